"""Groups of documents drawn as whole shuffled passes, and their permutations.

A *group* is a cluster (or, for the ``random`` policy and the ``random``
fallback, the whole usable corpus). Its members are drawn one pass at a time,
each pass a fresh permutation, so draw number ``j`` of group ``g`` is::

    pass p = j // size,  position i = j % size,
    document = members[g][permutation(seed, purpose, key, p)[i]]

The permutation of pass ``p`` is regenerated on demand from
``(seed, purpose, key, p // P)`` where one *chunk* holds ``P`` passes: tiny
clusters with thousands of passes would otherwise need one generator per pass.
Nothing about the draw history is stored: a group's state is its draw count.

Every ``SeedSequence`` of the schedule is made by
:func:`~clusterclip.schedule.seeds.seed_sequence` (re-exported here, with the
purpose codes, for the callers of earlier releases).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from clusterclip.schedule.protocols import written
from clusterclip.schedule.seeds import (
    PURPOSE_CHOICE,
    PURPOSE_CHOICE_V3,
    PURPOSE_CLUSTER_PASS,
    PURPOSE_FALLBACK_PASS,
    PURPOSE_PHASE,
    PURPOSE_RANDOM_PASS,
    PURPOSE_SMALL_TABLE,
    entropy_words,
    generators,
    pcg64_seeds,
    seed_sequence,
)
from clusterclip.schedule.sorting import stable_order

if TYPE_CHECKING:
    from clusterclip.schedule.protocols import GroupTable

__all__ = [
    "CACHE_SLOTS",
    "CHOICE_BLOCK",
    "PERMUTATION_CHUNK",
    "PURPOSE_CHOICE",
    "PURPOSE_CHOICE_V3",
    "PURPOSE_CLUSTER_PASS",
    "PURPOSE_FALLBACK_PASS",
    "PURPOSE_PHASE",
    "PURPOSE_RANDOM_PASS",
    "PURPOSE_SMALL_TABLE",
    "Groups",
    "chunk_permutations",
    "entropy_words",
    "passes_per_chunk",
    "pcg64_seeds",
    "seed_sequence",
    "sorted_with_order",
    "tokens_by_lookup",
    "whole_pass_tokens",
    "window_passes",
]

#: Positions per cluster-choice block: block b's uniforms come from
#: SeedSequence([seed, PURPOSE_CHOICE, b]). Part of SCHEDULE_VERSION.
CHOICE_BLOCK = 65536

#: A permutation chunk holds at least this many draws (ceil(C / size) passes).
PERMUTATION_CHUNK = 2048

#: Cache slots shared out over the groups in proportion to their draw weight (a
#: speed knob only: the result does not depend on it). See :func:`window_passes`.
CACHE_SLOTS = 2**24


def sorted_with_order(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative int64 ``values`` sorted, and ``np.argsort(values, kind="stable")``.

    Radix passes of 16-bit digits where they pay (:func:`~clusterclip.schedule.sorting.stable_order`),
    else one quicksort of ``value << b | position`` (``b = bit_length(n - 1)``),
    several times faster than numpy's stable sort of int64 (a merge sort);
    values too large to pack beside a position take the stable sort.

    >>> [a.tolist() for a in sorted_with_order(np.array([3, 1, 3, 0, 1]))]
    [[0, 1, 1, 3, 3], [3, 1, 4, 0, 2]]
    """
    n = values.size
    order = stable_order(values) if n else None
    if order is not None:  # radix passes (clusterclip.schedule.sorting)
        return np.take(values, order), order
    bits = max(n - 1, 1).bit_length()
    if n == 0 or int(values.max()) >= 2 ** (63 - bits):
        order = np.argsort(values, kind="stable")
        return values[order], order
    packed = values << bits
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    order = packed & ((1 << bits) - 1)
    packed >>= bits
    return packed, order


def _shuffled_rows(rng: np.random.Generator, size: int, rows: int) -> np.ndarray:
    """``rows`` successive permutations of ``range(size)`` drawn from ``rng``, shape (rows, size)."""
    if rows == 1:  # the first row of ``permuted`` below, drawn alone
        return rng.permutation(size)[None, :]
    out = np.empty((rows, size), dtype=np.int64)
    out[:] = np.arange(size, dtype=np.int64)
    return rng.permuted(out, axis=1, out=out)


def passes_per_chunk(size: int) -> int:
    """Number of passes generated together for a group of ``size`` members."""
    return max(1, -(-PERMUTATION_CHUNK // int(size)))


def chunk_permutations(
    seed: int, purpose: int, key: int, chunk: int, size: int, rows: int | None = None
) -> np.ndarray:
    """The permutations of passes ``chunk*P .. chunk*P + P - 1`` of one group.

    Parameters
    ----------
    seed, purpose, key, chunk : int
        Non-negative parts of the ``SeedSequence``; ``key`` is the cluster id.
    size : int
        Group size (>= 1).
    rows : int, optional
        Generate only the first ``rows`` passes of the chunk (1 <= rows <= P):
        the same rows as the full chunk's, at a fraction of the cost.

    Returns
    -------
    ndarray of int64, shape (P, size) or (rows, size)
        Row ``r`` is the permutation of pass ``chunk*P + r``.

    Examples
    --------
    >>> chunk_permutations(0, PURPOSE_CLUSTER_PASS, 3, 0, 600).shape  # 4 passes of 600
    (4, 600)
    >>> bool((chunk_permutations(0, PURPOSE_CLUSTER_PASS, 3, 0, 600, rows=2)
    ...       == chunk_permutations(0, PURPOSE_CLUSTER_PASS, 3, 0, 600)[:2]).all())
    True
    """
    n_passes = passes_per_chunk(size) if rows is None else int(rows)
    if size == 1:  # the only permutation of one member: no randomness to draw
        return np.zeros((n_passes, 1), dtype=np.int64)
    rng = np.random.default_rng(seed_sequence(seed, purpose, key, chunk))
    return _shuffled_rows(rng, size, n_passes)


def window_passes(
    sizes: np.ndarray, shares: np.ndarray, max_repeats: int | None = None
) -> np.ndarray:
    """Passes held at once in each group's cache window.

    About ``CACHE_SLOTS * share`` draws, so that the whole cache holds at most
    ``CACHE_SLOTS + N`` documents whatever the number of groups; at least one
    pass (a group is looked up a pass at a time), at most one permutation
    chunk, and never more passes than ``max_repeats`` (a group clipped after R
    passes never uses more).

    Parameters
    ----------
    sizes : ndarray of int64, shape (G,)
    shares : ndarray of float64, shape (G,)
        Each group's expected fraction of the draws (sums to 1 or less).
    max_repeats : int or None

    Examples
    --------
    >>> window_passes(np.array([1, 10, 5000]), np.array([0.5, 0.5, 0.0]), 4).tolist()
    [4, 4, 1]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    per_chunk = np.maximum(1, -(-PERMUTATION_CHUNK // np.maximum(sizes, 1)))
    wanted = np.ceil(np.minimum(CACHE_SLOTS * np.asarray(shares, np.float64), CACHE_SLOTS) / sizes)
    passes = np.minimum(per_chunk, np.maximum(1, wanted).astype(np.int64))
    if max_repeats is not None:
        passes = np.minimum(passes, min(int(max_repeats), PERMUTATION_CHUNK))
    return passes


def whole_pass_tokens(
    counts: np.ndarray,
    lengths: np.ndarray,
    members: np.ndarray,
    offsets: np.ndarray,
    sizes: np.ndarray,
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """Tokens of the whole passes within the first ``counts[g]`` draws of each group.

    Returns the members' lengths (in member-table order), the tokens of the
    whole passes (a Python int, exact past int64), the whole passes and the
    draws of each group's partial pass; the caller adds the partial passes
    through its own permutation rule.

    >>> whole_pass_tokens(np.array([5, 1]), np.array([1, 2, 3]), np.array([0, 1, 2]),
    ...                   np.array([0, 2]), np.array([2, 1]))[1:3]
    (9, array([2, 1]))
    """
    counts = np.asarray(counts, dtype=np.int64)
    member_tokens = lengths[members]
    totals = np.add.reduceat(member_tokens, offsets) if len(sizes) else np.zeros(0)
    full_passes = counts // sizes
    if float(full_passes @ totals.astype(np.float64)) < 2.0**62:
        total = int((full_passes * totals).sum())
    else:  # past int64: exact in Python ints
        total = sum(p * t for p, t in zip(full_passes.tolist(), totals.tolist(), strict=True))
    return member_tokens, total, full_passes, counts - full_passes * sizes


def tokens_by_lookup(table: GroupTable, counts: np.ndarray, lengths: np.ndarray) -> int:
    """Total tokens of the first ``counts[g]`` draws of every group of ``table``.

    Whole passes contribute the group's total; the partial passes are looked
    up at once through ``table.lookup`` (exact past int64: Python ints). The
    :meth:`tokens_of_first` of the tables whose lookups take any draw numbers.
    """
    _, total, full_passes, partial = whole_pass_tokens(
        counts, lengths, table.members, table.offsets, table.sizes
    )
    which = np.flatnonzero(partial)
    if which.size:
        group = np.repeat(which, partial[which])
        starts = np.cumsum(partial[which]) - partial[which]
        cursor = np.arange(group.size, dtype=np.int64) - np.repeat(starts, partial[which])
        draws = full_passes[group] * table.sizes[group] + cursor
        total += int(lengths[table.lookup(group, draws)].sum())
    return total


class Groups:
    """Member table of ``G`` groups with a cache window of pass permutations each.

    A group's *window* holds the documents of a run of consecutive passes of
    one permutation chunk: draws ``[low, high)``. A lookup whose draws of a
    group lie in one window (nearly all) is one gather; a group whose window
    does not hold them gets a new one (its chunk regenerated up to the passes
    needed), and a range longer than a window is served pass by pass.

    Memory: ``members`` (N) plus ``sum(window * size)`` cache slots (at most
    ``CACHE_SLOTS + N`` with :func:`window_passes`), plus nine int64 per group.
    A one-member group's window holds its member once per slot: it moves with
    the draws without drawing anything.

    Parameters
    ----------
    members : ndarray of int32 or int64
        Document ids of all groups, concatenated group after group.
    sizes : ndarray of int64, shape (G,)
        Members per group (all >= 1).
    keys : ndarray of int64, shape (G,)
        Key of each group in the permutation SeedSequence (the cluster id).
    seed, purpose : int
    window : ndarray of int64, shape (G,), optional
        Passes per window (:func:`window_passes`); default: one whole chunk.
    """

    def __init__(
        self,
        members: np.ndarray,
        sizes: np.ndarray,
        keys: np.ndarray,
        *,
        seed: int,
        purpose: int,
        window: np.ndarray | None = None,
    ) -> None:
        self.members = members
        self.sizes = sizes.astype(np.int64)
        self.keys = keys.astype(np.int64)
        self.seed = seed
        self.purpose = purpose
        self.offsets = np.cumsum(self.sizes) - self.sizes
        self.passes = np.maximum(1, -(-PERMUTATION_CHUNK // self.sizes))  # P per chunk
        self.per_chunk = self.passes * self.sizes  # draws per chunk
        window = self.passes if window is None else np.minimum(window, self.passes)
        slots = window * self.sizes
        self.cache_offsets = np.cumsum(slots) - slots
        self.window = window.astype(np.int64)
        self.cache = np.empty(int(slots.sum()), dtype=members.dtype)
        self.low = np.zeros(len(self.sizes), dtype=np.int64)  # window: draws [low, high)
        self.high = np.zeros(len(self.sizes), dtype=np.int64)
        self.single = np.flatnonzero(self.sizes == 1)
        # A one-member group's window is its member, repeated: fill it once.
        repeats = self.window[self.single]
        slot = np.arange(int(repeats.sum()), dtype=np.int64)
        slot += np.repeat(self.cache_offsets[self.single] - (np.cumsum(repeats) - repeats), repeats)
        self.cache[slot] = np.repeat(members[self.offsets[self.single]], repeats)

    def __len__(self) -> int:
        return len(self.sizes)

    def permutations(self, group: int, chunk: int, rows: int | None = None) -> np.ndarray:
        """Pass permutations of one chunk of one group, shape (P or rows, size)."""
        return chunk_permutations(
            self.seed,
            self.purpose,
            int(self.keys[group]),
            int(chunk),
            int(self.sizes[group]),
            rows,
        )

    def _move_windows(self, first: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Make every group's window hold its draws ``[first, end)``, where one can.

        Returns the groups whose range does not fit in one window (served by
        :meth:`_lookup_general`).
        """
        present = end > first
        stale = np.flatnonzero(present & ((first < self.low) | (end > self.high)))
        if stale.size == 0:
            return stale
        size = self.sizes[stale]
        start = first[stale] - first[stale] % size  # the window starts at first's pass
        chunk_end = (first[stale] // self.per_chunk[stale] + 1) * self.per_chunk[stale]
        stop = np.minimum(start + self.window[stale] * size, chunk_end)
        # A one-member group's window holds the same member in every slot: it
        # fits any range as long as the window and moves by relabelling.
        single = size == 1
        stop[single] = first[stale[single]] + self.window[stale[single]]
        fits = end[stale] <= stop
        single &= fits
        moved = stale[single]
        self.low[moved] = first[moved]
        self.high[moved] = first[moved] + self.window[moved]
        self._load(stale[fits & ~single], start[fits & ~single])
        return stale[~fits]

    def _load(self, groups: np.ndarray, begins: np.ndarray) -> None:
        """Fill the windows of ``groups`` from draws ``begins`` (each the start of a pass)."""
        if not groups.size:
            return
        size = self.sizes[groups]
        per_chunk = self.per_chunk[groups]
        chunk = begins // per_chunk
        row = (begins - chunk * per_chunk) // size
        rows = np.minimum(self.passes[groups], row + self.window[groups])
        made = generators(self.seed, self.purpose, self.keys[groups], chunk)
        starts, ats = self.offsets[groups].tolist(), self.cache_offsets[groups].tolist()
        for rng, n, first_row, n_rows, start, at in zip(
            made, size.tolist(), row.tolist(), rows.tolist(), starts, ats, strict=True
        ):
            perms = _shuffled_rows(rng, n, n_rows)[first_row:]
            self.cache[at : at + perms.size] = self.members[start : start + n][perms.ravel()]
        self.low[groups] = begins
        self.high[groups] = begins + (rows - row) * size

    def lookup(
        self,
        group: np.ndarray,
        draw: np.ndarray,
        *,
        first: np.ndarray | None = None,
        end: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Documents of draw numbers ``draw`` of groups ``group`` (vectorised).

        Parameters
        ----------
        group, draw : ndarray of int, same shape
            Group index and draw number (0-based count of earlier draws).
        first, end : ndarray of int, shape (G,), optional
            Per group, the range ``[first, end)`` of the draws asked for. When
            given, groups whose draws fit in one window (nearly all) take a
            fast path: one gather per position.
        out : ndarray of int64, optional
            Where the documents go (returned); else a new array.

        Returns
        -------
        ndarray of int64 document ids.
        """
        return written(self._lookup(group, draw, first, end), out)

    def _lookup(
        self,
        group: np.ndarray,
        draw: np.ndarray,
        first: np.ndarray | None,
        end: np.ndarray | None,
    ) -> np.ndarray:
        group = np.asarray(group, dtype=np.int64)
        draw = np.asarray(draw, dtype=np.int64)
        if first is None or end is None:
            return self._lookup_general(group, draw)
        crossing = self._move_windows(first, end)
        index = (self.cache_offsets - self.low)[group] + draw
        if not crossing.size:
            return self.cache[index].astype(np.int64)
        flagged = np.zeros(len(self.sizes), dtype=bool)
        flagged[crossing] = True
        slow = np.flatnonzero(flagged[group])
        index[slow] = 0
        out = self.cache[index].astype(np.int64)
        out[slow] = self._lookup_general(group[slow], draw[slow])
        return out

    def lookup_grouped(
        self, order: np.ndarray, per_group: np.ndarray, first: np.ndarray
    ) -> np.ndarray:
        """Documents of a block whose positions, sorted by group, are ``order``.

        Position ``order[start_g + i]`` (``start_g`` = draws of the groups
        before ``g``) receives draw ``first[g] + i`` of group ``g``. Works in the
        sorted domain, where each group's draws are one contiguous run of its
        window: one gather per position, then one scatter.
        """
        n = order.shape[0]
        crossing = self._move_windows(first, first + per_group)
        start = np.cumsum(per_group) - per_group
        shift = self.cache_offsets - self.low + first - start
        index = np.arange(n, dtype=np.int64)
        index += np.repeat(shift, per_group)
        if crossing.size:
            flagged = np.zeros(len(self.sizes), dtype=bool)
            flagged[crossing] = True
            slow = np.flatnonzero(np.repeat(flagged, per_group))
            index[slow] = 0
            docs = self.cache[index]
            slow_groups = np.repeat(np.arange(len(self.sizes)), per_group)[slow]
            docs[slow] = self._lookup_general(slow_groups, slow + (first - start)[slow_groups])
        else:
            docs = self.cache[index]
        out = np.empty(n, dtype=np.int64)
        out[order] = docs
        return out

    def _lookup_general(self, group: np.ndarray, draw: np.ndarray) -> np.ndarray:
        """Any draws of any groups: one chunk generation per (group, chunk) met."""
        out = np.empty(group.shape[0], dtype=np.int64)
        if not group.size:
            return out
        size = self.sizes[group]
        single = size == 1
        out[single] = self.members[self.offsets[group[single]]]
        rest = np.flatnonzero(~single)
        if not rest.size:
            return out
        group, draw, size = group[rest], draw[rest], size[rest]
        chunk = draw // self.per_chunk[group]
        within = draw - chunk * self.per_chunk[group]  # offset inside the chunk's rows
        order = np.lexsort((chunk, group))
        g_sorted, c_sorted = group[order], chunk[order]
        cut = np.flatnonzero((np.diff(g_sorted) != 0) | (np.diff(c_sorted) != 0)) + 1
        runs = np.split(order, cut)
        heads = order[np.concatenate([[0], cut])]
        made = generators(self.seed, self.purpose, self.keys[group[heads]], chunk[heads])
        for run, rng in zip(runs, made, strict=True):
            g, n = int(group[run[0]]), int(size[run[0]])
            need = within[run]
            perms = _shuffled_rows(rng, n, int(need.max()) // n + 1).ravel()
            start = int(self.offsets[g])
            out[rest[run]] = self.members[start : start + n][perms[need]]
        return out

    def tokens_of_first(self, counts: np.ndarray, lengths: np.ndarray) -> int:
        """Total tokens of the first ``counts[g]`` draws of every group.

        Whole passes contribute the group's total; the partial pass the
        prefix of its permutation. Used to resume a token budget without
        replaying documents. Exact for any counts (Python ints past int64).
        """
        member_tokens, total, full_passes, partial = whole_pass_tokens(
            counts, lengths, self.members, self.offsets, self.sizes
        )
        for g in np.flatnonzero(partial):
            p = int(full_passes[g])
            per = int(self.passes[g])
            row = self.permutations(int(g), p // per, p % per + 1)[p % per]
            start = self.offsets[g]
            own = member_tokens[start : start + self.sizes[g]]
            total += int(own[row[: partial[g]]].sum())
        return total
