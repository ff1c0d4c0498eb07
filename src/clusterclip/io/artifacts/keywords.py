"""``.keyword-state/RUN/``: what the keyword tasks of one description share, while it runs.

Describing clusters (the report's keywords, ``clusterclip inspect``) is a plan
task, read tasks and a merge task, none on the driver. The plan task writes
which cluster each document's words count for (:meth:`KeywordState.write_labels`);
each read task memory-maps its range of it and writes its word counts as a part
named by its first document (:meth:`KeywordState.write_part`); the merge task
reads the parts (:meth:`KeywordState.read_part`). Each description has its own
folder (``run``), so two at once do not meet, and :meth:`KeywordState.clear`
removes it. It sits in the work directory so that every Ray node sees it (a work
directory this process may not write to gets a temporary folder on the local engine).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io.files import atomic_path

if TYPE_CHECKING:
    from clusterclip.io.workdir import WorkDir

__all__ = ["KeywordState"]


class KeywordState:
    """The shared files of one cluster description (picklable: workers get the handle).

    Parameters
    ----------
    root : path
        The folder holding descriptions' folders: a work directory's
        ``.keyword-state`` (:meth:`of`), where every Ray node sees it.
    run : str, optional
        The description's folder name; a new one (random) by default.

    Examples
    --------
    >>> state = KeywordState.of(WorkDir("work"))  # doctest: +SKIP
    >>> state.write_labels(np.array([0, -1, 2], dtype=np.int32))  # doctest: +SKIP
    >>> state.labels()[1:]  # doctest: +SKIP
    memmap([-1,  2], dtype=int32)
    """

    def __init__(self, root: str | os.PathLike[str], run: str | None = None) -> None:
        self.root = Path(root)
        self.run = uuid.uuid4().hex if run is None else str(run)

    @classmethod
    def of(cls, work: WorkDir, *, local: bool = False) -> KeywordState:
        """A new description's state in ``work``'s ``.keyword-state``.

        With ``local`` (every task runs in this process), a work directory this
        process may not write to (a colleague's, a read-only mount) gets a
        temporary folder instead, so describing it needs no write access.
        """
        root = work.path_of("keyword_state")
        if local and not os.access(work.path, os.W_OK):
            root = Path(tempfile.mkdtemp(prefix="clusterclip-keywords-"))
        return cls(root)

    def __repr__(self) -> str:
        return f"KeywordState({os.fspath(self.root)!r}, {self.run!r})"

    @property
    def folder(self) -> Path:
        """``ROOT/RUN``."""
        return self.root / self.run

    @property
    def labels_path(self) -> Path:
        return self.folder / "labels.npy"

    def part_path(self, first: int) -> Path:
        """The word counts of the read task whose documents start at ``first``."""
        return self.folder / f"words-{int(first):012d}.npz"

    def write_labels(self, labels: np.ndarray) -> Path:
        """Write the int32 cluster each document's words count for (-1: none), atomically."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.labels_path) as tmp, open(tmp, "wb") as handle:
            np.save(handle, np.ascontiguousarray(labels, dtype=np.int32))
        return self.labels_path

    def labels(self) -> np.ndarray:
        """The labels :meth:`write_labels` wrote, memory-mapped."""
        if not self.labels_path.exists():
            raise ClusterClipError(f"{self.labels_path} is missing; rerun the command.")
        return np.load(self.labels_path, mmap_mode="r")

    def write_part(self, first: int, arrays: Mapping[str, np.ndarray]) -> Path:
        """Write one read task's named arrays atomically (a retried task overwrites its own)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.part_path(first)
        with atomic_path(target) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, **{name: np.asarray(value) for name, value in arrays.items()})
        return target

    def read_part(self, first: int) -> dict[str, Any]:
        """The arrays of the part of ``first``; a missing one is refused by name."""
        path = self.part_path(first)
        if not path.exists():
            raise ClusterClipError(
                f"the keyword part {path} is missing (a read task's output); rerun the command."
            )
        with np.load(path, allow_pickle=False) as part:
            return {name: part[name] for name in part.files}

    def clear(self) -> None:
        """Delete this description's folder, then ``.keyword-state`` if nothing else is in it."""
        folder = self.folder
        if folder.is_dir():
            for path in folder.iterdir():
                path.unlink(missing_ok=True)
            folder.rmdir()
        with contextlib.suppress(OSError):  # only when empty: another may be running
            self.root.rmdir()
