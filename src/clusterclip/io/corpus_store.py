"""The record store: every document's original bytes back to back, for ordered exports.

The schedule jumps around the corpus and compressed inputs cannot be seeked, so
exports that write documents in schedule order read them from a store built in
one streaming pass over the (checked) corpus: ``records.bin`` plus an int64
``(N, 2)`` array of start/stop offsets. :meth:`clusterclip.io.WorkDir.record_store`
owns where it lives and when it is rebuilt; this module only reads the sources.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra
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


def iter_source_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line as the embed stage counts it, record bytes)`` for one corpus file.

    jsonl: 1-based line numbers and the exact line without its newline;
    parquet: 0-based row numbers and the row as JSON.
    """
    if path.name.endswith(".parquet"):
        pq = require_extra("pyarrow.parquet", "io")
        row = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            for record in batch.to_pylist():
                yield row, json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
                row += 1
        return
    with _open_binary(path) as handle:
        for line, data in enumerate(handle, start=1):
            yield line, data.rstrip(b"\r\n")


def build_store(documents: Any, files: Mapping[str, Path], out: Path) -> np.ndarray:
    """Write every document's bytes to ``out``; return its ``(N, 2)`` offsets.

    Parameters
    ----------
    documents : pyarrow.Table
        ``source`` and ``line`` columns, rows in document index order.
    files : mapping
        Recorded source name -> file to read it from (already checked).
    out : path
        The ``records.bin`` to write (a temporary path; the caller renames it).
    """
    lines = documents.column("line").to_numpy().astype(np.int64)
    sources = np.asarray(documents.column("source").to_pylist(), dtype=object)
    n = len(lines)
    offsets = np.full((n, 2), -1, dtype=np.int64)
    with open(out, "wb") as handle, progress_bar(total=n, desc="record store", unit="doc") as bar:
        position = 0
        for source in dict.fromkeys(sources.tolist()):
            members = np.flatnonzero(sources == source)
            members = members[np.argsort(lines[members], kind="stable")]
            wanted = lines[members]
            cursor = 0
            for line, data in iter_source_lines(files[source]):
                if cursor == len(wanted):
                    break
                if line != wanted[cursor]:
                    continue
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
    return offsets
