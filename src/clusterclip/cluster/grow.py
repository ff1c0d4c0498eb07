"""Assign documents added to the corpus to the cluster stage's existing centroids (no refit).

Read the fitted clusters (:meth:`FittedClusters.read`) *before* the embed stage
records the added documents (the cluster artifacts are refused as stale after
that), then :func:`assign_added` assigns the rows from ``first_index`` on, on
the engine (:func:`~clusterclip.cluster.assignment.assign_files`), appends them to
``clusters.parquet`` and returns the cluster entry over the union. The centroids,
the fit and the dissolved clusters stay as they were: a document added this way
gets exactly the label the nearest-centroid rule gives it (coarse to fine down
the tree of a hierarchical stage).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.cluster.assignment import assign_files
from clusterclip.cluster.hierarchical import Tree
from clusterclip.cluster.stage import cluster_summary
from clusterclip.engines import resolve_options
from clusterclip.io import WorkDir, check_upstream
from clusterclip.io.artifacts import ClustersArtifact, EmbeddingsArtifact

__all__ = ["FittedClusters", "assign_added"]


@dataclass(frozen=True)
class FittedClusters:
    """A finished, fresh cluster stage's labels, scores, levels, centroids and tree."""

    entry: dict[str, Any]
    labels: np.ndarray
    scores: np.ndarray
    levels: np.ndarray | None
    centroids: np.ndarray
    tree: Any

    @classmethod
    def read(cls, work: WorkDir) -> FittedClusters | None:
        """The cluster stage of ``work``, or None when it has none or it is out of date.

        >>> FittedClusters.read(WorkDir("work")).centroids.shape  # doctest: +SKIP
        (100, 256)
        """
        entry = work.entry("cluster")
        if not entry or not entry.get("complete"):
            return None
        if check_upstream(work.path, "cluster", entry.get("inputs", {})):
            return None
        stored = work.cluster_tree()  # plain arrays; the stage's Tree also assigns
        tree = None if stored is None else Tree(stored.centroids, stored.parents)
        return cls(dict(entry), work.labels(), work.scores(), work.levels(), work.centroids(), tree)


def assign_added(
    work: WorkDir,
    fitted: FittedClusters,
    first_index: int,
    *,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assign documents ``first_index ..`` to ``fitted``'s centroids; write the union's clusters.

    Parameters
    ----------
    work : WorkDir
        Its embed stage already records the added documents.
    fitted : FittedClusters
        Read before the embed stage recorded them.
    first_index : int
        Index of the first added document (the documents before it keep their labels).
    engine, engine_options
        Where the assignment runs (:func:`clusterclip.engines.map_shards`).

    Returns
    -------
    dict
        The cluster stage's manifest entry over the union (to record).

    Examples
    --------
    >>> fitted = FittedClusters.read(work)  # doctest: +SKIP
    >>> entry = assign_added(work, fitted, 31102)  # doctest: +SKIP
    """
    config = fitted.entry.get("config", {})
    summary = dict(fitted.entry.get("summary", {}))
    paths = _parts_from(EmbeddingsArtifact(work).part_paths(), first_index)
    labels, scores = assign_files(
        paths, fitted.centroids, backend=str(summary.get("backend", "numpy")),
        block_rows=int(config.get("assign_batch_size", 65536)), engine=engine,
        options=resolve_options(engine, engine_options), tree=fitted.tree,
        beam=int(config.get("beam", 1)),
    )  # fmt: skip
    ok = work.ok_mask()[first_index:]
    labels[~ok], scores[~ok] = -1, 0.0
    all_labels = np.concatenate([fitted.labels, labels])
    all_scores = np.concatenate([fitted.scores, scores])
    levels = None
    if fitted.tree is not None and fitted.levels is not None:
        levels = np.concatenate([fitted.levels, fitted.tree.ancestors(labels)])
    clusters = ClustersArtifact(work).write(all_labels, all_scores, levels=levels)
    summary.update(cluster_summary(all_labels, all_scores, len(fitted.centroids)))
    summary["assigned_without_refit"] = int(summary.get("assigned_without_refit", 0) + len(labels))
    return {
        **fitted.entry,
        "inputs": {"embed.documents": work.output("embed.documents"),
                   "embed.embeddings": work.output("embed.embeddings")},
        "outputs": {**fitted.entry.get("outputs", {}), "clusters": clusters},
        "summary": summary,
        "complete": True,
    }  # fmt: skip


def _parts_from(paths: list[Path], first_index: int) -> list[Path]:
    """The parts holding rows ``first_index ..``; the first of them must start there."""
    from clusterclip.errors import ClusterClipError

    start = 0
    for number, path in enumerate(paths):
        if start == first_index:
            return paths[number:]
        start += int(np.load(path, mmap_mode="r").shape[0])
    raise ClusterClipError(
        f"no embedding part starts at document {first_index}. Refit instead: "
        "`clusterclip add ... --refit`, or rerun `clusterclip run INPUT... --workdir W`."
    )
