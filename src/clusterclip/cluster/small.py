"""Dissolve tiny clusters: their documents join the nearest sizeable cluster.

Uniform-over-clusters sampling gives every cluster the same share, so whatever
forms a tiny cluster (an outlier, a near-copy pair, a scrap of boilerplate) is
upsampled the most: a 1-document cluster among ``K`` gets ``1/K`` of the early
draws. After assignment, the cluster stage therefore dissolves every cluster
with fewer than ``min_cluster_size`` documents (:func:`effective_min_size`):
its documents are assigned to their nearest centroid among the clusters that
stay, the dissolved centroids are removed and the kept ones renumbered
``0..K'-1`` in their old order. Kept clusters only gain documents, so one pass
is stable, and ``assign(x, centroids)`` with the written centroids gives the
written labels (new documents never land in a dissolved cluster).

A dissolved document is then drawn at the rate of the cluster it joined, about
its natural rate, instead of ``1/K`` of the draws; the schedule needs no change.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["dissolve_small_clusters", "effective_min_size"]

#: The threshold never exceeds this fraction of the mean cluster size ``N / K``.
MEAN_FRACTION = 0.25

#: Member indices kept per dissolved cluster in the manifest (for the report's examples).
MAX_MEMBERS_RECORDED = 20


def effective_min_size(min_cluster_size: int, n_documents: int, n_clusters: int) -> int:
    """The size below which a cluster is dissolved: ``min_cluster_size``, capped.

    The cap is a quarter of the mean cluster size ``N / K``: the largest
    cluster holds at least ``N / K`` documents, so it always stays, and the
    dissolved clusters hold less than a quarter of the corpus together. On a
    few hundred documents with many clusters the rule switches itself off.

    >>> effective_min_size(5, 10_000, 100), effective_min_size(5, 300, 10)
    (5, 5)
    >>> effective_min_size(5, 40, 10), effective_min_size(1, 10_000, 100)
    (1, 1)
    """
    if n_clusters <= 0 or n_documents <= 0:
        return 1
    cap = max(1, math.ceil(MEAN_FRACTION * n_documents / n_clusters))
    return max(1, min(int(min_cluster_size), cap))


def dissolve_small_clusters(
    labels: np.ndarray,
    scores: np.ndarray,
    centroids: np.ndarray,
    rows: Any,
    *,
    min_size: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """Move the documents of clusters smaller than ``min_size`` to the nearest kept centroid.

    Parameters
    ----------
    labels : numpy.ndarray of int32, shape (N,)
        Cluster per document, ``-1`` for excluded documents (left alone).
    scores : numpy.ndarray of float32, shape (N,)
        Cosine to the assigned centroid.
    centroids : numpy.ndarray of float32, shape (K, d)
        Unit centroids.
    rows : callable
        ``rows(indices)`` -> embeddings of those documents, shape (len(indices), d);
        called once, with the sorted indices of the dissolved clusters' members.
    min_size : int
        Clusters with fewer documents (empty ones included) are dissolved.

    Returns
    -------
    labels, scores, centroids, record
        New int32 labels in ``0..K'-1`` (``-1`` kept), float32 scores, the kept
        centroids (K', d) in their old order, and a record:
        ``min_cluster_size``, ``sizes_before`` (K ints), ``kept`` (old id of each new
        cluster) and ``dissolved`` (``[{cluster, size, members, moved_to}]``: the
        old id, its size, up to 20 member indices and the new cluster each went to).

    Deterministic: no randomness; ties go to the lowest centroid id.

    Examples
    --------
    >>> C = np.array([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]], dtype=np.float32)
    >>> X = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1], [0.8, 0.6]], dtype=np.float32)
    >>> labels = np.array([0, 0, 1, 1, 2], dtype=np.int32)
    >>> new, _, kept, record = dissolve_small_clusters(
    ...     labels, np.ones(5, np.float32), C, lambda i: X[i], min_size=2)
    >>> new.tolist(), kept.shape, record["dissolved"][0]["cluster"]
    ([0, 0, 1, 1, 0], (2, 2), 2)
    """
    labels = np.asarray(labels, dtype=np.int32)
    scores = np.asarray(scores, dtype=np.float32)
    n_clusters = len(centroids)
    sizes = np.bincount(labels[labels >= 0], minlength=n_clusters)
    small = sizes < int(min_size)
    record: dict[str, Any] = {
        "min_cluster_size": int(min_size),
        "sizes_before": [int(s) for s in sizes],
        "kept": [int(k) for k in np.flatnonzero(~small)],
        "dissolved": [],
    }
    if not small.any() or small.all():  # small.all() cannot happen under the cap
        record["kept"] = list(range(n_clusters))
        return labels, scores, np.asarray(centroids, dtype=np.float32), record
    keep = np.flatnonzero(~small)
    new_id = np.full(n_clusters, -1, dtype=np.int32)
    new_id[keep] = np.arange(len(keep), dtype=np.int32)
    kept_centroids = np.ascontiguousarray(centroids[keep], dtype=np.float32)
    new_labels = np.where(labels >= 0, new_id[np.maximum(labels, 0)], -1).astype(np.int32)
    new_scores = scores.copy()
    moved = np.flatnonzero((labels >= 0) & small[np.maximum(labels, 0)])
    block = np.asarray(rows(moved), dtype=np.float32)
    block /= np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
    similarity = block @ kept_centroids.T
    target = np.argmax(similarity, axis=1).astype(np.int32)
    new_labels[moved] = target
    new_scores[moved] = similarity[np.arange(len(moved)), target]
    for cluster in np.flatnonzero(small & (sizes > 0)):
        members = moved[labels[moved] == cluster]
        record["dissolved"].append(
            {
                "cluster": int(cluster),
                "size": int(sizes[cluster]),
                "members": [int(i) for i in members[:MAX_MEMBERS_RECORDED]],
                "moved_to": [int(t) for t in new_labels[members[:MAX_MEMBERS_RECORDED]]],
            }
        )
    record["empty_removed"] = int((small & (sizes == 0)).sum())
    return new_labels, new_scores, kept_centroids, record
