"""Sources of the cluster part of versions 1 to 3 (:class:`~clusterclip.schedule.protocols.OnlineSource`).

A source produces the cluster part of the schedule from a start position:
``seek(start, end)`` replays what comes before the segment holding ``start``
(counts only) and returns that segment's first position; ``counts_before()``
the draws per group before it; ``segment(g0, limit)`` the documents, groups
and clip offsets of the next positions from ``g0`` (never past ``limit``);
``drawn_before(position)`` the draws per group before a position of the latest
segment (what the statistics read).

* :class:`BlockOnline`: versions 1 and 2, ``CHOICE_BLOCK`` positions per block
  (:mod:`clusterclip.schedule.choosers`);
* :class:`WindowSource`: version 3, rejection windows (:mod:`clusterclip.schedule.windows`);
* :class:`PlannedSource`: the planned order of versions 1 to 3
  (:mod:`clusterclip.schedule.planned`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from clusterclip.schedule.choosers import HierarchicalChooser, OnlineChooser
from clusterclip.schedule.groups import CHOICE_BLOCK
from clusterclip.schedule.planned import PlannedOrder, planned_phases
from clusterclip.schedule.protocols import GroupedTable, Segment
from clusterclip.schedule.windows import Window, WindowChooser
from clusterclip.threads import FasterWay, helper, overlapped

if TYPE_CHECKING:  # the prepared inputs build on the rules, which build on this
    from clusterclip.schedule.prepare import Prepared

__all__ = [
    "BlockOnline",
    "PlannedSource",
    "WindowSource",
    "counts_without_tail",
    "earliest",
]


def earliest(*bounds: int | None) -> int | None:
    """The smallest bound that is not None (None when all are)."""
    given = [b for b in bounds if b is not None]
    return min(given) if given else None


class BlockOnline:
    """Versions 1 and 2: ``CHOICE_BLOCK`` positions per block, mapped by :class:`OnlineChooser`."""

    def __init__(self, prep: Prepared) -> None:
        if not isinstance(prep.groups, GroupedTable):  # an engine bug, never a user error
            raise TypeError("clusterclip: the block source needs a table with lookup_grouped")
        self.groups: GroupedTable = prep.groups
        flat = prep.tree_paths is None
        self.chooser = OnlineChooser(prep) if flat else HierarchicalChooser(prep)
        self.last: tuple[int, np.ndarray] | None = None  # the latest segment: (g0, chosen)

    def seek(self, start: int, end: int | None) -> int:
        block = start // CHOICE_BLOCK
        for b in range(block):  # replay choices only: counts at the block start
            n = CHOICE_BLOCK if end is None else min(CHOICE_BLOCK, end - b * CHOICE_BLOCK)
            if n <= 0:
                break
            self.chooser.choose(b, n)
        return block * CHOICE_BLOCK

    def counts_before(self) -> np.ndarray:
        return self.chooser.counts.copy()

    def segment(self, g0: int, limit: int | None, out: np.ndarray | None = None) -> Segment:
        block = g0 // CHOICE_BLOCK
        g1 = earliest(limit, (block + 1) * CHOICE_BLOCK)
        chooser = self.chooser
        first = chooser.counts.copy()
        chosen = chooser.choose(block, g1 - g0)
        self.last = (g0, chosen)
        keys = chosen.astype(np.int16) if len(first) < 2**15 else chosen.astype(np.int32)
        order = np.argsort(keys, kind="stable")  # a radix sort for int16 keys
        docs = self.groups.lookup_grouped(order, chooser.counts - first, first)
        clips = np.array([offset for _, offset in chooser.events], dtype=np.int64)
        return docs, chosen, clips

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions (inside the latest segment)."""
        return counts_without_tail(self.chooser.counts.copy(), self.last, position)


class PlannedSource:
    """The planned order of versions 1 to 3, ``CHOICE_BLOCK`` positions at a time.

    ``plan``: the draws of every group (:func:`~clusterclip.schedule.planned.plan_draws`).
    """

    def __init__(self, prep: Prepared, plan: np.ndarray) -> None:
        self.prep = prep
        self.planned = PlannedOrder(plan, planned_phases(prep.config.seed, len(prep.weights)))
        self.start = 0

    def seek(self, start: int, end: int | None) -> int:
        self.start = start // CHOICE_BLOCK * CHOICE_BLOCK
        return self.start

    def counts_before(self) -> np.ndarray:
        return self.planned.counts_before(min(self.start, self.planned.total))

    def segment(self, g0: int, limit: int | None, out: np.ndarray | None = None) -> Segment:
        g1 = earliest(limit, (g0 // CHOICE_BLOCK + 1) * CHOICE_BLOCK)
        chosen, draws, first, end = self.planned.window_with_spans(g0, g1)
        clips = np.flatnonzero(draws == self.prep.caps[chosen] - 1)
        into = None if out is None or out.size < chosen.size else out[: chosen.size]
        docs = self.prep.groups.lookup(chosen, draws, first=first, end=end, out=into)
        return docs, chosen, clips

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions."""
        return self.planned.counts_before(position)


class WindowSource:
    """Version 3: rejection windows (:mod:`clusterclip.schedule.windows`)."""

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        self.chooser = WindowChooser(prep.config.seed, prep.weights, prep.caps)
        self.pending = None
        self.last: Window | None = None  # the latest window handed out (whole)
        self.ways = FasterWay()  # 1: look up on the helper thread (a speed knob only)

    def seek(self, start: int, end: int | None) -> int:
        self.pending = self.chooser.skip_to(start, end)
        return self.chooser.position if self.pending is None else self.pending.start

    def counts_before(self) -> np.ndarray:
        counts = self.chooser.counts.copy()
        if self.pending is not None:  # its counts are applied already
            np.subtract.at(counts, self.pending.groups, 1)
        return counts

    def segment(self, g0: int, limit: int | None, out: np.ndarray | None = None) -> Segment:
        window, self.pending = self.pending, None
        if window is None:
            window = self.chooser.next()
        if window is None or window.start != g0:  # the caller asks for positions in order
            raise RuntimeError("clusterclip: the window source was asked for a gap")
        self.last = window
        groups, draws, clips, order = window.groups, window.draws, window.clips, window.order
        if limit is not None and limit - g0 < window.size:  # the budget ends inside: a prefix
            n = limit - g0
            groups, draws, clips = groups[:n], draws[:n], clips[clips < n]
            order = None if order is None else order[order < n]
        lookup = self.prep.groups.lookup
        if order is None:
            task = functools.partial(lookup, groups, draws)
        else:
            task = functools.partial(_lookup_in_order, lookup, groups, draws, order)
        if limit is not None and window.start + window.size >= limit:  # the last window
            return task(), groups, clips
        # This window's documents, then the next window's choice (counts only; it is
        # pending, as after a seek). With a helper thread the two can overlap (numpy
        # releases the GIL in both): the helper looks up while this thread chooses.
        # Whether that is faster depends on the machine's load: measured, window by
        # window (self.ways). The same schedule either way: lookups do not read counts.
        docs, self.pending = overlapped(helper(), self.ways, task, self.chooser.next)
        return docs, groups, clips

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions (inside the latest window)."""
        last = None if self.last is None else (self.last.start, self.last.groups)
        return counts_without_tail(self.counts_before(), last, position)


def _lookup_in_order(
    lookup: Callable[..., np.ndarray], groups: np.ndarray, draws: np.ndarray, order: np.ndarray
) -> np.ndarray:
    docs = np.empty(groups.size, dtype=np.int64)  # looked up group by group, put in place
    docs[order] = lookup(groups[order], draws[order])
    return docs


def counts_without_tail(
    counts: np.ndarray, last: tuple[int, np.ndarray] | None, position: int
) -> np.ndarray:
    """``counts`` (all applied, a copy) less the latest segment's groups from ``position`` on.

    ``last``: the latest segment's first position and the group of each of its
    positions (None: no segment yet, nothing to take off).
    """
    if last is None:
        return counts
    start, groups = last
    if not start <= position <= start + groups.size:  # an engine bug, never a user error
        raise RuntimeError(
            f"clusterclip: draws counted at {position}, outside the latest segment "
            f"[{start}, {start + groups.size}]"
        )
    np.subtract.at(counts, groups[position - start :], 1)
    return counts
