"""A row-concatenated, memory-mapped view over ``.npy`` shards.

The embed stage writes ``embeddings/part-NNNNN.npy`` (float16, one row per
document, in index order). :class:`ShardedMatrix` presents them as one
read-only ``(n_rows, dim)`` matrix without loading them into memory.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from clusterclip.arrays import distinct
from clusterclip.errors import ClusterClipError

__all__ = ["ShardedMatrix", "npy_problem", "release_pages"]

#: What to do about a damaged part (the embed stage is the only writer of parts).
REDO_EMBED = (
    "Redo the embed stage: rerun `clusterclip run INPUT... --workdir W` (it redoes an embed "
    "stage whose parts are damaged) or `clusterclip embed INPUT... --workdir W --overwrite`."
)


def npy_problem(path: str | os.PathLike[str]) -> str | None:
    """What is wrong with an ``.npy`` file, from its header and size alone; None if nothing.

    Cheap (one small read, no mapping), so freshness checks can afford it for
    every part: a file cut short by a full disk or a killed copy, a file longer
    than its header says, or one that is not an ``.npy`` array at all.

    >>> npy_problem("embeddings/part-00000.npy")  # doctest: +SKIP
    'is truncated: its header promises 20000 x 384 float16 (15,360,128 bytes), the file has 1,000'
    """
    fmt = np.lib.format
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            version = fmt.read_magic(handle)
            read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _fortran, dtype = read(handle)
            offset = handle.tell()
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    except ValueError as error:
        return f"is not a readable .npy array ({error})"
    if dtype.hasobject:
        return "holds Python objects, not numbers"
    expected = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size == expected:
        return None
    promised = f"{' x '.join(map(str, shape))} {dtype} ({expected:,} bytes)"
    what = "is truncated" if size < expected else "is longer than its header says"
    return f"{what}: its header promises {promised}, the file has {size:,} bytes"


def release_pages(array: np.ndarray) -> None:
    """Drop this process's mapping of a memory-mapped array's pages (data stays valid).

    A pass over memory-mapped shards leaves every page it read mapped, so the
    resident size grows to the whole file (10 GB for 10M documents, counted
    once per mapping) although the memory is page cache the kernel may drop.
    ``MADV_DONTNEED`` on the read-only shared mapping unmaps them: views stay
    valid (a later read maps the page again from the cache). A no-op for
    in-memory arrays and where ``madvise`` is missing.
    """
    handle = getattr(array, "_mmap", None)
    if handle is None and isinstance(getattr(array, "base", None), np.memmap):
        handle = getattr(array.base, "_mmap", None)
    advise = getattr(handle, "madvise", None)
    if advise is not None and hasattr(mmap, "MADV_DONTNEED"):
        with contextlib.suppress(OSError, ValueError):  # closed: only residency is lost
            advise(mmap.MADV_DONTNEED)


class ShardedMatrix:
    """Read-only matrix made of ``.npy`` shards stacked by rows (memory-mapped).

    Supports ``len``, ``shape``, ``dtype``, ``m[i]``, ``m[a:b]`` and
    ``m[int_array]`` (returns an in-memory ``numpy.ndarray``), and
    :meth:`iter_blocks`.

    >>> m = ShardedMatrix(["embeddings/part-00000.npy", "embeddings/part-00001.npy"])  # doctest: +SKIP
    >>> m[10:20].shape  # doctest: +SKIP
    (10, 384)
    """

    def __init__(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        if not paths:
            raise ClusterClipError("no embedding shards found. Run `clusterclip embed` first.")
        self.paths = [Path(p) for p in paths]
        for path in self.paths:
            problem = npy_problem(path)
            if problem:
                raise ClusterClipError(f"{path} {problem}. {REDO_EMBED}")
        self._parts = [np.load(p, mmap_mode="r") for p in self.paths]
        dims = {part.shape[1:] for part in self._parts}
        dtypes = {part.dtype for part in self._parts}
        if len(dims) != 1 or len(dtypes) != 1 or self._parts[0].ndim != 2:
            raise ClusterClipError(
                f"embedding shards disagree on shape or dtype ({sorted(map(str, dims))}, "
                f"{sorted(map(str, dtypes))}). Rerun `clusterclip embed --overwrite`."
            )
        self._offsets = np.cumsum([0] + [len(p) for p in self._parts])
        self.dtype = self._parts[0].dtype
        self.shape = (int(self._offsets[-1]), int(self._parts[0].shape[1]))

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> ShardedMatrix:
        """All ``part-*.npy`` files of ``directory``, in name order."""
        return cls(sorted(Path(directory).glob("part-*.npy")))

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        return 2

    def __getitem__(self, key: int | slice | np.ndarray) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            index = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= index < self.shape[0]:
                raise IndexError(f"row {key} out of range for {self.shape[0]} rows")
            part = int(np.searchsorted(self._offsets, index, side="right") - 1)
            return np.asarray(self._parts[part][index - self._offsets[part]])
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                return self[np.arange(start, stop, step)]
            return self._slice(start, stop)
        rows = np.asarray(key)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64, copy=False)
        out = np.empty((len(rows), self.shape[1]), dtype=self.dtype)
        parts = np.searchsorted(self._offsets, rows, side="right") - 1
        for part in distinct(parts).tolist():
            mask = parts == part
            out[mask] = self._parts[part][rows[mask] - self._offsets[part]]
            release_pages(self._parts[part])
        return out

    def _slice(self, start: int, stop: int) -> np.ndarray:
        pieces = []
        for part, array in enumerate(self._parts):
            lo, hi = self._offsets[part], self._offsets[part + 1]
            if hi <= start or lo >= stop:
                continue
            pieces.append(array[max(start, lo) - lo : min(stop, hi) - lo])
        if not pieces:
            return np.empty((0, self.shape[1]), dtype=self.dtype)
        out = np.concatenate(pieces) if len(pieces) > 1 else np.array(pieces[0])
        for part, array in enumerate(self._parts):
            if self._offsets[part + 1] > start and self._offsets[part] < stop:
                release_pages(array)
        return out

    def iter_blocks(self, block_rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(start_row, block)`` pairs covering all rows in order."""
        for start in range(0, self.shape[0], block_rows):
            yield start, self._slice(start, min(start + block_rows, self.shape[0]))
