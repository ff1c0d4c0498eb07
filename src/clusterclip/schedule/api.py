"""Front door of the schedule core: a :class:`~clusterclip.schedule.policy.SchedulePolicy`
applied to labels.

:func:`open_stream`, :func:`build_schedule`, :func:`iter_schedule` and
:func:`schedule_config` take the labels and a policy: a ``SchedulePolicy``
value, or (the keyword shortcut) a policy name with the policy's settings as
keywords, ``build_schedule(labels, max_repeats=2, num_samples=10, seed=0)``.
The shortcut is :func:`~clusterclip.schedule.policy.as_policy`; its keywords
are the policy's fields, declared once, so there is one path either way.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from clusterclip.arrays import distinct
from clusterclip.errors import hint, invalid, spell
from clusterclip.io import fingerprint_array
from clusterclip.schedule.config import (
    ScheduleConfig,
    labels_fingerprint,
    labels_out_of_range,
    out_of_range_message,
    validate_labels,
    validate_lengths,
)
from clusterclip.schedule.hierarchy import validate_levels
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.memory_check import check_fits, expected_draws
from clusterclip.schedule.policy import (
    DEFAULT_POLICY,
    SchedulePolicy,
    as_policy,
    with_policy_keywords,
)
from clusterclip.schedule.prepare import Prepared
from clusterclip.schedule.stream import ScheduleStream, materialise, outside_package, rechunk
from clusterclip.schedule.units import Units, validate_duplicate_of
from clusterclip.threads import helper

__all__ = [
    "ScheduleConfig",
    "build_schedule",
    "iter_schedule",
    "materialise",
    "open_stream",
    "rechunk",
    "schedule_config",
]


def _check_index(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise invalid(name, f"an int in [{low}, inf)", value, f"Pass {hint(name, low)} or more.")
    return int(value)


def _prepared(
    policy: SchedulePolicy, labels: Any, lengths: Any, duplicate_of: Any, levels: Any
) -> Prepared:
    """The policy applied to validated inputs: labels, lengths, units, tree and the config."""
    out_of_range = labels_out_of_range(labels)
    labels = validate_labels(labels)
    # The labels are hashed on the helper thread while their groups are made below
    # (hashlib and numpy release the GIL); nothing before the end reads the hash.
    worker = helper()
    hashing = None if worker is None else worker.submit(labels_fingerprint, labels)
    if levels is not None and not policy.kind.uses_levels:
        raise invalid(
            "levels",
            f"None unless {hint('policy', 'hierarchical')}",
            f"levels with {hint('policy', policy.policy)}",
            f"Pass {hint('policy', 'hierarchical')} to draw down the cluster tree.",
        )
    hierarchy = validate_levels(levels, labels)
    units, optional = None, {}  # config fields recorded only when used
    if duplicate_of is not None:
        representatives = validate_duplicate_of(duplicate_of, labels)
        units = Units(representatives, labels)
        optional = {
            "duplicates": "group",
            "duplicates_fingerprint": fingerprint_array(representatives),
        }
    if hierarchy is not None:  # the tree, not the rows: excluded rows do not count
        optional["levels_fingerprint"] = hierarchy.fingerprint()
    if out_of_range:  # excluded like negative labels, but said and recorded
        warnings.warn(
            f"clusterclip: {out_of_range_message(out_of_range, labels.size)}",
            UserWarning,
            stacklevel=outside_package(),
        )
        optional["labels_out_of_range"] = out_of_range
    lengths_array = None if lengths is None else validate_lengths(lengths, labels.shape[0])
    if policy.num_tokens is not None and lengths_array is None:
        raise invalid(
            "lengths",
            f"given when {spell('num_tokens')} is used",
            None,
            f"Pass {spell('lengths')} (tokens per document) with {spell('num_tokens')}.",
        )
    config = ScheduleConfig(
        policy=policy.policy,
        max_repeats=policy.kind.effective_max_repeats(policy.max_repeats),
        num_samples=policy.num_samples,
        num_tokens=policy.num_tokens,
        alpha=policy.alpha,
        cluster_weights=_weights_for(policy, labels),
        order=policy.order,
        on_exhausted=policy.on_exhausted,
        seed=policy.seed,
        n_documents=int(labels.shape[0]),
        labels_fingerprint="" if hashing is not None else labels_fingerprint(labels),
        lengths_fingerprint=None if lengths_array is None else fingerprint_array(lengths_array),
        schedule_version=policy.schedule_version,  # resolved by the value
        **optional,
    )
    prepared = Prepared(labels, lengths_array, config, policy.kind, units, hierarchy)
    if hashing is not None:
        prepared.config = replace(config, labels_fingerprint=hashing.result())
    return prepared


def _weights_for(policy: SchedulePolicy, labels: np.ndarray) -> tuple[float, ...] | None:
    """``cluster_weights`` checked against the labels, cut to one per cluster id."""
    if policy.cluster_weights is None:
        return None
    array = np.asarray(policy.cluster_weights, dtype=np.float64)
    n_labels = int(labels.max()) + 1
    if array.shape[0] < n_labels:
        raise invalid(
            "cluster_weights",
            f"a 1-D array with one weight per cluster id (length >= {n_labels})",
            f"shape {array.shape}",
        )
    present = distinct(labels[labels >= 0])
    if not np.any(array[present] > 0):
        raise invalid(
            "cluster_weights",
            "positive for at least one non-empty cluster",
            "all zero",
            "Give some cluster a weight > 0.",
        )
    return policy.cluster_weights[:n_labels]


@with_policy_keywords
def open_stream(
    labels: Any,
    policy: SchedulePolicy | str = DEFAULT_POLICY,
    *,
    lengths: Any = None,
    duplicate_of: Any = None,
    levels: Any = None,
    **settings: Any,
) -> ScheduleStream:
    """The streaming engine of ``policy`` over ``labels`` (what the adapters and the stage read).

    Parameters as for :func:`build_schedule`. ``open_stream(...).blocks(start)``
    yields the global schedule from position ``start``; ``.config`` is the
    validated, fingerprinted :class:`ScheduleConfig`. Memory is O(N + K),
    independent of the budget.

    Examples
    --------
    >>> stream = open_stream(np.array([0, 0, 1]), num_samples=4, seed=0)
    >>> stream.config.max_repeats, stream.end
    (4, 4)
    """
    value = as_policy(policy, settings)
    return ScheduleStream(_prepared(value, labels, lengths, duplicate_of, levels))


@with_policy_keywords
def schedule_config(
    labels: Any,
    policy: SchedulePolicy | str = DEFAULT_POLICY,
    *,
    lengths: Any = None,
    duplicate_of: Any = None,
    levels: Any = None,
    **settings: Any,
) -> ScheduleConfig:
    """The recorded :class:`ScheduleConfig` of ``policy`` over these inputs, without drawing.

    >>> schedule_config(np.array([0, 1]), "uniform", num_samples=4, seed=0).max_repeats is None
    True
    """
    value = as_policy(policy, settings)
    return _prepared(value, labels, lengths, duplicate_of, levels).config


@with_policy_keywords
def build_schedule(
    labels: Any,
    policy: SchedulePolicy | str = DEFAULT_POLICY,
    *,
    lengths: Any = None,
    duplicate_of: Any = None,
    levels: Any = None,
    **settings: Any,
) -> Schedule:
    """Build the whole ClusterClip schedule in memory.

    Parameters
    ----------
    labels : array_like of int, shape (N,)
        Cluster id of every document; negative ids are excluded.
    policy : SchedulePolicy or str
        The settings, as one :class:`~clusterclip.schedule.policy.SchedulePolicy`
        value; or the name of a registered policy (``"clusterclip"``, the
        default; ``"uniform"``, ``"temperature"``, ``"random"``,
        ``"hierarchical"``) with the other settings as keywords.
    lengths : array_like of int, shape (N,), optional
        Tokens per document (required with a ``num_tokens`` budget).
    duplicate_of : array_like of int, shape (N,), optional
        Near-duplicate groups: the representative (lowest index) of every
        document's group, its own index when it has no copy
        (``clusterclip.io.WorkDir(W).duplicate_of()`` after the dedup stage).
        Each group is then drawn as one unit in its representative's cluster,
        its members taking turns (occurrence ``p`` emits member ``p % g``), so
        a group's members together appear at most ``max_repeats`` times.
        None (default): every document is its own unit.
    levels : array_like of int, shape (N, L - 1), optional
        ``policy="hierarchical"`` only: the ancestors of every document's
        cluster, coarsest first (e.g. ``WorkDir(W).levels()`` after a
        hierarchical cluster stage, or a source -> topic taxonomy). Every
        cluster needs one ancestor path; rows of excluded documents are
        ignored. None: the flat ``clusterclip`` rule.
    **settings
        With a policy name only: the fields of ``SchedulePolicy``
        (``max_repeats``, ``num_samples`` or ``num_tokens``, ``alpha``,
        ``cluster_weights``, ``order``, ``on_exhausted``, ``seed`` (required),
        ``schedule_version``), with the defaults and meaning documented there.

    Returns
    -------
    Schedule
        ``.indices`` (int64, shape (T,)), ``.stats``, ``.config``.

    Notes
    -----
    Deterministic: the same labels, settings, seed and ``SCHEDULE_VERSION``
    give a byte-identical schedule on any machine; :func:`iter_schedule` and
    :class:`clusterclip.ClusterClipSampler` produce the same sequence.

    Examples
    --------
    >>> labels = np.array([0, 0, 0, 0, 1, 2, 2])
    >>> schedule = build_schedule(labels, max_repeats=2, num_samples=10, seed=0)
    >>> schedule.indices.shape, int(schedule.stats.max_repeats_per_document) <= 2
    ((10,), True)
    >>> policy = SchedulePolicy(max_repeats=2, num_samples=10, seed=0)
    >>> build_schedule(labels, policy).indices.tolist() == schedule.indices.tolist()
    True
    """
    value = as_policy(policy, settings)
    stream = open_stream(labels, value, lengths=lengths, duplicate_of=duplicate_of, levels=levels)
    draws = expected_draws(
        stream.end, num_tokens=value.num_tokens, labels=stream.prep.labels,
        lengths=stream.prep.lengths,
    )  # fmt: skip
    check_fits(draws, estimated=stream.end is None)  # refuse now, not after filling memory
    return stream.collect()


@with_policy_keywords
def iter_schedule(
    labels: Any,
    policy: SchedulePolicy | str = DEFAULT_POLICY,
    *,
    lengths: Any = None,
    start: int = 0,
    block_size: int = 65536,
    duplicate_of: Any = None,
    levels: Any = None,
    **settings: Any,
) -> Iterator[np.ndarray]:
    """Stream the global schedule in int64 blocks, from global position ``start``.

    Same arguments and same sequence as :func:`build_schedule`; the
    concatenated blocks equal ``build_schedule(...).indices[start:]``. Extra
    memory is O(N + K + block_size), independent of the budget. Starting at
    ``start`` replays only the cluster choices of the earlier positions (no
    documents), so resuming late in a long schedule is cheap.

    Parameters
    ----------
    start : int
        First global position to produce (>= 0).
    block_size : int
        Length of every yielded block but the last (>= 1).

    Yields
    ------
    ndarray of int64

    Examples
    --------
    >>> labels = np.array([0, 0, 1, 1, 1, 2])
    >>> blocks = iter_schedule(labels, num_samples=9, seed=1, start=3, block_size=4)
    >>> [len(b) for b in blocks]
    [4, 2]
    """
    value = as_policy(policy, settings)
    start = _check_index("start", start, 0)
    block_size = _check_index("block_size", block_size, 1)
    stream = open_stream(labels, value, lengths=lengths, duplicate_of=duplicate_of, levels=levels)
    return rechunk(stream.blocks(start), block_size)
