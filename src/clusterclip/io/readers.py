"""Streaming corpus readers: jsonl, jsonl.gz, jsonl.zst, parquet, HF datasets.

Every input record becomes exactly one :class:`Record`, in input order, with a
status saying whether it holds usable text. Nothing is dropped silently: a bad
record is still yielded (``status != "ok"``) so the embed stage can list it in
``documents.parquet`` and ``rejects.jsonl``. Reading streams: memory stays flat
whatever the corpus size (one line, or one parquet batch, at a time).

Conventions
-----------
- ``text_field=None`` reads ``content`` (the ClusterClip authors' format) and
  falls back to ``text`` when a record has no ``content`` key.
- ``id_field=None`` uses ``id`` when the record has it, else the id is ``None``.
- Lines that hold only whitespace are not records: they are skipped and
  counted (:attr:`RecordStream.blank_lines`).
- Bytes that are not valid UTF-8 are replaced by U+FFFD; the number of lines
  where that happened is :attr:`RecordStream.replaced_utf8_lines`, the first
  of them :attr:`RecordStream.first_replaced_utf8` (``file:line``).
- A glob skips hidden files (a name, or a folder on the way, starting with
  ``.``), as the shell does; :func:`hidden_files_skipped` lists them.
- A UTF-8 byte order mark at the start of a jsonl file (as written by some
  Windows editors and exporters) is dropped; a UTF-16 or UTF-32 file is an
  error that says how to convert it.
- A truncated ``.gz`` / ``.zst`` file is an error that names the file and the
  last line read: the records after the cut cannot be accounted for.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.io.jsonlines import without_bom, without_lone_surrogates

__all__ = [
    "STATUSES",
    "SUFFIXES",
    "Record",
    "count_lines",
    "describe_statuses",
    "RecordStream",
    "expand_inputs",
    "fingerprint_input",
    "hidden_files_skipped",
    "is_hf_dataset",
    "iter_records",
]

#: File name endings the readers understand.
SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")
#: Every status a reader gives a record, ``ok`` first (the embed stage adds ``zero_vector``).
STATUSES = ("ok", "empty", "malformed", "missing_field", "not_text")
#: Text fields tried, in order, when ``text_field`` is ``None``.
DEFAULT_TEXT_FIELDS = ("content", "text")
DEFAULT_ID_FIELD = "id"
DATASET_SOURCE = "<dataset>"

#: What a reader yields before a record is judged: source, line, parsed value, parse error.
RawRecord = tuple[str, int, Any, "str | None"]

_PARQUET_BATCH_ROWS = 1024
_FULL_HASH_LIMIT = 64 << 20  # files up to 64 MiB are hashed whole
_SAMPLE_BYTES = 1 << 20  # larger ones: first, middle and last MiB


@dataclass(frozen=True)
class Record:
    """One input record and what the reader made of it.

    Attributes
    ----------
    index : int
        Global 0-based position across all inputs, in input order.
    source : str
        File path, or ``"<dataset>"`` for a Hugging Face dataset.
    line : int
        1-based line number for jsonl files, 0-based row for parquet and datasets.
    raw : dict or None
        The parsed record (``None`` when it could not be parsed).
    text : str or None
        The text, when ``status == "ok"``.
    id : str or None
        The record id (``id_field``), as a string.
    status : str
        ``"ok"``, ``"empty"``, ``"malformed"``, ``"missing_field"`` or ``"not_text"``.
    reason : str or None
        Why the record is not ``ok``.
    """

    index: int
    source: str
    line: int
    raw: dict | None
    text: str | None
    id: str | None
    status: str
    reason: str | None


def _is_supported(path: Path) -> bool:
    return path.name.endswith(SUFFIXES)


def expand_inputs(inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Resolve files, directories and glob patterns into a list of corpus files.

    Arguments keep their order; a directory (searched recursively) or a glob
    expands to its supported files in sorted path order. A file named twice is
    read once.

    Parameters
    ----------
    inputs : path, glob or a sequence of them
        ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` or ``.parquet`` files,
        directories holding them, or glob patterns such as ``"data/*.jsonl.gz"``.

    Returns
    -------
    list of pathlib.Path
        Deterministic: the same arguments on the same files give the same list.

    Raises
    ------
    ClusterClipError
        When an argument matches no supported file, or names an unsupported file.

    Examples
    --------
    >>> expand_inputs(["shards/"])  # doctest: +SKIP
    [PosixPath('shards/part-0.jsonl.gz'), PosixPath('shards/part-1.jsonl.gz')]
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    items = [os.fspath(item) for item in inputs]
    if not items:
        raise invalid("inputs", "at least one file, directory or glob", [], "Name a corpus file.")
    found: list[Path] = []
    seen: set[Path] = set()
    for item in items:
        path = Path(item)
        if path.is_dir():
            matches = sorted(p for p in path.rglob("*") if p.is_file() and _is_supported(p))
            where = f"directory {item}"
        elif path.is_file():
            if not _is_supported(path):
                raise invalid(
                    "inputs",
                    f"files ending in {', '.join(SUFFIXES)}",
                    item,
                    "Convert the file to jsonl or parquet, or rename it if it already is one.",
                )
            matches = [path]
            where = item
        elif glob.has_magic(item):
            matches = sorted(
                Path(p) for p in glob.glob(item, recursive=True) if _is_supported(Path(p))
            )
            matches = [p for p in matches if p.is_file()]
            where = f"glob {item!r}"
        else:
            raise ClusterClipError(f"input {item} does not exist. Check the path.")
        if not matches:
            raise ClusterClipError(
                f"{where} matches no corpus file (looked for {', '.join(SUFFIXES)}). "
                "Check the path or pattern."
            )
        for match in matches:
            key = match.resolve()
            if key not in seen:
                seen.add(key)
                found.append(match)
    return found


def hidden_files_skipped(
    inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> list[Path]:
    """The corpus files a glob of ``inputs`` left out because they are hidden.

    A glob (``data/*.jsonl``, ``data/**/*.jsonl.gz``) skips names starting
    with ``.`` and everything under such a folder, as the shell does;
    :func:`expand_inputs` keeps that rule, and this says what it skipped.
    (A directory argument reads its hidden corpus files; a file named on its
    own is read whatever its name.)

    >>> hidden_files_skipped(["data/*.jsonl"])  # doctest: +SKIP
    [PosixPath('data/.draft.jsonl')]
    """
    if is_hf_dataset(inputs):
        return []
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    skipped: list[Path] = []
    for item in (os.fspath(item) for item in inputs):
        path = Path(item)
        if path.exists() or not glob.has_magic(item):
            continue
        kept = {Path(p) for p in glob.glob(item, recursive=True)}
        for match in _glob_with_hidden(item):
            if match not in kept and match.is_file() and _is_supported(match):
                skipped.append(match)
    return sorted(set(skipped))


def _glob_with_hidden(pattern: str) -> list[Path]:
    """Every match of ``pattern``, hidden names included (pathlib's glob does not skip them)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    root = Path(*parts[:fixed]) if fixed else Path(".")
    rest = Path(*parts[fixed:])
    matches = root.glob(str(rest)) if parts[fixed:] else []
    return [match if fixed else Path(os.path.relpath(match)) for match in matches]


def is_hf_dataset(obj: Any) -> bool:
    """True for a Hugging Face ``datasets.Dataset`` / ``IterableDataset`` (no import)."""
    module = type(obj).__module__ or ""
    return module.startswith("datasets.") and hasattr(obj, "features")


def fingerprint_input(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Content fingerprint of one input file: size plus a blake2b hash.

    Files up to 64 MiB are hashed whole; larger ones hash their size and the
    first, middle and last MiB, so that checking a 100 GB corpus on rerun takes
    milliseconds. The modification time is deliberately not used: copying a
    corpus to another disk must not look like a change. (A same-size edit in
    the unsampled middle of a big file is therefore not detected.)

    >>> fingerprint_input("corpus.jsonl")  # doctest: +SKIP
    {'size': 1234, 'blake2b': '...', 'sampled': False}
    """
    size = os.path.getsize(path)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(size).encode())
    with open(path, "rb") as handle:
        if size <= _FULL_HASH_LIMIT:
            while chunk := handle.read(1 << 22):
                digest.update(chunk)
        else:
            for offset in (0, size // 2 - _SAMPLE_BYTES // 2, size - _SAMPLE_BYTES):
                handle.seek(offset)
                digest.update(handle.read(_SAMPLE_BYTES))
    return {"size": size, "blake2b": digest.hexdigest(), "sampled": size > _FULL_HASH_LIMIT}


class RecordStream(Iterator[Record]):
    """Iterator of :class:`Record` that also counts what it saw.

    Attributes (updated while iterating)
    ------------------------------------
    replaced_utf8_lines : int
        Lines (or text values) whose invalid UTF-8 or lone surrogates were replaced.
    first_replaced_utf8 : str or None
        ``source:line`` of the first of them.
    blank_lines : int
        Whitespace-only jsonl lines skipped (not records).
    text_fields : collections.Counter
        Which field supplied the text of each ``ok`` record.
    counts : collections.Counter
        Records by status.
    examples : dict
        ``{status: "source:line: reason"}`` of the first record of every non-ok status.
    """

    def __init__(
        self,
        inputs: Any,
        *,
        text_field: str | None,
        id_field: str | None,
        strict: bool,
        start: int = 0,
        raw: Callable[[RecordStream], Iterable[RawRecord]] | None = None,
    ) -> None:
        if text_field is not None and (not isinstance(text_field, str) or not text_field):
            raise invalid("text_field", "a non-empty field name or None", text_field)
        if id_field is not None and (not isinstance(id_field, str) or not id_field):
            raise invalid("id_field", "a non-empty field name or None", id_field)
        self.text_field = text_field
        self.id_field = id_field
        self.strict = strict
        self.replaced_utf8_lines = 0
        self.first_replaced_utf8: str | None = None
        self.blank_lines = 0
        self.text_fields: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self._index = start
        if raw is not None:  # a read task's pieces (clusterclip.io.ranges.read_pieces)
            self._raw = iter(raw(self))
        elif is_hf_dataset(inputs):
            self._raw = self._iter_dataset(inputs)
        else:
            self._raw = self._iter_files(expand_inputs(inputs))

    def __next__(self) -> Record:
        source, line, raw, error = next(self._raw)
        record = self._make(source, line, raw, error)
        self.counts[record.status] += 1
        if record.status != "ok" and record.status not in self.examples:
            self.examples[record.status] = f"{source}:{line}: {record.reason}"
        if self.strict and record.status != "ok":
            raise ClusterClipError(
                f"{source}:{line}: {record.status}: {record.reason}. "
                "Fix the record, or run without --strict to record it in rejects.jsonl."
            )
        self._index += 1
        return record

    # -- raw sources: yield (source, line, parsed dict or None, error or None) --

    def _iter_files(self, paths: list[Path]) -> Iterator[RawRecord]:
        for path in paths:
            if path.name.endswith(".parquet"):
                yield from self._iter_parquet(path)
            else:
                yield from self._iter_jsonl(path)

    def _iter_jsonl(self, path: Path) -> Iterator[RawRecord]:
        source = str(path)
        line = 0
        with open_lines(path) as handle:
            try:
                for line_bytes in handle:
                    line += 1
                    if line == 1:
                        line_bytes = without_bom(line_bytes, source)
                    if not line_bytes.strip():
                        self.blank_lines += 1
                        continue
                    yield self.parse_line(source, line, line_bytes)
            except (EOFError, OSError) as error:
                raise truncated(source, line, error) from error

    def parse_line(self, source: str, line: int, line_bytes: bytes) -> RawRecord:
        """One non-blank jsonl line as ``(source, line, parsed or None, error or None)``.

        Invalid UTF-8 is replaced (and counted); invalid JSON becomes the error.
        """
        try:
            text = line_bytes.decode("utf-8")
        except UnicodeDecodeError:
            text = line_bytes.decode("utf-8", errors="replace")
            self._replaced_utf8(source, line)
        try:
            return source, line, json.loads(text), None
        except json.JSONDecodeError as error:
            return source, line, None, f"invalid JSON ({error.msg} at column {error.colno})"

    def _iter_parquet(self, path: Path) -> Iterator[RawRecord]:
        pq = require_extra("pyarrow.parquet", "io")
        source = str(path)
        try:
            parquet = pq.ParquetFile(path)
        except Exception as error:  # pyarrow raises several types for bad files
            raise ClusterClipError(f"{source} is not a readable parquet file ({error}).") from error
        row = 0
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS):
            for raw in batch.to_pylist():
                yield source, row, raw, None
                row += 1

    def _iter_dataset(self, dataset: Any) -> Iterator[RawRecord]:
        for row, raw in enumerate(dataset):
            yield DATASET_SOURCE, row, raw, None

    # -- one record --

    def _make(self, source: str, line: int, raw: Any, error: str | None) -> Record:
        def reject(status: str, reason: str, parsed: dict | None = None) -> Record:
            return Record(self._index, source, line, parsed, None, None, status, reason)

        if error is not None:
            return reject("malformed", error)
        if not isinstance(raw, dict):
            return reject("malformed", f"expected a JSON object, got {type(raw).__name__}")
        record_id = self._record_id(raw)
        fields = (self.text_field,) if self.text_field else DEFAULT_TEXT_FIELDS
        field = next((name for name in fields if name in raw), None)
        if field is None:
            names = " or ".join(f"`{name}`" for name in fields)
            present = ", ".join(list(raw)[:8]) + (", ..." if len(raw) > 8 else "")
            fix = "" if self.text_field else "; pass --text-field to name the text field"
            return Record(
                self._index, source, line, raw, None, record_id, "missing_field",
                f"no {names} field (it has: {present or 'no fields'}){fix}",
            )  # fmt: skip
        value = raw[field]
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                value = value.decode("utf-8", errors="replace")
                self._replaced_utf8(source, line)
        if not isinstance(value, str):
            kind = "null" if value is None else type(value).__name__
            return Record(
                self._index, source, line, raw, None, record_id, "not_text",
                f"field `{field}` is {kind}, not text",
            )  # fmt: skip
        value, mended = without_lone_surrogates(value)
        if mended:
            self._replaced_utf8(source, line)
        if not value.strip():
            return Record(
                self._index, source, line, raw, None, record_id, "empty",
                f"field `{field}` is empty",
            )  # fmt: skip
        self.text_fields[field] += 1
        return Record(self._index, source, line, raw, value, record_id, "ok", None)

    def _replaced_utf8(self, source: str, line: int) -> None:  # or lone surrogates
        self.replaced_utf8_lines += 1
        if self.first_replaced_utf8 is None:
            self.first_replaced_utf8 = f"{source}:{line}"

    def _record_id(self, raw: dict) -> str | None:
        value = raw.get(self.id_field or DEFAULT_ID_FIELD)
        if value is None:
            return None
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        return str(value)


def truncated(source: str, line: int, error: BaseException) -> ClusterClipError:
    """The error for a compressed file that ends (or breaks) after ``line``."""
    unpack = "zstdcat" if source.endswith(".zst") else "zcat"
    return ClusterClipError(
        f"{source} is truncated or corrupt after line {line} ({error}); the records "
        "after that point cannot be read or accounted for. Re-create the file, or "
        f"recover the readable part (e.g. `{unpack} {source} > part.jsonl`) and pass that."
    )


def describe_statuses(counts: Any, examples: Any = None) -> str:
    """Records by status in one line, e.g. ``"20 records: 0 ok, 20 missing_field"``.

    With ``examples`` (:attr:`RecordStream.examples`), the first bad record of
    each status is quoted, so a message says what went wrong without a file to open.

    >>> describe_statuses({"ok": 3, "malformed": 1}, {"malformed": "a.jsonl:2: invalid JSON"})
    '4 records: 3 ok, 1 malformed (first: a.jsonl:2: invalid JSON)'
    """
    others = [status for status in counts if status not in STATUSES]  # the embed stage's
    total = sum(int(counts.get(status, 0)) for status in (*STATUSES, *others))
    parts = [f"{int(counts.get('ok', 0)):,} ok"]
    for status in (*STATUSES[1:], *others):
        count = int(counts.get(status, 0))
        if count:
            first = (examples or {}).get(status)
            parts.append(f"{count:,} {status}" + (f" (first: {first})" if first else ""))
    return f"{total:,} record{'s' if total != 1 else ''}: " + ", ".join(parts)


def iter_records(
    inputs: Any,
    *,
    text_field: str | None = None,
    id_field: str | None = None,
    strict: bool = False,
) -> RecordStream:
    """Stream every record of the inputs, in input order, with its status.

    Parameters
    ----------
    inputs : path, glob, sequence of them, or datasets.Dataset
        See :func:`expand_inputs`; a Hugging Face dataset is read row by row.
    text_field : str, optional
        Field holding the text. ``None``: ``content``, else ``text`` (per record).
    id_field : str, optional
        Field holding the document id. ``None``: ``id`` when present.
    strict : bool
        Raise :class:`~clusterclip.errors.ClusterClipError` (with file and line)
        at the first record whose status is not ``ok``.

    Returns
    -------
    RecordStream
        An iterator of :class:`Record`; its counters (UTF-8 replacements, blank
        lines, text fields used) fill in as it is consumed.

    Examples
    --------
    >>> from clusterclip.io.readers import iter_records
    >>> from importlib.resources import files
    >>> kjv = files("clusterclip") / "data" / "kjv-verses.jsonl.gz"
    >>> first = next(iter_records(str(kjv)))
    >>> first.status, first.line, first.text[:20]
    ('ok', 1, 'In the beginning God')
    """
    return RecordStream(inputs, text_field=text_field, id_field=id_field, strict=strict)


def count_lines(path: str | os.PathLike[str]) -> int:
    """Records in one file: parquet footer row count, or newlines in a jsonl file.

    A quick estimate for progress bars (blank lines and a missing final newline
    are not corrected for).
    """
    path = Path(path)
    if path.name.endswith(".parquet"):
        pq = require_extra("pyarrow.parquet", "io")
        return int(pq.ParquetFile(path).metadata.num_rows)
    count = 0
    try:
        if path.name.endswith(".zst"):
            return sum(chunk.count(b"\n") for chunk in _zstd_chunks(path))
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as handle:
            while chunk := handle.read(1 << 24):
                count += chunk.count(b"\n")
    except EOFError as error:
        raise ClusterClipError(
            f"{path} is truncated or corrupt after about {count} lines ({error}). "
            "Re-create the file, or recover the readable part and pass that."
        ) from error
    return count


class _TruncatedError(EOFError):
    pass


def _zstd_chunks(path: Path) -> Iterator[bytes]:
    """Decompressed chunks of a (multi-frame) zstd file; raises if the last frame is cut."""
    zstandard = require_extra("zstandard", "io")
    with open(path, "rb") as handle:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        pending = b""
        started = False
        while True:
            chunk = pending or handle.read(1 << 20)
            pending = b""
            if not chunk:
                break
            out = decompressor.decompress(chunk)
            if out:
                yield out
            if decompressor.eof:  # end of one frame: the rest starts the next one
                pending = decompressor.unused_data
                decompressor = zstandard.ZstdDecompressor().decompressobj()
                started = bool(pending)
            else:
                started = True
        if started and not decompressor.eof:
            raise _TruncatedError("zstd stream ended inside a frame")


def _zstd_lines(path: Path) -> Iterator[bytes]:
    rest = b""
    for chunk in _zstd_chunks(path):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line + b"\n"
    if rest:
        yield rest


@contextlib.contextmanager
def open_lines(path: Path) -> Iterator[Iterator[bytes]]:
    name = path.name
    if name.endswith(".zst"):
        yield _zstd_lines(path)
        return
    try:
        handle = gzip.open(path, "rb") if name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    except OSError as error:
        raise ClusterClipError(f"cannot open {path}: {error}") from error
    with handle:
        yield handle
