"""Export a schedule as a LitData optimized dataset, laid out for one training topology.

LitData (0.2.76, read from its source) does not read a non-shuffled dataset
the way the other clusterclip adapters split a schedule: with ``shuffle=False``
each (rank, DataLoader worker) reads one *contiguous* run of items, the runs in
rank-major, worker-minor order, and each rank's DataLoader takes one batch from
each of its workers in turn. Written in plain schedule order, rank 0 would
train on the start of the schedule while rank 1 trains on its middle: global
batches would mix early and late draws, which undoes the order ClusterClip
built (its clipped clusters vanish over training).

So :func:`export_litdata` writes the draws in the item order that makes that
reading give the schedule back, for the topology it is given (``world_size``
ranks, ``num_workers`` DataLoader workers per rank, ``batch_size`` per rank):

- global step ``t`` (the ``t``-th batch of every rank) holds schedule positions
  ``[t*W*B, (t+1)*W*B)``; slot ``k`` on rank ``r`` is position ``(t*B + k)*W + r``,
  the interleave every clusterclip adapter uses;
- that holds for the first ``W * floor(floor(T / B) / W) * B`` positions (every
  position when ``T`` is a multiple of ``W * B``); LitData hands the rest (fewer
  than ``W * B + B``) to one worker of the last rank, which reads them after
  all its other batches, or drops them when ``drop_last`` is true (its default
  when ``W > 1``);
- ``StreamingDataLoader.state_dict()`` / ``load_state_dict()`` resume exactly on
  the same topology. Reading with another ``W``, number of workers or batch
  size reads every draw once but not in schedule order: export again for it.

Each item has the columns ``text``, ``index`` (document) and ``position``
(schedule position), so a trainer can check the order it gets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.by_value import open_scheduled_texts
from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.errors import invalid, require_extra
from clusterclip.progress import progress_bar

__all__ = ["LitDataLayout", "export_litdata", "litdata_layout"]

_BLOCK = 1 << 16


@dataclass(frozen=True)
class LitDataLayout:
    """Where each schedule position goes in a LitData dataset read by one topology.

    Attributes
    ----------
    n_samples, world_size, num_workers, batch_size : int
        ``T``, ``W``, workers per rank (at least 1), ``B``.
    drop_last : bool
        Whether LitData drops the items that do not fill a batch on every rank.
    items_per_worker : numpy.ndarray
        int64 ``(W * num_workers,)``: items LitData assigns to global worker
        ``rank * num_workers + worker``, in the order it assigns them (its
        ``_associate_chunks_and_intervals_to_workers`` with ``shuffle=False``).
    regular : int
        Positions ``[0, regular)`` are read as whole global batches.
    """

    n_samples: int
    world_size: int
    num_workers: int
    batch_size: int
    drop_last: bool
    items_per_worker: np.ndarray
    regular: int

    def positions(self) -> Iterator[np.ndarray]:
        """Schedule positions in item order, in blocks (item ``i`` holds the ``i``-th position).

        Worker ``g = r * num_workers + w`` reads its items in order; its ``j``-th
        one is the rank's batch ``m = (j // B) * num_workers + w``, slot ``k = j % B``,
        i.e. the rank's sample ``m * B + k``: schedule position ``(m * B + k) * W + r``.
        The positions past ``regular`` follow in order where LitData reads them.
        """
        batch, workers, world = self.batch_size, self.num_workers, self.world_size
        leftover = np.arange(self.regular, self.n_samples, dtype=np.int64)
        holder = self._leftover_worker()
        for g, count in enumerate(self.items_per_worker.tolist()):
            rank, worker = divmod(g, workers)
            regular = count - (len(leftover) if g == holder else 0)
            for start in range(0, regular, _BLOCK):
                j = np.arange(start, min(start + _BLOCK, regular), dtype=np.int64)
                sample = ((j // batch) * workers + worker) * batch + j % batch
                yield sample * world + rank
            if g == holder and len(leftover):
                yield leftover
        if holder is None and len(leftover):
            yield leftover  # dropped by LitData (drop_last), kept in the file

    def _leftover_worker(self) -> int | None:
        if self.drop_last or self.regular == self.n_samples:
            return None
        base_batches = self.regular // (self.world_size * self.batch_size)
        return (self.world_size - 1) * self.num_workers + base_batches % self.num_workers


def litdata_layout(
    n_samples: int,
    *,
    world_size: int = 1,
    num_workers: int = 0,
    batch_size: int = 1,
    drop_last: bool | None = None,
) -> LitDataLayout:
    """Plan how ``n_samples`` schedule positions are laid out for one LitData topology.

    Pure numpy (LitData is not imported). ``num_workers=0`` (no worker
    processes) reads like one worker; ``drop_last=None`` is LitData's default:
    true when ``world_size > 1``.

    >>> layout = litdata_layout(10, world_size=2, num_workers=0, batch_size=2)
    >>> np.concatenate(list(layout.positions())).tolist()
    [0, 2, 4, 6, 1, 3, 5, 7, 8, 9]
    """
    for name, value, low in (
        ("n_samples", n_samples, 0),
        ("world_size", world_size, 1),
        ("num_workers", num_workers, 0),
        ("batch_size", batch_size, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise invalid(
                name, f"an int in [{low}, inf)", value, f"Pass the {name} the trainer uses."
            )
    workers = max(num_workers, 1)
    drop = world_size > 1 if drop_last is None else bool(drop_last)
    batches_per_rank = (n_samples // batch_size) // world_size
    base, extra = divmod(batches_per_rank, workers)
    per_rank = np.array([base + (1 if w < extra else 0) for w in range(workers)], dtype=np.int64)
    items = np.tile(per_rank * batch_size, world_size)
    regular = world_size * batches_per_rank * batch_size
    if not drop and n_samples > regular:
        items[(world_size - 1) * workers + extra % workers] += n_samples - regular
    return LitDataLayout(n_samples, world_size, workers, batch_size, drop, items, regular)


def export_litdata(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    world_size: int = 1,
    num_workers: int = 0,
    batch_size: int = 1,
    drop_last: bool | None = None,
    chunk_bytes: int = 1 << 26,
) -> dict[str, Any]:
    """Write the scheduled documents as a LitData optimized dataset for one topology.

    Parameters
    ----------
    workdir : path
        Work directory with a schedule; its corpus files must be unchanged
        since they were embedded (checked before anything is written).
    out : path
        Local output folder, new or empty (an earlier export is refused: delete
        it first). Receives ``index.json``, ``chunk-0-N.bin`` and
        ``clusterclip.json``; the folder appears whole or not at all.
    world_size, num_workers, batch_size : int
        The trainer's ranks, DataLoader workers per rank and batch size per
        rank, exactly as it will read (``StreamingDataLoader(dataset,
        batch_size=batch_size, num_workers=num_workers)`` on each of
        ``world_size`` ranks).
    drop_last : bool, optional
        The reader's ``drop_last`` (None: LitData's default, true when
        ``world_size > 1``).
    chunk_bytes : int
        Bytes per chunk file.

    Returns
    -------
    dict
        ``samples``, ``chunks``, ``bytes`` written, the ``topology`` and ``out``.

    Notes
    -----
    Deterministic. Needs ``litdata`` (``pip install 'clusterclip[litdata]'``).
    The reading contract is in the module docstring.

    Examples
    --------
    >>> export_litdata("work", "lit/", world_size=8, num_workers=4, batch_size=16)  # doctest: +SKIP
    {'samples': 15000, 'chunks': 1, 'bytes': 2150012, 'topology': {...}, 'out': 'lit'}
    """
    if not isinstance(chunk_bytes, int) or isinstance(chunk_bytes, bool) or chunk_bytes < 1:
        raise invalid(
            "chunk_bytes",
            "an int in [1, inf) (bytes per chunk)",
            chunk_bytes,
            "Pass chunk_bytes=67108864.",
        )
    writer_module = require_extra("litdata.streaming.writer", "litdata")
    check_export_folder(out)
    texts = open_scheduled_texts(workdir)
    layout = litdata_layout(
        len(texts),
        world_size=world_size,
        num_workers=num_workers,
        batch_size=batch_size,
        drop_last=drop_last,
    )
    topology = {
        "world_size": world_size,
        "num_workers": num_workers,
        "batch_size": batch_size,
        "drop_last": layout.drop_last,
        "regular_positions": layout.regular,
    }
    with export_folder(out) as tmp:
        texts.announce("export litdata")
        writer = writer_module.BinaryWriter(str(tmp), chunk_bytes=chunk_bytes)
        item = 0
        with progress_bar(total=len(texts), desc="export litdata", unit="doc") as bar:
            for block in layout.positions():
                for position, document, text in texts.samples(block):
                    writer.add_item(item, {"text": text, "index": document, "position": position})
                    item += 1
                bar.update(len(block))
        writer.done()
        writer.merge()
        texts.sidecar(
            tmp,
            {
                "format": "litdata",
                "reader": "litdata.StreamingDataset(shuffle=False)",
                "topology": topology,
            },
        )
        chunks = sorted(p.name for p in tmp.glob("chunk-*"))
        written = sum(p.stat().st_size for p in tmp.iterdir() if p.is_file())
    return {
        "samples": len(texts),
        "chunks": len(chunks),
        "bytes": written,
        "topology": topology,
        "out": str(Path(out)),
    }
