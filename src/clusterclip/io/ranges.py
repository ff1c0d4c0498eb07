"""Read ranges: the corpus cut into independent pieces from file metadata alone.

A read task must be able to read its share of the corpus without the driver
handing it a single record. :func:`plan_ranges` cuts the inputs using only
what the file system and the parquet footers say:

- an uncompressed ``.jsonl`` file into **byte ranges** of about
  ``range_bytes``; a range owns the lines that *start* inside it, so every line
  belongs to exactly one range whatever the cut;
- a ``.jsonl.gz`` / ``.jsonl.zst`` file is one range (a compressed stream
  cannot be entered in the middle);
- a ``.parquet`` file into its **row groups** (row counts from the footer);
- a Hugging Face dataset into one range of rows.

A jsonl range's number of records (its non-blank lines) is not metadata:
:func:`count_range` counts it, where the engine runs it. :func:`read_piece`
then reads records ``skip .. skip + take`` of a range, with their file line
numbers, exactly as :class:`~clusterclip.io.readers.RecordStream` reads the
whole file: the same bytes give the same records.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io.jsonlines import without_bom
from clusterclip.io.readers import (
    DATASET_SOURCE,
    RawRecord,
    RecordStream,
    open_lines,
    truncated,
)

__all__ = [
    "DEFAULT_RANGE_BYTES",
    "Piece",
    "ReadRange",
    "count_range",
    "plan_ranges",
    "read_piece",
    "read_pieces",
]

#: Bytes of uncompressed jsonl per read range (smaller than a typical shard, so a shard
#: task skips into at most one range it does not read to the end).
DEFAULT_RANGE_BYTES = 16 << 20
_PARQUET_BATCH_ROWS = 1024


@dataclass(frozen=True)
class ReadRange:
    """One independently readable part of the corpus.

    Attributes
    ----------
    source : str
        The file as named in ``documents.parquet`` (as given), or ``"<dataset>"``.
    path : str
        The absolute path a worker opens (empty for a dataset).
    kind : {"jsonl", "stream", "parquet", "dataset"}
        Byte range of a jsonl file, a whole compressed jsonl file, one parquet
        row group, rows of a dataset.
    start, stop : int
        Bytes ``[start, stop)`` (``jsonl``), the row group ``start``
        (``parquet``), rows ``[start, stop)`` (``dataset``; ``stop = -1``:
        to the end); 0 and -1 for ``stream``.
    rows : int or None
        Records in the range when metadata says so (parquet, a sized
        dataset); ``None`` until counted.
    first_row : int
        Row of the file the range starts at (parquet, dataset); 0 for jsonl,
        whose first line number comes from counting the ranges before it.
    """

    source: str
    path: str
    kind: str
    start: int
    stop: int
    rows: int | None = None
    first_row: int = 0


@dataclass(frozen=True)
class Piece:
    """Records ``skip .. skip + take`` of ``range``; ``first_line`` numbers the range's first line."""

    range: ReadRange
    first_line: int
    skip: int
    take: int


def plan_ranges(
    paths: Sequence[Path], *, dataset: Any = None, range_bytes: int | None = None
) -> list[ReadRange]:
    """Cut the corpus into read ranges, in input order, from file metadata only.

    Reads no record: file sizes from the file system, row groups from parquet
    footers. Deterministic: the same files and ``range_bytes`` give the same ranges.

    >>> [r.kind for r in plan_ranges([Path("a.jsonl"), Path("b.parquet")])]  # doctest: +SKIP
    ['jsonl', 'parquet', 'parquet']
    """
    range_bytes = range_bytes or DEFAULT_RANGE_BYTES  # read now: a test may lower it
    if dataset is not None:
        try:
            rows: int | None = len(dataset)
        except TypeError:  # an IterableDataset: counted by reading it
            rows = None
        stop = -1 if rows is None else rows
        return [ReadRange(DATASET_SOURCE, "", "dataset", 0, stop, rows)]
    ranges: list[ReadRange] = []
    for path in paths:
        source, absolute = str(path), str(Path(path).resolve())
        if path.name.endswith(".parquet"):
            ranges.extend(_parquet_ranges(source, absolute))
        elif path.name.endswith(".jsonl"):
            size = os.path.getsize(absolute)
            for start in range(0, size, range_bytes):
                ranges.append(
                    ReadRange(source, absolute, "jsonl", start, min(start + range_bytes, size))
                )
        else:
            ranges.append(ReadRange(source, absolute, "stream", 0, -1))
    return ranges


def _parquet_ranges(source: str, absolute: str) -> list[ReadRange]:
    pq = require_extra("pyarrow.parquet", "io")
    try:
        metadata = pq.ParquetFile(absolute).metadata
    except Exception as error:  # pyarrow raises several types for bad files
        raise ClusterClipError(f"{source} is not a readable parquet file ({error}).") from error
    ranges, first = [], 0
    for group in range(metadata.num_row_groups):
        rows = int(metadata.row_group(group).num_rows)
        ranges.append(ReadRange(source, absolute, "parquet", group, group + 1, rows, first))
        first += rows
    return ranges


def count_range(read_range: ReadRange, dataset: Any = None) -> tuple[int, int]:
    """``(lines, records)`` of a range: lines (blank ones too) and the records among them.

    For parquet and sized datasets both are the row count from metadata.
    """
    if read_range.rows is not None:
        return read_range.rows, read_range.rows
    if read_range.kind == "dataset":
        rows = sum(1 for _ in _dataset_rows(read_range, dataset, 0, None))
        return rows, rows
    lines = records = 0
    for is_record, _ in _jsonl_lines(read_range):
        lines += 1
        records += is_record
    return lines, records


def read_pieces(
    stream: RecordStream, pieces: Sequence[Piece], dataset: Any = None
) -> Iterator[RawRecord]:
    """The raw records of ``pieces``, one after the other: the ``raw`` of a task's stream.

    >>> stream = RecordStream(None, text_field=None, id_field=None, strict=False,
    ...     start=first_index, raw=lambda s: read_pieces(s, pieces))  # doctest: +SKIP
    """
    for piece in pieces:
        yield from read_piece(stream, piece, dataset)


def read_piece(stream: RecordStream, piece: Piece, dataset: Any = None) -> Iterator[RawRecord]:
    """The raw records of ``piece``, as a :class:`RecordStream` over its files would yield them.

    ``stream`` judges nothing here; it only counts replaced UTF-8 (its
    :meth:`~clusterclip.io.readers.RecordStream.parse_line`).
    """
    read_range, stop = piece.range, piece.skip + piece.take
    if read_range.kind == "parquet":
        yield from itertools.islice(_parquet_rows(read_range), piece.skip, stop)
    elif read_range.kind == "dataset":
        yield from _dataset_rows(read_range, dataset, piece.skip, stop)
    else:
        line = piece.first_line - 1
        records = 0
        for is_record, data in _jsonl_lines(read_range):
            line += 1
            if not is_record:
                continue
            if records >= piece.skip:
                yield stream.parse_line(read_range.source, line, data)
            records += 1
            if records == stop:
                return


def _jsonl_lines(read_range: ReadRange) -> Iterator[tuple[bool, bytes]]:
    """``(is_record, line)`` for every line the range owns; a blank line is no record."""
    lines = _byte_range(read_range) if read_range.kind == "jsonl" else _whole_file(read_range)
    first = read_range.start == 0
    for data in lines:
        if first:  # the file's first line: a byte order mark is dropped (or refused)
            data, first = without_bom(data, read_range.source), False
        yield bool(data.strip()), data


def _byte_range(read_range: ReadRange) -> Iterator[bytes]:
    """The lines that start in bytes ``[start, stop)`` of an uncompressed file."""
    try:
        handle = open(read_range.path, "rb")  # noqa: SIM115
    except OSError as error:
        raise ClusterClipError(f"cannot open {read_range.source}: {error}") from error
    with handle:
        position = read_range.start
        if position > 0:  # the line running over the start belongs to the range before
            handle.seek(position - 1)
            position += len(handle.readline()) - 1
        while position < read_range.stop:
            data = handle.readline()
            if not data:
                return
            position += len(data)
            yield data


def _whole_file(read_range: ReadRange) -> Iterator[bytes]:
    """Every line of a (compressed) file, with the reader's error for a truncated one."""
    line = 0
    with open_lines(Path(read_range.path)) as handle:
        try:
            for data in handle:
                line += 1
                yield data
        except (EOFError, OSError) as error:
            raise truncated(read_range.source, line, error) from error


def _parquet_rows(read_range: ReadRange) -> Iterator[RawRecord]:
    pq = require_extra("pyarrow.parquet", "io")
    parquet = pq.ParquetFile(read_range.path)
    row = read_range.first_row
    batches = parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=[read_range.start])
    for batch in batches:
        for raw in batch.to_pylist():
            yield read_range.source, row, raw, None
            row += 1


def _dataset_rows(
    read_range: ReadRange, dataset: Any, skip: int, stop: int | None
) -> Iterator[RawRecord]:
    if dataset is None:
        raise ClusterClipError("a dataset range needs its dataset; pass it to the read task.")
    first = read_range.first_row + skip
    if read_range.rows is not None and stop is not None:
        rows = dataset.select(range(first, read_range.first_row + stop))
    else:
        last = None if stop is None else read_range.first_row + stop
        rows = itertools.islice(dataset, first, last)
    for row, raw in enumerate(rows, start=first):
        yield DATASET_SOURCE, row, raw, None
