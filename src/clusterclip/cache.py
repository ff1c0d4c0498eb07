"""clusterclip's per-user cache directory: ``$CLUSTERCLIP_CACHE``, default ``~/.cache/clusterclip``.

Holds what is worth keeping between runs on one machine and is cheap to
rebuild: distilled static encoders (``static/``) and the k-means backend probe's
results for ``backend="fastest"`` (``kmeans-backend.json``; ``auto`` never reads it,
so no result depends on this directory). Never the work directory's files.

>>> cache_root().name  # doctest: +SKIP
'clusterclip'
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_root"]

#: The environment variable naming the cache directory.
CACHE_ENV = "CLUSTERCLIP_CACHE"


def cache_root() -> Path:
    """The cache directory (not created here)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "clusterclip")
