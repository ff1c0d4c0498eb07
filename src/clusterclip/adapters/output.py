"""The output of an export: a new or empty folder, written whole or not at all.

Every ``clusterclip export`` format writes through :func:`export_folder`:

- ``out`` must not exist, or be an empty folder. A folder with anything in it
  is refused before any work (an export never mixes its files with others, nor
  deletes them); so is a file.
- The export is written into a staging folder beside ``out`` and renamed to
  ``out`` when complete, so ``out`` appears whole or not at all.
- A failed export leaves nothing behind: the staging folder is removed, and so
  are the parent folders the export created; a folder that existed (empty) is
  left as it was.
- File-system errors name ``out``, never the staging folder (its name means
  nothing to the user, and it is gone).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from clusterclip.errors import ClusterClipError

__all__ = ["check_export_folder", "export_folder", "new_files"]

#: Prefix of the staging folder beside ``out`` (short: ``out``'s name may be long).
_STAGING = ".clusterclip-export-"


def check_export_folder(out: str | os.PathLike[str]) -> Path:
    """``out`` as a path, refused when it is a file or a folder that is not empty.

    >>> check_export_folder("new-export-folder")
    PosixPath('new-export-folder')
    """
    out = Path(out)
    if _exists(out) and not out.is_dir():
        raise ClusterClipError(f"--out {out} is a file; pass a folder (created if missing).")
    if out.is_dir() and any(out.iterdir()):
        raise ClusterClipError(
            f"export folder {out} already exists and is not empty. Remove it or pass another "
            "--out (an export is written only into a new or empty folder, so that its files "
            "never mix with others)."
        )
    return out


@contextlib.contextmanager
def export_folder(out: str | os.PathLike[str]) -> Iterator[Path]:
    """A staging folder that becomes ``out`` when the block succeeds (see the module docstring).

    Examples
    --------
    >>> with export_folder("ordered") as folder:  # doctest: +SKIP
    ...     (folder / "part-00000.jsonl").write_bytes(b'{"text": "a"}\\n')
    """
    out = check_export_folder(out)
    created = _missing_parents(out)
    staging = None
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=out.parent))
            # mkdtemp makes the folder 0700; give it the mode a plain mkdir would.
            staging.chmod(0o777 & ~_current_umask())
        except OSError as error:
            raise _cannot_write(out, error) from None
        try:
            yield staging
            _move(staging, out)
        except OSError as error:
            if _about_output(error, staging, out):
                raise _cannot_write(out, error) from error
            raise  # e.g. a corpus file that cannot be read: it names that file
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for folder in created:  # deepest first; only those this export made, only if empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


@contextlib.contextmanager
def new_files(*paths: str | os.PathLike[str]) -> Iterator[None]:
    """For an export named as files, not a folder: none may exist; a failure leaves none.

    Each path is refused when it exists (an export never overwrites a file). On
    an exception the paths the block wrote are removed, and so are the parent
    folders created for them. Write each one atomically
    (:func:`clusterclip.io.atomic_path`), which names the path in its errors; a
    file-system error about one of them is said as a :class:`ClusterClipError`.

    >>> with new_files("index/m.npy", "index/m.json"):  # doctest: +SKIP
    ...     ...
    """
    targets = [Path(path) for path in paths]
    for target in targets:
        if _exists(target):
            raise ClusterClipError(
                f"{target} already exists. Remove it or pass another --out (an export never "
                "overwrites a file)."
            )
    created = _missing_parents(targets[0])
    try:
        try:
            yield
        except OSError as error:
            named = None if error.filename is None else Path(os.fsdecode(error.filename))
            if named is None or named in targets:
                raise _cannot_write(named or targets[0], error) from error
            raise
    except BaseException:
        for target in targets:
            with contextlib.suppress(OSError):
                target.unlink(missing_ok=True)
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _exists(path: Path) -> bool:
    """``path.exists()``, refusing a path the file system cannot even look up (too long, ...)."""
    try:
        return path.exists()
    except OSError as error:
        raise ClusterClipError(
            f"--out {path} cannot be used: {error.strerror or error}. Pass another --out."
        ) from error


def _move(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``, replacing ``out`` only if it is an empty folder.

    POSIX rename replaces an empty folder and fails, keeping it, on one that has
    gained files since it was checked; elsewhere the empty folder is removed first.
    """
    try:
        os.replace(staging, out)
    except OSError:
        if not (out.is_dir() and not any(out.iterdir())):
            raise
        out.rmdir()
        os.replace(staging, out)


def _missing_parents(out: Path) -> list[Path]:
    """The parent folders of ``out`` that do not exist yet, deepest first."""
    missing = []
    parent = out.absolute().parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing


def _about_output(error: OSError, staging: Path, out: Path) -> bool:
    """Whether a file-system error is about writing the export (no file named: a write)."""
    if error.filename is None:
        return True
    named = Path(os.fsdecode(error.filename)).absolute()
    return named == out.absolute() or named.is_relative_to(staging.absolute())


def _cannot_write(out: Path, error: OSError) -> ClusterClipError:
    reason = error.strerror or type(error).__name__
    return ClusterClipError(
        f"cannot write the export to {out}: {reason}. Nothing was written; check that "
        f"{out.parent} is writable and has space, or pass another --out."
    )


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
