"""The manifest of a work directory: ``manifest.json``, one entry per stage.

Every stage records an entry::

    {"clusterclip_version": "0.1.0",
     "stages": {"embed": {"config": {...}, "inputs": {...}, "outputs": {...},
                          "versions": {...}, "complete": true, ...},
                "cluster": {...}, "schedule": {...}, "report": {...}}}

A stage records the fingerprints of what it consumed (``inputs``) and of what it
produced (``outputs``); :func:`check_upstream` compares them with the current ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError, spell
from clusterclip.io.files import atomic_write_json
from clusterclip.io.ownership import written_by_clusterclip

__all__ = [
    "MANIFEST_NAME",
    "STAGE_COMMANDS",
    "check_upstream",
    "corpus_key",
    "read_manifest",
    "read_stage",
    "require_stage",
    "write_stage",
]

#: The manifest's file name in the work directory.
MANIFEST_NAME = "manifest.json"

#: For each stage, the command that produces it (used in error messages).
STAGE_COMMANDS = {
    "embed": "clusterclip embed INPUT... --workdir W",
    "cluster": "clusterclip cluster --workdir W --n-clusters K",
    "dedup": "clusterclip dedup --workdir W",
    "schedule": "clusterclip run ... --workdir W (or clusterclip schedule)",
    "report": "clusterclip report --workdir W",
}


def read_manifest(workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of ``workdir`` (an empty one if the directory has none yet).

    A ``manifest.json`` that clusterclip did not write is refused, never merged into.
    """
    path = Path(workdir) / MANIFEST_NAME
    if not path.exists():
        return {"stages": {}}
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as error:
        raise ClusterClipError(
            f"{path}: manifest is not valid JSON ({error}). Delete it and rerun the stages."
        ) from error
    if not written_by_clusterclip(manifest):
        raise ClusterClipError(
            f"{path} was not written by clusterclip (no `clusterclip_version` and `stages`), so "
            f"{path.parent} is not a clusterclip work directory. Pass an empty or new "
            f"{spell('workdir')}."
        )
    _upgrade_embed_inputs(manifest["stages"].get("embed"))
    return manifest


def corpus_key(position: int) -> str:
    """The embed stage's input key of the corpus file at ``position`` (0-based).

    Inputs are keyed by position, not path, so that the same bytes under
    another name or folder are the same input.

    >>> corpus_key(0)
    'corpus file 1'
    """
    return f"corpus file {position + 1}"


def _upgrade_embed_inputs(entry: dict[str, Any] | None) -> None:
    """Key an embed entry of an earlier version (inputs by path) by position, in place."""
    if not isinstance(entry, dict):
        return
    names = entry.get("sources") or entry.get("config", {}).get("inputs") or []
    inputs = entry.get("inputs")
    if not names or not isinstance(inputs, dict) or set(inputs) != set(map(str, names)):
        return
    if any(str(name).startswith("<") for name in names):
        return  # an in-memory dataset: keyed by its fingerprint already
    entry["inputs"] = {corpus_key(i): inputs[str(name)] for i, name in enumerate(names)}


def read_stage(workdir: str | os.PathLike[str], stage: str) -> dict[str, Any] | None:
    """The manifest entry of one stage, or ``None`` if it never completed."""
    entry = read_manifest(workdir)["stages"].get(stage)
    if entry is None or not entry.get("complete", False):
        return None
    return entry


def write_stage(workdir: str | os.PathLike[str], stage: str, entry: Mapping[str, Any]) -> None:
    """Record (replace) one stage's entry in the manifest, atomically.

    Stages run one at a time per work directory (:meth:`WorkDir.lock`), so
    read-modify-write is safe.
    """
    from clusterclip import __version__

    manifest = read_manifest(workdir)
    manifest["clusterclip_version"] = __version__
    manifest["stages"][stage] = dict(entry)
    atomic_write_json(Path(workdir) / MANIFEST_NAME, manifest)


def require_stage(workdir: str | os.PathLike[str], stage: str) -> dict[str, Any]:
    """The completed entry of ``stage`` or an error saying which command makes it."""
    path = Path(workdir)
    if not path.is_dir():
        what = "is a file, not a work directory" if path.exists() else "does not exist"
        raise ClusterClipError(
            f"{path} {what}. Pass the --workdir of an earlier `clusterclip run` (or make one: "
            "`clusterclip run INPUT... --workdir W --n-clusters K`)."
        )
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
