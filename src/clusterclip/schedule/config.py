"""Validated, frozen policy configuration of a schedule, and its fingerprint.

Every argument of :func:`clusterclip.build_schedule` is checked here, once,
with the project's message template (parameter, rule, value, fix). The result
is a :class:`ScheduleConfig`: hashable, JSON-serialisable, and fingerprinted
so that a saved schedule or a sampler checkpoint can tell exactly which
setting changed.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from clusterclip.errors import invalid
from clusterclip.io import fingerprint_array

__all__ = [
    "EXHAUSTION_RULES",
    "ORDERS",
    "POLICIES",
    "SCHEDULE_VERSION",
    "ScheduleConfig",
    "labels_fingerprint",
    "make_config",
    "validate_labels",
    "validate_lengths",
]

#: Version of the draw rule. Any change that alters the sequence produced for
#: a given (labels, config, seed) must bump it: saved schedules and sampler
#: checkpoints record it and refuse to mix versions.
SCHEDULE_VERSION = 1

POLICIES = ("random", "uniform", "clusterclip", "temperature")
ORDERS = ("online", "planned")
EXHAUSTION_RULES = ("stop", "random", "error")


@dataclass(frozen=True)
class ScheduleConfig:
    """Every setting that determines a schedule, validated.

    ``max_repeats`` is the *effective* clip: ``None`` for ``policy="uniform"``
    (the paper's no-clip baseline) and whenever the user passed ``None``.
    ``labels_fingerprint`` / ``lengths_fingerprint`` tie the config to the
    exact inputs (see :func:`labels_fingerprint`).
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

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples become lists)."""
        out = asdict(self)
        if out["cluster_weights"] is not None:
            out["cluster_weights"] = list(out["cluster_weights"])
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
                    f"{key} (saved {_short(theirs.get(key))}, now {_short(mine.get(key))})"
                )
        return lines


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


def validate_labels(labels: Any) -> np.ndarray:
    """Return ``labels`` as a 1-D int64 array or raise the standard error."""
    array = np.asarray(labels)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise invalid(
            "labels",
            "a 1-D integer array (one cluster id per document, negative = excluded)",
            f"array of shape {array.shape} and dtype {array.dtype}",
            "Pass e.g. np.asarray(labels, dtype=np.int64).",
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


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise invalid(name, f"an int in [{low}, inf)", value, f"Pass {name}={low} or more.")
    return int(value)


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise invalid(name, f"one of {listed}", value)
    return str(value)


def make_config(
    labels: np.ndarray,
    lengths: np.ndarray | None,
    *,
    policy: str,
    max_repeats: int | None,
    num_samples: int | None,
    num_tokens: int | None,
    alpha: float | None,
    cluster_weights: Any,
    order: str,
    on_exhausted: str,
    seed: int,
) -> ScheduleConfig:
    """Validate every policy argument against validated ``labels``/``lengths``.

    Parameters
    ----------
    labels : ndarray of int64, shape (N,)
        Output of :func:`validate_labels`.
    lengths : ndarray of int64, shape (N,), or None
        Output of :func:`validate_lengths`.

    Returns
    -------
    ScheduleConfig

    Examples
    --------
    >>> labels = np.array([0, 0, 1])
    >>> make_config(labels, None, policy="clusterclip", max_repeats=2, num_samples=4,
    ...             num_tokens=None, alpha=None, cluster_weights=None, order="online",
    ...             on_exhausted="stop", seed=0).max_repeats
    2
    """
    policy = _check_choice("policy", policy, POLICIES)
    order = _check_choice("order", order, ORDERS)
    on_exhausted = _check_choice("on_exhausted", on_exhausted, EXHAUSTION_RULES)
    seed = _check_int("seed", seed, 0)

    if max_repeats is not None:
        max_repeats = _check_int("max_repeats", max_repeats, 1)
    if policy == "uniform":
        max_repeats = None  # the paper's uniform baseline never clips

    if (num_samples is None) == (num_tokens is None):
        raise invalid(
            "num_samples/num_tokens",
            "exactly one budget",
            {"num_samples": num_samples, "num_tokens": num_tokens},
            "Pass num_samples=T (draws) or num_tokens=B with lengths=..., not both.",
        )
    if num_samples is not None:
        num_samples = _check_int("num_samples", num_samples, 1)
    if num_tokens is not None:
        num_tokens = _check_int("num_tokens", num_tokens, 1)
        if lengths is None:
            raise invalid(
                "lengths",
                "given when num_tokens is used",
                None,
                "Pass lengths=<tokens per document> with num_tokens.",
            )

    if policy == "temperature":
        if (
            alpha is None
            or isinstance(alpha, bool)
            or not isinstance(alpha, (int, float, np.number))
        ):
            raise invalid(
                "alpha",
                "a finite float for policy='temperature'",
                alpha,
                "Pass e.g. alpha=0.5 (0 = uniform, 1 = natural sizes).",
            )
        alpha = float(alpha)
        if not math.isfinite(alpha):
            raise invalid("alpha", "a finite float", alpha, "Pass e.g. alpha=0.5.")
    elif alpha is not None:
        raise invalid(
            "alpha",
            "None unless policy='temperature'",
            alpha,
            "Pass policy='temperature' to weight clusters by size**alpha.",
        )

    weights: tuple[float, ...] | None = None
    if cluster_weights is not None:
        if policy not in ("uniform", "clusterclip"):
            raise invalid(
                "cluster_weights",
                "None unless policy is 'uniform' or 'clusterclip'",
                f"weights with policy={policy!r}",
                "Custom weights replace the equal cluster weights of those policies.",
            )
        array = np.asarray(cluster_weights, dtype=np.float64)
        n_labels = int(labels.max()) + 1
        if array.ndim != 1 or array.shape[0] < n_labels:
            raise invalid(
                "cluster_weights",
                f"a 1-D array with one weight per cluster id (length >= {n_labels})",
                f"shape {array.shape}",
            )
        if not np.all(np.isfinite(array)) or array.min() < 0:
            raise invalid(
                "cluster_weights", "finite and non-negative", "negative or non-finite values"
            )
        present = np.unique(labels[labels >= 0])
        if not np.any(array[present] > 0):
            raise invalid(
                "cluster_weights",
                "positive for at least one non-empty cluster",
                "all zero",
                "Give some cluster a weight > 0.",
            )
        weights = tuple(float(w) for w in array[:n_labels])

    return ScheduleConfig(
        policy=policy,
        max_repeats=max_repeats,
        num_samples=num_samples,
        num_tokens=num_tokens,
        alpha=alpha,
        cluster_weights=weights,
        order=order,
        on_exhausted=on_exhausted,
        seed=seed,
        n_documents=int(labels.shape[0]),
        labels_fingerprint=labels_fingerprint(labels),
        lengths_fingerprint=None if lengths is None else fingerprint_array(lengths),
    )
