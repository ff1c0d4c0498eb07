"""Advice printed by the summaries: the repetition cap, and an older draw rule for many clusters.

The repetition cap, for the budget at hand.

A cap ``R`` below twice the budget's passes binds early: under uniform cluster
sampling a cluster of ``s`` documents (mean size ``m``) runs out after a share
``(s / m) * (R / passes)`` of the budget, so at ``R`` = the passes every cluster
smaller than the mean runs out before the end and the clip, not the balance,
decides the rest of the run. The declared clip grid of ``docs/results.md``
(15 paired seeds per row, 4 and 8 passes) found ``R`` = twice the passes lower
in loss than no cap (natural mix -0.17 nats, q = 0.001) and than ``R`` = the
passes or four times the passes on every primary metric where it decided. The
summaries of ``clusterclip schedule`` and ``clusterclip run`` print this advice;
nothing is changed for the user.

>>> clip_advice("clusterclip", 4, passes=4.0)
'the budget is 4.0 passes over the usable documents and max_repeats=4: drawn uniformly, clusters under 1.0x the mean size run out before the budget ends (R = 2x passes trained best in the clip grid of docs/results.md); consider --max-repeats 8'
>>> clip_advice("clusterclip", 4, passes=1.0) is None
True

The passes are those of the budget the user asked for (:func:`budget_passes`),
not of the draws made: a schedule cut short by the clip (``on_exhausted="stop"``)
made at most ``R`` passes whatever the budget.

The draw rule: the rule of new schedules (version 4) builds in a few times the
time of a numpy permutation at any number of clusters (docs/performance.md),
while the older rules a schedule can still ask for (``--schedule-version 1``, ``2`` or ``3``, to
reproduce an earlier run) pay per cluster with very many of them
(docs/sampler.md, "Schedule versions"); :func:`rule_advice` says so. Nothing
is changed for the user: another version is another schedule of the same law.
"""

from __future__ import annotations

import math

from clusterclip.schedule.config import SCHEDULE_VERSION

__all__ = ["MANY_CLUSTERS", "budget_passes", "clip_advice", "rule_advice"]

#: The grid measured one and four passes; the advice is for budgets of several passes.
_MIN_PASSES = 3.0

#: From this many clusters on, :func:`rule_advice` speaks up for an older rule.
#: Measured (``bench_schedule.py --table --schedule-version 1``, docs/performance.md):
#: versions 1 and 2 take 2x a permutation at 10^4 clusters, 4 to 19x at 10^5;
#: version 3's planned order is far slower still from 10^5 on.
MANY_CLUSTERS = 100_000


def budget_passes(
    n_usable: int,
    *,
    num_samples: int | None,
    num_tokens: int | None = None,
    n_draws: int = 0,
    n_tokens: int | None = None,
) -> float:
    """Passes over the usable documents that the budget asks for (not the draws made).

    Parameters
    ----------
    n_usable : int
        Usable documents (labels >= 0).
    num_samples, num_tokens : int or None
        The budget, as built (``epochs`` already turned into ``num_samples``).
    n_draws, n_tokens : int
        Draws made and their tokens: with a token budget the tokens per draw of
        the schedule turn the budget into draws.

    Examples
    --------
    >>> budget_passes(100, num_samples=1_000, n_draws=400)  # cut short at 4 passes
    10.0
    >>> budget_passes(100, num_samples=None, num_tokens=6_000, n_draws=300, n_tokens=3_000)
    6.0
    """
    if n_usable <= 0:
        return math.nan
    if num_samples is not None:
        return num_samples / n_usable
    if num_tokens is not None and n_tokens:
        return num_tokens / (n_tokens / n_draws) / n_usable
    return n_draws / n_usable


def clip_advice(policy: str, max_repeats: int | None, *, passes: float) -> str | None:
    """One line of advice when ``max_repeats`` is below twice the passes of the budget.

    Parameters
    ----------
    policy : str
        The schedule's policy; only the clipped policies (``clusterclip``, or any
        with a finite ``max_repeats`` except ``random``) get advice.
    max_repeats : int or None
        The cap ``R`` (``None``: no cap, no advice).
    passes : float
        The budget in passes over the usable documents (:func:`budget_passes`).

    Returns
    -------
    str or None
        The advice, or ``None`` when the cap is at least twice the passes, the
        budget is under 3 passes, or the policy is not clipped.
    """
    if policy == "random" or max_repeats is None or not math.isfinite(passes):
        return None
    if passes < _MIN_PASSES or max_repeats >= 2 * passes:
        return None
    suggested = math.ceil(2 * passes)
    runs_out = passes / max_repeats  # a cluster of s documents lasts (s / mean) * (R / passes)
    return (
        f"the budget is {passes:,.1f} passes over the usable documents and "
        f"max_repeats={max_repeats}: drawn uniformly, clusters under {runs_out:.1f}x the mean "
        "size run out before the budget ends (R = 2x passes trained best in the clip grid of "
        f"docs/results.md); consider --max-repeats {suggested}"
    )


def rule_advice(
    policy: str, order: str, schedule_version: int | None, n_clusters: int
) -> str | None:
    """One line suggesting the default rule for a new run when an older one met many clusters.

    Parameters
    ----------
    policy, order : str
        The schedule's policy and order; ``random`` (one group, no cluster to
        pay for) gets no advice.
    schedule_version : int or None
        The recorded draw rule; only an older one than ``SCHEDULE_VERSION`` gets advice.
    n_clusters : int
        Clusters present.

    Examples
    --------
    >>> rule_advice("clusterclip", "online", 1, 1_000_000)[:62]
    '1,000,000 clusters: schedule version 1 builds a schedule over '
    >>> rule_advice("clusterclip", "online", 4, 1_000_000) is None
    True
    """
    if schedule_version is None or schedule_version >= SCHEDULE_VERSION:
        return None
    if n_clusters < MANY_CLUSTERS or policy == "random":
        return None
    return (
        f"{n_clusters:,} clusters: schedule version {schedule_version} builds a schedule over "
        "this many clusters several times slower than the default rule (version "
        f'{SCHEDULE_VERSION}, docs/sampler.md, "Schedule versions"); it draws the same law but '
        "another schedule, so for a new run leave --schedule-version unset, not in the middle "
        "of one"
    )
