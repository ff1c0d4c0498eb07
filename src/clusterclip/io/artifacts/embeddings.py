"""``embeddings/part-NNNNN.npy``: float16 rows, one per document, one part per embed task."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io.artifacts.base import Artifact
from clusterclip.io.files import atomic_path, fingerprint_file

__all__ = ["EMBEDDING_DTYPE", "EmbeddingsArtifact"]

#: The dtype of every stored embedding row (L2-normalised vectors; half the bytes of float32).
EMBEDDING_DTYPE = np.dtype(np.float16)


class EmbeddingsArtifact(Artifact):
    """The embedding parts of a work directory: one ``.npy`` per task, read as one matrix.

    Part ``t`` holds the rows of embed task ``t`` (its documents in index order;
    zero rows for documents that are not ``ok``), so parts written by many
    workers at once concatenate into the ``(N, dim)`` matrix in task order.

    Examples
    --------
    >>> from clusterclip.io.artifacts import EmbeddingsArtifact
    >>> embeddings = EmbeddingsArtifact("work")  # doctest: +SKIP
    >>> embeddings.write_part(0, np.zeros((3, 8), np.float16))  # doctest: +SKIP
    >>> embeddings.read().shape  # doctest: +SKIP
    (3, 8)
    """

    key = "embeddings"
    stage = "embed"

    def part_path(self, task: int) -> Path:
        """The part of embed task ``task`` (0-based)."""
        return self.path / f"part-{task:05d}.npy"

    def part_paths(self) -> list[Path]:
        """The parts present, in task order."""
        return sorted(self.path.glob("part-*.npy")) if self.path.is_dir() else []

    def write_part(self, task: int, rows: np.ndarray) -> Path:
        """Write the float16 ``(n, dim)`` rows of one task atomically (fsynced before the rename).

        Safe from many processes at once: each task has its own file.
        """
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.dtype != EMBEDDING_DTYPE:
            raise ClusterClipError(
                f"an embedding part must be a 2-D {EMBEDDING_DTYPE} array; got {rows.dtype} "
                f"with shape {rows.shape}."
            )
        target = self.part_path(task)
        with atomic_path(target) as tmp, open(tmp, "wb") as handle:
            np.save(handle, rows)
            handle.flush()
            os.fsync(handle.fileno())
        return target

    def part_rows(self, task: int) -> int | None:
        """Rows of the part of ``task`` as its header says, or None if missing or unreadable."""
        try:
            return int(np.load(self.part_path(task), mmap_mode="r").shape[0])
        except (OSError, ValueError):
            return None

    def part_fingerprint(self, task: int) -> str:
        """Content hash of the part of ``task`` (what :meth:`fingerprint` combines)."""
        return fingerprint_file(self.part_path(task))

    def fingerprint(
        self, n_tasks: int | None = None, *, known: Mapping[int, str] | None = None
    ) -> str:
        """Content hash of every part (of tasks ``0..n_tasks-1``; default: those present), in task order.

        ``known``: ``{task: part_fingerprint(task)}`` already computed where the
        parts were written (the embed tasks), so the caller reads none of those parts.
        """
        import hashlib

        known = known or {}
        if n_tasks is None:
            parts = [(int(p.stem.removeprefix("part-")), p) for p in self.part_paths()]
        else:
            parts = [(task, self.part_path(task)) for task in range(n_tasks)]
        digest = hashlib.blake2b(digest_size=16)
        for task, part in parts:
            found = known.get(task) or fingerprint_file(part)
            digest.update(f"{part.name}:{found};".encode())
        return digest.hexdigest()

    def damaged(self) -> str | None:
        """What is wrong with a present part (header against file size), or None."""
        from clusterclip.io.shards import npy_problem

        for part in self.part_paths():
            problem = npy_problem(part)
            if problem:
                return f"{part} {problem}"
        return None

    def read(self) -> Any:
        """float16 ``(N, dim)`` :class:`~clusterclip.io.shards.ShardedMatrix`, memory-mapped.

        Refused without a completed embed stage, with a damaged part, or with
        another row count than the manifest records.
        """
        from clusterclip.io.shards import ShardedMatrix

        entry = self.work.require(self.stage)
        problem = self.damaged()
        if problem:
            where = self.work.path
            raise ClusterClipError(
                f"{problem}. Redo the embed stage: rerun `clusterclip run INPUT... --workdir "
                f"{where}` (it redoes an embed stage whose parts are damaged) or "
                f"`clusterclip embed INPUT... --workdir {where} --overwrite`."
            )
        matrix = ShardedMatrix.from_directory(self.path)
        expected = sum(entry.get("counts", {}).values())
        if expected and len(matrix) != expected:
            raise ClusterClipError(
                f"{self.path} has {len(matrix)} rows but the manifest records "
                f"{expected} documents. Rerun `clusterclip embed ... --overwrite`."
            )
        return matrix
