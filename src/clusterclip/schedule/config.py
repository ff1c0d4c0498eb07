"""The recorded configuration of a schedule, its fingerprint, and the input checks.

A :class:`ScheduleConfig` is what a saved schedule and a sampler checkpoint
record: the settings of a :class:`~clusterclip.schedule.policy.SchedulePolicy`
resolved against the labels (effective clip, weights cut to the cluster ids)
plus the inputs' fingerprints. It is hashable, JSON-serialisable and
fingerprinted, so a saved schedule or a checkpoint can tell exactly which
setting changed. The settings themselves are validated by ``SchedulePolicy``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from clusterclip.errors import hint, invalid, spell
from clusterclip.io import fingerprint_array
from clusterclip.schedule.policies import cluster_cap

__all__ = [
    "SCHEDULE_VERSION",
    "SUPPORTED_VERSIONS",
    "TREE_VERSIONS",
    "ScheduleConfig",
    "check_schedule_version",
    "cluster_cap_of",
    "labels_fingerprint",
    "labels_out_of_range",
    "schedule_version_for",
    "validate_labels",
    "validate_lengths",
]

#: Version of the draw rule of new schedules. Any change that alters the
#: sequence produced for a given (labels, config, seed) must bump it: saved
#: schedules and sampler checkpoints record it and refuse to mix versions, and
#: every released version stays reproducible (``schedule_version=...``).
#:
#: * 1 and 2: one uniform per position, pass permutations from cached
#:   generators (the default before version 4; recorded as 1 for seeds below
#:   2**32 and 2 above, where version 1's seed words aliased smaller seeds');
#: * 3: rejection windows and pass permutations computed per draw (was
#:   opt-in for very many small clusters; flat policies only);
#: * 4 (the default): version 3's windows, processed in chunks, down a cluster
#:   tree for ``policy="hierarchical"``; sorted-key passes cached per group; the
#:   planned order sorted in slabs of time (docs/sampler.md, "Schedule versions").
SCHEDULE_VERSION = 4

#: Every draw-rule version this release produces.
SUPPORTED_VERSIONS = (1, 2, 3, 4)

#: The versions whose rule can draw down a cluster tree (``policy="hierarchical"``);
#: version 3's windows draw over a flat cluster list. The policy checks this without
#: loading the engine; ``rules.DRAW_RULES[v].draws_trees`` agrees (tested).
TREE_VERSIONS = (1, 2, 4)

_VERSION_RULE = "one of 1 (seeds < 2**32), 2 (seeds >= 2**32), 3 or 4 (the default: None)"


def schedule_version_for(seed: int) -> int:
    """The version the rule of versions 1 and 2 (the default before 4) records for ``seed``.

    A seed below 2**32 drew exactly the same under versions 1 and 2 and records
    1; a larger seed records 2 (its version-1 stream aliased a smaller seed's).

    >>> schedule_version_for(0), schedule_version_for(2**32)
    (1, 2)
    """
    return 1 if seed < 2**32 else 2


def check_schedule_version(version: object, seed: int) -> int:
    """``version`` as an int (None: the default rule, ``SCHEDULE_VERSION``), or the standard error.

    Versions 1 and 2 are one rule (the default before version 4),
    recorded as 1 for seeds below 2**32 and as 2 above: only that pair is
    accepted, so that a schedule asked for with an old version records exactly
    what earlier releases recorded.

    >>> check_schedule_version(None, seed=0), check_schedule_version(1, seed=0)
    (4, 1)
    >>> check_schedule_version(2, seed=0)
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `schedule_version` must be one of 1 (seeds < 2**32), 2 (seeds >= 2**32), 3 or 4 (the default: None); got 2. Seed 0 was drawn by the old rule as version 1: pass schedule_version=1.
    """
    if version is None:  # the default rule
        return SCHEDULE_VERSION
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)):
        raise invalid("schedule_version", _VERSION_RULE, version)
    version = int(version)
    if version not in SUPPORTED_VERSIONS:
        raise invalid(
            "schedule_version",
            _VERSION_RULE,
            version,
            f"Leave it unset for the default rule, or pass {hint('schedule_version', 1)} to "
            "resume a schedule of an earlier release.",
        )
    if version < 3 and version != schedule_version_for(seed):
        old = schedule_version_for(seed)
        raise invalid(
            "schedule_version",
            _VERSION_RULE,
            version,
            f"Seed {seed} was drawn by the old rule as version {old}: pass "
            f"{hint('schedule_version', old)}.",
        )
    return version


@dataclass(frozen=True)
class ScheduleConfig:
    """Every setting that determines a schedule, validated.

    ``max_repeats`` is the *effective* clip: ``None`` for ``policy="uniform"``
    (the paper's no-clip baseline) and whenever the user passed ``None``.
    ``labels_fingerprint`` / ``lengths_fingerprint`` tie the config to the
    exact inputs (see :func:`labels_fingerprint`). ``duplicates`` is
    ``"group"`` when near-duplicate groups are drawn as units
    (:mod:`clusterclip.schedule.units`), with the fingerprint of their
    ``duplicate_of`` array; ``"off"`` (the default) is left out of
    :meth:`to_dict`, so such a config, its fingerprint and saved schedules are
    exactly those of the versions before grouping existed.
    ``labels_out_of_range`` counts the unsigned labels an int64 cluster id
    cannot hold (>= 2**63), excluded like negative ones; 0 (the usual case) is
    left out of :meth:`to_dict`.
    ``levels_fingerprint`` is the fingerprint of the cluster tree of
    ``policy="hierarchical"`` (:meth:`~clusterclip.schedule.hierarchy.Hierarchy.fingerprint`),
    None (and left out of :meth:`to_dict`) for a flat run, so that a
    checkpoint or saved schedule refuses a changed tree.
    """

    policy: str
    max_repeats: int | None
    num_samples: int | None
    num_tokens: int | None
    alpha: float | None
    cluster_weights: tuple[float, ...] | None
    order: str
    on_exhausted: str
    seed: int
    n_documents: int
    labels_fingerprint: str
    lengths_fingerprint: str | None
    schedule_version: int = SCHEDULE_VERSION
    duplicates: str = "off"
    duplicates_fingerprint: str | None = None
    levels_fingerprint: str | None = None
    labels_out_of_range: int = 0

    @property
    def cluster_cap(self) -> int | None:
        """The cap at which clusters are clipped one by one (None: none is); see :func:`cluster_cap_of`."""
        return cluster_cap(self.policy, self.max_repeats)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples become lists; the duplicates and levels fields only when used)."""
        out = asdict(self)
        if out["cluster_weights"] is not None:
            out["cluster_weights"] = list(out["cluster_weights"])
        if self.duplicates == "off":
            del out["duplicates"], out["duplicates_fingerprint"]
        if self.levels_fingerprint is None:
            del out["levels_fingerprint"]
        if not self.labels_out_of_range:
            del out["labels_out_of_range"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleConfig:
        """Inverse of :meth:`to_dict`."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("cluster_weights") is not None:
            values["cluster_weights"] = tuple(float(w) for w in values["cluster_weights"])
        return cls(**values)

    def fingerprint(self) -> str:
        """128-bit hex hash of the canonical JSON of this config."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()

    def differences(self, other: dict[str, Any] | ScheduleConfig) -> list[str]:
        """Human-readable ``name (saved X, now Y)`` lines where ``other`` differs."""
        theirs = other.to_dict() if isinstance(other, ScheduleConfig) else dict(other)
        mine = self.to_dict()
        lines = []
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                lines.append(
                    f"{spell(key)} (saved {_short(theirs.get(key))}, now {_short(mine.get(key))})"
                )
        return lines


def cluster_cap_of(recorded: Mapping[str, Any]) -> int | None:
    """The cap that clips clusters one by one, from a recorded config (``schedule.json``'s).

    What the report and the CLI ask of a saved schedule's settings, without the
    engine: the policy registry says whether the policy clips clusters (not
    ``uniform``, nor ``random``, whose cap ends the whole corpus's passes). A
    config missing the policy or the cap has none.

    >>> cluster_cap_of({"policy": "clusterclip", "max_repeats": 4})
    4
    >>> cluster_cap_of({"policy": "random", "max_repeats": 4}), cluster_cap_of({})
    (None, None)
    """
    return cluster_cap(str(recorded.get("policy")), recorded.get("max_repeats"))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def labels_fingerprint(labels: np.ndarray) -> str:
    """Fingerprint of cluster labels, independent of their integer dtype.

    ``fingerprint_array(np.asarray(labels, dtype=np.int64))``, so int32 labels
    read from ``clusters.parquet`` and the same labels as int64 agree.

    >>> labels_fingerprint(np.array([0, 1, 1])) == labels_fingerprint(np.array([0, 1, 1], np.int32))
    True
    """
    return fingerprint_array(np.asarray(labels, dtype=np.int64))


def labels_out_of_range(labels: Any) -> int:
    """Unsigned labels too large for an int64 cluster id (>= 2**63); they are excluded.

    >>> labels_out_of_range(np.array([0, 2**63, 2**64 - 1], dtype=np.uint64))
    2
    >>> labels_out_of_range([0, -1, 5])
    0
    """
    array = np.asarray(labels)
    if array.dtype.kind != "u" or array.dtype.itemsize < 8:
        return 0
    return int(np.count_nonzero(array > np.iinfo(np.int64).max))


def out_of_range_message(count: int, n_labels: int) -> str:
    """The warning for labels beyond int64: how many, what happens to them, the fix.

    >>> out_of_range_message(2, 10)[:58]
    '2 of 10 labels are >= 2**63 (unsigned) and cannot be clust'
    """
    return (
        f"{count:,} of {n_labels:,} labels are >= 2**63 (unsigned) and cannot be cluster ids: "
        "those documents are excluded, like negative labels. Renumber the clusters to keep "
        "them, e.g. labels = numpy.unique(labels, return_inverse=True)[1]."
    )


def validate_labels(labels: Any) -> np.ndarray:
    """Return ``labels`` as a 1-D int64 array or raise the standard error."""
    array = np.asarray(labels)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        numeric = array.dtype.kind in "bfc"
        raise invalid(
            "labels",
            "a 1-D integer array (one cluster id per document, negative = excluded)",
            f"array of shape {array.shape} and dtype {array.dtype}",
            "Pass e.g. np.asarray(labels, dtype=np.int64)."
            if numeric or array.ndim != 1
            else "Number the clusters first, e.g. np.unique(labels, return_inverse=True)[1] "
            "gives each distinct name an int id.",
        )
    if array.size == 0:
        raise invalid("labels", "non-empty", "an empty array", "Pass one label per document.")
    array = array.astype(np.int64, copy=False)
    if array.max() < 0:
        raise invalid(
            "labels",
            "an array with at least one non-negative label (negative = excluded)",
            f"all {array.size} labels negative",
            "Check the cluster stage's output.",
        )
    return array


def validate_lengths(lengths: Any, n_documents: int) -> np.ndarray:
    """Return ``lengths`` as a 1-D int64 array of non-negative token counts."""
    array = np.asarray(lengths)
    if array.ndim != 1 or array.shape[0] != n_documents:
        raise invalid(
            "lengths",
            f"a 1-D array with one token count per document (shape ({n_documents},))",
            f"array of shape {array.shape}",
            "Pass lengths aligned with labels.",
        )
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or not np.all(array == np.floor(array)):
            raise invalid(
                "lengths", "whole, finite token counts", "non-integer values", "Round them."
            )
    elif array.dtype.kind not in "iu":
        raise invalid("lengths", "an integer array", f"dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and array.min() < 0:
        raise invalid(
            "lengths",
            "non-negative token counts",
            f"minimum {int(array.min())} at document {int(array.argmin())}",
            "Token counts cannot be negative.",
        )
    return array
