"""Content fingerprints of corpus files, computed once and cached by (path, size, mtime).

The embed stage decides freshness by the *content* of its input files
(:func:`~clusterclip.io.readers.fingerprint_input`: size plus a blake2b hash),
never by their paths, so a corpus moved, renamed or copied with the same bytes
is not re-embedded. Hashing a large corpus on every rerun would cost minutes,
so each fingerprint is kept in a small cache file in the work directory, keyed
by the file's absolute path, size and modification time (nanoseconds): a rerun
over unchanged files reads the cache; a moved file (new path) or a touched one
(new mtime) is hashed again, and its content decides. A file modified within
:data:`SETTLE_SECONDS` of being hashed is not cached (its mtime may not yet
reflect a write in the same clock tick).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusterclip.io.files import atomic_write_json

__all__ = ["cached_fingerprints"]

#: Format of the cache file (another format is ignored and rewritten).
CACHE_FORMAT = 1
#: Files modified this recently are hashed but not cached.
SETTLE_SECONDS = 2.0


def cached_fingerprints(
    paths: Sequence[str | os.PathLike[str]], *, cache: Path, write: bool
) -> list[dict[str, Any]]:
    """The content fingerprint of each file in ``paths``, reusing ``cache`` where it is valid.

    Parameters
    ----------
    paths : sequence of path
        Corpus files.
    cache : path
        The cache file (in the work directory).
    write : bool
        Store the fingerprints computed now (writers only: the caller holds the
        work directory's lock; readers pass False and leave it untouched).

    Returns
    -------
    list of dict
        ``{"size", "blake2b", "sampled"}`` per file, in the order of ``paths``:
        equal to :func:`~clusterclip.io.readers.fingerprint_input`.

    Examples
    --------
    >>> cached_fingerprints(["corpus.jsonl"], cache=Path("w/.input-fingerprints.json"),
    ...                     write=True)  # doctest: +SKIP
    [{'size': 1234, 'blake2b': '...', 'sampled': False}]
    """
    from clusterclip.io.readers import fingerprint_input

    known = _load(cache)
    kept: dict[str, Any] = {}
    found = []
    for path in paths:
        key = str(Path(path).resolve())
        stat = os.stat(path)
        stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        entry = known.get(key)
        if isinstance(entry, dict) and entry.get("stamp") == stamp:
            fingerprint = entry["fingerprint"]
        else:
            fingerprint = fingerprint_input(path)
        found.append(fingerprint)
        if time.time() - stat.st_mtime >= SETTLE_SECONDS:
            kept[key] = {"stamp": stamp, "fingerprint": fingerprint}
    merged = {key: entry for key, entry in known.items() if os.path.exists(key)}  # moved: gone
    merged.update(kept)
    if write and (merged != known or not cache.exists()):  # present once written to, always
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
            atomic_write_json(cache, {"format": CACHE_FORMAT, "files": merged})
    return found


def _load(cache: Path) -> dict[str, Any]:
    try:
        data = json.loads(cache.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}
