"""The planned order of ``SCHEDULE_VERSION`` 4: the plan's times, sorted in slabs of time.

The plan and the times are those of the earlier versions
(:mod:`clusterclip.schedule.planned`): cluster ``k`` gets ``n_k`` draws
(water-filling), and its draw ``j`` the time ``tau = (j + phi_k) / n_k`` (float64,
that very expression) with the phases of ``planned_phases``. Version 4 lists
the draws by ``(q, k, j)`` with ``q = floor(tau * 2**TIME_BITS)``: the time on a
grid of ``2**-40``, ties in cluster order, then draw order. Sorting integers
instead of floats lets one ``np.sort`` of packed int64 keys order a whole slab.

A *slab* is every draw whose time lies in ``[i / S, (i + 1) / S)`` for a power of
two ``S``: exactly the draws ``j`` of each cluster from ``below(i / S)`` to
``below((i + 1) / S)``, where ``below(x)`` counts the draws with ``tau < x``
(``ceil(x n_k - phi_k)``, made exact against the float expression). A slab is
made in O(K + its draws) and is a contiguous run of positions (it starts at
``sum(below(i / S))``), so the order is streamed slab after slab, and any
position is found by a binary search over the slabs, without the earlier ones.
``S`` is a speed knob only (slabs of about ``max(2**16, 4 K)`` positions): the
order does not depend on it.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING

import numpy as np

from clusterclip.schedule import kernels
from clusterclip.schedule.planned import draws_below, planned_phases
from clusterclip.schedule.protocols import Segment
from clusterclip.schedule.sorting import stable_order
from clusterclip.threads import helper

if TYPE_CHECKING:  # the prepared inputs build on the rules, which build on this
    from clusterclip.schedule.prepare import Prepared

__all__ = ["AHEAD", "PIECE", "SLAB_POSITIONS", "TIME_BITS", "SlabOrder", "SlabSource"]

#: Bits of the time grid the draws are ordered on (part of SCHEDULE_VERSION 4).
TIME_BITS = 40
#: Positions a segment hands out at most (a speed knob: the lookups of a
#: segment stay in cache).
PIECE = 2**15
#: Slabs made ahead on the helper thread, at most (a speed knob: each holds its
#: positions' groups and draws).
AHEAD = 2
#: Positions per slab, about: this many, or 4 per cluster when that is more (a
#: speed knob: each slab costs O(K) besides its positions; the order does not
#: depend on it).
SLAB_POSITIONS = 2**16


class SlabOrder:
    """Random-access view of version 4's planned order of ``sum(plan)`` draws.

    Parameters
    ----------
    plan : ndarray of int64, shape (G,)
        Draws per group (:func:`~clusterclip.schedule.planned.plan_draws`).
    phases : ndarray of float64, shape (G,)
        :func:`~clusterclip.schedule.planned.planned_phases`.

    Examples
    --------
    >>> order = SlabOrder(np.array([3, 0, 2]), np.array([0.5, 0.1, 0.2]))
    >>> groups, draws = order.slab(0)
    >>> groups.tolist(), draws.tolist()     # times 1/10, 1/6, 1/2, 3/5, 5/6
    ([2, 0, 0, 2, 0], [0, 0, 1, 1, 2])
    """

    def __init__(self, plan: np.ndarray, phases: np.ndarray) -> None:
        self.plan = np.asarray(plan, dtype=np.int64)
        self.total = int(self.plan.sum())
        self.clusters = np.flatnonzero(self.plan > 0)  # groups that appear at all
        self.n = self.plan[self.clusters]
        self.phi = phases[self.clusters]
        target = max(SLAB_POSITIONS, 4 * self.clusters.size)  # positions per slab, about
        wanted = max(1, -(-self.total // target))
        self.n_slabs = min(2 ** (wanted - 1).bit_length(), 2**20)
        self._starts: dict[int, int] = {0: 0, self.n_slabs: self.total}
        # The latest below(x), for the next slab. Two threads may make slabs at once
        # (the first two): each reads this tuple once and only replaces it whole.
        self._last: tuple[float, np.ndarray] | None = None

    def below(self, x: float) -> np.ndarray:
        """Exact count of draws of each appearing cluster with ``tau < x`` (a new array)."""
        last = self._last  # one read: the helper thread may set it meanwhile
        if last is not None and last[0] == x:  # the previous slab's end
            return last[1].copy()
        count = self._below(x)
        self._last = (x, count)
        return count.copy()

    def _below(self, x: float) -> np.ndarray:
        if x <= 0.0:
            return np.zeros_like(self.n)
        if x >= 1.0:
            return self.n.copy()
        return draws_below(x, self.n, self.phi)

    def slab_start(self, i: int) -> int:
        """Position of slab ``i``'s first draw (``total`` for ``i = n_slabs``)."""
        if i not in self._starts:
            self._starts[i] = int(self.below(i / self.n_slabs).sum())
        return self._starts[i]

    def slab_of(self, position: int) -> int:
        """The slab holding ``position`` (``n_slabs`` when it is past the end)."""
        if position >= self.total:
            return self.n_slabs
        low, high = 0, self.n_slabs  # slab_start(low) <= position < slab_start(high)
        while high - low > 1:
            middle = (low + high) // 2
            if self.slab_start(middle) <= position:
                low = middle
            else:
                high = middle
        return low

    def slab(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Group and draw number of every position of slab ``i``, in order (int64)."""
        groups, draws, _ = self.slab_with_lasts(i)
        return groups, draws

    def slab_with_lasts(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`slab`, and the ascending offsets of the positions that take their group's last draw.

        The last draws are found in cluster-major order (one per cluster that
        ends in the slab) and located in the sorted keys, so no per-position
        gather of the plan is needed.
        """
        low = self.below(i / self.n_slabs)
        span = self.below((i + 1) / self.n_slabs)
        ends = span  # below((i + 1) / S), per appearing cluster
        span = ends - low
        which = np.flatnonzero(span)
        span, low, ends = span[which], low[which], ends[which]
        n = int(span.sum())
        self._starts.setdefault(i + 1, self.slab_start(i) + n)
        offset = (i * 2**TIME_BITS) // self.n_slabs
        compiled = kernels.slab(
            span, low, self.phi[which], self.n[which], self.clusters[which], offset
        )
        if compiled is not None:  # the same slab, in C (clusterclip.schedule.kernels)
            groups, draws, last = compiled
            return groups, draws, np.flatnonzero(last)
        owner = np.repeat(np.arange(which.size, dtype=np.int64), span)  # cluster-major
        first = np.cumsum(span) - span
        draws = np.arange(n, dtype=np.int64)
        draws += np.take(low - first, owner)
        # tau = (j + phi_k) / n_k, the very expression of the definition; on the grid.
        tau = draws + np.take(self.phi[which], owner)
        tau /= np.take(self.n[which], owner)
        tau *= float(2**TIME_BITS)
        time = tau.astype(np.int64)
        time -= (i * 2**TIME_BITS) // self.n_slabs
        lasts = first[ends == self.n[which]] + span[ends == self.n[which]] - 1  # cluster-major
        order, lasts = _by_time(time, n, lasts)
        groups = self.clusters[which]
        shift = max(int((low + span).max(initial=1)), 1).bit_length()  # of every draw number
        if (int(groups.max(initial=0)) >> (62 - shift)) == 0:  # one gather of both, packed
            both = np.take(groups, owner)
            both <<= shift
            both |= draws
            both = np.take(both, order)
            draws = both & ((1 << shift) - 1)
            both >>= shift
            return both, draws, lasts
        return np.take(groups, np.take(owner, order)), np.take(draws, order), lasts

    def counts_before(self, position: int) -> np.ndarray:
        """Draws of every group (length G) among the first ``position`` positions."""
        counts = np.zeros(self.plan.size, dtype=np.int64)
        if position <= 0:
            return counts
        if position >= self.total:
            return self.plan.copy()
        i = self.slab_of(position)
        counts[self.clusters] = self.below(i / self.n_slabs)
        groups, _ = self.slab(i)
        counts += np.bincount(groups[: position - self.slab_start(i)], minlength=self.plan.size)
        return counts


def _by_time(time: np.ndarray, n: int, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable order of ``time`` (non-negative int64), and where ``entries`` land in it.

    Returns the positions by ``(time, position)`` and the ascending ranks in that
    order of the positions ``entries``. One ``np.sort`` of ``time << b | position``
    when both fit in 63 bits (always, for slabs of fewer than 2**23 positions),
    where each entry's rank is a binary search of its own key; else a lexsort.
    """
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = stable_order(time)
    if order is not None:  # radix passes, where they pay
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        return order, np.sort(np.take(rank, entries))
    width = max(n - 1, 1).bit_length()
    if int(time.max()).bit_length() + width > 63:
        order = np.lexsort((np.arange(n), time))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        return order, np.sort(rank[entries])
    time <<= width
    time |= np.arange(n, dtype=np.int64)
    keys = np.sort(time[entries])
    time.sort()
    ranks = np.searchsorted(time, keys)
    time &= (1 << width) - 1
    return time, ranks


class SlabSource:
    """Version 4's planned order as the cluster part of a schedule (an :class:`OnlineSource`)."""

    def __init__(self, prep: Prepared, plan: np.ndarray) -> None:
        self.prep = prep
        self.order = SlabOrder(plan, planned_phases(prep.config.seed, len(prep.weights)))
        self.slab = -1
        self.slab_start = 0
        self.groups = self.draws = self.clips = np.zeros(0, dtype=np.int64)
        self.clipped = plan == prep.caps  # plan <= caps: these groups end clipped
        self.start = 0
        # The next slabs, made on the helper thread while this one is looked up (a
        # speed knob only: a slab does not depend on when it is made), in order.
        self._ahead: list[tuple[int, Future]] = []

    def _load(self, i: int, limit: int | None = None) -> None:
        worker = helper()
        while self._ahead and self._ahead[0][0] < i:  # empty slabs skipped
            self._ahead.pop(0)[1].result()
        if self._ahead and self._ahead[0][0] == i:
            slab = self._ahead.pop(0)[1].result()
        else:  # a seek, or the first slab: the next ones meanwhile, on the helper
            self._settle()
            self._ahead = []
            self._make_ahead(worker, i + 1, limit)
            slab = self.order.slab_with_lasts(i)
        self.slab = i
        self.slab_start = self.order.slab_start(i)
        self.groups, self.draws, lasts = slab
        # A group is clipped at its last planned draw when the plan takes its cap.
        self.clips = lasts[np.take(self.clipped, np.take(self.groups, lasts))]
        self._make_ahead(worker, i + 1, limit)

    def _make_ahead(self, worker: Executor | None, first: int, limit: int | None) -> None:
        """Keep the slabs after ``first - 1``, up to ``AHEAD`` of them, being made on the helper.

        A slab past ``limit`` (the budget) is not made: it would not be read.
        """
        if worker is None:
            return
        wanted = self._ahead[-1][0] + 1 if self._ahead else first
        while len(self._ahead) < AHEAD and self._needed(wanted, limit):
            self._ahead.append((wanted, worker.submit(self.order.slab_with_lasts, wanted)))
            wanted += 1

    def _needed(self, i: int, limit: int | None) -> bool:
        """Whether slab ``i`` exists and starts before ``limit`` (then it is worth making ahead)."""
        if i >= self.order.n_slabs:
            return False
        return limit is None or self.order.slab_start(i) < limit

    def _settle(self) -> None:
        """Wait for the slabs being made on the helper thread (they are kept)."""
        for _, future in self._ahead:
            future.result()

    def seek(self, start: int, end: int | None) -> int:
        self._settle()
        start = min(start, self.order.total)
        i = self.order.slab_of(start)
        if i < self.order.n_slabs:
            self._load(i)
        self.start = start
        return start

    def counts_before(self) -> np.ndarray:
        self._settle()
        return self.order.counts_before(self.start)

    def segment(self, g0: int, limit: int | None, out: np.ndarray | None = None) -> Segment:
        at = g0 - self.slab_start
        if at >= self.groups.size:  # the next slab (skipping empty ones)
            self._load(self.order.slab_of(g0), limit)
            at = g0 - self.slab_start
        stop = min(self.groups.size, at + PIECE)
        if limit is not None:
            stop = min(stop, limit - self.slab_start)
        groups, draws = self.groups[at:stop], self.draws[at:stop]
        clips = self.clips[np.searchsorted(self.clips, at) : np.searchsorted(self.clips, stop)]
        into = None if out is None or out.size < groups.size else out[: groups.size]
        return self.prep.groups.lookup(groups, draws, out=into), groups, clips - at

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions."""
        self._settle()
        return self.order.counts_before(position)
