"""The materialised :class:`Schedule` and its files (``.npy`` + JSON sidecar)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io.artifacts.schedule import (
    SCHEDULE_FORMAT,
    npy_path,
    read_schedule_files,
    sidecar_path,
    write_schedule_files,
)
from clusterclip.schedule.config import ScheduleConfig, labels_fingerprint
from clusterclip.schedule.stats import ScheduleStats, count_repeats

__all__ = ["FORMAT_NAME", "Schedule", "sidecar_path"]

#: The sidecar's ``format`` (owned by :mod:`clusterclip.io.artifacts.schedule`).
FORMAT_NAME = SCHEDULE_FORMAT


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

    def sidecar_meta(self) -> dict[str, Any]:
        """What the JSON sidecar records about this schedule, besides its format and hash.

        Version, settings (``config``) and their fingerprint, the labels'
        fingerprint and the statistics.

        >>> sorted(schedule.sidecar_meta())  # doctest: +SKIP
        ['config', 'config_fingerprint', 'labels_fingerprint', 'schedule_version', 'stats', 'version']
        """
        from clusterclip import __version__

        return {
            "version": __version__,
            "schedule_version": self.config.schedule_version,
            "config": self.config.to_dict(),
            "config_fingerprint": self.config.fingerprint(),
            "labels_fingerprint": self.config.labels_fingerprint,
            "stats": self.stats.to_dict(),
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``<path>.npy`` and the sidecar ``<stem>.json``, each atomically.

        Returns the ``.npy`` path. The files are laid out by
        :func:`clusterclip.io.artifacts.write_schedule_files`.

        >>> schedule.save("work/schedule.npy")  # doctest: +SKIP
        """
        return write_schedule_files(path, self.indices, self.sidecar_meta())

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, labels: Any = None) -> Schedule:
        """Read a saved schedule; with ``labels``, refuse one built from other labels.

        The files are checked by :func:`clusterclip.io.artifacts.read_schedule_files`
        (sidecar format, 1-D int64 indices matching the sidecar's fingerprint).
        The schedule of a work directory is read with
        :meth:`clusterclip.io.WorkDir.schedule`, which also checks it is fresh.

        Raises
        ------
        ClusterClipError
            Missing/corrupt files, or labels whose fingerprint differs.

        >>> Schedule.load("work/schedule.npy", labels=labels)  # doctest: +SKIP
        """
        indices, meta = read_schedule_files(path)
        config = ScheduleConfig.from_dict(meta["config"])
        if labels is not None:
            given = labels_fingerprint(labels)
            if given != config.labels_fingerprint:
                raise ClusterClipError(
                    f"{npy_path(path)}: labels fingerprint mismatch: the schedule was built from "
                    f"labels {config.labels_fingerprint} ({config.n_documents} documents), the "
                    f"labels given have {given} ({np.asarray(labels).shape[0]} documents). The "
                    "clusters changed since the schedule was built; rebuild it."
                )
        repeats = count_repeats(indices, config.n_documents)
        stats = ScheduleStats.from_dict(meta["stats"], repeats)
        return cls(indices=indices, stats=stats, config=config)
