"""ClusterClip Sampling: balanced, resumable data schedules for LLM training.

Embed every document, cluster the embeddings with spherical k-means, then feed
the trainer a schedule that samples clusters uniformly, documents randomly
within a cluster, and clips every document at ``max_repeats`` repetitions
(Shao et al., arXiv 2402.14526).

Importing ``clusterclip`` is cheap: only numpy is imported. Heavy stages
(torch, faiss, sentence-transformers, Ray) load when first used.

>>> import numpy as np
>>> import clusterclip
>>> labels = np.array([0, 0, 0, 0, 1, 2, 2])
>>> schedule = clusterclip.build_schedule(labels, max_repeats=2, num_samples=10, seed=0)
>>> len(schedule.indices)
10
"""

from __future__ import annotations

import importlib
from typing import Any

from clusterclip.errors import ClusterClipError, ClusterClipWarning, MissingDependencyError

__version__ = "0.1.0"

# Public name -> module that defines it; imported on first attribute access so
# `import clusterclip` never pulls in torch, faiss or sentence-transformers.
_LAZY = {
    "build_schedule": "clusterclip.schedule",
    "iter_schedule": "clusterclip.schedule",
    "Schedule": "clusterclip.schedule",
    "SchedulePolicy": "clusterclip.schedule",
    "ClusterClipSampler": "clusterclip.adapters.torch",
    "embed": "clusterclip.embed",
    "KMeans": "clusterclip.cluster",
    "cluster": "clusterclip.cluster",
    "dedup": "clusterclip.dedup",
    "run": "clusterclip.pipeline",
    "add": "clusterclip.grow",
}

#: Sub-packages reachable as attributes after a bare ``import clusterclip``
#: (``clusterclip.io.WorkDir(...)``), imported on first access. ``embed``, ``cluster``
#: and ``dedup`` are the functions above, not their packages.
_SUBPACKAGES = ("adapters", "config", "describe", "io", "options", "report", "schedule")

__all__ = [
    "ClusterClipError",
    "ClusterClipWarning",
    "MissingDependencyError",
    "__version__",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"clusterclip.{name}")  # the import system binds it
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'clusterclip' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBPACKAGES})
