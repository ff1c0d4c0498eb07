"""The greedy k-means++ loop as it was before issue 14: one centre (one draw, one product)
at a time. ``init="k-means++"`` (the default again) must give exactly its rows."""

from __future__ import annotations

import numpy as np

from clusterclip.cluster.seeding import _candidates, _pool_products

REDRAWS = 8


def sequential_kmeans_plusplus(
    X: np.ndarray, n_clusters: int, rng: np.random.Generator, *, min_cell: int = 1
) -> np.ndarray:
    n = len(X)
    trials = 2 + int(np.log(n_clusters))
    products = _pool_products(X, (n_clusters - 1) * trials)
    chosen = np.empty(n_clusters, dtype=np.int64)
    chosen[0] = rng.integers(n)
    distance = np.maximum(1.0 - X @ X[chosen[0]], 0.0).astype(np.float32)
    isolated = np.zeros(n, dtype=bool)
    for step in range(1, n_clusters):
        for _attempt in range(REDRAWS if min_cell > 1 else 1):
            weights = np.where(isolated, 0.0, distance) if isolated.any() else distance
            candidates = _candidates(rng, weights, trials)
            candidate_distance = np.maximum(1.0 - products(candidates), 0.0)
            updated = np.minimum(distance[None, :], candidate_distance)
            totals = updated.sum(axis=1, dtype=np.float64)
            if min_cell <= 1:
                break
            small = (candidate_distance < distance[None, :]).sum(axis=1) < min_cell
            if not small.all():
                totals[small] = np.inf
                break
            isolated[candidates] = True
        best = int(np.argmin(totals))
        chosen[step] = candidates[best]
        distance = updated[best]
    return chosen


def previous_seed_rows(
    X: np.ndarray, n_clusters: int, rng: np.random.Generator, *, pool: int, min_cell: int = 1
) -> np.ndarray:
    """Rows of ``X`` the previous ``seed_centroids(init="k-means++")`` seeded from."""
    subset = np.sort(rng.choice(len(X), pool, replace=False)) if pool < len(X) else None
    rows = sequential_kmeans_plusplus(
        X if subset is None else X[subset], n_clusters, rng, min_cell=min_cell
    )
    return rows if subset is None else subset[rows]
