"""The dedup stage: near-duplicate groups that share one repetition budget.

Exact copies (same normalised text) are grouped across the corpus, near copies
(cosine >= ``threshold``) inside each cluster; each group's representative is
its lowest document index. The schedule then draws a group as one unit whose
members take turns, so all copies of a text together appear at most
``max_repeats`` times (:mod:`clusterclip.schedule.units`).

>>> from clusterclip.dedup import DedupOptions
>>> DedupOptions(threshold=0.9).block_size
1024
"""

from __future__ import annotations

import importlib
from typing import Any

from clusterclip._callable import make_module_callable

_LAZY = {
    "DedupOptions": "clusterclip.dedup.options",
    "DuplicateGroups": "clusterclip.dedup.detect",
    "find_groups": "clusterclip.dedup.detect",
    "normalise_text": "clusterclip.dedup.detect",
    "DedupStage": "clusterclip.dedup.stage",
    "dedup": "clusterclip.dedup.stage",
    "group_rows": "clusterclip.dedup.stage",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'clusterclip.dedup' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


make_module_callable(__name__, "clusterclip.dedup.stage:dedup")
