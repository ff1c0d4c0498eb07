"""``schedule.npy`` + ``schedule.json``: the training order and its sidecar, and their one loader.

Every reader of a saved schedule goes through :func:`read_schedule_files`
(a schedule file anywhere) or :meth:`ScheduleArtifact.read` (the schedule of a
work directory), so the checks are written once: the sidecar is a clusterclip
schedule's, the indices are the ones its fingerprint names, and (in a work
directory) the schedule was built from the current clusters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io.artifacts.base import Artifact
from clusterclip.io.files import atomic_path, atomic_write_json, fingerprint_array

__all__ = [
    "SCHEDULE_FORMAT",
    "ScheduleArtifact",
    "ScheduleFile",
    "read_schedule_files",
    "sidecar_path",
    "write_schedule_files",
]

#: The sidecar's ``format``: what marks a JSON file as a clusterclip schedule's sidecar.
SCHEDULE_FORMAT = "clusterclip.schedule"
#: Dtype of the stored indices.
INDEX_DTYPE = np.dtype(np.int64)


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """The JSON sidecar next to a schedule: ``<dir>/<stem>.json``.

    >>> sidecar_path("work/schedule.npy").name
    'schedule.json'
    """
    return Path(path).with_suffix(".json")


def npy_path(path: str | os.PathLike[str]) -> Path:
    """``path`` with the ``.npy`` suffix ``numpy.save`` would add.

    >>> npy_path("out/order").name
    'order.npy'
    """
    path = Path(path)
    return path if path.suffix == ".npy" else path.with_name(path.name + ".npy")


def labels_fingerprint(labels: np.ndarray) -> str:
    """Fingerprint of cluster labels whatever their integer dtype (as int64)."""
    return fingerprint_array(np.asarray(labels, dtype=np.int64))


@dataclass(frozen=True)
class ScheduleFile:
    """A saved schedule: ``indices`` (int64, shape (T,), memory-mapped or loaded) and its sidecar."""

    indices: np.ndarray
    meta: dict[str, Any]
    path: Path

    @property
    def config(self) -> dict[str, Any]:
        """The schedule's recorded configuration (policy, max_repeats, seed, ...)."""
        return dict(self.meta.get("config", {}))


def write_schedule_files(
    path: str | os.PathLike[str], indices: np.ndarray, meta: Mapping[str, Any]
) -> Path:
    """Write ``<path>.npy`` (int64) and its sidecar ``<stem>.json``, each atomically.

    The sidecar is ``meta`` plus ``format`` and ``indices_fingerprint``, which
    the readers check. Returns the ``.npy`` path.

    >>> write_schedule_files("out/order.npy", np.arange(3), {"config": {}})  # doctest: +SKIP
    PosixPath('out/order.npy')
    """
    target = npy_path(path)
    indices = np.ascontiguousarray(indices, dtype=INDEX_DTYPE)
    with atomic_path(target) as tmp, open(tmp, "wb") as handle:
        np.save(handle, indices)
    sidecar = {**meta, "format": SCHEDULE_FORMAT, "indices_fingerprint": fingerprint_array(indices)}
    atomic_write_json(sidecar_path(target), sidecar)
    return target


def read_schedule_files(
    path: str | os.PathLike[str], *, memory_map: bool = False
) -> tuple[np.ndarray, dict[str, Any]]:
    """The indices and sidecar of a saved schedule, checked against each other.

    Raises
    ------
    ClusterClipError
        A missing file, a sidecar that is not a clusterclip schedule's, indices
        that are not 1-D int64, or indices whose fingerprint is not the one the
        sidecar records.
    """
    target = npy_path(path)
    side = sidecar_path(target)
    for needed in (target, side):
        if not needed.exists():
            raise ClusterClipError(
                f"{needed}: no such file. A saved schedule is a .npy plus its .json "
                "sidecar; build one with clusterclip.build_schedule(...).save(path)."
            )
    try:
        meta = json.loads(side.read_text("utf-8"))
    except json.JSONDecodeError as error:
        raise ClusterClipError(
            f"{side}: not valid JSON ({error}). Rebuild the schedule."
        ) from error
    if not isinstance(meta, dict) or meta.get("format") != SCHEDULE_FORMAT:
        raise ClusterClipError(f"{side}: not a clusterclip schedule sidecar. Rebuild the schedule.")
    indices = np.load(target, mmap_mode="r" if memory_map else None, allow_pickle=False)
    if indices.ndim != 1 or indices.dtype != INDEX_DTYPE:
        raise ClusterClipError(
            f"{target}: expected a 1-D int64 array of document indices, got "
            f"{indices.dtype}{indices.shape}. Rebuild the schedule."
        )
    if "indices_fingerprint" not in meta:
        raise ClusterClipError(
            f"{target}: its sidecar records no `indices_fingerprint`, so the schedule cannot be "
            "checked. Rebuild the schedule."
        )
    if fingerprint_array(indices) != meta["indices_fingerprint"]:
        raise ClusterClipError(
            f"{target}: the indices do not match the fingerprint recorded in its sidecar "
            f"{side.name} (the file was modified or belongs to another schedule). Rebuild the "
            "schedule."
        )
    return indices, meta


class ScheduleArtifact(Artifact):
    """The schedule of a work directory, and the one loader every adapter uses.

    Examples
    --------
    >>> from clusterclip.io.artifacts import ScheduleArtifact
    >>> saved = ScheduleArtifact("work").read()  # doctest: +SKIP
    >>> saved.indices[:3]  # doctest: +SKIP
    memmap([ 812, 3301,   17])
    """

    key = "schedule"
    stage = "schedule"

    @property
    def sidecar(self) -> Path:
        """``schedule.json``."""
        return self.work.path_of("schedule_meta")

    def write(self, indices: np.ndarray, meta: Mapping[str, Any]) -> dict[str, str]:
        """Write the indices and sidecar; return their fingerprints (``schedule``, ``meta``)."""
        write_schedule_files(self.path, indices, meta)
        return {"schedule": self.fingerprint(), "meta": self.work.fingerprint("schedule_meta")}

    def read(self) -> ScheduleFile:
        """The saved schedule, memory-mapped, after every check.

        Checked: the schedule stage is fresh (no input changed since it ran,
        when the manifest records it); the indices match the sidecar's
        fingerprint; the sidecar's labels fingerprint is the current clusters'.
        Reading the labels and fingerprinting the indices costs O(N + T) time
        and no memory beyond the page cache.

        Raises
        ------
        ClusterClipError
            Naming what is wrong and the command that rebuilds the schedule.
        """
        from clusterclip.io.artifacts.clusters import ClustersArtifact
        from clusterclip.io.workdir import STAGE_COMMANDS

        work = self.work.path
        if not self.exists():
            raise ClusterClipError(
                f"{self.path} not found. Build a schedule first: `clusterclip run ... --workdir "
                f"{work}` or `clusterclip schedule --workdir W`."
            )
        if self.work.entry(self.stage) is not None:
            self.check_fresh()
        indices, meta = read_schedule_files(self.path, memory_map=True)
        fix = f"Rebuild the schedule: `{STAGE_COMMANDS['schedule']}`."
        was = meta.get("labels_fingerprint")
        if was is None:
            raise ClusterClipError(
                f"{self.path}: its sidecar records no `labels_fingerprint`, so the schedule "
                f"cannot be checked against the work directory. {fix}"
            )
        labels = ClustersArtifact(self.work).labels()
        now = labels_fingerprint(labels)
        if now != was:
            n_documents = meta.get("config", {}).get("n_documents", "?")
            raise ClusterClipError(
                f"{self.path}: the schedule in {work} was built from other cluster labels than "
                f"the current ones: the labels of {work} changed since the schedule was built "
                f"(built from labels {was}, {n_documents} documents; the clusters now give "
                f"{now}, {labels.shape[0]} documents). {fix}"
            )
        return ScheduleFile(indices=indices, meta=meta, path=self.path)
