"""LitData chunks written by engine tasks, each task with a ``BinaryWriter`` of its own.

LitData's ``BinaryWriter`` (0.2.76, read from its source) cuts a chunk by the
bytes the *previous* chunk took on disk (its Arrow rows' size per item), so
where a chunk ends cannot be known without writing the ones before it. LitData's
own ``optimize`` scales out the other way: several writers, each with a rank,
write ``chunk-<rank>-<n>.bin`` and ``<rank>.index.json``, and ``merge`` joins
the indices in rank order. The reader sees the items of every chunk, in the
order of the merged index, whatever writer wrote them.

So the items (in the layout's order, :meth:`~clusterclip.adapters.litdata_export.LitDataLayout.positions`)
are cut into runs of about :data:`LITDATA_TASK_BYTES` bytes of text, and task
``t`` writes its run with a writer of rank ``t`` (:class:`ChunkWorker`). The
cut depends only on the texts' sizes, never on the engine, so the local engine
and Ray write the same files; an export of less text than one task (most) is
written by one writer of rank 0, as it was before tasks. A retried task
rewrites the same files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError

__all__ = ["LITDATA_TASK_BYTES", "ChunkWorker", "item_tasks", "merge_indices"]

#: Text bytes one task writes, about. Part of the output: each task's writer
#: starts its own run of chunks, so changing it changes the chunk files.
LITDATA_TASK_BYTES = 1 << 30
#: Items read at once by a task (a speed knob only).
_BLOCK = 1 << 14


def item_tasks(text_bytes: Iterable[np.ndarray]) -> Iterator[tuple[int, tuple[int, int, int]]]:
    """Runs of consecutive items holding about :data:`LITDATA_TASK_BYTES` of text, as tasks.

    ``text_bytes`` gives the sizes of the items' texts, in item order, block by
    block. Yields ``(task, (task, first item, end item))``; a run ends with the
    first item that takes it to the task size or past it. Every task has at
    least one item.

    >>> list(item_tasks([np.array([3, 4]), np.array([5])]))
    [(0, (0, 0, 3))]
    """
    task, first, offset = 0, 0, 0  # the open run's first item; the block's first item
    before = 0  # text bytes of the items before the open run
    total = 0  # text bytes of the items before the block
    for block in text_bytes:
        ends = total + np.cumsum(np.asarray(block, dtype=np.int64))
        while True:
            last = int(np.searchsorted(ends, before + LITDATA_TASK_BYTES, side="left"))
            last = max(last, first - offset)  # a run holds at least one item
            if last >= ends.size:
                break
            yield task, (task, first, offset + last + 1)
            task, first, before = task + 1, offset + last + 1, int(ends[last])
        offset += ends.size
        total = int(ends[-1]) if ends.size else total
    if first < offset:
        yield task, (task, first, offset)


def _writer(folder: str, chunk_bytes: int, rank: int) -> Any:
    """A LitData ``BinaryWriter`` whose files carry ``rank`` (its ``rank`` property)."""
    from litdata.streaming.writer import BinaryWriter

    class _RankedWriter(BinaryWriter):
        @property
        def rank(self) -> int:
            return rank

    return _RankedWriter(folder, chunk_bytes=chunk_bytes)


class ChunkWorker:
    """Writes one run of items as LitData chunks of its own rank (an engine task).

    Pass ``functools.partial(ChunkWorker, schedule, positions, spans, texts,
    folder, chunk_bytes)`` (the paths of ``schedule.npy``, of the items'
    schedule positions (``.npy``), of the documents' ``(N, 2)`` byte spans in
    the text cache and of that cache, the output folder and the chunk size) to
    :func:`clusterclip.engines.map_shards`; each payload comes from
    :func:`item_tasks`. Writes ``chunk-<task>-<n>.bin`` and ``<task>.index.json``
    and returns the items written.
    """

    def __init__(
        self,
        schedule: str,
        positions: str,
        spans: str,
        texts: str,
        folder: str,
        chunk_bytes: int,
    ) -> None:
        self.indices = np.load(schedule, mmap_mode="r")
        self.positions = np.load(positions, mmap_mode="r")
        self.spans = np.load(spans, mmap_mode="r")
        size = os.path.getsize(texts)
        self.texts = np.memmap(texts, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        self.folder = folder
        self.chunk_bytes = chunk_bytes

    def __call__(self, task: tuple[int, int, int]) -> int:
        number, first, end = task
        writer = _writer(self.folder, self.chunk_bytes, number)
        texts = memoryview(self.texts)
        for low in range(first, end, _BLOCK):
            high = min(low + _BLOCK, end)
            positions = np.asarray(self.positions[low:high], dtype=np.int64)
            documents = np.asarray(self.indices[positions], dtype=np.int64)
            spans = np.take(self.spans, documents, axis=0).reshape(-1, 2)
            for item, (position, document, (begin, stop)) in enumerate(
                zip(positions.tolist(), documents.tolist(), spans.tolist(), strict=True), low
            ):
                text = str(texts[begin:stop], "utf-8")
                writer.add_item(item, {"text": text, "index": document, "position": position})
        writer.done()
        return end - first


def merge_indices(folder: str | os.PathLike[str], chunk_bytes: int, tasks: int) -> None:
    """Join the tasks' ``<task>.index.json`` into ``index.json`` with LitData's own ``merge``.

    Refuses to start when a task's index is missing (``merge`` would wait for it).
    """
    missing = [
        t for t in range(tasks) if not os.path.exists(os.path.join(folder, f"{t}.index.json"))
    ]
    if missing:
        raise ClusterClipError(
            f"LitData task {missing[0]} left no {missing[0]}.index.json in {folder} "
            f"({len(missing)} of {tasks} missing); export again."
        )
    if tasks:
        _writer(os.fspath(folder), chunk_bytes, 0).merge(num_workers=tasks)
