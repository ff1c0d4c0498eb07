"""Export a schedule as a MosaicML ``streaming`` dataset (MDS shards), in schedule order.

Sample ``j`` of the MDS dataset is the draw at schedule position ``j``
(columns ``text``, ``index``, ``position``; see
:mod:`clusterclip.adapters.by_value`). Repeated documents are written again at
each draw, so the export costs about ``len(schedule) / n_documents`` times the
corpus; the cost is printed before anything is written.

Reading contract (mosaicml-streaming 0.13, read from its source)
----------------------------------------------------------------
Read it with ``StreamingDataset(local=out, shuffle=False, num_canonical_nodes=1,
batch_size=B)`` and a ``StreamingDataLoader(dataset, batch_size=B, ...)``.
With one canonical node and no shuffling the sample space is ``0..T-1`` in
order; ``get_partitions_orig`` hands it to the P physical nodes round robin
(node ``p`` takes ``p, p + P, ...``), each node to its R ranks round robin,
and each rank's list to its DataLoader workers in consecutive runs of ``B``
samples, which the DataLoader takes back in turn. So, with ``W = P * R`` ranks:

- global step ``t`` (the ``t``-th batch of every rank) holds exactly schedule
  positions ``[t*W*B, (t+1)*W*B)``, whatever the number of workers;
- slot ``k`` of that batch on node ``p``, local rank ``r`` is position
  ``(t*B + k)*W + p + P*r`` (on one node: ``(t*B + k)*W + rank``, the same
  interleave as every other clusterclip adapter);
- ``StreamingDataLoader.state_dict()`` records ``sample_in_epoch = steps * W * B``
  and a resumed dataset drops exactly that prefix, so it continues with the
  next global batch, also on another number of nodes (``num_canonical_nodes=1``
  keeps the order independent of P).

Shuffling, or ``num_canonical_nodes > 1`` (its default when unset is the
number of physical nodes, and 64x that for the ``py1s``/``py2s`` shuffles),
breaks the order. When ``T`` is not a multiple of ``W``, streaming repeats a
few samples so every rank gets the same count; make the budget a multiple of
``W * B`` to have no partial or padded last batch.

How it is written
-----------------
In two rounds of engine tasks (the local engine runs the same tasks in-process,
so the files are the same bytes on every engine):

1. read tasks, cut as the embed stage cuts the corpus, write each scheduled
   document's text once, as UTF-8, into a part of a temporary text cache
   (:class:`clusterclip.adapters.tokenizing.TextWorker`); the driver joins the
   parts and keeps each document's byte span (16 bytes per document);
2. the driver computes where ``MDSWriter`` would cut the shards from the samples'
   sizes alone (:class:`clusterclip.adapters.mds_shards.ShardCuts`), and shard tasks
   (:class:`clusterclip.adapters.mds_shards.ShardWorker`) write whole shards, in
   ``MDSWriter``'s bytes; the driver writes ``index.json`` from their entries.

The driver reads no text. Writing needs no extra package; a ``compression``
uses mosaicml-streaming's codecs (``pip install 'clusterclip[streaming]'``), and
reading the export needs mosaicml-streaming. On Ray, every worker must see the
output folder's parent and the work directory at the same paths.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.by_value import write_sidecar
from clusterclip.adapters.mds_shards import (
    MDS_COLUMNS,
    ShardCuts,
    ShardWorker,
    mds_config,
    sample_sizes,
    shard_tasks,
)
from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.adapters.text_tasks import TextTasks
from clusterclip.adapters.tokens import iter_schedule_blocks
from clusterclip.engines import map_shards
from clusterclip.errors import invalid, require_extra
from clusterclip.io import human_bytes
from clusterclip.io.artifacts.schedule import npy_path
from clusterclip.progress import progress_bar

__all__ = ["MDS_COLUMNS", "export_mds"]

_TEXTS = ".mds-texts.bin"
_SPANS = ".mds-texts-spans.npy"


def export_mds(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    size_limit: int = 1 << 26,
    compression: str | None = None,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the scheduled documents, in schedule order, as an MDS dataset.

    Parameters
    ----------
    workdir : path
        Work directory with a schedule; its corpus files must be unchanged
        since they were embedded (checked before anything is written).
    out : path
        Local output folder, new or empty (an earlier export is refused: delete
        it first). Receives ``index.json``, ``shard.NNNNN.mds[.zstd]`` and
        ``clusterclip.json``. The folder appears whole or not at all.
    size_limit : int
        Bytes per shard before compression (MDSWriter's ``size_limit``), below 2**32.
    compression : str, optional
        MDS shard compression, e.g. ``"zstd"`` (None: uncompressed); needs
        mosaicml-streaming for its codecs.
    engine : {"local", "ray"}
        Where the texts are read and the shards written (see the module
        docstring); the files are the same on every engine.
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    dict
        ``samples``, ``shards``, ``bytes`` written, and ``out``.

    Notes
    -----
    Deterministic: the same schedule gives the same samples in the same order,
    and the files ``MDSWriter`` writes for them. See the module docstring for the
    reading contract (``shuffle=False``, ``num_canonical_nodes=1``, ``batch_size``).

    Examples
    --------
    >>> export_mds("work", "mds/")  # doctest: +SKIP
    {'samples': 15000, 'shards': 1, 'bytes': 2113536, 'out': 'mds'}
    >>> from streaming import StreamingDataset  # doctest: +SKIP
    >>> StreamingDataset(local="mds/", shuffle=False, num_canonical_nodes=1, batch_size=8)[0]["position"]  # doctest: +SKIP
    0
    """
    if (
        not isinstance(size_limit, int)
        or isinstance(size_limit, bool)
        or not 1 <= size_limit < 2**32
    ):
        raise invalid(
            "size_limit",
            "an int in [1, 2**32) (bytes per shard: MDS offsets are uint32)",
            size_limit,
            "Pass size_limit=67108864.",
        )
    if compression:
        codecs = require_extra("streaming.base.compression", "streaming")
        if not codecs.is_compression(compression):
            raise invalid(
                "compression",
                f"one of mosaicml-streaming's codecs ({', '.join(sorted(codecs.get_compressions()))})",
                compression,
                "Pass compression='zstd', or None.",
            )
    compression = compression or None
    out = check_export_folder(out)
    corpus = TextTasks.open(workdir, engine, engine_options)  # everything checked now
    work, schedule, mask, tasks = corpus.work, corpus.schedule, corpus.mask, corpus.tasks
    indices = schedule.indices
    with export_folder(out) as tmp:
        staging = tmp.resolve()  # the tasks may run in another folder
        texts, spans_path = staging / _TEXTS, staging / _SPANS
        try:
            spans = corpus.write_texts(texts, spans_path)
            config = mds_config(compression, size_limit)
            cuts = _cut(indices, spans[:, 1] - spans[:, 0], ShardCuts(size_limit, config))
            _say(len(indices), int(mask.sum()), cuts)
            write = functools.partial(
                ShardWorker, str(npy_path(schedule.path).resolve()), str(spans_path),
                str(texts), str(staging), compression, size_limit,
            )  # fmt: skip
            entries: list[dict[str, Any]] = []
            with progress_bar(total=len(indices), desc="export mds", unit="doc") as bar:
                for _, done in map_shards(shard_tasks(cuts), write, **tasks):
                    entries.extend(done)
                    bar.update(sum(entry["samples"] for entry in done))
        finally:
            texts.unlink(missing_ok=True)
            spans_path.unlink(missing_ok=True)
        with open(staging / "index.json", "w") as handle:  # as MDSWriter writes it
            json.dump({"version": 2, "shards": entries}, handle, sort_keys=True)
        write_sidecar(
            tmp,
            {
                "format": "mds",
                "reader": "streaming.StreamingDataset(shuffle=False, num_canonical_nodes=1)",
            },
            work,
            len(indices),
            schedule.path,
        )
        shards = sorted(p.name for p in tmp.glob("shard.*"))
        written = sum(p.stat().st_size for p in tmp.iterdir() if p.is_file())
    return {"samples": len(indices), "shards": len(shards), "bytes": written, "out": str(Path(out))}


def _cut(indices: np.ndarray, text_bytes: np.ndarray, cuts: ShardCuts) -> list:
    """The shards of the schedule, from its samples' sizes (streamed in blocks)."""
    for block in iter_schedule_blocks(indices):
        cuts.add(sample_sizes(np.take(text_bytes, block)))
    return cuts.finish()


def _say(n_samples: int, distinct: int, shards: list) -> None:
    """Print what will be written, before the shards are."""
    total = sum(size for _, _, size in shards)
    print(
        f"export mds: {n_samples:,} draws of {distinct:,} documents; writing {len(shards):,} "
        f"shard{'s' if len(shards) != 1 else ''}, about {human_bytes(total)} (repeated "
        "documents are stored again)",
        file=sys.stderr,
        flush=True,
    )
