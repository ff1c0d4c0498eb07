"""Records as JSON lines that every reader loads: UTF-8, no byte order mark, one object a line.

The embed stage reads leniently (:mod:`clusterclip.io.readers`): it drops a
UTF-8 byte order mark, replaces invalid UTF-8 by U+FFFD and, like Python's
``json``, accepts ``NaN`` and ``Infinity``. Exports that copy a source line
must not copy those defects to strict readers (``datasets.load_dataset("json")``
stops at a BOM, ``NaN`` or invalid UTF-8; Python's text files split a line at
a bare carriage return). :func:`clean_line` keeps a clean line byte for byte
and mends the others; :func:`encode_json` is the one encoder.

>>> clean_line(b'\\xef\\xbb\\xbf{"text": "a"}')
(b'{"text": "a"}', 'utf8_bom')
>>> clean_line(b'{"text": "a"}')
(b'{"text": "a"}', None)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from clusterclip.errors import ClusterClipError

__all__ = [
    "MENDED",
    "clean_line",
    "describe_mended",
    "encode_json",
    "without_bom",
    "without_lone_surrogates",
]

#: A UTF-16 surrogate code point: only a lone one survives JSON decoding (pairs combine).
_SURROGATE = re.compile(r"[\ud800-\udfff]")

_UTF8_BOM = b"\xef\xbb\xbf"
#: Byte order marks of encodings the jsonl reader does not read (longest first).
_OTHER_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)

#: Why a line was mended -> what was done, as messages say it.
MENDED = {
    "utf8_bom": "a UTF-8 byte order mark dropped",
    "invalid_utf8": "invalid UTF-8 bytes replaced by U+FFFD (as the embed stage read them)",
    "carriage_return": "a carriage return inside the line (text readers split there)",
    "non_finite_number": "NaN or Infinity, which JSON has no number for, written as null",
}


def encode_json(obj: Any, *, default: Callable[[Any], Any] | None = None) -> tuple[bytes, int]:
    """``obj`` as one line of standard JSON in UTF-8, and how many numbers became null.

    Non-ASCII text is written as is (``ensure_ascii=False``), so a record without
    ``NaN``/``Infinity`` gives exactly ``json.dumps(obj, ensure_ascii=False)``.
    ``NaN`` and ``Infinity`` (not JSON) become ``null``; a lone surrogate (not
    UTF-8) is written as its ``\\uXXXX`` escape.

    >>> encode_json({"a": float("nan"), "b": [1.5, float("inf")], "c": "é"})
    (b'{"a": null, "b": [1.5, null], "c": "\\xc3\\xa9"}', 2)
    """
    replaced = 0
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=default)
    except ValueError:
        obj, replaced = _finite(obj)
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=default)
    try:
        return text.encode("utf-8"), replaced
    except UnicodeEncodeError:  # a lone surrogate: its escape is valid JSON and valid UTF-8
        return json.dumps(obj, allow_nan=False, default=default).encode("ascii"), replaced


def _finite(obj: Any) -> tuple[Any, int]:
    """``obj`` with every non-finite float replaced by None, and the number replaced."""
    if isinstance(obj, float):
        return (obj, 0) if math.isfinite(obj) else (None, 1)
    if isinstance(obj, dict):
        pairs = [(key, _finite(value)) for key, value in obj.items()]
        return {key: value for key, (value, _) in pairs}, sum(n for _, (_, n) in pairs)
    if isinstance(obj, (list, tuple)):
        items = [_finite(value) for value in obj]
        return [value for value, _ in items], sum(n for _, n in items)
    return obj, 0


def clean_line(data: bytes) -> tuple[bytes, str | None]:
    """A jsonl record line as every reader loads it, and why it had to change (None: it did not).

    ``data`` is one line of a corpus file (without its newline) that the embed
    stage read as a JSON object. A clean line (no byte order mark, valid UTF-8,
    no carriage return, no ``NaN``/``Infinity``) is returned unchanged. The
    others change as little as they must: the byte order mark is dropped,
    invalid bytes become U+FFFD (what the embed stage read), a carriage return
    (JSON whitespace here: the reader refuses one inside a string) becomes a
    space, and a record holding ``NaN`` or ``Infinity`` is re-encoded by
    :func:`encode_json`. The reason is a key of :data:`MENDED` (the first
    that applies).

    >>> clean_line(b'{"text": "caf\\xe9",\\r "n": NaN}')
    (b'{"text": "caf\\xef\\xbf\\xbd", "n": null}', 'invalid_utf8')
    """
    reason = None
    text = None
    if data.startswith(_UTF8_BOM):
        reason = "utf8_bom"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        reason = reason or "invalid_utf8"
    text = text.removeprefix("\ufeff")
    if "\r" in text:
        text = text.replace("\r", " ")
        reason = reason or "carriage_return"
    if "NaN" in text or "Infinity" in text:  # maybe inside a string: parse to know
        try:
            line, replaced = encode_json(json.loads(text))
        except json.JSONDecodeError:  # not a record the embed stage kept: as read
            line, replaced = b"", 0
        if replaced:
            return line, reason or "non_finite_number"
    return (data, None) if reason is None else (text.encode("utf-8"), reason)


def describe_mended(notes: dict[str, dict[str, Any]]) -> str:
    """One sentence from what a record store mended (empty when nothing was).

    >>> describe_mended({"utf8_bom": {"count": 1, "first": "c.jsonl:1"}})
    '1 corpus record mended into a clean JSON line: 1 with a UTF-8 byte order mark dropped (first: c.jsonl:1)'
    """
    total = sum(int(note["count"]) for note in notes.values())
    if not total:
        return ""
    parts = [
        f"{int(note['count']):,} with {MENDED.get(reason, reason)} (first: {note['first']})"
        for reason, note in notes.items()
    ]
    plural = "records" if total != 1 else "record"
    lines = "clean JSON lines" if total != 1 else "a clean JSON line"
    return f"{total:,} corpus {plural} mended into {lines}: " + "; ".join(parts)


def without_lone_surrogates(text: str) -> tuple[str, bool]:
    r"""``text`` with each lone UTF-16 surrogate replaced by U+FFFD, and whether any was.

    A JSON string may escape half of a surrogate pair (``"\ud800"``); Python
    decodes it into a code point that has no UTF-8 form, which tokenizers and
    every by-value export refuse. The reader (:mod:`clusterclip.io.readers`) mends it as it mends invalid
    UTF-8 bytes, and counts the line with them.

    >>> without_lone_surrogates("a\ud800b") == ("a\ufffdb", True)
    True
    >>> without_lone_surrogates("caf\u00e9")
    ('café', False)
    """
    if text.isascii() or not _SURROGATE.search(text):
        return text, False
    return _SURROGATE.sub("\ufffd", text), True


def without_bom(first_line: bytes, source: str) -> bytes:
    """The first line of a jsonl file without its UTF-8 byte order mark; refuse UTF-16/32."""
    if first_line.startswith(_UTF8_BOM):
        return first_line[len(_UTF8_BOM) :]
    for mark, encoding in _OTHER_BOMS:
        if first_line.startswith(mark):
            raise ClusterClipError(
                f"{source} is {encoding}-encoded; clusterclip reads UTF-8 jsonl. Convert it, e.g. "
                f"`iconv -f {encoding} -t UTF-8 {source} > converted.jsonl`, and pass that."
            )
    return first_line
