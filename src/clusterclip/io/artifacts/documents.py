"""``documents.parquet`` (+ ``rejects.jsonl``): one row per input record, in index order.

The embed stage writes the index in two steps, so that many tasks can write at
once: every read task writes a *fragment* (its rows, plus a ``reason`` column)
named by its task id, atomically; when every task is done :meth:`DocumentsArtifact.merge`
concatenates the fragments, in task order, into ``documents.parquet`` and the
rows that are not ``ok`` into ``rejects.jsonl``. Memory stays at one fragment
whatever the corpus size.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io.artifacts.base import Artifact, Column, arrow_schema, read_in_index_order
from clusterclip.io.files import atomic_path

__all__ = ["DOCUMENT_COLUMNS", "FRAGMENT_COLUMNS", "DocumentsArtifact"]

#: Columns of ``documents.parquet``, in order, with their Arrow types (docs/architecture.md).
DOCUMENT_COLUMNS: tuple[Column, ...] = (
    ("index", "int64"),
    ("source", "string"),
    ("line", "int64"),
    ("id", "string"),
    ("n_chars", "int64"),
    ("n_tokens", "int64"),
    ("status", "string"),
)
#: Columns of a task's fragment: the document columns and why a record was rejected.
FRAGMENT_COLUMNS: tuple[Column, ...] = (*DOCUMENT_COLUMNS, ("reason", "string"))
#: Columns of every line of ``rejects.jsonl``.
REJECT_COLUMNS = ("index", "source", "line", "status", "reason")
#: The key of a fragment's ``notes`` in its Parquet metadata.
_NOTES_KEY = "clusterclip.task_notes"
_FIX = "Re-embed: `clusterclip embed INPUT... --workdir W --overwrite`."


class DocumentsArtifact(Artifact):
    """The document index of a work directory: its schema, fragments, merge and readers.

    Examples
    --------
    >>> from clusterclip.io.artifacts import DocumentsArtifact
    >>> documents = DocumentsArtifact("work")  # doctest: +SKIP
    >>> documents.write_fragment(0, {"index": [0], "source": ["a.jsonl"], "line": [1],
    ...     "id": [None], "n_chars": [5], "n_tokens": [2], "status": ["ok"],
    ...     "reason": [None]})  # doctest: +SKIP
    >>> documents.merge(1)  # doctest: +SKIP
    Counter({'ok': 1})
    >>> documents.read(["status"]).num_rows  # doctest: +SKIP
    1
    """

    key = "documents"
    stage = "embed"

    # -- fragments: one per read task ---------------------------------------
    @property
    def fragments_folder(self) -> Path:
        """Where the tasks' fragments wait for :meth:`merge` (``.embed-state``)."""
        return self.work.path_of("embed_state")

    def fragment_path(self, task: int) -> Path:
        """The fragment of read task ``task`` (0-based; tasks are merged in this order)."""
        return self.fragments_folder / f"index-{task:05d}.parquet"

    def fragment_paths(self) -> list[Path]:
        """The fragments present, in task order."""
        folder = self.fragments_folder
        return sorted(folder.glob("index-*.parquet")) if folder.is_dir() else []

    def write_fragment(
        self,
        task: int,
        columns: Mapping[str, Sequence[Any]],
        *,
        notes: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write the rows of one task (``{column: values}`` of :data:`FRAGMENT_COLUMNS`) atomically.

        Safe to call from many processes at once: each task has its own file,
        which appears whole or not at all. ``notes``: what the task wants back
        on a resume without reading its records again (JSON-able, e.g. its read
        statistics), kept in the fragment's Parquet metadata
        (:meth:`fragment_notes`); it never reaches ``documents.parquet``.
        """
        pa = require_extra("pyarrow", "io")
        pq = require_extra("pyarrow.parquet", "io")
        schema = arrow_schema(FRAGMENT_COLUMNS)
        if notes is not None:
            schema = schema.with_metadata({_NOTES_KEY: json.dumps(dict(notes))})
        table = pa.table(dict(columns), schema=schema)
        target = self.fragment_path(task)
        with atomic_path(target) as tmp:
            pq.write_table(table, tmp, compression="zstd")
        return target

    def fragment_notes(self, task: int) -> dict[str, Any] | None:
        """The ``notes`` task ``task`` wrote with its fragment (None: none, or no fragment).

        Reads the Parquet footer only, not the rows.

        >>> DocumentsArtifact("work").fragment_notes(0)  # doctest: +SKIP
        {'counts': {'ok': 120}, ...}
        """
        pq = require_extra("pyarrow.parquet", "io")
        path = self.fragment_path(task)
        if not path.exists():
            return None
        metadata = pq.read_schema(path).metadata or {}
        raw = metadata.get(_NOTES_KEY.encode())
        return None if raw is None else json.loads(raw)

    @staticmethod
    def read_fragment(path: Path) -> Any:
        """One fragment as a pyarrow Table."""
        pq = require_extra("pyarrow.parquet", "io")
        return pq.read_table(path)

    def merge(self, n_tasks: int) -> Counter[str]:
        """Concatenate the fragments of tasks ``0..n_tasks-1`` into the index and the rejects.

        Both files are written atomically. Returns the number of documents by status.
        """
        return self._write_index([self.fragment_path(task) for task in range(n_tasks)])

    def extend(self, first_task: int, n_tasks: int) -> Counter[str]:
        """Append the fragments of tasks ``first_task .. first_task + n_tasks - 1`` to the index.

        The rows already in ``documents.parquet`` and ``rejects.jsonl`` are kept as
        they are, the fragments' rows follow them (their ``index`` must continue the
        index's). Both files are replaced atomically. Returns the number of the
        *appended* documents by status.

        >>> DocumentsArtifact("work").extend(3, 1)  # doctest: +SKIP
        Counter({'ok': 120})
        """
        tasks = range(first_task, first_task + n_tasks)
        return self._write_index([self.fragment_path(task) for task in tasks], keep=True)

    def _write_index(self, fragments: list[Path], *, keep: bool = False) -> Counter[str]:
        """Write the index and the rejects from ``fragments`` (after the present rows: ``keep``)."""
        pc = require_extra("pyarrow.compute", "io")
        pq = require_extra("pyarrow.parquet", "io")
        counts: Counter[str] = Counter()
        names = [name for name, _ in DOCUMENT_COLUMNS]
        kept = pq.ParquetFile(self.path) if keep else None
        with (
            atomic_path(self.path) as documents_tmp,
            atomic_path(self.rejects_path) as rejects_tmp,
            pq.ParquetWriter(
                documents_tmp, arrow_schema(DOCUMENT_COLUMNS), compression="zstd"
            ) as writer,
            open(rejects_tmp, "w", encoding="utf-8") as rejects,
        ):
            if kept is not None:
                for group in range(kept.num_row_groups):
                    writer.write_table(kept.read_row_group(group).select(names))
                if self.rejects_path.exists():
                    with open(self.rejects_path, encoding="utf-8") as old_rejects:
                        shutil.copyfileobj(old_rejects, rejects)
            for fragment in fragments:
                table = self.read_fragment(fragment)
                writer.write_table(table.select(names))
                status = table.column("status")
                for value, count in zip(*pc.value_counts(status).flatten(), strict=True):
                    counts[value.as_py()] += count.as_py()
                bad = table.filter(pc.not_equal(status, "ok"))
                for row in bad.select(list(REJECT_COLUMNS)).to_pylist():
                    rejects.write(json.dumps(row, ensure_ascii=False) + "\n")
        return counts

    def write(self, columns: Mapping[str, Sequence[Any]]) -> str:
        """Write a whole index at once (one task's fragment, merged); return its fingerprint.

        ``columns`` holds :data:`DOCUMENT_COLUMNS` (``reason`` optional). For
        small indices built in one process, such as test fixtures.
        """
        rows = dict(columns)
        rows.setdefault("reason", [None] * len(rows["index"]))
        self.write_fragment(0, rows)
        self.merge(1)
        self.fragment_path(0).unlink()
        if not any(self.fragments_folder.iterdir()):
            self.fragments_folder.rmdir()
        return self.fingerprint()

    @property
    def rejects_path(self) -> Path:
        """``rejects.jsonl``: every record that is not ``ok``, with its reason."""
        return self.work.path_of("rejects")

    # -- readers ------------------------------------------------------------
    def read(self, columns: list[str] | None = None) -> Any:
        """The index as a pyarrow Table, rows in document index order.

        >>> DocumentsArtifact("work").read(["index", "status"]).num_rows  # doctest: +SKIP
        10000
        """
        if not self.exists():
            raise ClusterClipError(
                f"{self.path} not found. Run `clusterclip embed` (or `clusterclip run`) first."
            )
        table = read_in_index_order(self.path, columns, fix=_FIX)
        if columns is not None and "index" not in columns:
            table = table.drop(["index"])
        return table

    def read_mapped(self) -> Any:
        """The whole index as written (memory-mapped; ``source`` and ``status`` dictionary-encoded).

        Rows in the order the tasks were merged, which is index order.
        """
        pq = require_extra("pyarrow.parquet", "io")
        return pq.read_table(self.path, memory_map=True, read_dictionary=["source", "status"])

    def n_rows(self) -> int:
        """Rows of the index (every input record, ok or not), read from the footer."""
        pq = require_extra("pyarrow.parquet", "io")
        return int(pq.ParquetFile(self.path).metadata.num_rows)

    def statuses(self) -> np.ndarray:
        """object ``(N,)``: every document's status (``ok``, ``empty``, ``malformed``, ...)."""
        return np.asarray(self.read(["status"]).column("status").to_pylist(), dtype=object)

    def ok_mask(self) -> np.ndarray:
        """bool ``(N,)``: True where the status is ``ok`` (compared in Arrow, not per object).

        >>> DocumentsArtifact("work").ok_mask().sum()  # doctest: +SKIP
        9998
        """
        pc = require_extra("pyarrow.compute", "io")
        column = self.read(["status"]).column("status")
        return pc.equal(column, "ok").to_numpy(zero_copy_only=False).astype(bool, copy=False)

    def status_counts(self) -> dict[str, int]:
        """Documents by status, in sorted order of the status (counted in Arrow).

        >>> DocumentsArtifact("work").status_counts()  # doctest: +SKIP
        {'empty': 2, 'ok': 9998}
        """
        pc = require_extra("pyarrow.compute", "io")
        counts = pc.value_counts(self.read(["status"]).column("status"))
        found = {
            str(v): int(c)
            for v, c in zip(
                counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True
            )
        }
        return dict(sorted(found.items()))

    def n_tokens(self) -> np.ndarray:
        """int64 ``(N,)``: tokens per document as counted by the encoder (0 when not ok)."""
        return self.read(["n_tokens"]).column("n_tokens").to_numpy().astype(np.int64)
