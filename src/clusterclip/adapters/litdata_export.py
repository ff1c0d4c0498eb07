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

The items are written by engine tasks, the same on the local engine and on Ray
(:mod:`clusterclip.adapters.litdata_chunks`): the driver reads no text.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.by_value import write_sidecar
from clusterclip.adapters.litdata_chunks import ChunkWorker, item_tasks, merge_indices
from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.adapters.text_tasks import TextTasks
from clusterclip.adapters.tokens import iter_schedule_blocks
from clusterclip.engines import map_shards
from clusterclip.errors import invalid, require_extra
from clusterclip.io import human_bytes
from clusterclip.io.artifacts.schedule import npy_path
from clusterclip.progress import progress_bar

__all__ = ["LitDataLayout", "export_litdata", "litdata_layout"]

_BLOCK = 1 << 16
_TEXTS = ".litdata-texts.bin"
_SPANS = ".litdata-texts-spans.npy"
_POSITIONS = ".litdata-positions.npy"


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
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the scheduled documents as a LitData optimized dataset for one topology.

    Parameters
    ----------
    workdir : path
        Work directory with a schedule; its corpus files must be unchanged
        since they were embedded (checked before anything is written).
    out : path
        Local output folder, new or empty (an earlier export is refused: delete
        it first). Receives ``index.json``, ``chunk-T-N.bin`` and
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
    engine : {"local", "ray"}
        Where the texts are read and the chunks written; the files are the same
        on every engine (``index.json`` differs only in LitData's ``updated_at``).
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    dict
        ``samples``, ``chunks``, ``bytes`` written, the ``topology`` and ``out``.

    Notes
    -----
    Deterministic. Needs ``litdata`` (``pip install 'clusterclip[litdata]'``).
    The reading contract is in the module docstring. Written in two rounds of
    engine tasks: read tasks write each scheduled document's text once into a
    temporary text cache (as for MDS), then each task writes a run of about
    :data:`~clusterclip.adapters.litdata_chunks.LITDATA_TASK_BYTES` of items with
    a LitData writer of its own rank (``chunk-<task>-<n>.bin``), and LitData's
    ``merge`` joins their indices. The driver reads no text. On Ray, every
    worker must see the output folder's parent and the work directory at the
    same paths.

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
    require_extra("litdata.streaming.writer", "litdata")
    out = check_export_folder(out)
    corpus = TextTasks.open(workdir, engine, engine_options)  # everything checked now
    indices = corpus.schedule.indices
    layout = litdata_layout(
        len(indices),
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
        _write_items(tmp.resolve(), corpus, layout, chunk_bytes)
        write_sidecar(
            tmp,
            {
                "format": "litdata",
                "reader": "litdata.StreamingDataset(shuffle=False)",
                "topology": topology,
            },
            corpus.work,
            len(indices),
            corpus.schedule.path,
        )
        chunks = sorted(p.name for p in tmp.glob("chunk-*"))
        written = sum(p.stat().st_size for p in tmp.iterdir() if p.is_file())
    return {
        "samples": len(indices),
        "chunks": len(chunks),
        "bytes": written,
        "topology": topology,
        "out": str(Path(out)),
    }


def _write_items(staging: Path, corpus: TextTasks, layout: LitDataLayout, chunk_bytes: int) -> None:
    """The two rounds of tasks: the scheduled texts once, then the runs of items as chunks."""
    schedule, mask = corpus.schedule, corpus.mask
    indices = schedule.indices
    texts, spans_path = staging / _TEXTS, staging / _SPANS
    positions_path = staging / _POSITIONS
    try:
        spans = corpus.write_texts(texts, spans_path)
        _save_positions(layout, positions_path)
        text_bytes = spans[:, 1] - spans[:, 0]
        _say(indices, mask, text_bytes)
        write = functools.partial(
            ChunkWorker, str(npy_path(schedule.path).resolve()), str(positions_path),
            str(spans_path), str(texts), str(staging), chunk_bytes,
        )  # fmt: skip
        runs = item_tasks(_item_sizes(indices, positions_path, text_bytes))
        n_tasks = 0
        with progress_bar(total=len(indices), desc="export litdata", unit="doc") as bar:
            for _, written in map_shards(runs, write, **corpus.tasks):
                bar.update(written)
                n_tasks += 1
        merge_indices(staging, chunk_bytes, n_tasks)
    finally:
        for path in (texts, spans_path, positions_path):
            path.unlink(missing_ok=True)


def _save_positions(layout: LitDataLayout, path: Path) -> None:
    """The schedule position of every item, in item order, as an int64 ``.npy``."""
    positions = np.lib.format.open_memmap(
        path, mode="w+", dtype=np.int64, shape=(layout.n_samples,)
    )
    at = 0
    for block in layout.positions():
        positions[at : at + block.size] = block
        at += block.size
    positions.flush()
    del positions


def _item_sizes(indices: np.ndarray, positions_path: Path, text_bytes: np.ndarray) -> Iterator:
    """The text size of every item, in item order, block by block."""
    positions = np.load(positions_path, mmap_mode="r")
    for start in range(0, len(positions), _BLOCK):
        block = np.asarray(positions[start : start + _BLOCK])
        yield np.take(text_bytes, np.asarray(indices[block], dtype=np.int64))


def _say(indices: np.ndarray, mask: np.ndarray, text_bytes: np.ndarray) -> None:
    """Print what will be written, before the chunks are."""
    distinct = int(np.where(mask, text_bytes, 0).sum())
    total = sum(int(np.take(text_bytes, block).sum()) for block in iter_schedule_blocks(indices))
    ratio = total / distinct if distinct else 0.0
    print(
        f"export litdata: {len(indices):,} draws of {int(mask.sum()):,} documents; writing "
        f"{ratio:.2f}x their text: about {human_bytes(total)} (repeated documents are stored "
        "again)",
        file=sys.stderr,
        flush=True,
    )
