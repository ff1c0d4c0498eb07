"""The cluster stage: spherical k-means and streaming assignment.

Describing the clusters (``inspect_clusters``, keywords) lives in
:mod:`clusterclip.describe` and the per-cluster folder export in
:mod:`clusterclip.adapters.folders`: they read a finished work directory and are
no part of the stage. ``clusterclip.cluster.inspect_clusters`` still resolves to
:func:`clusterclip.describe.inspect_clusters`.

>>> import numpy as np
>>> from clusterclip.cluster import KMeans
>>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
>>> KMeans(2, seed=0, backend="numpy").fit(X).cluster_centers_.shape
(2, 2)
"""

from __future__ import annotations

from typing import Any

from clusterclip._callable import make_module_callable
from clusterclip.cluster.kmeans import KMeans, assign, assign_matrix, k_means

__all__ = [
    "ClusterResult",
    "KMeans",
    "assign",
    "assign_matrix",
    "cluster",
    "inspect_clusters",
    "k_means",
]


def __getattr__(name: str) -> Any:  # the stage needs pyarrow; load it on use
    if name in ("cluster", "ClusterResult"):
        from clusterclip.cluster import stage

        return getattr(stage, name)
    if name == "inspect_clusters":  # moved to clusterclip.describe; the old name still works
        from clusterclip.describe import inspect_clusters

        return inspect_clusters
    raise AttributeError(f"module 'clusterclip.cluster' has no attribute {name!r}")


make_module_callable(__name__, "clusterclip.cluster.stage:cluster")
