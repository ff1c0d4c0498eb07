"""The record store: every document's original bytes back to back, for ordered exports.

The schedule jumps around the corpus and compressed inputs cannot be seeked, so
exports that write documents in schedule order read them from a store built in
one streaming pass over the (checked) corpus: ``records.bin`` plus an int64
``(N, 2)`` array of start/stop offsets. :meth:`clusterclip.io.WorkDir.record_store`
owns where it lives and when it is rebuilt; this module only reads the sources.

A usable record is stored as a JSON line every reader loads
(:func:`clusterclip.io.jsonlines.clean_line`): a clean jsonl line byte for byte,
one with a byte order mark, invalid UTF-8, a carriage return or ``NaN`` mended,
and a parquet row as standard JSON (``NaN`` as null). What was mended is
counted and returned, so exports can say it.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io.jsonlines import clean_line, encode_json
from clusterclip.progress import progress_bar

__all__ = ["build_store", "iter_source_lines"]


@contextmanager
def _open_binary(path: Path) -> Iterator[IO[bytes]]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as handle:
            yield handle
    elif path.name.endswith(".zst"):
        zstandard = require_extra("zstandard", "io")
        with open(path, "rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            with io.BufferedReader(reader) as handle:
                yield handle
    else:
        with open(path, "rb") as handle:
            yield handle


def iter_source_lines(path: Path) -> Iterator[tuple[int, bytes, str | None]]:
    """``(line as the embed stage counts it, record bytes, why mended)`` for one corpus file.

    jsonl: 1-based line numbers and the exact line without its newline (None:
    not mended; :func:`clean_line` runs on the usable ones only, in :func:`build_store`);
    parquet: 0-based row numbers and the row as standard JSON (``"non_finite_number"``
    when a NaN or infinity became null).
    """
    if path.name.endswith(".parquet"):
        pq = require_extra("pyarrow.parquet", "io")
        row = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            for record in batch.to_pylist():
                data, replaced = encode_json(record, default=str)
                yield row, data, "non_finite_number" if replaced else None
                row += 1
        return
    with _open_binary(path) as handle:
        for line, data in enumerate(handle, start=1):
            yield line, data.rstrip(b"\r\n"), None


def build_store(
    documents: Any, files: Mapping[str, Path], out: Path
) -> tuple[np.ndarray, dict[str, dict[str, Any]]]:
    """Write every document's bytes to ``out``; return its ``(N, 2)`` offsets and what was mended.

    Parameters
    ----------
    documents : pyarrow.Table
        ``source``, ``line`` and ``status`` columns, rows in document index order.
    files : mapping
        Recorded source name -> file to read it from (already checked).
    out : path
        The ``records.bin`` to write (a temporary path; the caller renames it).

    Returns
    -------
    (offsets, mended)
        ``mended`` is ``{reason: {"count": n, "first": "source:line"}}`` over the
        usable records (reasons: :data:`clusterclip.io.jsonlines.MENDED`).
    """
    lines = documents.column("line").to_numpy().astype(np.int64)
    sources = np.asarray(documents.column("source").to_pylist(), dtype=object)
    usable = np.asarray(documents.column("status").to_pylist(), dtype=object) == "ok"
    n = len(lines)
    offsets = np.full((n, 2), -1, dtype=np.int64)
    mended: dict[str, dict[str, Any]] = {}
    with open(out, "wb") as handle, progress_bar(total=n, desc="record store", unit="doc") as bar:
        position = 0
        for source in dict.fromkeys(sources.tolist()):
            members = np.flatnonzero(sources == source)
            members = members[np.argsort(lines[members], kind="stable")]
            wanted = lines[members]
            cursor = 0
            for line, data, reason in iter_source_lines(files[source]):
                if cursor == len(wanted):
                    break
                if line != wanted[cursor]:
                    continue
                if usable[members[cursor]]:
                    if reason is None:
                        data, reason = clean_line(data)
                    if reason is not None:
                        note = mended.setdefault(reason, {"count": 0, "first": f"{source}:{line}"})
                        note["count"] += 1
                handle.write(data)
                offsets[members[cursor]] = (position, position + len(data))
                position += len(data)
                cursor += 1
                bar.update(1)
            if cursor != len(wanted):
                raise ClusterClipError(
                    f"{source} has changed since it was embedded: line {wanted[cursor]} is "
                    "missing. Restore it, or rerun `clusterclip run` (it re-embeds changed inputs)."
                )
    return offsets, mended
