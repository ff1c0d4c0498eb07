"""The work directory: atomic writes, fingerprints and the shared manifest.

Every pipeline stage writes its outputs into one work directory and records a
stage entry in ``manifest.json``::

    {"clusterclip_version": "0.1.0",
     "stages": {"embed": {"config": {...}, "inputs": {...}, "outputs": {...},
                          "versions": {...}, "complete": true, ...},
                "cluster": {...}, "schedule": {...}, "report": {...}}}

A stage records the fingerprints of what it consumed (``inputs``) and of what
it produced (``outputs``). A later stage compares its recorded inputs with the
current outputs of the stage before it (:func:`check_upstream`) and refuses to
run on stale data, naming what changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError

__all__ = [
    "MANIFEST_NAME",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "check_upstream",
    "fingerprint_array",
    "fingerprint_file",
    "read_manifest",
    "read_stage",
    "require_stage",
    "versions",
    "write_stage",
]

MANIFEST_NAME = "manifest.json"

#: For each stage, the command that produces it (used in error messages).
STAGE_COMMANDS = {
    "embed": "clusterclip embed INPUT... --workdir W",
    "cluster": "clusterclip cluster --workdir W --n-clusters K",
    "schedule": "clusterclip run ... --workdir W (or clusterclip schedule)",
    "report": "clusterclip report --workdir W",
}


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it over ``path`` on success.

    Readers never see a half-written file: either the old file or the new one.
    On an exception the temporary file is removed and ``path`` is untouched.

    >>> with atomic_path("out.npy") as tmp:  # doctest: +SKIP
    ...     np.save(tmp, array)
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    # mkstemp makes the file 0600; give it the mode a plain open() would, so
    # other users and Ray workers on a shared filesystem can read the outputs.
    os.chmod(tmp, 0o666 & ~_current_umask())
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


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
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def _json_default(obj: Any) -> Any:
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


def read_manifest(workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of ``workdir`` (an empty one if the directory has none yet)."""
    path = Path(workdir) / MANIFEST_NAME
    if not path.exists():
        return {"stages": {}}
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as error:
        raise ClusterClipError(
            f"{path}: manifest is not valid JSON ({error}). Delete it and rerun the stages."
        ) from error
    manifest.setdefault("stages", {})
    return manifest


def read_stage(workdir: str | os.PathLike[str], stage: str) -> dict[str, Any] | None:
    """The manifest entry of one stage, or ``None`` if it never completed."""
    entry = read_manifest(workdir)["stages"].get(stage)
    if entry is None or not entry.get("complete", False):
        return None
    return entry


def write_stage(workdir: str | os.PathLike[str], stage: str, entry: Mapping[str, Any]) -> None:
    """Record (replace) one stage's entry in the manifest, atomically.

    Stages run one at a time per work directory, so read-modify-write is safe.
    """
    from clusterclip import __version__

    manifest = read_manifest(workdir)
    manifest["clusterclip_version"] = __version__
    manifest["stages"][stage] = dict(entry)
    atomic_write_json(Path(workdir) / MANIFEST_NAME, manifest)


def require_stage(workdir: str | os.PathLike[str], stage: str) -> dict[str, Any]:
    """The completed entry of ``stage`` or an error saying which command makes it."""
    entry = read_stage(workdir, stage)
    if entry is None:
        command = STAGE_COMMANDS.get(stage, f"the {stage} stage")
        raise ClusterClipError(
            f"work directory {workdir} has no completed `{stage}` stage. Run `{command}` first."
        )
    return entry


def check_upstream(
    workdir: str | os.PathLike[str], stage: str, recorded: Mapping[str, str]
) -> list[str]:
    """Compare fingerprints a stage recorded for its inputs with the current ones.

    Parameters
    ----------
    recorded : mapping
        ``{"<upstream stage>.<output name>": fingerprint}`` as recorded by
        ``stage`` when it ran.

    Returns
    -------
    list of str
        One human-readable line per input that changed (empty if none).
    """
    manifest = read_manifest(workdir)["stages"]
    changed = []
    for key, fingerprint in recorded.items():
        upstream, _, output = key.partition(".")
        current = manifest.get(upstream, {}).get("outputs", {}).get(output)
        if current != fingerprint:
            changed.append(f"{key} changed since `{stage}` ran (was {fingerprint}, now {current})")
    return changed
