"""``records/``: every document's original bytes back to back, for exports in schedule order."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from clusterclip.io.artifacts.base import Artifact
from clusterclip.io.files import atomic_path, atomic_write_json

__all__ = ["RECORDS_FORMAT", "RecordsArtifact"]

_RECORDS_BIN, _OFFSETS, _RECORDS_META = "records.bin", "offsets.npy", "records.json"
#: Layout of the record store; a store of another format is rebuilt (2: usable records
#: mended into clean JSON lines, see clusterclip.io.jsonlines).
RECORDS_FORMAT = 2


class RecordsArtifact(Artifact):
    """The record store of a work directory: built once from the checked corpus, then mapped.

    ``records.bin`` (uint8) holds the documents back to back, ``offsets.npy``
    (int64 ``(N, 2)``) where each starts and stops, ``records.json`` the
    fingerprint of the ``documents.parquet`` it was built for (another one
    rebuilds it) and what was mended.

    Examples
    --------
    >>> from clusterclip.io.artifacts import RecordsArtifact
    >>> records, offsets = RecordsArtifact("work").read()  # doctest: +SKIP
    >>> bytes(records[offsets[0, 0] : offsets[0, 1]])[:20]  # doctest: +SKIP
    b'{"id": "Genesis 1:1"'
    """

    key = "records"
    stage = "embed"

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """Every document's original bytes, memory-mapped (built first when missing or stale).

        Returns
        -------
        (records, offsets) : (uint8 memmap, int64 ``(N, 2)``)
            Document ``i`` is ``records[offsets[i, 0]:offsets[i, 1]]``: the exact
            input line for jsonl sources, the row as JSON for parquet; a usable
            record that strict JSON readers would refuse (a byte order mark,
            invalid UTF-8, a carriage return, ``NaN``) is mended
            (:func:`clusterclip.io.jsonlines.clean_line`), and :meth:`mended`
            says which.
        """
        from clusterclip.io.artifacts.documents import DocumentsArtifact
        from clusterclip.io.corpus_store import build_store

        files = self.work.corpus_by_name()
        store = self.path
        documents = DocumentsArtifact(self.work)
        fingerprint = documents.fingerprint()
        meta_path = store / _RECORDS_META
        if meta_path.exists() and (store / _OFFSETS).exists():
            meta = json.loads(meta_path.read_text("utf-8"))
            if meta.get("documents") == fingerprint and meta.get("format") == RECORDS_FORMAT:
                return self._open()
        table = documents.read(["source", "line", "status"])
        store.mkdir(parents=True, exist_ok=True)
        with atomic_path(store / _RECORDS_BIN) as tmp:
            offsets, mended = build_store(table, files, tmp)
        with atomic_path(store / _OFFSETS) as tmp, open(tmp, "wb") as handle:
            np.save(handle, offsets)
        atomic_write_json(
            meta_path,
            {
                "documents": fingerprint,
                "n_documents": len(offsets),
                "format": RECORDS_FORMAT,
                "mended": mended,
            },
        )
        return self._open()

    def mended(self) -> dict[str, dict[str, Any]]:
        """What the store mended: ``{reason: {"count", "first"}}`` (empty: nothing).

        Reasons are the keys of :data:`clusterclip.io.jsonlines.MENDED`;
        ``first`` is the first such record as ``source:line``. Builds the store
        if needed.
        """
        self.read()
        meta = json.loads((self.path / _RECORDS_META).read_text("utf-8"))
        return dict(meta.get("mended", {}))

    def _open(self) -> tuple[np.ndarray, np.ndarray]:
        offsets = np.load(self.path / _OFFSETS, mmap_mode="r")
        size = (self.path / _RECORDS_BIN).stat().st_size
        records = (
            np.memmap(self.path / _RECORDS_BIN, dtype=np.uint8, mode="r")
            if size
            else np.zeros(0, dtype=np.uint8)
        )
        return records, offsets
