"""The rows of the document index one embed task collects, before its fragment is written.

The layout of the index (columns, fragments named by task, the merge into
``documents.parquet`` and ``rejects.jsonl``) belongs to
:class:`clusterclip.io.artifacts.DocumentsArtifact`; this module only gathers
one task's rows from its records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clusterclip.io.artifacts import FRAGMENT_COLUMNS
from clusterclip.io.readers import Record

__all__ = ["IndexRows"]


class IndexRows:
    """Index rows of one task, collected column by column (:data:`FRAGMENT_COLUMNS`)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name, _ in FRAGMENT_COLUMNS}

    def __len__(self) -> int:
        return len(self.columns["index"])

    def add(self, record: Record) -> None:
        ok = record.status == "ok"
        self.columns["index"].append(record.index)
        self.columns["source"].append(record.source)
        self.columns["line"].append(record.line)
        self.columns["id"].append(record.id)
        self.columns["n_chars"].append(len(record.text) if ok and record.text else 0)
        self.columns["n_tokens"].append(0)
        self.columns["status"].append(record.status)
        self.columns["reason"].append(record.reason)

    def reject(self, position: int, status: str, reason: str) -> None:
        """Turn the ``ok`` row at ``position`` into a rejected one (no characters or tokens)."""
        self.columns["status"][position] = status
        self.columns["reason"][position] = reason
        self.columns["n_chars"][position] = 0
        self.columns["n_tokens"][position] = 0

    def set_tokens(self, ok_positions: Sequence[int], counts: Sequence[int]) -> None:
        tokens = self.columns["n_tokens"]
        for position, count in zip(ok_positions, counts, strict=True):
            tokens[position] = int(count)
