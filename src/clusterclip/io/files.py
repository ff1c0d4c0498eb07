"""Atomic writes, content fingerprints and version records (no work-directory names here)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "fingerprint_array",
    "fingerprint_file",
    "human_bytes",
    "json_default",
    "remove_own",
    "versions",
]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it over ``path`` on success.

    Readers never see a half-written file: either the old file or the new one.
    On an exception the temporary file is removed and ``path`` is untouched. A
    file-system error about the temporary file names ``path`` instead: the
    temporary name means nothing to the user and is gone.

    >>> with atomic_path("out.npy") as tmp:  # doctest: +SKIP
    ...     np.save(tmp, array)
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A bounded prefix: a long file name must not make the temporary one too long.
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name[:64]}.", suffix=".tmp", dir=target.parent
        )
    except OSError as error:
        raise _naming(error, target) from None
    os.close(fd)
    tmp = Path(tmp_name)
    # mkstemp makes the file 0600; give it the mode a plain open() would, so
    # other users and Ray workers on a shared filesystem can read the outputs.
    os.chmod(tmp, 0o666 & ~_current_umask())
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as error:
        if error.filename is not None and Path(os.fsdecode(error.filename)) == tmp:
            raise _naming(error, target) from error
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


def _naming(error: OSError, path: Path) -> OSError:
    """The same file-system error about ``path`` (not about a temporary file)."""
    if error.errno is None:
        return error
    return type(error)(error.errno, error.strerror, str(path))


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON to ``path`` atomically."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=json_default) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def json_default(obj: Any) -> Any:
    """``json.dumps`` fallback for numpy scalars and arrays and paths."""
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def human_bytes(n_bytes: int) -> str:
    """A byte count in decimal units, as disks are sold.

    >>> human_bytes(1834), human_bytes(412_170), human_bytes(999)
    ('1.8 kB', '412.2 kB', '999 B')
    """
    value = float(n_bytes)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def fingerprint_file(path: str | os.PathLike[str], *, chunk_size: int = 1 << 22) -> str:
    """Content hash of a file (``blake2b``, 128-bit hex), streamed in chunks."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint_array(array: Any) -> str:
    """Content hash of a numpy array, its dtype and shape (128-bit hex).

    Equal arrays give equal fingerprints on every machine (little-endian bytes).
    """
    import numpy as np

    arr = np.ascontiguousarray(array)
    arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{arr.dtype.str}{arr.shape}".encode())
    digest.update(memoryview(arr).cast("B"))
    return digest.hexdigest()


def versions(*packages: str) -> dict[str, str]:
    """Installed versions of clusterclip, Python, numpy and the named packages."""
    import platform
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("clusterclip", "numpy", *packages):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def remove_own(folder: Path, pattern: str) -> None:
    """Delete ``folder``'s files named ``pattern`` and their temp files, then ``folder`` if empty.

    The temp files are :func:`atomic_path`'s (``.NAME.XXXX.tmp``), left by a write
    that was interrupted.

    >>> remove_own(Path("no-such-folder"), "part-*.npy")
    """
    if not folder.is_dir():
        return
    for path in [*folder.glob(pattern), *folder.glob(f".{pattern}.*.tmp")]:
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: it holds someone else's files
        folder.rmdir()
