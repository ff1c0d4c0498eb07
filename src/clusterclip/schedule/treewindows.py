"""The online rule of ``SCHEDULE_VERSION`` 4: rejection windows, down a cluster tree if any.

**Flat policies** draw version 3's windows exactly
(:mod:`clusterclip.schedule.windows`): window ``w`` draws ``WINDOW`` candidate
groups i.i.d. over the groups *listed* at its start (uniformly, or by the
normalised cumulative weights), a candidate whose group has taken its cap
(counting the earlier candidates of the window) is dropped, and the kept
candidates in order are the window's positions; the list is compacted at a
window's start once more than a quarter of it is clipped. Version 4 processes a
window in chunks of candidates (the same positions: a chunk's draw numbers
count the earlier chunks' draws), so the counts a chunk touches stay in cache.

**``policy="hierarchical"``** (levels of a tree above the groups, coarsest
first; top levels of one node are left out) draws the *top nodes* by those
windows, with node ``v``'s cap the sum of its leaves' caps: a top node is kept
while one of its leaves is not clipped. Each inner node ``v`` then has a stream
of its own in each window ``w``: candidate ``n`` is its listed child number
``min(floor(u m), m - 1)`` of the ``m`` children listed at the window's start,
with ``u = (mix64(K_vw + (n + 1) GAMMA) >> 11) / 2**53`` and ``K_vw =
mix64(G_v + (w + 1) GAMMA)`` (``G_v``: :func:`~clusterclip.schedule.feistel.group_keys`
of ``(seed, PURPOSE_TREE, v)``, nodes numbered level after level in ascending
id). The ``r``-th position of the window that enters ``v`` takes the ``r``-th
candidate of ``v``'s stream whose child is still active (a child is dropped
once its leaves' draws reach its cap). So at every position each level is a
uniform choice among the *active* children of the node chosen above -- the
hierarchical rule of :mod:`clusterclip.schedule.hierarchy` -- drawn with no
loop per position. A node's list is compacted at a window's start once more
than a quarter of it is exhausted, as the top list is.

Resuming at position ``p`` replays the chunks before the one holding ``p``
(counts only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from clusterclip.schedule import kernels
from clusterclip.schedule.feistel import GAMMA, group_keys, mix64
from clusterclip.schedule.grouping import NO_CAP
from clusterclip.schedule.groups import sorted_with_order
from clusterclip.schedule.protocols import Segment
from clusterclip.schedule.seeds import PURPOSE_TREE
from clusterclip.schedule.sorting import stable_order
from clusterclip.schedule.sources import counts_without_tail
from clusterclip.schedule.windows import (
    WINDOW,
    Window,
    cdf_guide,
    listed_cdf,
    ranked_among_equal_with_lasts,
    ranked_by_sort_with_lasts,
    window_candidates,
)
from clusterclip.threads import FasterWay, helper, overlapped

if TYPE_CHECKING:  # the prepared inputs build on the rules, which build on this
    from clusterclip.schedule.prepare import Prepared

__all__ = [
    "CHUNK",
    "FEW_ENTRIES",
    "NodeLevel",
    "TreeSource",
    "TreeWindows",
    "alive_bits",
    "tree_levels",
]

#: Candidates processed at once when a tree with many top nodes is descended (a
#: speed knob only: the rows a chunk's descent touches stay in cache; the
#: positions do not depend on it). Without a tree a window is processed whole.
CHUNK = 2**13
#: Up to this many top nodes a window is processed whole (they fit in cache anyway).
FEW_ENTRIES = 2**13
#: Positions looked up at once, about (a speed knob only).
LOOKUP_POSITIONS = 2**16
_GAMMA = np.uint64(GAMMA)
_ONE = np.uint64(1)
_S11 = np.uint64(11)


class NodeLevel:
    """The nodes of one inner level of a cluster tree and their listed children.

    Attributes
    ----------
    keys : ndarray of uint64, shape (V,)
        Stream key ``G_v`` of every node.
    start, listed : ndarray of int64, shape (V,)
        Where each node's children start in ``children``, and how many of them
        are listed (packed at the front, ascending).
    children : ndarray of int64
        Child indices (in the level below), node after node.
    dead : ndarray of int64, shape (V,)
        Listed children exhausted since the last compaction.
    parent_of_child : ndarray of int64
        The node of every child of the level below.
    caps, counts : ndarray of int64, shape (V,)
        Draws of all the node's leaves together: most (``NO_CAP``: unreachable) and so far
        (views of ``state``).
    state : ndarray of int64, shape (V, 2)
        Count and cap side by side, so that a draw reads one memory line for both.
    alive : ndarray of uint8, or None
        One bit per position of ``children`` (:func:`alive_bits`, little-endian):
        whether the child listed there has draws left. The compiled descent reads
        and keeps them (it tells exhausted candidates from cache); None until it
        first runs, and again after the numpy code changed what they say.
    """

    def __init__(self, parent_of_child: np.ndarray, keys: np.ndarray, caps: np.ndarray) -> None:
        n_nodes = keys.size
        self.keys = keys
        self.parent_of_child = parent_of_child
        full = np.bincount(parent_of_child, minlength=n_nodes).astype(np.int64)
        self.start = np.cumsum(full) - full
        self.children = _by_parent(parent_of_child, self.start)  # ascending inside a node
        self.listed = full.copy()
        self.dead = np.zeros(n_nodes, dtype=np.int64)
        self.state = _side_by_side(caps)
        self.counts = self.state[:, 0]
        self.caps = self.state[:, 1]
        self.alive: np.ndarray | None = None

    def compact(self, child_state: np.ndarray) -> None:
        """Relist the nodes more than a quarter of whose listed children are exhausted.

        ``child_state``: count and cap of every child (the level below), side by side.
        """
        lists = (self.start, self.listed, self.dead, self.children, child_state, self.alive)
        if kernels.compact(*lists):
            return  # the same lists, in C (the alive bits kept)
        self.alive = None
        child_counts, child_caps = child_state[:, 0], child_state[:, 1]
        nodes = np.flatnonzero(4 * self.dead > self.listed)
        for node in nodes.tolist():  # each relisting shrinks a list by a quarter at least
            first, size = int(self.start[node]), int(self.listed[node])
            kids = self.children[first : first + size]
            alive = kids[child_counts[kids] < child_caps[kids]]
            self.children[first : first + alive.size] = alive
            self.listed[node] = alive.size
            self.dead[node] = 0


def alive_bits(children: np.ndarray, child_state: np.ndarray) -> np.ndarray:
    """:attr:`NodeLevel.alive` from the children's count and cap rows, one bit per position.

    >>> alive_bits(np.array([1, 0, 2]), np.array([[0, 1], [1, 1], [3, 5]])).tolist()  # 0b110
    [6]
    """
    rows = np.take(child_state, children, axis=0)
    return np.packbits(rows[:, 0] < rows[:, 1], bitorder="little")


def _by_parent(parent: np.ndarray, start: np.ndarray) -> np.ndarray:
    """``np.argsort(parent, kind="stable")``, by a counting sort in C where built.

    ``start``: where each parent's children begin in that order (its counts' prefix sums).
    """
    order = np.empty(parent.size, dtype=np.int64)
    following = np.concatenate(([0], start))  # kernels.place reads label + 1
    if kernels.place(np.ascontiguousarray(parent), 0, following, order):
        return order
    return np.argsort(parent, kind="stable")


def _node_numbers(ids: np.ndarray) -> np.ndarray:
    """``np.unique(ids, return_inverse=True)[1]``: each id's rank among the distinct ids.

    Ids no larger than a few times their count (the usual numbering) are ranked by
    a count instead of a sort.
    """
    if ids.size and int(ids.min()) >= 0 and int(ids.max()) < 4 * ids.size:
        present = np.bincount(ids) > 0
        rank = np.cumsum(present) - 1
        return np.take(rank, ids)
    return np.unique(ids, return_inverse=True)[1]


def _side_by_side(caps: np.ndarray) -> np.ndarray:
    """Zero counts beside ``caps``, shape (n, 2): a gather of rows reads both at once."""
    state = np.zeros((caps.size, 2), dtype=np.int64)
    state[:, 1] = caps
    return state


def _saturated_sums(caps: np.ndarray, parent: np.ndarray, n_parents: int) -> np.ndarray:
    """Sum of the children's caps per parent, ``NO_CAP`` when it reaches it (no overflow)."""
    approximate = np.bincount(parent, weights=caps.astype(np.float64), minlength=n_parents)
    exact = np.bincount(parent, weights=np.minimum(caps, NO_CAP), minlength=n_parents)
    sums = np.where(approximate >= NO_CAP / 2, NO_CAP, 0).astype(np.int64)
    small = approximate < NO_CAP / 2  # exact in float64 below 2**53, else by Python ints
    if small.any() and approximate[small].max() < 2**53:
        sums[small] = exact[small].astype(np.int64)
    else:
        for node in np.flatnonzero(small).tolist():
            total = sum(int(c) for c in caps[parent == node])
            sums[node] = min(total, NO_CAP)
    return sums


def tree_levels(seed: int, tree_paths: np.ndarray, caps: np.ndarray) -> list[NodeLevel]:
    """The inner levels of a cluster tree, top first (top levels of one node left out).

    ``tree_paths`` (G, L - 1): the ancestors of every group, coarsest first;
    ``caps`` (G,): the groups' caps. Node ids are per level (one parent each).
    """
    paths = np.asarray(tree_paths, dtype=np.int64)
    while paths.shape[1] and paths.shape[0] and paths[:, 0].min() == paths[:, 0].max():
        paths = paths[:, 1:]  # a lone top node: every position enters it
    nodes_of = [_node_numbers(paths[:, level]) for level in range(paths.shape[1])]
    sizes = [int(n.max()) + 1 for n in nodes_of]
    levels: list[NodeLevel] = []
    child_caps = caps
    parents: list[np.ndarray] = []
    for level in range(paths.shape[1] - 1, -1, -1):  # bottom-up: caps are sums
        if level == paths.shape[1] - 1:
            parent = nodes_of[level]  # of every group
        else:
            parent = np.zeros(sizes[level + 1], dtype=np.int64)
            parent[nodes_of[level + 1]] = nodes_of[level]
        parents.append(parent)
        child_caps = _saturated_sums(child_caps, parent, sizes[level])
        levels.append(NodeLevel(parent, np.zeros(sizes[level], np.uint64), child_caps))
    levels.reverse()
    first = 0
    for level in levels:  # stream keys: nodes numbered level after level
        ids = np.arange(first, first + level.keys.size, dtype=np.int64)
        level.keys = group_keys(seed, PURPOSE_TREE, ids)
        first += level.keys.size
    return levels


class TreeWindows:
    """Chunks of positions of version 4's online rule, from counts only.

    Parameters
    ----------
    seed : int
    weights, caps : ndarray, shape (G,)
        Positive draw weight and cap of every group.
    tree_paths : ndarray of int64, shape (G, L - 1), optional
        ``policy="hierarchical"``: the ancestors of every group (None: flat).

    Attributes
    ----------
    counts : ndarray of int64, shape (G,)
        Draws of every group so far.
    position : int
        Global position of the next chunk's first position.
    """

    def __init__(
        self,
        seed: int,
        weights: np.ndarray,
        caps: np.ndarray,
        tree_paths: np.ndarray | None = None,
    ) -> None:
        self.seed = seed
        self.caps = caps
        self.levels = [] if tree_paths is None else tree_levels(seed, tree_paths, caps)
        top_caps = self.levels[0].caps if self.levels else caps
        # The windows' entries (groups, or top nodes): count and cap side by
        # side, so that a candidate reads one memory line.
        self._state = np.zeros((top_caps.size, 2), dtype=np.int64)
        self._state[:, 1] = top_caps
        self.top_counts = self._state[:, 0]  # views
        self.top_caps = self._state[:, 1]
        self._scratch = np.empty(top_caps.size, dtype=np.int32)  # for the ranks
        if self.levels:  # the windows draw top nodes, uniformly
            self.levels[0].counts = self.top_counts  # (its own state is not read)
            self._leaves = _side_by_side(caps)  # what the last level's descent reads
            self.counts = self._leaves[:, 0]
            self.weights = None
        else:
            self.counts = self.top_counts
            self.weights = None if weights.min() == weights.max() else weights
        self.listed = np.flatnonzero(self.top_caps > 0)
        self.n_active = int(self.listed.size)
        self.n_clipped_listed = 0
        self._cdf: np.ndarray | None = None
        self._guide: np.ndarray | None = None
        self.window = -1
        self.candidates = np.zeros(0, dtype=np.int64)
        self.cursor = WINDOW  # the first call starts window 0
        self.chunk = CHUNK if self.levels and self.top_caps.size > FEW_ENTRIES else WINDOW
        self.position = 0
        self.next_n = [np.zeros(level.keys.size, dtype=np.int64) for level in self.levels]
        self._scratches: dict[int, np.ndarray] = {}

    def _start_window(self) -> None:
        if 4 * self.n_clipped_listed > self.listed.size:  # compact: clipped ones cost draws
            listed = self.listed
            self.listed = listed[self.top_counts[listed] < self.top_caps[listed]]
            self.n_clipped_listed = 0
            self._cdf = None
        below = [*self.levels[1:]]
        for level, child in zip(self.levels, below, strict=False):
            level.compact(child.state)
        if self.levels:
            self.levels[-1].compact(self._leaves)
        if self.weights is not None and self._cdf is None:
            self._cdf = listed_cdf(self.weights, self.listed)
            self._guide = cdf_guide(self._cdf)
        self.window += 1
        self.candidates = window_candidates(
            self.seed, self.window, self.listed, self.top_caps.size, self._cdf, self._guide
        )
        self.cursor = 0
        for next_n in self.next_n:
            next_n[:] = 0

    def next(self) -> Window | None:
        """The next chunk of positions (its counts applied), or None once every group is clipped."""
        while self.n_active:
            if self.cursor >= WINDOW:
                self._start_window()
            candidates = self.candidates[self.cursor : self.cursor + self.chunk]
            self.cursor += candidates.size
            chosen, draws, final = self._top(candidates)
            if not chosen.size:
                continue
            for depth in range(len(self.levels)):
                chosen, draws, final = self._descend(depth, chosen)
            chunk = Window(self.position, chosen, draws, np.flatnonzero(final))
            self.position += chunk.size
            return chunk
        return None

    def _top(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kept candidates of a chunk, their draw numbers, and which take their last draw."""
        kept = kernels.take(candidates, self._state)  # in C where built, the same
        chosen, draws, final = self._kept(candidates) if kept is None else kept
        clipped = int(np.count_nonzero(final))  # the node's (or group's) last draw: clipped
        self.n_active -= clipped
        self.n_clipped_listed += clipped
        return chosen, draws, final

    def _kept(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_top`'s kept candidates by numpy, their counts applied (the reference)."""
        if self.listed.size < 4 * candidates.size:  # most candidates repeat: rank by a sort
            ranks, _, lasts = ranked_by_sort_with_lasts(candidates)
        else:
            ranks, lasts = ranked_among_equal_with_lasts(candidates, self._scratch)
        state = np.take(self._state, candidates, axis=0)
        draws = state[:, 0] + ranks
        caps = state[:, 1]
        after = draws + 1
        final = after == caps  # only kept candidates can take the last draw
        np.minimum(after, caps, out=after)
        self.top_counts[candidates] = after
        self.top_counts[candidates[lasts]] = after[lasts]  # no write depends on duplicates' order
        kept = draws < caps
        if kept.all():
            return candidates, draws, final
        return candidates[kept], draws[kept], final[kept]

    def _descend(
        self, depth: int, entries: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The child each position takes from its node's stream at level ``depth``.

        Returns the children (in the level below: nodes, or groups at the last
        level), their draw numbers and which take their last draw.
        """
        below = self.levels[depth + 1] if depth + 1 < len(self.levels) else None
        state = self._leaves if below is None else below.state  # children's count, cap
        level = self.levels[depth]
        if level.alive is None and kernels.compiled():
            level.alive = alive_bits(level.children, state)
        compiled = kernels.descend(
            entries, level.keys, level.start, level.listed, level.children,
            self.next_n[depth], level.dead, state, self.window, level.alive,
        )  # fmt: skip
        if compiled is not None:  # the same children, in C (clusterclip.schedule.kernels)
            return compiled
        level.alive = None  # the numpy descent below does not keep the bits
        child_counts = state[:, 0]
        order = _by_node(entries, level.keys.size)  # positions by (node, position)
        sorted_nodes = entries[order]
        head = np.flatnonzero(np.concatenate(([True], sorted_nodes[1:] != sorted_nodes[:-1])))
        nodes = sorted_nodes[head]
        need = np.diff(np.append(head, entries.size))
        slot = head.copy()  # where each node's next taken child goes (node-sorted order)
        children = np.empty(entries.size, dtype=np.int64)
        draws = np.empty(entries.size, dtype=np.int64)
        finals = np.empty(entries.size, dtype=bool)
        pending = np.arange(nodes.size)
        while pending.size:
            child, n, owner = self._candidates(depth, nodes[pending], need[pending])
            # A child has one parent, so its candidates are one node's: rank them.
            if state.shape[0] >= 4 * child.size:
                ranks = ranked_among_equal_with_lasts(child, self._scratch_of(depth))[0]
            elif state.shape[0] <= 2**16:
                ranks = _ranks_of_small(child)
            else:
                ranks = ranked_by_sort_with_lasts(child)[0]
            rows = np.take(state, child, axis=0)
            drawn = rows[:, 0] + ranks
            caps = rows[:, 1]
            ok = drawn < caps
            # The first `need` kept candidates of each node are its positions' children.
            first_of = np.searchsorted(owner, np.arange(pending.size))
            kept_before = np.cumsum(ok) - ok
            kept_before -= np.take(kept_before[first_of], owner)
            take = np.flatnonzero(ok & (kept_before < np.take(need[pending], owner)))
            taken_owner, taken_child, taken_draws = owner[take], child[take], drawn[take]
            taken_final = taken_draws + 1 == caps[take]  # the child's last draw
            into = slot[pending][taken_owner] + kept_before[take]
            children[into] = taken_child
            draws[into] = taken_draws
            finals[into] = taken_final
            self._count(depth, taken_child, taken_final, child_counts)
            got = np.bincount(taken_owner, minlength=pending.size)
            done = got == need[pending]
            # A node that got its children resumes after the last one taken; the
            # others after every candidate drawn.
            resume = n[first_of] + np.diff(np.append(first_of, owner.size))
            if take.size:
                last = np.flatnonzero(np.append(taken_owner[1:] != taken_owner[:-1], True))
                finished = done[taken_owner[last]]
                resume[taken_owner[last[finished]]] = n[take[last[finished]]] + 1
            self.next_n[depth][nodes[pending]] = resume
            slot[pending] += got
            need[pending] -= got
            pending = pending[~done]
        result_child = np.empty(entries.size, dtype=np.int64)
        result_draws = np.empty(entries.size, dtype=np.int64)
        result_final = np.empty(entries.size, dtype=bool)
        result_child[order] = children
        result_draws[order] = draws
        result_final[order] = finals
        return result_child, result_draws, result_final

    def _scratch_of(self, depth: int) -> np.ndarray:
        """Scratch for ranking the children of level ``depth`` (one entry per child)."""
        size = self.caps.size if depth + 1 == len(self.levels) else self.levels[depth + 1].caps.size
        scratch = self._scratches.get(depth)
        if scratch is None:
            scratch = self._scratches[depth] = np.empty(size, dtype=np.int32)
        return scratch

    def _candidates(
        self, depth: int, nodes: np.ndarray, need: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Children drawn by the streams of ``nodes``: child, counter ``n``, owner (index in ``nodes``).

        At least ``need`` per node (a quarter more, as some are exhausted),
        node after node, counters ascending from where each stream stands.
        """
        level = self.levels[depth]
        # Enough candidates for the children still alive (a few more: some are
        # exhausted inside the window); the loop of _descend asks again if short.
        listed = level.listed[nodes]
        alive = np.maximum(listed - level.dead[nodes], 1)
        many = (need * listed) // alive + need // 16 + 4
        owner = np.repeat(np.arange(nodes.size, dtype=np.int64), many)
        n = np.arange(owner.size, dtype=np.int64)
        n -= np.take(np.cumsum(many) - many - self.next_n[depth][nodes], owner)
        window_keys = np.full(nodes.size, self.window + 1, dtype=np.uint64)
        window_keys *= _GAMMA
        window_keys += level.keys[nodes]
        mix64(window_keys)
        word = n.astype(np.uint64)
        word += _ONE
        word *= _GAMMA
        word += np.take(window_keys, owner)
        mix64(word)
        word >>= _S11
        u = word.astype(np.float64)
        u *= 2.0**-53
        m = np.take(level.listed[nodes], owner)
        index = (u * m).astype(np.int64)
        np.minimum(index, m - 1, out=index)
        index += np.take(level.start[nodes], owner)
        return np.take(level.children, index), n, owner

    def _count(
        self, depth: int, child: np.ndarray, final: np.ndarray, child_counts: np.ndarray
    ) -> None:
        """Apply draws taken at ``depth`` to the children's counts; note the exhausted ones.

        ``final``: whether each draw is its child's last (at most one per child).
        """
        np.add.at(child_counts, child, 1)
        exhausted = child[final]
        if exhausted.size:
            level = self.levels[depth]
            np.add.at(level.dead, np.take(level.parent_of_child, exhausted), 1)


def _ranks_of_small(values: np.ndarray) -> np.ndarray:
    """Rank of every entry among the earlier entries of the same value (values < 2**16).

    A radix order of 16-bit values instead of a sort of packed int64.
    """
    order = np.argsort(values.astype(np.uint16), kind="stable")
    ordered = values[order]
    head = np.empty(values.size, dtype=bool)
    head[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
    starts = np.flatnonzero(head)
    sorted_ranks = np.arange(values.size, dtype=np.int64)
    sorted_ranks -= np.repeat(starts, np.diff(starts, append=values.size))
    ranks = np.empty(values.size, dtype=np.int64)
    ranks[order] = sorted_ranks
    return ranks


def _by_node(entries: np.ndarray, n_nodes: int) -> np.ndarray:
    """Positions ordered by (node, position): radix passes where they pay, else a packed sort."""
    order = stable_order(entries, bound=n_nodes)
    return order if order is not None else sorted_with_order(entries)[1]


class TreeSource:
    """Version 4's online rule as the cluster part of a schedule (an :class:`OnlineSource`)."""

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        self.chooser = TreeWindows(prep.config.seed, prep.weights, prep.caps, prep.tree_paths)
        self.pending: list[Window] = []  # chosen (counts applied), not handed out yet
        self.last: Window | None = None  # the latest segment handed out (whole)
        self.ways = FasterWay()  # 1: look up on the helper thread (a speed knob only)

    def seek(self, start: int, end: int | None) -> int:
        while True:
            chunk = self.chooser.next()
            if chunk is None or chunk.start + chunk.size > start:
                self.pending = [] if chunk is None else [chunk]
                return self.chooser.position if chunk is None else chunk.start
            if end is not None and chunk.start + chunk.size >= end:
                self.pending = []
                return self.chooser.position

    def counts_before(self) -> np.ndarray:
        counts = self.chooser.counts.copy()
        for chunk in self.pending:  # their counts are applied already
            np.subtract.at(counts, chunk.groups, 1)
        return counts

    def _choose(self, chunks: list[Window], g0: int, limit: int | None) -> list[Window]:
        """``chunks`` and the next ones, until about LOOKUP_POSITIONS positions from ``g0``."""
        size = sum(c.size for c in chunks)
        end = chunks[-1].start + chunks[-1].size if chunks else g0
        while size < LOOKUP_POSITIONS and (limit is None or end < limit):
            chunk = self.chooser.next()
            if chunk is None:
                break
            chunks.append(chunk)
            size += chunk.size
            end = chunk.start + chunk.size
        return chunks

    def segment(self, g0: int, limit: int | None, out: np.ndarray | None = None) -> Segment:
        chunks, self.pending = self._choose(self.pending, g0, limit), []
        if not chunks or chunks[0].start != g0:  # the caller asks for positions in order
            raise RuntimeError("clusterclip: the chunk source was asked for a gap")
        chunk = _joined(chunks)
        self.last = chunk
        groups, draws, clips = chunk.groups, chunk.draws, chunk.clips
        if limit is not None and limit - g0 < chunk.size:  # the budget ends inside: a prefix
            n = limit - g0
            groups, draws, clips = groups[:n], draws[:n], clips[clips < n]
        into = None if out is None or out.size < groups.size else out[: groups.size]
        table = self.prep.groups
        if limit is not None and g0 + chunk.size >= limit:  # the last segment
            return table.lookup(groups, draws, out=into), groups, clips
        # This segment's documents, then the next segment's choice (counts only; it
        # is pending, as after a seek). On the helper thread the two overlap (numpy
        # releases the GIL in both; a lookup never reads the counts). Whether that
        # is faster depends on the machine and its load: measured (self.ways).
        docs, self.pending = overlapped(
            helper(),
            self.ways,
            lambda: table.lookup(groups, draws, out=into),
            lambda: self._choose([], g0 + chunk.size, limit),
        )
        return docs, groups, clips

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions (inside the latest chunk)."""
        last = None if self.last is None else (self.last.start, self.last.groups)
        return counts_without_tail(self.counts_before(), last, position)


def _joined(chunks: list[Window]) -> Window:
    """Consecutive chunks as one."""
    if len(chunks) == 1:
        return chunks[0]
    at = np.cumsum([0] + [c.size for c in chunks[:-1]]).tolist()
    return Window(
        chunks[0].start,
        np.concatenate([c.groups for c in chunks]),
        np.concatenate([c.draws for c in chunks]),
        np.concatenate([c.clips + a for c, a in zip(chunks, at, strict=True)]),
    )
