"""What the clusters of a work directory are about: sizes, keywords, nearest documents.

Not a pipeline stage: it reads a finished work directory through
:class:`clusterclip.io.WorkDir` (labels, scores, the checked corpus) and
writes nothing, so the report and the ``inspect`` command can use it without
importing the cluster stage.

>>> from clusterclip.describe import inspect_clusters
>>> inspect_clusters("work", clusters=[0])[0]["keywords"]  # doctest: +SKIP
['election', 'labour', 'blair', 'party', 'tory', ...]
"""

from __future__ import annotations

from typing import Any

__all__ = ["KeywordCounter", "document_texts", "inspect_clusters", "nearest_documents"]


def __getattr__(name: str) -> Any:  # keep `import clusterclip.describe` free of pyarrow
    if name in ("document_texts", "inspect_clusters", "nearest_documents"):
        from clusterclip.describe import inspect

        return getattr(inspect, name)
    if name == "KeywordCounter":
        from clusterclip.describe.keywords import KeywordCounter

        return KeywordCounter
    raise AttributeError(f"module 'clusterclip.describe' has no attribute {name!r}")
