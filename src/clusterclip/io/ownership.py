"""Whose directory it is and who writes it: the ownership marker and the one-writer lock.

A work directory is clusterclip's alone: its stages overwrite and delete the
files they list as their own, so they must never do it in a folder that holds
someone else's files. :func:`claim` makes a directory ours before anything is
written into it:

- a new or empty directory gets the marker file;
- a directory made by an earlier clusterclip (it holds clusterclip's
  ``manifest.json`` but no marker) is adopted: the marker is written;
- anything else is refused, naming a few of the files it holds and the fix; a
  ``manifest.json`` that clusterclip did not write is refused, never merged.

:func:`hold_lock` keeps one writer per work directory: the lock file records
the pid, host, command and start time of its holder, and a second writer is
refused with those. A lock whose holder is gone (same host, no such process)
or that was copied along with the directory is stale and taken over. Readers
take no lock. The file names are the caller's (:class:`~clusterclip.io.WorkDir`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError, invalid, spell
from clusterclip.io.files import atomic_write_json

__all__ = ["claim", "hold_lock", "is_clusterclip_manifest", "written_by_clusterclip"]

#: Content of the marker file (its presence is what counts).
MARKER = {
    "clusterclip_workdir": 1,
    "note": "A clusterclip work directory: clusterclip overwrites and deletes the files its "
    "stages write here. Keep no other files in it.",
}
#: Names listed in a refusal before "and N more".
SHOWN = 5
#: Attempts at creating the lock file (another process may take over a stale one meanwhile).
ATTEMPTS = 20
#: Lock depth per work directory held by this process (a run holds it around its stages).
_HELD: dict[str, int] = {}


def written_by_clusterclip(manifest: Any) -> bool:
    """Whether a parsed ``manifest.json`` is clusterclip's (every version records these two keys)."""
    return (
        isinstance(manifest, dict)
        and isinstance(manifest.get("clusterclip_version"), str)
        and isinstance(manifest.get("stages"), dict)
    )


def is_clusterclip_manifest(path: Path) -> bool:
    """Whether the file ``path`` is a ``manifest.json`` written by clusterclip (any version)."""
    try:
        return written_by_clusterclip(json.loads(path.read_text("utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False


def claim(path: Path, *, marker: Path, manifest: Path) -> bool:
    """Make ``path`` a clusterclip work directory, or refuse; True when the marker was written.

    Raises
    ------
    ClusterClipError
        ``path`` is a file, holds files clusterclip did not write, or holds a
        ``manifest.json`` that is not clusterclip's.
    """
    if path.exists() and not path.is_dir():
        raise ClusterClipError(f"work directory {path} is a file. Pass a directory path.")
    if marker.exists():
        return False
    path.mkdir(parents=True, exist_ok=True)
    entries = sorted(os.listdir(path))
    if entries and manifest.name in entries:
        if not is_clusterclip_manifest(manifest):
            raise invalid(
                "workdir",
                "a new or empty directory, or one clusterclip made",
                str(path),
                f"Its {manifest.name} was not written by clusterclip (no `clusterclip_version` "
                "and `stages`), so clusterclip will neither merge its stages into it nor "
                f"replace it. Pass an empty or new {spell('workdir')} (for example "
                f"{spell('workdir')} {path / 'clusterclip-work'}: it is created).",
            )
    elif entries:
        shown = [name + ("/" if (path / name).is_dir() else "") for name in entries[:SHOWN]]
        more = f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else ""
        raise invalid(
            "workdir",
            "a new or empty directory, or one clusterclip made",
            str(path),
            f"It holds files clusterclip did not write ({', '.join(shown)}{more}) and no "
            f"{marker.name} marker; its stages would overwrite or delete such files. Pass an "
            f"empty or new {spell('workdir')} (for example {spell('workdir')} "
            f"{path / 'clusterclip-work'}: it is created).",
        )
    atomic_write_json(marker, MARKER)
    return True


@contextlib.contextmanager
def hold_lock(
    path: Path,
    *,
    lock: Path,
    marker: Path,
    manifest: Path,
    log: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Claim ``path`` (:func:`claim`) and hold its one-writer lock file ``lock`` inside the block.

    Re-entrant within one process: a run holds the lock around its stages and
    each stage takes it again. A directory this block created or marked, and
    that holds nothing but the marker at its end (a refused command), is left
    as it was found.
    """
    key = str(path.resolve()) if path.exists() else str(path.absolute())
    if _HELD.get(key):
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    existed = path.exists()
    marked = claim(path, marker=marker, manifest=manifest)
    key = str(path.resolve())
    text = _acquire(lock, key, log)
    _HELD[key] = 1
    try:
        yield
    finally:
        _HELD.pop(key, None)
        _release(lock, text)
        if marked:
            _undo_claim(path, marker, remove_dir=not existed)


def _holder_info(workdir: str) -> dict[str, Any]:
    argv = sys.argv or ["python"]
    name = Path(argv[0]).name
    if name == "__main__.py":  # python -m clusterclip
        name = Path(argv[0]).parent.name
    command = shlex.join([name, *argv[1:]])
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command if len(command) <= 300 else command[:297] + "...",
        "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "workdir": workdir,
    }


def _acquire(lock: Path, workdir: str, log: Callable[[str], None] | None) -> str:
    text = json.dumps(_holder_info(workdir), sort_keys=True) + "\n"
    for _ in range(ATTEMPTS):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            held = _read(lock)
            if held is None:  # released meanwhile, or its holder is still writing it
                time.sleep(0.05)
                continue
            holder = _parse(held)
            stale = _stale_reason(holder, workdir)
            if stale is None:
                raise _in_use(lock, holder) from None
            if _take_over(lock, held) and log is not None:
                log(f"lock      took over {lock} from {_describe(holder)}: {stale}")
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        return text
    held = _read(lock)
    raise _in_use(lock, _parse(held) if held else {})


def _read(lock: Path) -> str | None:
    try:
        text = lock.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return "{}"
    if not text.strip():
        # Created but not written yet, or left empty by a crash: stale once it is old.
        with contextlib.suppress(OSError):
            if time.time() - lock.stat().st_mtime > 10:
                return "{}"
        return None
    return text


def _parse(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _stale_reason(holder: dict[str, Any], workdir: str) -> str | None:
    """Why the lock of ``holder`` is stale, or None while its holder may still be writing."""
    if holder.get("workdir") not in (None, workdir):
        return f"it was copied from {holder['workdir']}"
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return None  # another machine: its process cannot be checked from here
    if pid == os.getpid():
        return "this process holds no lock there (an earlier process had the same pid)"
    if not _alive(pid):
        return "that process is no longer running"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    with contextlib.suppress(OSError, IndexError):  # Linux: a zombie has exited
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    return True


def _take_over(lock: Path, stale_text: str) -> bool:
    """Remove the stale lock holding ``stale_text``; False if another process got there first."""
    grave = lock.with_name(f"{lock.name}.{os.getpid()}.stale")
    try:
        os.rename(lock, grave)
    except FileNotFoundError:
        return False
    try:
        if grave.read_text("utf-8") != stale_text:  # a live lock taken meanwhile: put it back
            with contextlib.suppress(FileExistsError):
                os.link(grave, lock)
            return False
        return True
    finally:
        grave.unlink(missing_ok=True)


def _release(lock: Path, text: str) -> None:
    with contextlib.suppress(OSError):
        if lock.read_text("utf-8") == text:
            lock.unlink()


def _undo_claim(path: Path, marker: Path, *, remove_dir: bool) -> None:
    with contextlib.suppress(OSError):
        if os.listdir(path) == [marker.name]:
            marker.unlink()
            if remove_dir:
                path.rmdir()


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "an unreadable lock"
    return (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')} "
        f"(`{holder.get('command', '?')}`, since {holder.get('since', '?')})"
    )


def _in_use(lock: Path, holder: dict[str, Any]) -> ClusterClipError:
    workdir = lock.parent
    return ClusterClipError(
        f"work directory {workdir} is being written by another clusterclip process: "
        f"{_describe(holder)}; lock file {lock}. Wait for it to finish, or use another "
        f"{spell('workdir')}. If that process is gone (it ran on another machine, or was "
        f"killed there), delete {lock} and rerun."
    )
