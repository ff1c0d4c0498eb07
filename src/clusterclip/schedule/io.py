"""The materialised :class:`Schedule` and its files (``.npy`` + JSON sidecar)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io import atomic_path, atomic_write_json, fingerprint_array
from clusterclip.schedule.config import ScheduleConfig, labels_fingerprint
from clusterclip.schedule.stats import ScheduleStats, count_repeats

__all__ = ["FORMAT_NAME", "Schedule", "sidecar_path"]

FORMAT_NAME = "clusterclip.schedule"


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """The JSON sidecar next to a schedule: ``<dir>/<stem>.json``."""
    path = Path(path)
    return path.with_suffix(".json")


def _npy_path(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path if path.suffix == ".npy" else path.with_name(path.name + ".npy")


@dataclass
class Schedule:
    """A global training order of document indices.

    Attributes
    ----------
    indices : ndarray of int64, shape (T,)
        Document indices in training order.
    stats : ScheduleStats
        Per-cluster draws, clip steps, repeats, budget status.
    config : ScheduleConfig
        The validated settings (with label/length fingerprints).
    """

    indices: np.ndarray
    stats: ScheduleStats
    config: ScheduleConfig

    def __len__(self) -> int:
        return int(self.indices.shape[0])

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``<path>.npy`` and the sidecar ``<stem>.json``, each atomically.

        Returns the ``.npy`` path.

        >>> schedule.save("work/schedule.npy")  # doctest: +SKIP
        """
        from clusterclip import __version__

        target = _npy_path(path)
        with atomic_path(target) as tmp, open(tmp, "wb") as handle:
            np.save(handle, np.ascontiguousarray(self.indices, dtype=np.int64))
        atomic_write_json(
            sidecar_path(target),
            {
                "format": FORMAT_NAME,
                "version": __version__,
                "schedule_version": self.config.schedule_version,
                "config": self.config.to_dict(),
                "config_fingerprint": self.config.fingerprint(),
                "labels_fingerprint": self.config.labels_fingerprint,
                "indices_fingerprint": fingerprint_array(self.indices.astype(np.int64)),
                "stats": self.stats.to_dict(),
            },
        )
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, labels: Any = None) -> Schedule:
        """Read a saved schedule; with ``labels``, refuse one built from other labels.

        Raises
        ------
        ClusterClipError
            Missing/corrupt files, or labels whose fingerprint differs.

        >>> Schedule.load("work/schedule.npy", labels=labels)  # doctest: +SKIP
        """
        target = _npy_path(path)
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
        if meta.get("format") != FORMAT_NAME:
            raise ClusterClipError(f"{side}: not a clusterclip schedule sidecar.")
        indices = np.load(target, allow_pickle=False)
        if indices.ndim != 1 or indices.dtype != np.int64:
            raise ClusterClipError(
                f"{target}: expected a 1-D int64 array, got {indices.dtype}{indices.shape}."
            )
        if fingerprint_array(indices) != meta.get("indices_fingerprint"):
            raise ClusterClipError(
                f"{target}: indices do not match the fingerprint in {side.name} "
                "(the file was modified or belongs to another sidecar). Rebuild the schedule."
            )
        config = ScheduleConfig.from_dict(meta["config"])
        if labels is not None:
            given = labels_fingerprint(labels)
            if given != config.labels_fingerprint:
                raise ClusterClipError(
                    f"{target}: labels fingerprint mismatch: the schedule was built from labels "
                    f"{config.labels_fingerprint} ({config.n_documents} documents), the labels "
                    f"given have {given} ({np.asarray(labels).shape[0]} documents). The clusters "
                    "changed since the schedule was built; rebuild it."
                )
        repeats = count_repeats(indices, config.n_documents)
        stats = ScheduleStats.from_dict(meta["stats"], repeats)
        return cls(indices=indices, stats=stats, config=config)
