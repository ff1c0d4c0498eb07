"""The global schedule as a stream of blocks, and the schedule with its statistics.

Global position ``t`` of the schedule is computed from ``(seed, t)`` and a
handful of per-cluster counts, never from a stored history. A
:class:`ScheduleStream` holds the prepared inputs
(:class:`~clusterclip.schedule.prepare.Prepared`), the plan of the planned
order and what is known before any draw (the schedule's length, whether the
budget is met, exhaustion); each iteration asks the version's draw rule for a
source of the *cluster part* (online or planned,
:class:`~clusterclip.schedule.protocols.OnlineSource`), and once every cluster
is clipped (position ``E = sum of caps`` online, ``sum(plan)`` planned) the
schedule stops, raises, or goes on with shuffled passes over every usable
document (``on_exhausted``).

Resuming at position ``p`` replays the cluster *choices* (not the documents)
before ``p``; a token budget is resumed from the counts
(:meth:`GroupTable.tokens_of_first`).

:meth:`ScheduleStream.blocks` streams (what the sampler reads);
:meth:`ScheduleStream.collect` builds the whole :class:`Schedule` and hands
its statistics back with it.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator

import numpy as np

from clusterclip.errors import ClusterClipError, ClusterClipWarning, hint, spell
from clusterclip.schedule.groups import CHOICE_BLOCK
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.planned import plan_draws
from clusterclip.schedule.prepare import NO_CAP, Prepared
from clusterclip.schedule.protocols import OnlineSource
from clusterclip.schedule.sources import earliest
from clusterclip.schedule.stats import GroupDraws, compute_stats, dense_ids

__all__ = ["ScheduleStream", "materialise", "outside_package", "plan_for_budget", "rechunk"]


def plan_for_budget(prep: Prepared) -> np.ndarray:
    """Draws of every group for the planned order of ``prep``'s budget (int64, shape (G,)).

    A sample budget is water-filled directly (:func:`~clusterclip.schedule.planned.plan_draws`).
    A token budget: the smallest T whose plan's *expected* tokens (mean length
    per cluster) reach the budget, then T grows until the plan's exact tokens
    do. The stream then stops at the first position where the cumulative tokens
    reach the budget, as for the online order.
    """
    config = prep.config
    caps = prep.caps if prep.capped else None
    if config.num_samples is not None:
        return plan_draws(prep.weights, caps, config.num_samples)
    budget = config.num_tokens
    means = prep.group_tokens / prep.groups.sizes

    def expected(total: int) -> float:
        return float(plan_draws(prep.weights, caps, total) @ means)

    high = prep.capped_total
    if high is not None and expected(high) < budget:
        return plan_draws(prep.weights, caps, high)
    limit = NO_CAP if high is None else high  # no schedule is longer than NO_CAP
    low, upper = 1, 1
    while expected(upper) < budget:
        low, upper = upper, upper * 2
        if upper >= limit:
            upper = limit
            break
    while low < upper:
        middle = (low + upper) // 2
        if expected(middle) >= budget:
            upper = middle
        else:
            low = middle + 1
    total = upper
    mean_all = max(float(prep.group_tokens.sum()) / prep.groups.sizes.sum(), 1e-9)
    while True:
        plan = plan_draws(prep.weights, caps, total)
        exact = prep.groups.tokens_of_first(plan, prep.lengths)
        if exact >= budget or total >= limit:
            return plan
        total = min(limit, total + int(math.ceil((budget - exact) / mean_all)) + 1)


class _Run:
    """What one iteration learns: clip positions, the length and whether the budget was met."""

    def __init__(self, stream: ScheduleStream) -> None:
        self.end = stream.end
        self.budget_met = stream.budget_met
        self.clip_step = np.full(len(stream.prep.weights), -1, dtype=np.int64)
        self.source: OnlineSource | None = None
        self.complete = False  # iterated from 0 to the schedule's end


class ScheduleStream:
    """Produces the global schedule block by block from any start position.

    Attributes
    ----------
    prep : Prepared
    config : ScheduleConfig
    plan : ndarray of int64, shape (G,), or None
        ``order="planned"``: the draws planned for every group.
    cluster_end : int or None
        Where the cluster part ends (every group clipped; None: never).
    end : int or None
        The schedule's length when known before iterating (None for a token
        budget that the cluster part can meet, or with no clip).
    exhausted_at : int or None
        ``cluster_end`` when the budget outlasts the cluster part, else None.
    budget_met : bool
        Whether the budget is met (False: ``on_exhausted="stop"`` stops short).
    """

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        config = prep.config
        self.config = config
        self.plan: np.ndarray | None = None
        if config.order == "planned":
            self.plan = plan_for_budget(prep)
            self.cluster_end: int | None = int(self.plan.sum())
        else:
            self.cluster_end = prep.capped_total
        # Does the capped part fall short of the budget?
        self.exhausted = False
        if self.cluster_end is not None:
            if config.num_samples is not None:
                self.exhausted = config.num_samples > self.cluster_end
            else:
                self.exhausted = self._capped_tokens() < config.num_tokens
        self.exhausted_at = self.cluster_end if self.exhausted else None
        self.end: int | None = config.num_samples
        if self.exhausted and config.on_exhausted == "stop":
            self.end = self.cluster_end
        self.budget_met = not self.exhausted or config.on_exhausted == "random"
        self._last_run: _Run | None = None
        # Known before any draw: fail or warn now, never silently.
        if self.exhausted and config.on_exhausted == "error":
            raise self._exhausted_error()
        if self.exhausted and config.on_exhausted == "stop":
            self._warn_exhausted()

    def _capped_tokens(self) -> int:
        prep = self.prep
        if self.plan is not None:
            return prep.groups.tokens_of_first(self.plan, prep.lengths)
        if prep.units is not None:  # R passes of a unit emit members in turn
            return prep.groups.tokens_of_first(prep.caps, prep.lengths)
        # Finite capped_total: every cap is max_repeats * size. Python ints: exact.
        return int(self.config.max_repeats) * int(prep.group_tokens.sum())

    # -- streaming --------------------------------------------------------
    def _source(self) -> OnlineSource:
        rule = self.prep.rule
        if self.plan is not None:
            return rule.planned(self.prep, self.plan)
        return rule.online(self.prep)

    def _final_counts(self) -> np.ndarray:
        """Draws of every group once the cluster part is over (every group clipped)."""
        return self.prep.caps.copy() if self.plan is None else self.plan.copy()

    def blocks(self, start: int = 0) -> Iterator[np.ndarray]:
        """Documents (int64) of positions ``start, start + 1, ...`` in consecutive arrays.

        The blocks end wherever the engine cuts them (at most ``CHOICE_BLOCK``
        positions); :func:`rechunk` regroups them.
        """
        run = _Run(self)
        self._last_run = run
        yield from self._produce(start, run)

    def collect(self, *, progress: Callable[[int], object] | None = None) -> Schedule:
        """The whole schedule and its statistics, in one pass over the stream.

        Parameters
        ----------
        progress : callable, optional
            Called with the size of every block as it is produced (a progress bar).

        Returns
        -------
        Schedule
            ``.indices`` (int64, shape (T,)), ``.stats`` (counted during this
            pass: draws and clip position of every cluster, repeats, budget
            status), ``.config``.
        """
        run = _Run(self)
        # With the length known, the sources write straight into the schedule.
        out = None if self.end is None else np.empty(self.end, dtype=np.int64)
        blocks = self._produce(0, run, out)
        if progress is not None:
            blocks = _reported(blocks, progress)
        return self._schedule(_concatenated(blocks, out), run)

    def schedule_of(self, indices: np.ndarray) -> Schedule:
        """The :class:`Schedule` of ``indices``, all of :meth:`blocks` ``(0)`` of the latest iteration.

        What :func:`materialise` did; :meth:`collect` builds and counts in one pass.

        Raises
        ------
        ClusterClipError
            When no iteration from position 0 has run to the end of the schedule.
        """
        run = self._last_run
        if run is None or not run.complete:
            raise ClusterClipError(
                "the stream has not produced its whole schedule from position 0 yet, so its "
                "statistics are unknown. Call stream.collect() for the schedule with its "
                "statistics, or iterate stream.blocks(0) to the end first."
            )
        return self._schedule(indices, run)

    def _produce(
        self, start: int, run: _Run, out: np.ndarray | None = None
    ) -> Iterator[np.ndarray]:
        """Blocks of positions ``start, start + 1, ...``; ``out``: the whole schedule (start 0)."""
        config, cluster_end = self.config, self.cluster_end
        source = self._source()
        run.source = source
        in_clusters = cluster_end is None or start < cluster_end
        # In the fallback passes every cluster is clipped: nothing to replay.
        position = source.seek(start, cluster_end) if in_clusters else start
        tokens, budget = 0, config.num_tokens
        if budget is not None:
            counts = source.counts_before() if in_clusters else self._final_counts()
            tokens = self._tokens_before(position, counts)
            if tokens >= budget:
                run.complete = start == 0
                return
        while run.end is None or position < run.end:
            chosen = clips = None
            into = None if out is None else out[position:]
            if cluster_end is None or position < cluster_end:
                docs, chosen, clips = source.segment(position, earliest(run.end, cluster_end), into)
            else:
                stop = earliest(run.end, (position // CHOICE_BLOCK + 1) * CHOICE_BLOCK)
                docs = self._fallback_part(position - cluster_end, stop - position, into)
            last = False
            if budget is not None:
                docs, tokens, last = self._within_budget(docs, tokens, position, run)
            if chosen is not None:
                hit = clips[(clips < docs.size) & (position + clips >= start)]
                run.clip_step[chosen[hit]] = position + hit
            if position + docs.size > start:
                yield docs[max(0, start - position) :]
            position += docs.size
            if last:
                break
            if self.exhausted and config.on_exhausted == "stop" and position >= cluster_end:
                run.end = cluster_end
                break
        run.complete = start == 0

    def _within_budget(
        self, docs: np.ndarray, tokens: int, position: int, run: _Run
    ) -> tuple[np.ndarray, int, bool]:
        """``docs`` cut at the token budget's first crossing; the tokens after; whether it ended."""
        running = tokens + np.cumsum(self.prep.lengths[docs])
        reach = int(np.searchsorted(running, self.config.num_tokens, side="left"))
        last = reach < docs.size
        if last:
            docs = docs[: reach + 1]
            run.end = position + reach + 1
            run.budget_met = True
        return docs, int(running[docs.size - 1]), last

    def _fallback_part(self, first: int, n: int, out: np.ndarray | None) -> np.ndarray:
        """Documents of draws ``first .. first + n - 1`` of the fallback passes (into ``out``)."""
        draws = np.arange(first, first + n, dtype=np.int64)
        into = None if out is None or out.size < n else out[:n]
        return self.prep.fallback.lookup(
            np.zeros_like(draws), draws, first=draws[:1].copy(), end=draws[-1:] + 1, out=into
        )

    def _tokens_before(self, position: int, counts: np.ndarray) -> int:
        prep = self.prep
        tokens = prep.groups.tokens_of_first(counts, prep.lengths)
        if self.cluster_end is not None and position > self.cluster_end:
            extra = np.array([position - self.cluster_end])
            tokens += prep.fallback.tokens_of_first(extra, prep.lengths)
        return tokens

    # -- the schedule and its statistics -------------------------------------
    def _schedule(self, indices: np.ndarray, run: _Run) -> Schedule:
        """:class:`Schedule` of ``indices``, produced from position 0 by ``run``."""
        prep = self.prep
        ids = prep.stats_ids
        clip_step = np.full(ids.size, -1, dtype=np.int64)
        planned = None
        if self.plan is not None and not prep.policy.single_group:
            planned = np.zeros(ids.size, dtype=np.int64)
        drawn = passes = None
        end = self.cluster_end
        whole = end is None or indices.size <= end  # the cluster part drew every position
        if prep.policy.single_group and whole and run.source is not None and prep.units is None:
            passes = (run.source.drawn_before(indices.size), prep.groups.sizes)
            drawn = _whole_passes(prep, int(passes[0][0]), ids)
        if not prep.policy.single_group:
            where = prep.cluster_ids if dense_ids(ids) else np.searchsorted(ids, prep.cluster_ids)
            clip_step[where] = run.clip_step
            if planned is not None:
                planned[where] = self.plan
            if prep.units is None and run.source is not None:
                # Every draw of the cluster part is a draw of its group's cluster: count
                # them from the engine's counts, not a label per draw. (With units the
                # members are representatives only.)
                emitted = indices.size if end is None else min(indices.size, end)
                counts = run.source.drawn_before(emitted)
                drawn = GroupDraws(counts, prep.groups.sizes, where, emitted)
        stats = compute_stats(
            indices,
            prep.labels,
            prep.lengths,
            budget_met=run.budget_met,
            exhausted_at=self.exhausted_at,
            clip_step=clip_step,
            planned_draws=planned,
            cluster_ids=ids,
            drawn=drawn,
            passes=passes,
        )
        return Schedule(indices=indices, stats=stats, config=prep.config)

    # -- messages -------------------------------------------------------------
    def _budget_text(self) -> str:
        config = self.config
        if config.num_samples is not None:
            return hint("num_samples", config.num_samples)
        return hint("num_tokens", config.num_tokens)

    def _exhausted_error(self) -> ClusterClipError:
        return ClusterClipError(
            f"the budget {self._budget_text()} cannot be met: every cluster is clipped at "
            f"{hint('max_repeats', self.config.max_repeats)} after {self.cluster_end} draws. "
            f"Raise {spell('max_repeats')} above {self.config.max_repeats}, lower the budget, "
            "or pass "
            f"{hint('on_exhausted', 'stop')} or {hint('on_exhausted', 'random')}."
        )

    def _warn_exhausted(self) -> None:
        warnings.warn(
            f"clusterclip: the budget {self._budget_text()} cannot be met: every cluster "
            f"is clipped at {hint('max_repeats', self.config.max_repeats)} after "
            f"{self.cluster_end} draws; the schedule stops there "
            f"({hint('on_exhausted', 'stop')}). Pass {hint('on_exhausted', 'random')} to "
            f"continue with random passes, or raise {spell('max_repeats')} above "
            f"{self.config.max_repeats}.",
            ClusterClipWarning,
            stacklevel=outside_package(),
        )


def _whole_passes(prep: Prepared, draws: int, ids: np.ndarray) -> GroupDraws | None:
    """``policy="random"``: the corpus group's whole passes among its first ``draws``, per cluster.

    Position ``j`` is the group's draw ``j``, so each whole pass is one draw of
    every document: ``p`` passes draw ``p`` times each cluster's size, with no
    label looked up (the statistics count the partial pass after them).
    """
    present, sizes = prep.corpus_clusters
    whole = draws // int(prep.groups.sizes[0])
    if whole == 0:
        return None
    at = present if dense_ids(ids) else np.searchsorted(ids, present)
    return GroupDraws(whole * sizes, sizes, at, whole * int(prep.groups.sizes[0]))


def _reported(
    blocks: Iterator[np.ndarray], progress: Callable[[int], object]
) -> Iterator[np.ndarray]:
    for block in blocks:
        progress(block.size)
        yield block


def _concatenated(blocks: Iterator[np.ndarray], out: np.ndarray | None) -> np.ndarray:
    """The blocks in one array: ``out`` (the length known), else a concatenation.

    A block a source wrote in its place in ``out`` already is not copied again.
    """
    if out is None:
        parts = list(blocks)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    filled = 0
    for block in blocks:
        place = out[filled : filled + block.size]
        if block.size and block.ctypes.data != place.ctypes.data:
            place[...] = block
        filled += block.size
    return out if filled == out.size else out[:filled].copy()


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def outside_package() -> int:
    """``stacklevel`` of the first caller outside ``clusterclip`` (whatever the route)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR + os.sep
    ):
        frame = frame.f_back
        level += 1
    return level


def materialise(stream: ScheduleStream, indices: np.ndarray) -> Schedule:
    """The :class:`Schedule` of ``indices`` produced by ``stream.blocks(0)``: stats and config.

    Kept for callers of earlier releases: :meth:`ScheduleStream.collect` builds
    the schedule and its statistics in one call, with no iteration beforehand.

    Parameters
    ----------
    stream : ScheduleStream
        The stream, iterated from 0 to its end (:meth:`ScheduleStream.schedule_of`).
    indices : ndarray of int64, shape (T,)
        The concatenated blocks.
    """
    return stream.schedule_of(indices)


def rechunk(parts: Iterator[np.ndarray], block_size: int) -> Iterator[np.ndarray]:
    """Regroup consecutive arrays into arrays of ``block_size`` (the last shorter).

    >>> [b.tolist() for b in rechunk(iter([np.arange(3), np.arange(2)]), 2)]
    [[0, 1], [2, 0], [1]]
    """
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
