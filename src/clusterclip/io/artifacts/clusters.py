"""The cluster stage's files: ``clusters.parquet`` (with levels), ``centroids.npy``, ``level_centroids.npz``."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io.artifacts.base import Artifact, Column, arrow_schema, read_in_index_order
from clusterclip.io.files import atomic_path, remove_own

__all__ = [
    "CLUSTER_COLUMNS",
    "LEVEL_PREFIX",
    "CentroidsArtifact",
    "ClustersArtifact",
    "LevelCentroidsArtifact",
    "level_column",
]

#: Columns of ``clusters.parquet`` for every cluster stage, in order.
CLUSTER_COLUMNS: tuple[Column, ...] = (
    ("index", "int64"),
    ("cluster", "int32"),
    ("score", "float32"),
)
#: Prefix of the columns a hierarchical stage adds: ``level_0`` (coarsest) .. ``level_{L-2}``.
LEVEL_PREFIX = "level_"
#: Arrow type of every level column.
LEVEL_TYPE = "int32"


def level_column(level: int) -> str:
    """The column of ``clusters.parquet`` holding level ``level`` (0: the coarsest).

    >>> level_column(1)
    'level_1'
    """
    return f"{LEVEL_PREFIX}{level}"


def _level_of(name: str) -> int | None:
    rest = name.removeprefix(LEVEL_PREFIX)
    return int(rest) if rest != name and rest.isdigit() else None


class ClustersArtifact(Artifact):
    """``clusters.parquet``: every document's cluster, its cosine to the centroid, its levels.

    Columns :data:`CLUSTER_COLUMNS`, then one int32 :func:`level_column` per
    level above the leaf when the stage ran hierarchical k-means. Rows in
    index order; ``cluster`` is -1 for excluded documents (and so is every level).

    Examples
    --------
    >>> from clusterclip.io.artifacts import ClustersArtifact
    >>> clusters = ClustersArtifact("work")  # doctest: +SKIP
    >>> clusters.write(np.array([0, 1, -1]), np.ones(3, np.float32))  # doctest: +SKIP
    >>> clusters.labels()  # doctest: +SKIP
    array([ 0,  1, -1], dtype=int32)
    """

    key = "clusters"
    stage = "cluster"

    def write(
        self, labels: np.ndarray, scores: np.ndarray, *, levels: np.ndarray | None = None
    ) -> str:
        """Write labels (N,), scores (N,) and optional levels (N, L-1) atomically; return the fingerprint."""
        pa = require_extra("pyarrow", "io")
        pq = require_extra("pyarrow.parquet", "io")
        (index, _), (cluster, _), (score, _) = CLUSTER_COLUMNS
        columns = {
            index: np.arange(len(labels), dtype=np.int64),
            cluster: np.asarray(labels).astype(np.int32),
            score: np.asarray(scores).astype(np.float32),
        }
        layout = list(CLUSTER_COLUMNS)
        if levels is not None:  # coarse to fine, the levels above the leaf
            for level in range(levels.shape[1]):
                columns[level_column(level)] = np.asarray(levels[:, level]).astype(np.int32)
                layout.append((level_column(level), LEVEL_TYPE))
        table = pa.table(
            {name: pa.array(values) for name, values in columns.items()},
            schema=arrow_schema(layout),
        )
        with atomic_path(self.path) as tmp:
            pq.write_table(table, tmp)
        return self.fingerprint()

    # -- assignment parts: one per assignment task ---------------------------
    @property
    def parts_folder(self) -> Path:
        """Where the assignment tasks' parts wait for :meth:`read_parts` (``.cluster-state``)."""
        return self.work.path_of("cluster_state")

    def part_path(self, first_row: int) -> Path:
        """The part of the assignment task whose rows start at global row ``first_row``."""
        return self.parts_folder / f"assigned-{int(first_row):012d}.npz"

    def write_part(self, first_row: int, labels: np.ndarray, scores: np.ndarray) -> Path:
        """Write one task's labels (int32) and scores (float32) atomically.

        Safe from many processes at once: each task has its own file, which
        appears whole or not at all; a retried task overwrites its own.
        """
        labels = np.asarray(labels, dtype=np.int32)
        scores = np.asarray(scores, dtype=np.float32)
        if labels.shape != scores.shape or labels.ndim != 1:
            raise ClusterClipError(
                f"an assignment part needs 1-D labels and scores of one length; got shapes "
                f"{labels.shape} and {scores.shape}."
            )
        self.parts_folder.mkdir(parents=True, exist_ok=True)
        target = self.part_path(first_row)
        with atomic_path(target) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, labels=labels, scores=scores)
        return target

    def read_parts(self, blocks: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """Labels and scores of the parts of ``blocks`` (``(first_row, rows)``, consecutive).

        A missing part, or one of another length, is refused with its file named.
        """
        total = sum(int(rows) for _, rows in blocks)
        labels = np.empty(total, dtype=np.int32)
        scores = np.empty(total, dtype=np.float32)
        done = 0
        for first, rows in blocks:
            path = self.part_path(first)
            if int(first) != done or not path.exists():
                raise ClusterClipError(
                    f"the assignment part {path} (rows {first}..{first + rows - 1}) is missing; "
                    "rerun the cluster stage."
                )
            with np.load(path) as part:
                if part["labels"].shape != (rows,) or part["scores"].shape != (rows,):
                    raise ClusterClipError(
                        f"the assignment part {path} holds {part['labels'].shape[0]} rows where "
                        f"{rows} were planned; rerun the cluster stage."
                    )
                labels[done : done + rows] = part["labels"]
                scores[done : done + rows] = part["scores"]
            done += rows
        return labels, scores

    def clear_parts(self) -> None:
        """Delete the assignment parts (and their temp files), then the folder if empty."""
        remove_own(self.parts_folder, "assigned-*.npz")

    def _columns(self, *columns: str) -> np.ndarray:
        """``columns`` in index order, one per column of the result (one column: 1-D)."""
        self.check_fresh()  # first: "no completed cluster stage" names the command
        if not self.exists():
            raise ClusterClipError(
                f"{self.path} not found. Run `clusterclip cluster --workdir {self.work.path} "
                "--n-clusters K` (or `clusterclip run`) first."
            )
        arrays = self._read(*columns)
        return arrays[0] if len(arrays) == 1 else np.stack(arrays, axis=1)

    def _read(self, *columns: str) -> list[np.ndarray]:
        """``columns`` in index order, as read from the file (one read of it)."""
        table = read_in_index_order(self.path, columns, fix="Rerun `clusterclip cluster`.")
        return [table.column(c).to_numpy() for c in columns]

    def read_written(self, fingerprint: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Labels, scores and levels (or None) of the file the manifest recorded as ``fingerprint``.

        For a step that reads the clusters while the inputs they were made from are
        being extended (``clusterclip add``: the embed stage already lists the added
        documents, so :meth:`labels` would refuse them as stale): the file must still
        be the one written, byte for byte.
        """
        if not self.exists() or self.fingerprint() != fingerprint:
            raise ClusterClipError(
                f"{self.path} is missing or changed since the cluster stage wrote it; rerun "
                f"`clusterclip cluster --workdir {self.work.path} --overwrite`."
            )
        names = self.level_names()
        labels, scores, *levels = self._read("cluster", "score", *names)
        return (
            labels.astype(np.int32, copy=False),
            scores.astype(np.float32, copy=False),
            np.stack(levels, axis=1).astype(np.int32) if levels else None,
        )

    def labels(self) -> np.ndarray:
        """int32 ``(N,)``: cluster of every document in index order (-1 = excluded)."""
        return self._columns("cluster").astype(np.int32, copy=False)

    def scores(self) -> np.ndarray:
        """float32 ``(N,)``: cosine of every document to its centroid."""
        return self._columns("score").astype(np.float32, copy=False)

    def level_names(self) -> list[str]:
        """The level columns present, coarse to fine (empty for flat k-means)."""
        pq = require_extra("pyarrow.parquet", "io")
        found = [(_level_of(n), n) for n in pq.read_schema(self.path).names]
        return [name for level, name in sorted((lv, n) for lv, n in found if lv is not None)]

    def levels(self) -> np.ndarray | None:
        """int32 ``(N, L-1)``: every document's cluster on each level above its leaf, or None.

        Column ``l`` is :func:`level_column` ``(l)``, coarse to fine; None when
        the stage ran flat k-means.
        """
        if not self.exists():
            self._columns("cluster")  # raises the stale-stage or missing-file error
        names = self.level_names()
        if not names:
            self.check_fresh()
            return None
        levels = self._columns(*names).astype(np.int32).reshape(-1, len(names))
        return np.ascontiguousarray(levels)


class CentroidsArtifact(Artifact):
    """``centroids.npy``: float32 ``(K, dim)`` centroids of the leaves."""

    key = "centroids"
    stage = "cluster"

    def write(self, centroids: np.ndarray) -> str:
        """Write the centroids atomically; return the fingerprint."""
        with atomic_path(self.path) as tmp, open(tmp, "wb") as handle:
            np.save(handle, np.ascontiguousarray(centroids, dtype=np.float32))
        return self.fingerprint()

    def _require(self) -> None:
        if not self.exists():
            raise ClusterClipError(f"{self.path} not found. Run `clusterclip cluster` first.")

    def read(self) -> np.ndarray:
        """float32 ``(K, dim)``."""
        self._require()
        return np.load(self.path)

    def n_clusters(self) -> int:
        """K (empty clusters included), from the file's header."""
        self._require()
        return int(np.load(self.path, mmap_mode="r").shape[0])


class LevelCentroidsArtifact(Artifact):
    """``level_centroids.npz``: every level's centroids and each node's parent (hierarchical only)."""

    key = "level_centroids"
    stage = "cluster"

    def write(self, centroids: Sequence[np.ndarray], parents: Sequence[np.ndarray]) -> str:
        """Write ``centroids_l`` (float32) and ``parents_l`` (int32) atomically; return the fingerprint.

        Byte-identical for the same arrays: the zip members carry a fixed
        timestamp, so a rerun (or another engine) writes the same file.
        """
        arrays = [
            (f"centroids_{i}", np.asarray(c, dtype=np.float32)) for i, c in enumerate(centroids)
        ]
        arrays += [
            (f"parents_{i + 1}", np.asarray(p, dtype=np.int32)) for i, p in enumerate(parents)
        ]
        with (
            atomic_path(self.path) as tmp,
            zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive,
        ):
            for name, array in arrays:
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
                member = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(member, buffer.getvalue())
        return self.fingerprint()

    def remove(self) -> None:
        """Delete the file (a flat run after a hierarchical one)."""
        self.path.unlink(missing_ok=True)

    def read(self) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
        """``(centroids, parents)``, coarse to fine, or None for flat k-means (fresh stage only)."""
        self.check_fresh()
        if not self.exists():
            return None
        with np.load(self.path) as stored:
            count = sum(1 for name in stored.files if name.startswith("centroids_"))
            centroids = [stored[f"centroids_{i}"] for i in range(count)]
            parents = [stored[f"parents_{i}"] for i in range(1, count)]
        return centroids, parents

    def tree(self) -> Any:
        """The :class:`clusterclip.tree.Tree` of the stored levels, or None for flat k-means."""
        from clusterclip.tree import Tree

        stored = self.read()
        return None if stored is None else Tree(tuple(stored[0]), tuple(stored[1]))
