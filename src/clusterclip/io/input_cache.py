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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from clusterclip.io.files import atomic_write_json

__all__ = ["FingerprintWorker", "cached_fingerprints"]

#: Format of the cache file (another format is ignored and rewritten).
CACHE_FORMAT = 1
#: Files modified this recently are hashed but not cached.
SETTLE_SECONDS = 2.0


def cached_fingerprints(
    paths: Sequence[str | os.PathLike[str]],
    *,
    cache: Path,
    write: bool,
    hash_files: Callable[[list[str]], list[dict[str, Any]]] | None = None,
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
    hash_files : callable, optional
        Computes :func:`~clusterclip.io.readers.fingerprint_input` of the files
        the cache does not hold, in order (e.g. as tasks on an engine, so the
        driver reads none of them); default: here, one after the other.

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
    stats = [os.stat(path) for path in paths]
    found: list[Any] = []
    missing = []
    for path, stat in zip(paths, stats, strict=True):
        entry = known.get(str(Path(path).resolve()))
        stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        if isinstance(entry, dict) and entry.get("stamp") == stamp:
            found.append(entry["fingerprint"])
        else:
            found.append(None)
            missing.append(len(found) - 1)
    if missing:
        wanted = [str(paths[i]) for i in missing]
        hashed = hash_files(wanted) if hash_files is not None else map(fingerprint_input, wanted)
        for position, fingerprint in zip(missing, hashed, strict=True):
            found[position] = fingerprint
    for path, stat, fingerprint in zip(paths, stats, found, strict=True):
        if time.time() - stat.st_mtime >= SETTLE_SECONDS:
            stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
            kept[str(Path(path).resolve())] = {"stamp": stamp, "fingerprint": fingerprint}
    merged = {key: entry for key, entry in known.items() if os.path.exists(key)}  # moved: gone
    merged.update(kept)
    if write and (merged != known or not cache.exists()):  # present once written to, always
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
            atomic_write_json(cache, {"format": CACHE_FORMAT, "files": merged})
    return found


class FingerprintWorker:
    """A file's content fingerprint, wherever an engine runs it (the factory is the class).

    >>> FingerprintWorker()("corpus.jsonl")  # doctest: +SKIP
    {'size': 1234, 'blake2b': '...', 'sampled': False}
    """

    def __call__(self, path: str) -> dict[str, Any]:
        from clusterclip.io.readers import fingerprint_input

        return fingerprint_input(path)


def _load(cache: Path) -> dict[str, Any]:
    try:
        data = json.loads(cache.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}
