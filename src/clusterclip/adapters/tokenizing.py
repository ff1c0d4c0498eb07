"""Tokenising the scheduled documents in read tasks on the engine, each task into its own part.

The token exports (:mod:`clusterclip.adapters.flat`, :mod:`clusterclip.adapters.megatron`)
need the token ids of every document the schedule uses, each distinct document
once, back to back in index order (:func:`~clusterclip.adapters.tokens.tokenize_scheduled`).
Here that pass is cut into read tasks exactly as the embed stage cuts the
corpus (:mod:`clusterclip.io.readplan`). Each task (:class:`TokenizeWorker`)
loads the tokenizer once per process, reads and judges its own documents,
tokenises the scheduled ones and writes their ids into its own part file,
atomically and named by its first document, so a retried task rewrites its own
part. It returns only the token count of each of its documents. The driver
turns the counts into offsets and appends the parts, in order, to the output
with the kernel's file copy: it never tokenises, and holds no text and no token.
The bytes are the same on every engine and for any cut into tasks.

The exports that store samples by value (:mod:`clusterclip.adapters.mds`) run
the same read tasks with :class:`TextWorker`, which writes each scheduled
document's text as UTF-8 instead of its tokens (:func:`write_in_parts`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.engines import RayOptions, map_shards
from clusterclip.errors import ClusterClipError
from clusterclip.io.readplan import ReadPlan, ShardTask, shard_records

__all__ = [
    "TOKENIZE_TASK_DOCUMENTS",
    "TextWorker",
    "TokenizeTask",
    "TokenizeWorker",
    "tokenize_in_tasks",
    "write_in_parts",
]

#: Documents one tokenising task reads (a speed knob only: the bytes do not depend on it).
TOKENIZE_TASK_DOCUMENTS = 2**16
#: Documents per tokenizer call.
TOKENIZE_BATCH = 512


@dataclass(frozen=True)
class TokenizeTask:
    """One task: its documents, which of them the schedule uses, and the part it writes."""

    shard: ShardTask
    scheduled: np.ndarray
    part: str


class TokenizeWorker:
    """Tokenise the scheduled documents of a :class:`TokenizeTask` into its part file.

    Pass ``functools.partial(TokenizeWorker, tokenizer, read_options, dtype)``
    to :func:`clusterclip.engines.map_shards`, where ``tokenizer`` is
    ``(name_or_path, eos_token, append_eos, info)``: each process loads the
    tokenizer once and refuses one whose :class:`~clusterclip.adapters.tokens.TokenizerInfo`
    differs from the driver's ``info`` (another file at that path on this node).
    """

    def __init__(
        self,
        tokenizer: tuple[str, str | None, bool, Mapping[str, Any]],
        read_options: Mapping[str, Any],
        dtype: str,
    ) -> None:
        from clusterclip.adapters.tokens import load_tokenizer

        name, eos_token, append_eos, info = tokenizer
        self.tokenizer = load_tokenizer(name, eos_token=eos_token, append_eos=append_eos)
        where = ("name_or_path", "resolved_path")  # how it was named, not what it is
        here = {k: v for k, v in self.tokenizer.info.to_dict().items() if k not in where}
        there = {k: v for k, v in dict(info).items() if k not in where}
        if here != there:
            raise ClusterClipError(
                f"the tokenizer {name!r} on this node is not the driver's ({here} here, "
                f"{there} there). Give every node the same tokenizer files."
            )
        self.read_options = dict(read_options)
        self.dtype = np.dtype(dtype)

    def __call__(self, task: TokenizeTask) -> np.ndarray:
        """int64 token count of each of the task's documents (-1: not scheduled)."""
        first = task.shard.first_index
        lengths = np.full(task.shard.rows, -1, dtype=np.int64)
        batch: list[tuple[int, str]] = []
        with _part_file(task.part) as handle:
            for record in _scheduled_records(task, self.read_options):
                batch.append((record.index, record.text))
                if len(batch) == TOKENIZE_BATCH:
                    self._flush(batch, handle, lengths, first)
            self._flush(batch, handle, lengths, first)
        return lengths

    def _flush(
        self, batch: list[tuple[int, str]], handle: Any, lengths: np.ndarray, first: int
    ) -> None:
        if not batch:
            return
        limit = np.iinfo(self.dtype).max
        info = self.tokenizer.info
        for (index, _), ids in zip(
            batch, self.tokenizer.encode([t for _, t in batch]), strict=True
        ):
            array = np.asarray(ids, dtype=np.int64)
            if array.size and (int(array.max()) > limit or int(array.min()) < 0):
                raise ClusterClipError(
                    f"the tokenizer {info.name_or_path!r} produced token id "
                    f"{int(array.max())}, beyond its recorded vocabulary size "
                    f"{info.vocab_size}. Report this tokenizer as a bug."
                )
            handle.write(array.astype(self.dtype).tobytes())
            lengths[index - first] = array.size
        batch.clear()


def _append(part: str, handle: Any) -> None:
    """Append the file ``part`` to ``handle`` in the kernel where it can, then remove it."""
    with open(part, "rb") as source:
        size = os.fstat(source.fileno()).st_size
        handle.flush()
        copied = 0
        try:
            while copied < size:
                step = os.copy_file_range(source.fileno(), handle.fileno(), size - copied)
                if step == 0:
                    break
                copied += step
        except (AttributeError, OSError):  # no copy_file_range here: an ordinary copy
            source.seek(copied)
            handle.seek(0, os.SEEK_END)
            shutil.copyfileobj(source, handle, 1 << 20)
    os.unlink(part)


def tokenize_in_tasks(
    plan: ReadPlan,
    read_options: Mapping[str, Any],
    tokenizer: Any,
    mask: np.ndarray,
    out: str | os.PathLike[str],
    dtype: np.dtype,
    *,
    engine: str = "local",
    options: RayOptions | None = None,
    progress: Callable[[int], object] | None = None,
) -> np.ndarray:
    """Write the tokens of the documents in ``mask`` to ``out``; their ``(N, 2)`` offsets.

    ``plan`` and ``read_options`` come from :func:`~clusterclip.io.readplan.corpus_plan`
    (which checks the corpus files first); ``tokenizer`` is the driver's
    :class:`~clusterclip.adapters.tokens.DocumentTokenizer` (each task loads the
    same one by its recorded name). See
    :func:`~clusterclip.adapters.tokens.tokenize_scheduled` for the layout.
    """
    info = tokenizer.info
    # by its absolute path when it is a local one: a worker may run in another folder
    name = info.resolved_path or info.name_or_path
    spec = (name, info.eos_token, info.append_eos, info.to_dict())
    worker = functools.partial(TokenizeWorker, spec, read_options, np.dtype(dtype).str)
    return write_in_parts(plan, worker, mask, out, engine=engine, options=options,
                          progress=progress)  # fmt: skip


def write_in_parts(
    plan: ReadPlan,
    worker: Callable[[], Callable[[TokenizeTask], np.ndarray]],
    mask: np.ndarray,
    out: str | os.PathLike[str],
    *,
    engine: str = "local",
    options: RayOptions | None = None,
    progress: Callable[[int], object] | None = None,
) -> np.ndarray:
    """Run ``worker`` on read tasks of :data:`TOKENIZE_TASK_DOCUMENTS` documents; join their parts.

    Each task writes what it makes of its documents in ``mask`` (the ones the
    schedule uses) into its own part file beside ``out`` and returns one length
    per document (-1: not in ``mask``), in the units of its part. The parts are
    appended to ``out`` in task order; the result is each document's ``(start,
    stop)`` there, ``(-1, -1)`` outside ``mask``. :class:`TokenizeWorker` writes
    token ids; :class:`TextWorker` UTF-8 texts.
    """
    out = Path(out).resolve()  # the tasks write their parts beside it, from any folder

    def tasks() -> Iterator[tuple[int, TokenizeTask]]:
        for shard in plan.shards(TOKENIZE_TASK_DOCUMENTS):
            low, high = shard.first_index, shard.first_index + shard.rows
            part = str(out.with_name(f"{out.name}.part-{low:012d}"))
            yield low, TokenizeTask(shard, mask[low:high], part)

    offsets = np.full((mask.size, 2), -1, dtype=np.int64)
    position = 0
    with open(out, "wb") as handle:
        for low, lengths in map_shards(tasks(), worker, engine=engine, options=options):
            used = np.flatnonzero(lengths >= 0)
            ends = position + np.cumsum(lengths[used])
            offsets[low + used, 1] = ends
            offsets[low + used, 0] = ends - lengths[used]
            position = int(ends[-1]) if used.size else position
            _append(str(out.with_name(f"{out.name}.part-{low:012d}")), handle)
            if progress is not None:
                progress(int(used.size))
    return offsets


class TextWorker:
    """Write the UTF-8 text of the scheduled documents of a :class:`TokenizeTask` into its part.

    Pass ``functools.partial(TextWorker, read_options)`` to :func:`write_in_parts`.
    The text is the one the embed stage read (``Record.text``); the result is
    the byte length of each of the task's documents (-1: not scheduled).
    """

    def __init__(self, read_options: Mapping[str, Any]) -> None:
        self.read_options = dict(read_options)

    def __call__(self, task: TokenizeTask) -> np.ndarray:
        first = task.shard.first_index
        lengths = np.full(task.shard.rows, -1, dtype=np.int64)
        with _part_file(task.part) as handle:
            for record in _scheduled_records(task, self.read_options):
                data = record.text.encode("utf-8")  # the reader mended any lone surrogate
                handle.write(data)
                lengths[record.index - first] = len(data)
        return lengths


@contextlib.contextmanager
def _part_file(part: str) -> Iterator[Any]:
    """A task's part, written under a temporary name and renamed when whole (a retry rewrites it)."""
    tmp = f"{part}.tmp-{os.getpid()}"
    with open(tmp, "wb", buffering=1 << 20) as handle:
        yield handle
    os.replace(tmp, part)


def _scheduled_records(task: TokenizeTask, read_options: Mapping[str, Any]) -> Iterator[Any]:
    """The task's records the schedule uses, each with its text (one without is refused)."""
    first = task.shard.first_index
    for record in shard_records(task.shard, read_options):
        if not task.scheduled[record.index - first]:
            continue
        if record.text is None:
            raise ClusterClipError(
                f"document {record.index} is scheduled but its record is {record.status} "
                f"({record.reason}). Rebuild the schedule with `clusterclip run`."
            )
        yield record
