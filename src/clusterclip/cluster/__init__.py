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

Hierarchical k-means (levels above the leaves, assigned coarse to fine):

>>> from clusterclip.cluster import HierarchicalKMeans
>>> Y = np.concatenate([X + 0.01 * i for i in range(4)])
>>> model = HierarchicalKMeans(4, levels=(2,), seed=0, backend="numpy").fit(Y)
>>> model.parents_[0].tolist(), model.predict(Y).shape
([0, 0, 1, 1], (16,))
"""

from __future__ import annotations

import importlib
from typing import Any

from clusterclip._callable import make_module_callable

#: Public name -> module defining it, imported on first use: reading the stage's
#: options (clusterclip.cluster.options, for the CLI) must not load k-means.
_LAZY = {
    "HierarchicalKMeans": "clusterclip.cluster.hierarchical",
    "KMeans": "clusterclip.cluster.kmeans",
    "assign": "clusterclip.cluster.kmeans",
    "assign_matrix": "clusterclip.cluster.kmeans",
    "k_means": "clusterclip.cluster.kmeans",
    "cluster": "clusterclip.cluster.stage",
    "ClusterResult": "clusterclip.cluster.stage",
    "ClusterStage": "clusterclip.cluster.stage",
    "ClusterOptions": "clusterclip.cluster.options",
    "inspect_clusters": "clusterclip.describe",  # moved there; the old name still works
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'clusterclip.cluster' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


make_module_callable(__name__, "clusterclip.cluster.stage:cluster")
