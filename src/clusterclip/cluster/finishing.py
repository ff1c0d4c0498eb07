"""The end of the cluster stage as one engine task: the worker reads the labels, the driver none.

After the assignment tasks have written their parts
(:func:`~clusterclip.cluster.assignment.assign_to_parts`), :class:`FinishWorker`
reads them, marks the documents that are not ``ok``, dissolves the small
clusters (reading their members' rows from the memory-mapped embeddings),
compares the seed-stability fit, derives the levels, writes ``clusters.parquet``,
``centroids.npy`` and ``level_centroids.npz`` through their handles and summarises
the assignment. It sends back what is as small as the cluster count: the output
fingerprints, the summary, the small-cluster record and the kept centroids. On
the local engine the same worker runs in-process, so both engines write the same
bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterclip.arrays import distinct
from clusterclip.cluster.hierarchical import Tree, dissolve_small_leaves
from clusterclip.cluster.small import dissolve_small_clusters, effective_min_size
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import CentroidsArtifact, ClustersArtifact, LevelCentroidsArtifact

__all__ = ["Finish", "FinishWorker", "cluster_summary", "finish_on_engine"]


@dataclass(frozen=True)
class Finish:
    """What the assignment's end needs besides the parts: the payload of :class:`FinishWorker`.

    Attributes
    ----------
    blocks : list of (int, int)
        The assignment parts, ``(first_row, rows)`` in row order.
    centroids : numpy.ndarray
        ``(K, d)`` unit centroids the documents were assigned to (the leaves).
    tree : Tree or None
        The hierarchical k-means tree (None for flat k-means).
    min_cluster_size, n_clusters, beam : int
        The stage's options (:func:`~clusterclip.cluster.small.effective_min_size`).
    stability : dict or None
        The seed-stability fit's rows and labels
        (:func:`~clusterclip.cluster.stability.stability_fit`), or None.
    """

    blocks: list[tuple[int, int]]
    centroids: np.ndarray
    tree: Tree | None
    min_cluster_size: int
    n_clusters: int
    beam: int
    stability: dict[str, Any] | None


def _gini(sizes: np.ndarray) -> float:
    sizes = np.sort(np.asarray(sizes, dtype=np.float64))
    n, total = len(sizes), sizes.sum()
    if n == 0 or total == 0:
        return 0.0
    ranks = np.arange(1, n + 1)
    return float(2.0 * np.sum(ranks * sizes) / (n * total) - (n + 1) / n)


def cluster_summary(labels: np.ndarray, scores: np.ndarray, n_clusters: int) -> dict[str, Any]:
    """Sizes and balance of an assignment (``-1`` labels are left out).

    >>> s = cluster_summary(np.array([0, 0, 1, -1]), np.array([1.0, 0.5, 1.0, 0.0]), 3)
    >>> s["sizes"]["max"], s["empty_clusters"], s["excluded_documents"]
    (2, 1, 1)
    """
    kept = labels >= 0
    sizes = np.bincount(labels[kept], minlength=n_clusters)
    n = int(kept.sum())
    return {
        "documents": len(labels),
        "clustered_documents": n,
        "excluded_documents": int(len(labels) - n),
        "n_clusters": int(n_clusters),
        "sizes": {
            "min": int(sizes.min()),
            "median": float(np.median(sizes)),
            "max": int(sizes.max()),
        },
        "gini": round(_gini(sizes), 6),
        "imbalance_factor": round(
            float(n_clusters * np.square(sizes, dtype=np.float64).sum() / max(n, 1) ** 2), 6
        ),
        "empty_clusters": int((sizes == 0).sum()),
        "mean_score": round(float(np.mean(scores[kept], dtype=np.float64)), 6) if n else 0.0,
    }


class FinishWorker:
    """Finish the cluster stage in the work directory from the assignment parts.

    Pass ``functools.partial(FinishWorker, workdir)`` as the worker of
    :func:`clusterclip.engines.run_task` and a :class:`Finish` as its payload.
    Returns (when called) a dict: ``outputs`` (the written files' fingerprints),
    ``summary`` (:func:`cluster_summary`), ``non_empty`` (the non-empty clusters of
    each level above the leaves, or None for flat k-means), ``small`` (the dissolved clusters' record), ``stability`` (the
    comparison's record, or None), ``centroids`` (the kept leaves) and ``tree``
    (the pruned tree, or None).

    Examples
    --------
    >>> FinishWorker("work")(finish)  # doctest: +SKIP
    {'outputs': {'clusters': '...', 'centroids': '...'}, 'summary': {...}, ...}
    """

    def __init__(self, workdir: str) -> None:
        self.workdir = str(workdir)

    def __call__(self, finish: Finish) -> dict[str, Any]:
        work = WorkDir(self.workdir)
        clusters = ClustersArtifact(work)
        labels, scores = clusters.read_parts(finish.blocks)
        ok = work.ok_mask()
        labels[~ok] = -1
        scores[~ok] = 0.0
        embeddings = work.embeddings()
        min_size = effective_min_size(
            finish.min_cluster_size, int(np.count_nonzero(ok)), finish.n_clusters
        )
        tree = finish.tree
        if tree is None:
            labels, scores, centroids, small = dissolve_small_clusters(
                labels, scores, finish.centroids, lambda rows: embeddings[rows], min_size=min_size
            )
        else:
            labels, scores, tree, small = dissolve_small_leaves(
                labels, scores, tree, lambda rows: embeddings[rows], min_size=min_size,
                beam=finish.beam,
            )  # fmt: skip
            centroids = tree.centroids[-1]
        stability = None
        if finish.stability is not None:
            from clusterclip.cluster.stability import compare_stability

            stability = compare_stability(labels, finish.stability)
        levels = None if tree is None else tree.ancestors(labels)
        outputs = write_outputs(work, labels, scores, centroids, levels=levels, tree=tree)
        clusters.clear_parts()
        non_empty = None
        if levels is not None:
            kept = levels[:, 0] >= 0 if levels.shape[1] else np.zeros(0, dtype=bool)
            non_empty = [int(len(distinct(levels[kept, lv]))) for lv in range(levels.shape[1])]
        return {"outputs": outputs, "summary": cluster_summary(labels, scores, len(centroids)),
                "non_empty": non_empty, "small": small, "stability": stability,
                "centroids": centroids, "tree": tree}  # fmt: skip


def write_outputs(
    work: WorkDir,
    labels: np.ndarray,
    scores: np.ndarray,
    centroids: np.ndarray,
    *,
    levels: np.ndarray | None = None,
    tree: Tree | None = None,
) -> dict[str, str]:
    """Write the cluster stage's files through their handles; their fingerprints by key."""
    outputs = {
        "clusters": ClustersArtifact(work).write(labels, scores, levels=levels),
        "centroids": CentroidsArtifact(work).write(centroids),
    }
    level_centroids = LevelCentroidsArtifact(work)
    if tree is None:
        level_centroids.remove()  # a former hierarchical run's
        return outputs
    outputs["level_centroids"] = level_centroids.write(tree.centroids, tree.parents)
    return outputs


def finish_on_engine(
    workdir: str, finish: Finish, *, engine: str = "local", options: Any = None
) -> dict[str, Any]:
    """Run :class:`FinishWorker` on ``finish`` as one task of ``engine`` (on the driver's threads).

    Dissolving small clusters assigns their members again, whose last bits can
    follow the BLAS thread count, so the worker runs on the driver's
    (:func:`~clusterclip.threads.on_driver_threads`) and writes the local engine's bytes.

    >>> finish_on_engine("work", finish)["outputs"]  # doctest: +SKIP
    {'clusters': '...', 'centroids': '...'}
    """
    import functools

    from clusterclip.engines import run_task
    from clusterclip.threads import on_driver_threads

    worker = on_driver_threads(functools.partial(FinishWorker, str(workdir)), engine)
    return run_task(worker, finish, engine=engine, options=options)
