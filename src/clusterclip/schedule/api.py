"""Front door of the schedule core: :func:`build_schedule` and :func:`iter_schedule`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from clusterclip.errors import invalid
from clusterclip.schedule.config import (
    ScheduleConfig,
    make_config,
    validate_labels,
    validate_lengths,
)
from clusterclip.schedule.engine import Prepared, ScheduleStream
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.stats import compute_stats

__all__ = ["build_schedule", "iter_schedule", "materialise", "open_stream"]


def open_stream(
    labels: Any,
    *,
    policy: str = "clusterclip",
    max_repeats: int | None = 4,
    num_samples: int | None = None,
    num_tokens: int | None = None,
    lengths: Any = None,
    alpha: float | None = None,
    cluster_weights: Any = None,
    order: str = "online",
    on_exhausted: str = "stop",
    seed: int,
) -> ScheduleStream:
    """Validate every argument and return the engine (used by the adapters).

    The stream's ``config`` is the validated :class:`ScheduleConfig`.
    """
    labels = validate_labels(labels)
    lengths_array = None if lengths is None else validate_lengths(lengths, labels.shape[0])
    config = make_config(
        labels,
        lengths_array,
        policy=policy,
        max_repeats=max_repeats,
        num_samples=num_samples,
        num_tokens=num_tokens,
        alpha=alpha,
        cluster_weights=cluster_weights,
        order=order,
        on_exhausted=on_exhausted,
        seed=seed,
    )
    return ScheduleStream(Prepared(labels, lengths_array, config))


def build_schedule(
    labels: Any,
    *,
    policy: str = "clusterclip",
    max_repeats: int | None = 4,
    num_samples: int | None = None,
    num_tokens: int | None = None,
    lengths: Any = None,
    alpha: float | None = None,
    cluster_weights: Any = None,
    order: str = "online",
    on_exhausted: str = "stop",
    seed: int,
) -> Schedule:
    """Build the whole ClusterClip schedule in memory.

    Parameters
    ----------
    labels : array_like of int, shape (N,)
        Cluster id of every document; negative ids are excluded.
    policy : {"clusterclip", "uniform", "temperature", "random"}
        ``clusterclip``: clusters drawn uniformly, documents clipped at
        ``max_repeats``; ``uniform``: the same without clip (``max_repeats`` is
        ignored); ``temperature``: cluster weights ``|C_k|**alpha`` (clip if
        ``max_repeats`` is not None); ``random``: shuffled passes over the corpus.
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
        Non-negative; required.

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
    stream = open_stream(
        labels,
        policy=policy,
        max_repeats=max_repeats,
        num_samples=num_samples,
        num_tokens=num_tokens,
        lengths=lengths,
        alpha=alpha,
        cluster_weights=cluster_weights,
        order=order,
        on_exhausted=on_exhausted,
        seed=seed,
    )
    parts = list(stream.blocks(0))
    indices = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return materialise(stream, indices)


def materialise(stream: ScheduleStream, indices: np.ndarray) -> Schedule:
    prep = stream.prep
    clip_step = np.full(prep.n_labels, -1, dtype=np.int64)
    if prep.config.policy != "random":
        clip_step[prep.cluster_ids] = stream.clip_step
    planned = None
    if stream.planned is not None and prep.config.policy != "random":
        planned = np.zeros(prep.n_labels, dtype=np.int64)
        planned[prep.cluster_ids] = stream.planned.plan
    stats = compute_stats(
        indices,
        prep.labels,
        prep.lengths,
        budget_met=stream.budget_met,
        exhausted_at=stream.exhausted_at,
        clip_step=clip_step,
        planned_draws=planned,
    )
    return Schedule(indices=indices, stats=stats, config=prep.config)


def iter_schedule(
    labels: Any,
    *,
    policy: str = "clusterclip",
    max_repeats: int | None = 4,
    num_samples: int | None = None,
    num_tokens: int | None = None,
    lengths: Any = None,
    alpha: float | None = None,
    cluster_weights: Any = None,
    order: str = "online",
    on_exhausted: str = "stop",
    seed: int,
    start: int = 0,
    block_size: int = 65536,
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
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < 0:
        raise invalid("start", "an int in [0, inf)", start)
    if (
        isinstance(block_size, bool)
        or not isinstance(block_size, (int, np.integer))
        or block_size < 1
    ):
        raise invalid("block_size", "an int in [1, inf)", block_size)
    stream = open_stream(
        labels,
        policy=policy,
        max_repeats=max_repeats,
        num_samples=num_samples,
        num_tokens=num_tokens,
        lengths=lengths,
        alpha=alpha,
        cluster_weights=cluster_weights,
        order=order,
        on_exhausted=on_exhausted,
        seed=seed,
    )
    return rechunk(stream.blocks(int(start)), int(block_size))


def rechunk(parts: Iterator[np.ndarray], block_size: int) -> Iterator[np.ndarray]:
    """Regroup consecutive arrays into arrays of ``block_size`` (the last shorter)."""
    pending: list[np.ndarray] = []
    held = 0
    for part in parts:
        while part.size:
            take = min(block_size - held, part.size)
            pending.append(part[:take])
            held += take
            part = part[take:]
            if held == block_size:
                yield pending[0] if len(pending) == 1 else np.concatenate(pending)
                pending, held = [], 0
    if held:
        yield pending[0] if len(pending) == 1 else np.concatenate(pending)


__all__ += ["ScheduleConfig", "rechunk"]
