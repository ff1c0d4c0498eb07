"""Front door of the schedule core: :func:`build_schedule` and :func:`iter_schedule`.

The keyword functions are thin twins of :class:`~clusterclip.schedule.policy.SchedulePolicy`:
each makes the policy value from its keywords (defaults declared once, in
:mod:`clusterclip.schedule.policy`) and applies it, so there is one path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from clusterclip.schedule.config import ScheduleConfig
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.policy import (
    DEFAULT_MAX_REPEATS,
    DEFAULT_ON_EXHAUSTED,
    DEFAULT_ORDER,
    DEFAULT_POLICY,
    SchedulePolicy,
)
from clusterclip.schedule.stream import ScheduleStream, materialise, rechunk

__all__ = [
    "ScheduleConfig",
    "build_schedule",
    "iter_schedule",
    "materialise",
    "open_stream",
    "rechunk",
]


def open_stream(
    labels: Any,
    *,
    policy: str = DEFAULT_POLICY,
    max_repeats: int | None = DEFAULT_MAX_REPEATS,
    num_samples: int | None = None,
    num_tokens: int | None = None,
    lengths: Any = None,
    alpha: float | None = None,
    cluster_weights: Any = None,
    order: str = DEFAULT_ORDER,
    on_exhausted: str = DEFAULT_ON_EXHAUSTED,
    seed: int,
    schedule_version: int | None = None,
    duplicate_of: Any = None,
    levels: Any = None,
) -> ScheduleStream:
    """Validate every argument and return the engine (used by the adapters and the CLI).

    The keyword twin of :meth:`SchedulePolicy.stream`; the stream's ``config``
    is the validated :class:`ScheduleConfig`.

    Examples
    --------
    >>> stream = open_stream(np.array([0, 0, 1]), num_samples=4, seed=0)
    >>> stream.config.max_repeats, stream.end
    (4, 4)
    """
    return SchedulePolicy(
        policy=policy,
        max_repeats=max_repeats,
        num_samples=num_samples,
        num_tokens=num_tokens,
        alpha=alpha,
        cluster_weights=cluster_weights,
        order=order,
        on_exhausted=on_exhausted,
        seed=seed,
        schedule_version=schedule_version,
    ).stream(labels, lengths, duplicate_of=duplicate_of, levels=levels)


def build_schedule(
    labels: Any,
    *,
    policy: str = DEFAULT_POLICY,
    max_repeats: int | None = DEFAULT_MAX_REPEATS,
    num_samples: int | None = None,
    num_tokens: int | None = None,
    lengths: Any = None,
    alpha: float | None = None,
    cluster_weights: Any = None,
    order: str = DEFAULT_ORDER,
    on_exhausted: str = DEFAULT_ON_EXHAUSTED,
    seed: int,
    schedule_version: int | None = None,
    duplicate_of: Any = None,
    levels: Any = None,
) -> Schedule:
    """Build the whole ClusterClip schedule in memory.

    The keyword twin of ``SchedulePolicy(...).build(labels, lengths)``
    (:class:`~clusterclip.schedule.policy.SchedulePolicy`); the defaults are
    declared there.

    Parameters
    ----------
    labels : array_like of int, shape (N,)
        Cluster id of every document; negative ids are excluded.
    policy : {"clusterclip", "uniform", "temperature", "random", "hierarchical"}
        ``clusterclip``: clusters drawn uniformly, documents clipped at
        ``max_repeats``; ``uniform``: the same without clip (``max_repeats`` is
        ignored); ``temperature``: cluster weights ``|C_k|**alpha`` (clip if
        ``max_repeats`` is not None); ``random``: shuffled passes over the corpus;
        ``hierarchical``: uniform over the top level of ``levels``, then over
        the chosen node's children, down to a cluster, clipped as ``clusterclip``.
    max_repeats : int or None
        Most appearances of any document (R); None = no clip.
    num_samples, num_tokens : int
        The budget: exactly one. ``num_tokens`` needs ``lengths`` and ends the
        schedule at the first position where the cumulative tokens reach it.
    lengths : array_like of int, shape (N,), optional
        Tokens per document.
    alpha : float, optional
        Temperature exponent (``policy="temperature"`` only).
    cluster_weights : array_like of float, optional
        Weight per cluster id (``uniform``/``clusterclip`` only); 0 excludes a cluster.
    order : {"online", "planned"}
        ``online``: the paper's rule (DESIGN.md section 2); ``planned``: plan
        each cluster's draws for the whole budget, spread them evenly (docs/sampler.md).
    on_exhausted : {"stop", "random", "error"}
        What happens when every cluster is clipped before the budget is met.
    seed : int
        In [0, 2**63-1]; required. Distinct seeds give distinct schedules.
    schedule_version : {None, 1, 2, 3, 4}
        The draw rule: None (default) for the rule of new schedules
        (``SCHEDULE_VERSION``, 4); 1 (seeds below 2**32), 2 (above) or 3 to
        reproduce a schedule or checkpoint of an earlier release
        (docs/sampler.md, "Schedule versions").
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

    Returns
    -------
    Schedule
        ``.indices`` (int64, shape (T,)), ``.stats``, ``.config``.

    Notes
    -----
    Deterministic: the same labels, arguments, seed and ``SCHEDULE_VERSION``
    give a byte-identical schedule on any machine; :func:`iter_schedule` and
    :class:`clusterclip.ClusterClipSampler` produce the same sequence.

    Examples
    --------
    >>> labels = np.array([0, 0, 0, 0, 1, 2, 2])
    >>> schedule = build_schedule(labels, max_repeats=2, num_samples=10, seed=0)
    >>> schedule.indices.shape, int(schedule.stats.max_repeats_per_document) <= 2
    ((10,), True)
    """
    return SchedulePolicy(
        policy=policy,
        max_repeats=max_repeats,
        num_samples=num_samples,
        num_tokens=num_tokens,
        alpha=alpha,
        cluster_weights=cluster_weights,
        order=order,
        on_exhausted=on_exhausted,
        seed=seed,
        schedule_version=schedule_version,
    ).build(labels, lengths, duplicate_of=duplicate_of, levels=levels)


def iter_schedule(
    labels: Any,
    *,
    policy: str = DEFAULT_POLICY,
    max_repeats: int | None = DEFAULT_MAX_REPEATS,
    num_samples: int | None = None,
    num_tokens: int | None = None,
    lengths: Any = None,
    alpha: float | None = None,
    cluster_weights: Any = None,
    order: str = DEFAULT_ORDER,
    on_exhausted: str = DEFAULT_ON_EXHAUSTED,
    seed: int,
    schedule_version: int | None = None,
    start: int = 0,
    block_size: int = 65536,
    duplicate_of: Any = None,
    levels: Any = None,
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
    return SchedulePolicy(
        policy=policy,
        max_repeats=max_repeats,
        num_samples=num_samples,
        num_tokens=num_tokens,
        alpha=alpha,
        cluster_weights=cluster_weights,
        order=order,
        on_exhausted=on_exhausted,
        seed=seed,
        schedule_version=schedule_version,
    ).iterate(
        labels,
        lengths,
        start=start,
        block_size=block_size,
        duplicate_of=duplicate_of,
        levels=levels,
    )
