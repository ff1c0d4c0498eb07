"""Cluster choices of ``SCHEDULE_VERSION`` 3: rejection windows.

Positions are produced window by window. Window ``w`` draws ``WINDOW``
candidates i.i.d. from the clusters active at the window's start, from
``Generator(PCG64(seed_sequence(seed, PURPOSE_CHOICE_V3, w)))``:

* equal weights: ``integers(m, size=WINDOW)`` indexes the ``m`` active groups
  (ascending);
* otherwise: ``random(WINDOW)`` is mapped through the normalised cumulative
  weights of the active groups (the first whose cumulative weight exceeds ``u``).

A candidate whose group has already reached its cap (counting the earlier kept
candidates of the same window, in order) is dropped; the kept candidates, in
order, are the window's positions. Given the earlier positions, the next kept
candidate is a weight-proportional choice among the groups still active: the
online rule of DESIGN.md section 2, in law (rejection sampling), with no loop
per position and no extra cost per clip. The draw number of a kept position is
its group's count before the window plus its rank among the group's
candidates in the window. Once every group is clipped there are no more windows.

Resuming at position ``p`` replays the counting of the windows before the one
holding ``p`` (no documents).
"""

from __future__ import annotations

import numpy as np

from clusterclip.schedule import kernels
from clusterclip.schedule.groups import PURPOSE_CHOICE_V3, seed_sequence, sorted_with_order

__all__ = [
    "WINDOW",
    "Window",
    "WindowChooser",
    "ranked_among_equal_with_lasts",
    "ranked_by_sort_with_lasts",
    "ranks_among_equal",
    "listed_cdf",
    "ranks_by_sort",
    "window_candidates",
]

#: Candidates per window (part of SCHEDULE_VERSION 3).
WINDOW = 2**16
#: Below this many listed groups a window's candidates are ranked by one sort
#: (most share a group), else by :func:`ranks_among_equal`: a speed knob only.
_FEW_GROUPS = 4 * WINDOW


class Window:
    """The kept positions of one window, in window order.

    Attributes
    ----------
    start : int
        Global position of the window's first kept candidate.
    size : int
        Kept positions.
    groups, draws : ndarray of int64, shape (size,)
        Group index and draw number of positions ``start, start + 1, ...``.
    clips : ndarray of int64
        Ascending offsets (in ``[0, size)``) of the positions that take their
        group's last draw (``draws == caps[groups] - 1``): the group is clipped there.
    order : ndarray of int64 or None
        The offsets ordered by group (then offset) when the window was ranked
        by a sort (few groups), else None: lookups in that order read each
        group's members (or pass permutation) together.
    """

    __slots__ = ("clips", "draws", "groups", "order", "size", "start")

    def __init__(
        self,
        start: int,
        groups: np.ndarray,
        draws: np.ndarray,
        clips: np.ndarray,
        order: np.ndarray | None = None,
    ) -> None:
        self.start = start
        self.groups, self.draws, self.clips, self.order = groups, draws, clips, order
        self.size = int(groups.size)


def ranks_by_sort(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank of every entry among the earlier entries of the same value, and the stable order.

    From :func:`~clusterclip.schedule.groups.sorted_with_order` (one sort of
    ``value << b | position``), several times faster than a stable argsort of int64.

    Returns
    -------
    ranks : ndarray of int64, shape (n,)
    order : ndarray of int64, shape (n,)
        The positions by value, then position (``np.argsort(values, kind="stable")``).

    Examples
    --------
    >>> [a.tolist() for a in ranks_by_sort(np.array([5, 2, 5, 5, 2, 0]))]
    [[0, 0, 1, 2, 1, 0], [5, 1, 4, 0, 2, 3]]
    """
    return ranked_by_sort_with_lasts(values)[:2]


def ranked_by_sort_with_lasts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`ranks_by_sort`, and the position of every distinct value's last entry."""
    n = values.size
    packed, order = sorted_with_order(values)
    head = np.empty(n, dtype=bool)
    head[:1] = True
    np.not_equal(packed[1:], packed[:-1], out=head[1:])
    heads = np.flatnonzero(head)  # where each value's run starts
    sorted_ranks = np.arange(n, dtype=np.int64)
    sorted_ranks -= np.repeat(heads, np.diff(heads, append=n))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = sorted_ranks
    head[:-1] = head[1:]  # now: the last of a run
    head[-1:] = True
    return ranks, order, order[head]


def ranks_among_equal(values: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Rank of every entry among the earlier entries of the same value (0 for a first).

    Parameters
    ----------
    values : ndarray of int64, shape (n,)
        Non-negative, each below ``scratch.size``.
    scratch : ndarray of int32 or int64
        Working space, overwritten where ``values`` point (its contents do not
        matter): one entry per possible value keeps this O(n), with no sort of
        the whole array. Its dtype must hold ``n - 1``.

    Returns
    -------
    ndarray of int64, shape (n,)

    Only the entries whose value occurs more than once need ordering: one
    scatter and one gather find them (each value's entries all write their
    position; whichever survives, every other entry reads a position not its
    own), then :func:`ranks_by_sort` of those entries alone ranks them.

    Examples
    --------
    >>> ranks_among_equal(np.array([5, 2, 5, 5, 2, 0]), np.empty(6, np.int32)).tolist()
    [0, 0, 1, 2, 1, 0]
    """
    return ranked_among_equal_with_lasts(values, scratch)[0]


def ranked_among_equal_with_lasts(
    values: np.ndarray, scratch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ranks_among_equal`, and the last entry of every value that occurs more than once."""
    n = values.size
    position = np.arange(n, dtype=scratch.dtype)
    scratch[values] = position
    survivor = np.take(scratch, values)
    repeated = survivor != position  # every entry of a repeated value but the survivor
    repeated[survivor[repeated]] = True  # and the survivors
    which = np.flatnonzero(repeated)
    ranks = np.zeros(n, dtype=np.int64)
    if not which.size:
        return ranks, which
    ranks[which], _, lasts = ranked_by_sort_with_lasts(values[which])
    return ranks, which[lasts]


def listed_cdf(weights: np.ndarray, listed: np.ndarray) -> np.ndarray:
    """The normalised cumulative weights of the ``listed`` groups (what unequal weights draw by)."""
    cumulative = np.cumsum(weights[listed])
    return cumulative / cumulative[-1]


def cdf_guide(cdf: np.ndarray) -> np.ndarray:
    """Where the search for a uniform in each of ``cdf.size`` equal slices of [0, 1) may start.

    Entry ``b`` is the first index whose cumulative weight exceeds ``b / L``
    (``L = cdf.size``): the answer for any ``u`` in slice ``b`` is there or after.
    """
    compiled = kernels.cdf_guide(cdf)
    if compiled is not None:  # the same entries, in C (clusterclip.schedule.kernels)
        return compiled
    slices = np.arange(cdf.size, dtype=np.float64)
    slices /= cdf.size
    return np.searchsorted(cdf, slices, side="right")


def _inverse_cdf(cdf: np.ndarray, u: np.ndarray, guide: np.ndarray | None) -> np.ndarray:
    """``np.searchsorted(cdf, u, side="right")``, found faster (the same indices).

    With a guide (:func:`cdf_guide`), each search starts in its slice and walks
    a few steps; the few still walking after four steps are searched in order.
    Without, the queries are searched in sorted order (each search starts where
    the previous one ended).
    """
    compiled = None if guide is None else kernels.inverse_cdf(cdf, u, guide)
    if compiled is not None:  # the same indices, in C (clusterclip.schedule.kernels)
        return compiled
    if guide is None:
        order = np.argsort(u)
        picked = np.empty(u.size, dtype=np.int64)
        picked[order] = np.searchsorted(cdf, u[order], side="right")
        return picked
    last = cdf.size - 1
    slot = (u * cdf.size).astype(np.int64)
    np.minimum(slot, last, out=slot)
    picked = np.take(guide, slot)
    # A slice's start is right unless float rounding put u in the slice above:
    # then the answer may lie before it. Those few are searched outright.
    before = np.take(cdf, np.maximum(picked - 1, 0))
    early = np.flatnonzero((picked > 0) & (before > u))
    walking = np.arange(u.size)
    if early.size:
        picked[early] = np.searchsorted(cdf, u[early], side="right")
        walking = np.setdiff1d(walking, early, assume_unique=True)
    for _ in range(4):
        at = np.minimum(picked[walking], last)
        walking = walking[(picked[walking] <= last) & (np.take(cdf, at) <= u[walking])]
        if not walking.size:
            return picked
        picked[walking] += 1
    picked[walking] = _inverse_cdf(cdf, u[walking], None)
    return picked


def window_candidates(
    seed: int,
    window: int,
    listed: np.ndarray,
    n_groups: int,
    cdf: np.ndarray | None = None,
    guide: np.ndarray | None = None,
) -> np.ndarray:
    """The ``WINDOW`` candidate groups of window ``window`` (int64), drawn over ``listed``.

    From ``Generator(PCG64(seed_sequence(seed, PURPOSE_CHOICE_V3, window)))``:
    ``integers(m, size=WINDOW)`` indexes the ``m`` listed groups when ``cdf`` is
    None (equal weights), else ``random(WINDOW)`` is mapped through ``cdf``
    (:func:`listed_cdf`: the first group whose cumulative weight exceeds ``u``;
    ``guide``, optional, :func:`cdf_guide` of it, only speeds that up).

    >>> window_candidates(0, 0, np.array([3, 5]), 6)[:8].tolist()
    [3, 3, 5, 3, 5, 5, 5, 5]
    """
    rng = np.random.Generator(np.random.PCG64(seed_sequence(seed, PURPOSE_CHOICE_V3, window)))
    m = listed.size
    if cdf is None:
        picked = rng.integers(m, size=WINDOW)
    else:
        picked = _inverse_cdf(cdf, rng.random(WINDOW), guide)
        np.minimum(picked, m - 1, out=picked)
    # Every group listed: listed is arange(n_groups), nothing to map.
    return picked if m == n_groups else np.take(listed, picked)


class WindowChooser:
    """Windows of the version-3 online rule, one after the other, from counts only.

    Parameters
    ----------
    seed : int
    weights : ndarray of float64, shape (G,)
        Positive draw weight of every group.
    caps : ndarray of int64, shape (G,)
        Most draws of every group.

    Attributes
    ----------
    counts : ndarray of int64, shape (G,)
        Draws of every group before the next window (a strided view).
    position : int
        Global position of the next window's first kept candidate.
    """

    def __init__(self, seed: int, weights: np.ndarray, caps: np.ndarray) -> None:
        self.seed = seed
        self.weights = weights
        self.caps = caps
        # Each group's count and cap side by side: one memory read per candidate.
        self._state = np.zeros((len(caps), 2), dtype=np.int64)
        self._state[:, 1] = caps
        self.counts = self._state[:, 0]  # a view
        self.listed = np.flatnonzero(caps > 0)
        self.n_active = int(self.listed.size)
        self.n_clipped_listed = 0
        self.equal = bool(weights.min() == weights.max())
        self.window = 0
        self.position = 0
        self._cdf: np.ndarray | None = None
        self._scratch = np.empty(len(caps), dtype=np.int32)  # for ranks_among_equal

    def _candidates(self) -> np.ndarray:
        if not self.equal and self._cdf is None:
            self._cdf = listed_cdf(self.weights, self.listed)
        return window_candidates(self.seed, self.window, self.listed, len(self.caps), self._cdf)

    def next(self) -> Window | None:
        """The next window (its counts applied), or None once every group is clipped."""
        if self.n_active == 0:
            return None
        if 4 * self.n_clipped_listed > self.listed.size:  # compact: clipped groups cost draws
            self.listed = self.listed[self.counts[self.listed] < self.caps[self.listed]]
            self.n_clipped_listed = 0
            self._cdf = None
        candidates = self._candidates()
        state = np.take(self._state, candidates, axis=0)
        order = None
        if self.listed.size < _FEW_GROUPS:
            ranks, order, lasts = ranked_by_sort_with_lasts(candidates)
        else:
            ranks, lasts = ranked_among_equal_with_lasts(candidates, self._scratch)
        draws = state[:, 0] + ranks
        caps = state[:, 1]
        # Each group's count after the window: its last candidate's draw + 1, at most
        # its cap. Ranked without a sort, every candidate writes its own (where a
        # group repeats, whichever write lands), then the last one of each repeated
        # group (``lasts``, distinct) writes again; after a sort ``lasts`` holds the
        # last one of every group. No write depends on the order of duplicates.
        after = draws + 1
        final = after == caps  # the group's last draw: clipped there
        np.minimum(after, caps, out=after)
        if order is None:
            self.counts[candidates] = after
        self.counts[candidates[lasts]] = after[lasts]
        kept = draws < caps
        clipped = int(np.count_nonzero(final))
        self.n_active -= clipped
        self.n_clipped_listed += clipped
        groups = candidates
        if not kept.all():
            groups, draws, final = candidates[kept], draws[kept], final[kept]
            if order is not None:  # the kept ones, renumbered
                order = (np.cumsum(kept) - 1)[order[kept[order]]]
        window = Window(self.position, groups, draws, np.flatnonzero(final), order)
        self.position += window.size
        self.window += 1
        return window

    def skip_to(self, position: int, end: int | None) -> Window | None:
        """Replay the windows ending at or before ``position``; return the one holding it.

        ``end``: the position where the cluster part ends (None: never).
        """
        while True:
            window = self.next()
            if window is None or window.start + window.size > position:
                return window
            if end is not None and window.start + window.size >= end:
                return None
