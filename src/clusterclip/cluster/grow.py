"""Assign documents added to the corpus to the cluster stage's existing centroids (no refit).

Read the fitted clusters (:meth:`FittedClusters.read`) *before* the embed stage
records the added documents (the cluster artifacts are refused as stale after
that), then :func:`assign_added` assigns the rows from ``first_index`` on, on
the engine (:func:`~clusterclip.cluster.assignment.assign_to_parts`: each task
writes its part), and one more task (:class:`AddedWorker`) appends them to
``clusters.parquet``; it returns the cluster entry over the union. The driver
holds no label or score. The centroids,
the fit and the dissolved clusters stay as they were: a document added this way
gets exactly the label the nearest-centroid rule gives it (coarse to fine down
the tree of a hierarchical stage).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.cluster.assignment import assign_to_parts
from clusterclip.cluster.finishing import cluster_summary
from clusterclip.cluster.hierarchical import Tree
from clusterclip.engines import resolve_options, run_task
from clusterclip.io import WorkDir, check_upstream
from clusterclip.io.artifacts import ClustersArtifact, EmbeddingsArtifact

__all__ = ["AddedWorker", "FittedClusters", "assign_added"]


@dataclass(frozen=True)
class FittedClusters:
    """A finished, fresh cluster stage: its entry, centroids and tree (labels stay on disk)."""

    entry: dict[str, Any]
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
        return cls(dict(entry), work.centroids(), tree)


class AddedWorker:
    """Append the added documents' assignment parts to ``clusters.parquet`` (one task's worker).

    Pass ``functools.partial(AddedWorker, workdir)`` to :func:`clusterclip.engines.run_task`
    with the payload ``(blocks, first_index, fingerprint, tree, n_clusters)``: the parts
    (:func:`~clusterclip.cluster.assignment.assign_to_parts`, rows counted from
    ``first_index``), the manifest's fingerprint of the clusters file they extend, the
    tree (or None) and K. Returns ``{"clusters": fingerprint, "summary": ..., "added": n}``.
    """

    def __init__(self, workdir: str) -> None:
        self.workdir = str(workdir)

    def __call__(self, payload: tuple[Any, int, str, Any, int]) -> dict[str, Any]:
        blocks, first_index, fingerprint, tree, n_clusters = payload
        work = WorkDir(self.workdir)
        clusters = ClustersArtifact(work)
        old_labels, old_scores, old_levels = clusters.read_written(fingerprint)
        labels, scores = clusters.read_parts(blocks)
        ok = work.ok_mask()[first_index:]
        labels[~ok], scores[~ok] = -1, 0.0
        all_labels = np.concatenate([old_labels, labels])
        all_scores = np.concatenate([old_scores, scores])
        levels = None
        if tree is not None and old_levels is not None:
            levels = np.concatenate([old_levels, tree.ancestors(labels)])
        written = clusters.write(all_labels, all_scores, levels=levels)
        clusters.clear_parts()
        summary = cluster_summary(all_labels, all_scores, n_clusters)
        return {"clusters": written, "summary": summary, "added": int(len(labels))}


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
        Where the assignment and the append run (:func:`clusterclip.engines.map_shards`).

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
    options = resolve_options(engine, engine_options)
    ClustersArtifact(work).clear_parts()  # an interrupted run's
    blocks = assign_to_parts(
        work.path, paths, fitted.centroids, backend=str(summary.get("backend", "numpy")),
        block_rows=int(config.get("assign_batch_size", 65536)), engine=engine, options=options,
        tree=fitted.tree, beam=int(config.get("beam", 1)),
    )  # fmt: skip
    payload = (blocks, first_index, fitted.entry.get("outputs", {}).get("clusters"), fitted.tree,
               len(fitted.centroids))  # fmt: skip
    done = run_task(functools.partial(AddedWorker, str(work.path)), payload, engine=engine,
                    options=options)  # fmt: skip
    summary.update(done["summary"])
    summary["assigned_without_refit"] = int(
        summary.get("assigned_without_refit", 0) + done["added"]
    )
    return {
        **fitted.entry,
        "inputs": {"embed.documents": work.output("embed.documents"),
                   "embed.embeddings": work.output("embed.embeddings")},
        "outputs": {**fitted.entry.get("outputs", {}), "clusters": done["clusters"]},
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
