"""Flat token files (nanoGPT / OLMo style): every scheduled document's tokens, in schedule order.

:func:`export_flat_tokens` writes into a directory:

``tokens.bin``
    Raw token ids, no header (``np.memmap(path, dtype=..., mode="r")``, exactly
    what nanoGPT's ``train.bin`` and OLMo's token files are): the documents of
    schedule positions 0, 1, 2, ... back to back, each followed by the
    end-of-document token. ``uint16`` when the vocabulary has at most 65,536 ids,
    else ``uint32``. A repeated document is written again (a flat file has no
    references), so the file holds exactly the tokens training reads.
``offsets.npy``
    int64 ``(T + 1,)``: schedule position ``j`` is ``tokens[offsets[j]:offsets[j + 1]]``.
``document_ids.npy``
    int64 ``(T,)``: the document (embed input index) at each position.
``tokens.json``
    dtype, counts, the tokenizer (name or path, vocabulary size, end-of-document
    token and id, fingerprint of its ``tokenizer.json``) and the schedule fingerprint.

The export goes into a new or empty folder that appears whole or not at all
(:mod:`clusterclip.adapters.output`). It never holds the schedule or the tokens
in memory, and it runs as tasks of the engine (the local engine runs the same
tasks in-process, so the files are the same bytes on every engine):

1. each distinct scheduled document is tokenized once into a temporary cache in the
   output directory (:func:`clusterclip.adapters.tokens.tokenize_scheduled`, read tasks);
2. the driver streams the schedule in blocks and writes the index: ``offsets.npy``
   and ``document_ids.npy`` (16 bytes per position);
3. copy tasks (:class:`CopyWorker`), one per run of :data:`COPY_TASK_POSITIONS`
   positions, each copy their positions' tokens from the cache to their own byte
   range of ``tokens.bin`` (``os.pwrite``, so a retried task rewrites the same bytes).

The driver copies no token. Memory is ``O(N)`` for the per-document spans; disk is
the cache (distinct documents) until the export ends, plus the result. On Ray,
every worker must see the output folder's parent and the work directory at the
same paths.

:class:`FlatTokens` reads the directory back (memory-mapped) and gives
documents by position and fixed-length windows from any token offset, which is
how a trainer resumes: ``start = windows_consumed * length``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.adapters.tokens import (
    iter_schedule_blocks,
    load_tokenizer,
    token_dtype,
    tokenize_scheduled,
)
from clusterclip.engines import map_shards, resolve_options
from clusterclip.errors import ClusterClipError, invalid
from clusterclip.io import WorkDir, atomic_path, atomic_write_json, fingerprint_file, human_bytes
from clusterclip.io.artifacts.schedule import npy_path
from clusterclip.progress import progress_bar

__all__ = ["COPY_TASK_POSITIONS", "CopyWorker", "FlatTokens", "export_flat_tokens"]

TOKENS, OFFSETS, DOCUMENT_IDS, META = "tokens.bin", "offsets.npy", "document_ids.npy", "tokens.json"
_CACHE = ".tokens-cache.bin"
_SPANS = ".tokens-spans.npy"
#: Schedule positions one copy task writes (a speed knob only: the bytes do not depend on it).
COPY_TASK_POSITIONS = 2**18
#: Positions a copy task gathers at once (bounds its memory; a speed knob only).
_COPY_BLOCK = 2**13


def export_flat_tokens(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str],
    eos_token: str | None = None,
    append_eos: bool = True,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the schedule's documents as one flat, memory-mappable token array.

    Parameters
    ----------
    workdir : path
        Work directory with a schedule; its corpus files must be unchanged since
        they were embedded (checked before anything is written).
    out : path
        Output directory, new or empty; receives ``tokens.bin``, ``offsets.npy``,
        ``document_ids.npy`` and ``tokens.json``, all at once (nothing when the
        export fails).
    tokenizer : str or path
        The tokenizer to use, named by the user: a ``tokenizer.json`` file, a
        Hugging Face tokenizer directory, or a hub name already in the local
        cache (see :func:`clusterclip.adapters.tokens.load_tokenizer`).
    eos_token : str, optional
        Token appended after every document (default: the tokenizer's own).
    append_eos : bool
        False: no separator token (``offsets.npy`` still marks the documents).
    engine : {"local", "ray"}
        Where the documents are read and tokenised (read tasks, each writing its
        own part; :func:`clusterclip.adapters.tokens.tokenize_scheduled`) and
        where their tokens are copied into ``tokens.bin`` (:class:`CopyWorker`).
        The files are the same on every engine.
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    dict
        ``n_positions``, ``n_tokens``, ``dtype``, ``bytes`` and ``out``.
        Deterministic: the same work directory and tokenizer give identical files.

    Examples
    --------
    >>> export_flat_tokens("work", "flat/", tokenizer="gpt2")  # doctest: +SKIP
    {'n_positions': 15000, 'n_tokens': 512340, 'dtype': 'uint16', 'bytes': 1024680, 'out': 'flat'}
    >>> tokens = np.memmap("flat/tokens.bin", dtype=np.uint16, mode="r")  # doctest: +SKIP
    """
    work, out = WorkDir(workdir), check_export_folder(out)
    loaded = load_tokenizer(tokenizer, eos_token=eos_token, append_eos=append_eos)
    dtype = token_dtype(loaded.info.vocab_size)
    schedule = work.schedule()
    indices = schedule.indices
    with export_folder(out) as folder:
        tasks = {"engine": engine, "engine_options": engine_options}
        spans, total = _write_tokens(work, loaded, schedule, folder, dtype, tasks)
        summary = {
            "n_positions": int(indices.shape[0]),
            "n_tokens": total,
            "dtype": dtype.name,
            "bytes": total * dtype.itemsize,
            "out": str(out),
        }
        atomic_write_json(
            folder / META,
            {
                "format": "flat-tokens",
                "tokens": TOKENS,
                "offsets": OFFSETS,
                "document_ids": DOCUMENT_IDS,
                "dtype": dtype.name,
                "n_positions": int(indices.shape[0]),
                "n_tokens": total,
                "n_distinct_documents": int((spans[:, 0] >= 0).sum()),
                "tokenizer": loaded.info.to_dict(),
                "meaning": "position j = tokens[offsets[j]:offsets[j+1]], document document_ids[j]; "
                "positions in schedule order",
                "schedule": fingerprint_file(schedule.path),
                "workdir": str(work.path),
            },
        )
    return summary


def _write_tokens(
    work: WorkDir, loaded: Any, schedule: Any, out: Path, dtype: np.dtype,
    tasks: Mapping[str, Any],
) -> tuple[np.ndarray, int]:  # fmt: skip
    """Tokenize the scheduled documents into a cache, then write the three arrays into ``out``."""
    indices = schedule.indices
    out = out.resolve()  # the tasks may run in another folder
    cache = out / _CACHE
    spans_path = out / _SPANS
    try:
        spans = tokenize_scheduled(work, loaded, cache, dtype=dtype, **tasks)
        np.save(spans_path, spans)
        total = sum(int((spans[b, 1] - spans[b, 0]).sum()) for b in iter_schedule_blocks(indices))
        n_positions = int(indices.shape[0])
        distinct = int((spans[:, 0] >= 0).sum())
        print(  # the cost up front: a flat array stores a repeated document again
            f"export flat-tokens: {n_positions:,} positions; writing {total:,} tokens, about "
            f"{human_bytes(total * dtype.itemsize)} ({human_bytes(cache.stat().st_size)} for "
            f"the {distinct:,} distinct documents; repeated documents are stored again)",
            file=sys.stderr,
            flush=True,
        )
        with (
            atomic_path(out / TOKENS) as tokens_tmp,
            atomic_path(out / OFFSETS) as offsets_tmp,
            atomic_path(out / DOCUMENT_IDS) as ids_tmp,
        ):
            offsets = np.lib.format.open_memmap(offsets_tmp, "w+", np.int64, (n_positions + 1,))
            ids = np.lib.format.open_memmap(ids_tmp, "w+", np.int64, (n_positions,))
            offsets[0] = 0
            written, first = 0, 0
            for block in iter_schedule_blocks(indices):
                lengths = spans[block, 1] - spans[block, 0]
                ids[first : first + block.size] = block
                offsets[first + 1 : first + 1 + block.size] = written + np.cumsum(lengths)
                written += int(lengths.sum())
                first += block.size
            with open(tokens_tmp, "wb") as handle:
                handle.truncate(total * dtype.itemsize)  # the copy tasks fill their ranges
            copies = _copy_tasks(offsets)
            copy = functools.partial(
                CopyWorker, str(npy_path(schedule.path).resolve()), str(spans_path), str(cache),
                str(Path(tokens_tmp).resolve()), dtype.str,
            )  # fmt: skip
            options = resolve_options(tasks["engine"], tasks["engine_options"])
            desc = f"flat tokens ({human_bytes(total * dtype.itemsize)})"
            with progress_bar(total=total, desc=desc, unit="tok") as bar:
                for _, copied in map_shards(copies, copy, engine=tasks["engine"], options=options):
                    bar.update(copied)
            offsets.flush()
            ids.flush()
            del offsets, ids
    finally:
        cache.unlink(missing_ok=True)
        spans_path.unlink(missing_ok=True)
    return spans, total


def _copy_tasks(offsets: np.ndarray) -> Iterator[tuple[int, tuple[int, int, int]]]:
    """``(task, (first, stop, token offset))`` for runs of :data:`COPY_TASK_POSITIONS` positions.

    >>> list(_copy_tasks(np.array([0, 3, 5])))  # 2 positions: one task
    [(0, (0, 2, 0))]
    """
    n_positions, step = offsets.size - 1, COPY_TASK_POSITIONS
    for n, first in enumerate(range(0, n_positions, step)):
        yield n, (first, min(first + step, n_positions), int(offsets[first]))


class CopyWorker:
    """Copies the cached tokens of a run of schedule positions into ``tokens.bin`` (an engine task).

    Pass ``functools.partial(CopyWorker, schedule, spans, cache, target, dtype)``
    (the paths of ``schedule.npy``, of the documents' ``(N, 2)`` token spans in
    the cache, of the cache and of the pre-sized target file, and the token
    dtype's string) to :func:`clusterclip.engines.map_shards`. Each payload is
    ``(first, stop, offset)``: positions ``first .. stop - 1``, whose tokens start
    at token ``offset`` of the target. Returns the tokens written. The target is
    written with ``os.pwrite`` at fixed offsets: a retried task rewrites the
    same bytes, and tasks never overlap.
    """

    def __init__(self, schedule: str, spans: str, cache: str, target: str, dtype: str) -> None:
        self.dtype = np.dtype(dtype)
        self.indices = np.load(schedule, mmap_mode="r")
        self.spans = np.load(spans, mmap_mode="r")
        self.cache = _memmap(Path(cache), self.dtype)
        self.target = target

    def __call__(self, task: tuple[int, int, int]) -> int:
        first, stop, offset = task
        written = 0
        handle = os.open(self.target, os.O_WRONLY)
        try:
            for low in range(first, stop, _COPY_BLOCK):
                documents = np.asarray(self.indices[low : min(low + _COPY_BLOCK, stop)])
                spans = np.take(self.spans, documents, axis=0)
                lengths = spans[:, 1] - spans[:, 0]
                n = int(lengths.sum())
                # token i of the block: cache[begin of its position + rank in it]
                where = np.repeat(spans[:, 0] - (np.cumsum(lengths) - lengths), lengths)
                where += np.arange(n, dtype=np.int64)
                _write_at(handle, np.take(self.cache, where).tobytes(), offset + written,
                          self.dtype.itemsize)  # fmt: skip
                written += n
        finally:
            os.close(handle)
        return written


def _write_at(handle: int, data: bytes, token: int, itemsize: int) -> None:
    """Write all of ``data`` at token offset ``token`` (``os.pwrite`` may write a part)."""
    view, at = memoryview(data), token * itemsize
    while view:
        done = os.pwrite(handle, view, at)
        view, at = view[done:], at + done


def _memmap(path: Path, dtype: np.dtype) -> np.ndarray:
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


class FlatTokens:
    """A flat token export, memory-mapped (see :func:`export_flat_tokens`).

    Parameters
    ----------
    path : path
        The export directory (holding ``tokens.json``).

    Attributes
    ----------
    tokens : numpy.memmap, shape (n_tokens,)
        Every token in schedule order.
    offsets : numpy.memmap of int64, shape (n_positions + 1,)
    document_ids : numpy.memmap of int64, shape (n_positions,)
    meta : dict
        The sidecar (dtype, counts, tokenizer).

    Examples
    --------
    >>> flat = FlatTokens("flat/")  # doctest: +SKIP
    >>> flat.document(0)[:5]  # doctest: +SKIP
    memmap([1999, 1996, 2927, 2643, 2580], dtype=uint16)
    >>> for window in flat.windows(1024, start=resume_tokens):  # doctest: +SKIP
    ...     x, y = window[:-1], window[1:]
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        meta_path = self.path / META
        if not meta_path.is_file():
            raise ClusterClipError(
                f"{meta_path} not found: {self.path} is not a complete flat-token export. "
                "Write one with `clusterclip export --format flat-tokens --tokenizer NAME`."
            )
        self.meta: dict[str, Any] = json.loads(meta_path.read_text("utf-8"))
        dtype = np.dtype(self.meta["dtype"])
        self.tokens = _memmap(self.path / self.meta["tokens"], dtype)
        self.offsets = np.load(self.path / self.meta["offsets"], mmap_mode="r")
        self.document_ids = np.load(self.path / self.meta["document_ids"], mmap_mode="r")
        if self.tokens.shape[0] != self.meta["n_tokens"] or self.offsets[-1] != len(self.tokens):
            raise ClusterClipError(
                f"{self.path}: {self.meta['tokens']} holds {self.tokens.shape[0]} tokens but the "
                f"sidecar records {self.meta['n_tokens']}. Export again."
            )

    def __len__(self) -> int:
        """Number of schedule positions."""
        return int(self.document_ids.shape[0])

    def document(self, position: int) -> np.ndarray:
        """Tokens of schedule position ``position`` (end-of-document token included)."""
        if not 0 <= position < len(self):
            raise invalid("position", f"an int in [0, {len(self)})", position)
        return self.tokens[int(self.offsets[position]) : int(self.offsets[position + 1])]

    def windows(self, length: int, *, start: int = 0) -> Iterator[np.ndarray]:
        """Consecutive windows of ``length + 1`` tokens (inputs and shifted targets).

        Window ``w`` covers ``tokens[start + w * length : start + (w + 1) * length + 1]``,
        so consecutive windows overlap by one token and together read every token
        once, in schedule order. Resume after ``w`` windows with
        ``start = w * length`` (plus the first run's ``start``); the last partial
        window is dropped.
        """
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise invalid("length", "an int in [1, inf)", length)
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise invalid("start", "an int in [0, inf)", start)
        for begin in range(start, len(self.tokens) - length, length):
            yield self.tokens[begin : begin + length + 1]
