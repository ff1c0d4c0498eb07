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

from clusterclip.schedule.groups import PURPOSE_CHOICE_V3, seed_sequence

__all__ = ["WINDOW", "WindowChooser", "Window"]

#: Candidates per window (part of SCHEDULE_VERSION 3).
WINDOW = 2**16
_POSITION_BITS = 16  # WINDOW == 2**_POSITION_BITS


class Window:
    """The kept positions of one window, listed by group (then by position).

    Attributes
    ----------
    start : int
        Global position of the window's first kept candidate.
    size : int
        Kept positions.
    groups, draws, slots : ndarray of int64, shape (size,)
        Sorted by group: group index, draw number, and offset in the window's
        positions (``start + slots[i]`` is the global position).
    """

    __slots__ = ("draws", "groups", "size", "slots", "start")

    def __init__(
        self, start: int, groups: np.ndarray, draws: np.ndarray, slots: np.ndarray
    ) -> None:
        self.start = start
        self.groups, self.draws, self.slots = groups, draws, slots
        self.size = int(groups.size)

    def in_order(self) -> np.ndarray:
        """Group of every position, in window order."""
        out = np.empty(self.size, dtype=np.int64)
        out[self.slots] = self.groups
        return out


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
        Draws of every group before the next window.
    position : int
        Global position of the next window's first kept candidate.
    """

    def __init__(self, seed: int, weights: np.ndarray, caps: np.ndarray) -> None:
        self.seed = seed
        self.weights = weights
        self.caps = caps
        self.counts = np.zeros(len(caps), dtype=np.int64)
        self.listed = np.flatnonzero(caps > 0)
        self.n_active = int(self.listed.size)
        self.n_clipped_listed = 0
        self.equal = bool(weights.min() == weights.max())
        self.window = 0
        self.position = 0
        self._cdf: np.ndarray | None = None

    def _candidates(self) -> np.ndarray:
        rng = np.random.Generator(
            np.random.PCG64(seed_sequence(self.seed, PURPOSE_CHOICE_V3, self.window))
        )
        m = self.listed.size
        if self.equal:
            return self.listed[rng.integers(m, size=WINDOW)]
        if self._cdf is None:
            cumulative = np.cumsum(self.weights[self.listed])
            self._cdf = cumulative / cumulative[-1]
        picked = np.searchsorted(self._cdf, rng.random(WINDOW), side="right")
        return self.listed[np.minimum(picked, m - 1)]

    def next(self) -> Window | None:
        """The next window (its counts applied), or None once every group is clipped."""
        if self.n_active == 0:
            return None
        if 4 * self.n_clipped_listed > self.listed.size:  # compact: clipped groups cost draws
            self.listed = self.listed[self.counts[self.listed] < self.caps[self.listed]]
            self.n_clipped_listed = 0
            self._cdf = None
        candidates = self._candidates()
        # One sort gives each candidate's rank among its group's candidates.
        packed = candidates << _POSITION_BITS
        packed |= np.arange(WINDOW, dtype=np.int64)
        packed.sort()
        groups = packed >> _POSITION_BITS
        offsets = packed & (WINDOW - 1)
        is_head = np.empty(WINDOW, dtype=bool)
        is_head[0] = True
        np.not_equal(groups[1:], groups[:-1], out=is_head[1:])
        heads = np.flatnonzero(is_head)
        run_start = np.zeros(WINDOW, dtype=np.int64)
        run_start[heads] = heads
        np.maximum.accumulate(run_start, out=run_start)
        draws = self.counts[groups]  # sorted: the reads go forward
        draws += np.arange(WINDOW, dtype=np.int64)
        draws -= run_start  # + the rank among the group's candidates
        kept = draws < self.caps[groups]
        head_groups = groups[heads]
        before = self.counts[head_groups]
        caps = self.caps[head_groups]
        after = np.minimum(before + np.diff(np.append(heads, WINDOW)), caps)
        self.counts[head_groups] = after
        clipped = int(np.count_nonzero((after == caps) & (before < caps)))
        self.n_active -= clipped
        self.n_clipped_listed += clipped
        if not kept.all():
            groups, offsets, draws = groups[kept], offsets[kept], draws[kept]
            # Slots: the offsets' ranks among the kept offsets (window order).
            marked = np.zeros(WINDOW, dtype=np.int64)
            marked[offsets] = 1
            offsets = (np.cumsum(marked) - 1)[offsets]
        window = Window(self.position, groups, draws, offsets)
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
