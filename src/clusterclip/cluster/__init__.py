"""The cluster stage: spherical k-means, streaming assignment, inspection, export.

>>> import numpy as np
>>> from clusterclip.cluster import KMeans
>>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
>>> KMeans(2, seed=0, backend="numpy").fit(X).cluster_centers_.shape
(2, 2)
"""

from __future__ import annotations

import sys
import types
from typing import Any

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


def __getattr__(name: str) -> Any:  # the stage and inspection need pyarrow; load them on use
    if name in ("cluster", "ClusterResult"):
        from clusterclip.cluster import stage

        return getattr(stage, name)
    if name == "inspect_clusters":
        from clusterclip.cluster.inspect import inspect_clusters

        return inspect_clusters
    raise AttributeError(f"module 'clusterclip.cluster' has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """Lets ``clusterclip.cluster(workdir, ...)`` run the stage.

    ``clusterclip.cluster`` is both this sub-package and the stage function of
    the public API; importing the sub-package binds the module to that name, so
    the module itself forwards calls to :func:`clusterclip.cluster.stage.cluster`.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from clusterclip.cluster.stage import cluster as run_stage

        return run_stage(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
