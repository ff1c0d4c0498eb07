"""The document index: per-shard fragments while running, then ``documents.parquet``.

While the embed job runs, each shard's index rows go to a fragment file
``.embed-state/index-NNNNN.parquet`` (with a ``reason`` column). When every
shard is done, the fragments are concatenated, row group by row group, into
``documents.parquet`` and the non-``ok`` rows into ``rejects.jsonl``; memory
stays at one fragment whatever the corpus size.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusterclip.errors import require_extra
from clusterclip.io import atomic_path
from clusterclip.io.readers import Record

__all__ = ["DOCUMENT_COLUMNS", "IndexRows", "read_fragment", "write_documents", "write_fragment"]

#: Columns of documents.parquet, in order (docs/architecture.md).
DOCUMENT_COLUMNS = ("index", "source", "line", "id", "n_chars", "n_tokens", "status")


def _schema() -> Any:
    pa = require_extra("pyarrow", "io")
    return pa.schema(
        [
            ("index", pa.int64()),
            ("source", pa.string()),
            ("line", pa.int64()),
            ("id", pa.string()),
            ("n_chars", pa.int64()),
            ("n_tokens", pa.int64()),
            ("status", pa.string()),
            ("reason", pa.string()),
        ]
    )


class IndexRows:
    """Index rows of one shard, collected column by column."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in (*DOCUMENT_COLUMNS, "reason")}

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

    def set_tokens(self, ok_positions: Sequence[int], counts: Sequence[int]) -> None:
        tokens = self.columns["n_tokens"]
        for position, count in zip(ok_positions, counts, strict=True):
            tokens[position] = int(count)


def write_fragment(path: Path, rows: IndexRows) -> None:
    """Write one shard's index rows atomically."""
    pa = require_extra("pyarrow", "io")
    pq = require_extra("pyarrow.parquet", "io")
    table = pa.table(rows.columns, schema=_schema())
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_fragment(path: Path) -> Any:
    """One fragment as a pyarrow Table."""
    pq = require_extra("pyarrow.parquet", "io")
    return pq.read_table(path)


def write_documents(
    fragments: Sequence[Path], *, documents_path: Path, rejects_path: Path
) -> Counter[str]:
    """Concatenate fragments into documents.parquet and rejects.jsonl (both atomic).

    Returns the number of documents by status.
    """
    pc = require_extra("pyarrow.compute", "io")
    pq = require_extra("pyarrow.parquet", "io")
    counts: Counter[str] = Counter()
    schema = _schema()
    document_schema = schema.remove(schema.get_field_index("reason"))
    with (
        atomic_path(documents_path) as documents_tmp,
        atomic_path(rejects_path) as rejects_tmp,
        pq.ParquetWriter(documents_tmp, document_schema, compression="zstd") as writer,
        open(rejects_tmp, "w", encoding="utf-8") as rejects,
    ):
        for fragment in fragments:
            table = read_fragment(fragment)
            writer.write_table(table.select(list(DOCUMENT_COLUMNS)))
            status = table.column("status")
            for value, count in zip(*pc.value_counts(status).flatten(), strict=True):
                counts[value.as_py()] += count.as_py()
            bad = table.filter(pc.not_equal(status, "ok"))
            for row in bad.select(["index", "source", "line", "status", "reason"]).to_pylist():
                rejects.write(json.dumps(row, ensure_ascii=False) + "\n")
    return counts
