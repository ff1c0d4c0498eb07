"""The assignment step of the cluster stage, on any engine.

The rows to assign are the embed stage's part files, cut into blocks
described by ``(file, start, stop, offset)``. :class:`AssignWorker` is the
factory handed to :func:`clusterclip.engines.map_shards`: each process keeps a
copy of the centroids and memory-maps the part files itself, so no embedding
is shipped from the driver, whichever engine runs it. With a work directory
(:func:`assign_to_parts`) each task also writes its labels and scores there
(:meth:`~clusterclip.io.artifacts.ClustersArtifact.write_part`) and sends back
only its row count, so no per-document array reaches the driver either.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.cluster.kmeans import assign
from clusterclip.engines import RayOptions, map_shards
from clusterclip.errors import ClusterClipError
from clusterclip.io.shards import release_pages
from clusterclip.threads import on_driver_threads

__all__ = [
    "AssignWorker",
    "Block",
    "TreeAssignWorker",
    "assign_files",
    "assign_to_parts",
    "plan_blocks",
]

#: ``(part file, first row, end row, global row of the first row)``.
Block = tuple[str, int, int, int]


class AssignWorker:
    """Assign blocks of embedding rows to their nearest centroid.

    Pass ``functools.partial(AssignWorker, centroids, backend)`` as the
    ``worker`` of :func:`clusterclip.engines.map_shards`; each process builds
    one and calls it with every :data:`Block`.

    Parameters
    ----------
    centroids : numpy.ndarray
        ``(K, d)`` unit centroids; copied (backends such as torch want a
        writable array, and Ray hands out read-only ones).
    backend : str
        E-step backend of :func:`clusterclip.cluster.assign`.
    workdir : str, optional
        Write each block's labels and scores into this work directory's
        assignment parts and return the block's row count instead.

    Examples
    --------
    >>> worker = AssignWorker(np.eye(2, dtype=np.float32), "numpy")
    >>> worker(("embeddings/part-00000.npy", 0, 2, 0))  # doctest: +SKIP
    (array([1, 0], dtype=int32), array([1., 1.], dtype=float32))
    """

    def __init__(self, centroids: np.ndarray, backend: str, workdir: str | None = None) -> None:
        self.centroids = np.array(centroids, dtype=np.float32)
        self.backend = backend
        self.files: dict[str, np.ndarray] = {}
        self.workdir = workdir

    def _rows(self, path: str, start: int, stop: int) -> np.ndarray:
        """A copy of the rows; the mapping's pages are dropped so the resident size stays small."""
        if path not in self.files:
            self.files[path] = np.load(path, mmap_mode="r")
        rows = np.array(self.files[path][start:stop])
        release_pages(self.files[path])
        return rows

    def __call__(self, block: Block) -> Any:
        """``labels`` int32 and ``scores`` float32 of the block's rows (or their count)."""
        path, start, stop, offset = block
        return self._answer(offset, *self._assigned(self._rows(path, start, stop), offset))

    def _assigned(self, rows: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
        return assign(rows, self.centroids, backend=self.backend, offset=offset)

    def _answer(self, offset: int, labels: np.ndarray, scores: np.ndarray) -> Any:
        labels = np.asarray(labels, dtype=np.int32)
        scores = np.asarray(scores, dtype=np.float32)
        if self.workdir is None:
            return labels, scores
        from clusterclip.io.artifacts import ClustersArtifact

        ClustersArtifact(self.workdir).write_part(offset, labels, scores)
        return len(labels)


class TreeAssignWorker(AssignWorker):
    """Like :class:`AssignWorker`, but coarse to fine down a hierarchical k-means tree.

    Pass ``functools.partial(TreeAssignWorker, tree, beam)``; each call returns the
    leaf (int32) and its cosine (float32) of every row, as
    :meth:`clusterclip.cluster.hierarchical.Tree.assign` gives them.
    """

    def __init__(self, tree: Any, beam: int, workdir: str | None = None) -> None:
        super().__init__(tree.centroids[-1], "numpy", workdir)
        self.tree, self.beam = tree, int(beam)

    def _assigned(self, rows: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
        return self.tree.assign(rows, beam=self.beam, offset=offset)


def plan_blocks(paths: Sequence[str | os.PathLike[str]], block_rows: int) -> list[Block]:
    """Cut the files (stacked by rows, in this order) into blocks of at most ``block_rows``.

    >>> plan_blocks([], 10)
    []
    """
    blocks, offset = [], 0
    for path in paths:
        rows = int(np.load(path, mmap_mode="r").shape[0])
        for start in range(0, rows, block_rows):
            blocks.append((str(Path(path)), start, min(start + block_rows, rows), offset + start))
        offset += rows
    return blocks


def assign_files(
    paths: Sequence[str | os.PathLike[str]],
    centroids: np.ndarray,
    *,
    backend: str,
    block_rows: int,
    engine: str = "local",
    options: RayOptions | None = None,
    progress: bool = False,
    tree: Any = None,
    beam: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Assign every row of the embedding part files to its nearest centroid.

    Parameters
    ----------
    paths : sequence of path
        ``.npy`` files of shape ``(rows, d)``, stacked by rows in this order
        (``embeddings/part-*.npy``). Workers memory-map them, so on a
        multi-node Ray cluster every node must see them at the same path.
    centroids : numpy.ndarray
        ``(K, d)`` unit centroids (shipped once per process).
    backend : str
        E-step backend (:mod:`clusterclip.cluster.backends`), resolved.
    block_rows : int
        Rows per task.
    engine, options
        See :func:`clusterclip.engines.map_shards`.
    progress : bool
        A progress bar on stderr.
    tree : clusterclip.cluster.hierarchical.Tree, optional
        Assign coarse to fine down this tree (``centroids`` are then its leaves)
        with ``beam`` nodes kept per level, instead of exactly.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``labels`` int32 and ``scores`` float32 of length ``sum(rows)``:
        what :func:`~clusterclip.cluster.assign` gives on the stacked rows,
        whatever the engine and the number of workers.

    Examples
    --------
    >>> labels, scores = assign_files(parts, centroids, backend="numpy", block_rows=65536)  # doctest: +SKIP
    """
    blocks = plan_blocks(paths, block_rows)
    total = blocks[-1][3] + blocks[-1][2] - blocks[-1][1] if blocks else 0
    labels = np.empty(total, dtype=np.int32)
    scores = np.empty(total, dtype=np.float32)
    run = _Run(centroids, backend=backend, engine=engine, options=options, progress=progress,
               tree=tree, beam=beam)  # fmt: skip
    for offset, (block_labels, block_scores) in run.blocks(blocks, total):
        labels[offset : offset + len(block_labels)] = block_labels
        scores[offset : offset + len(block_labels)] = block_scores
    return labels, scores


def assign_to_parts(
    workdir: str | os.PathLike[str],
    paths: Sequence[str | os.PathLike[str]],
    centroids: np.ndarray,
    **settings: Any,
) -> list[tuple[int, int]]:
    """:func:`assign_files`, each task writing its rows' labels and scores into ``workdir``.

    ``settings`` are :func:`assign_files`' keywords (``backend`` and ``block_rows``
    required). The parts (:meth:`~clusterclip.io.artifacts.ClustersArtifact.write_part`)
    are what :func:`assign_files` would return, cut by task; the driver receives one
    row count per task. Returns the blocks as ``(first_row, rows)``, in row order:
    what :meth:`~clusterclip.io.artifacts.ClustersArtifact.read_parts` takes.

    Examples
    --------
    >>> blocks = assign_to_parts("work", parts, centroids, backend="numpy", block_rows=65536)  # doctest: +SKIP
    >>> labels, scores = ClustersArtifact("work").read_parts(blocks)  # doctest: +SKIP
    """
    blocks = plan_blocks(paths, settings.pop("block_rows"))
    total = blocks[-1][3] + blocks[-1][2] - blocks[-1][1] if blocks else 0
    run = _Run(centroids, workdir=str(Path(workdir)), **settings)
    return [(offset, rows) for offset, rows in run.blocks(blocks, total)]


class _Run:
    """One assignment over planned blocks: the worker, the engine, the order and count checks."""

    def __init__(
        self,
        centroids: np.ndarray,
        *,
        backend: str,
        engine: str = "local",
        options: RayOptions | None = None,
        progress: bool = False,
        tree: Any = None,
        beam: int = 1,
        workdir: str | None = None,
    ) -> None:
        if tree is None:
            worker: Any = functools.partial(AssignWorker, centroids, backend, workdir)
        else:
            worker = functools.partial(TreeAssignWorker, tree, beam, workdir)
        self.worker = on_driver_threads(worker, engine)  # the local engine's bits on any engine
        self.engine, self.options, self.progress = engine, options, progress

    def blocks(self, blocks: list[Block], total: int) -> Any:
        """Yield ``(first_row, result)`` per block in row order; refuse a gap or a shortfall."""
        from clusterclip.progress import progress_bar

        tasks = [(block[3], block) for block in blocks]
        done = 0  # rows filled so far: results come back in row order
        bar = progress_bar(total=total, desc="assign", unit="doc") if self.progress else None
        for offset, result in map_shards(
            tasks, self.worker, engine=self.engine, options=self.options
        ):
            if offset != done:
                raise ClusterClipError(
                    f"the {self.engine} engine returned rows from {offset} where {done} was "
                    "expected; rerun the cluster stage."
                )
            rows = result if isinstance(result, int) else len(result[0])
            done += rows
            if bar is not None:
                bar.update(rows)
            yield offset, result
        if bar is not None:
            bar.close()
        if done != total:
            raise ClusterClipError(
                f"the {self.engine} engine returned {done} of {total} rows; rerun the cluster "
                "stage."
            )
