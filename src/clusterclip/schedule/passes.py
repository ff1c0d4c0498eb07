"""Pass permutations of ``SCHEDULE_VERSION`` 4: a table for small groups, sorted keys for the rest.

Draw ``j`` of a group of ``s`` members (a cluster, or the whole corpus for
``policy="random"`` and the passes after exhaustion) is::

    pass p = j // s,  cursor i = j % s,
    document = members[g][order_p[i]]

with the order of pass ``p`` keyed by ``(seed, purpose, key, p)`` (``key``: the
cluster id, 0 for a corpus group) through splitmix64 words, as in version 3:
the group key ``G`` (:func:`~clusterclip.schedule.feistel.group_keys`) and the
pass key ``P = mix64(G + (p + 1) * GAMMA)`` (:func:`~clusterclip.schedule.feistel.pass_keys`).

* **Small groups** (``s <= SMALL_PASS``): row ``P mod TABLE_ROWS`` of a table
  of ``TABLE_ROWS`` uniformly random permutations per size, read cyclically
  from ``(P >> 32) mod s`` -- version 3's table (``PURPOSE_SMALL_TABLE``),
  one gather per draw and nothing cached.
* **Larger groups**: the members in the order of their *sort keys*
  ``(mix64(P + (i + 1) * GAMMA) >> 32, i)`` for member position ``i`` (the
  ``i``-th output of a splitmix64 stream seeded with ``P``, its high 32 bits,
  ties broken by position): a uniformly random order, up to the ties of 32-bit
  keys (about ``s**2 / 2**33`` pairs in a pass, each left in member order).
  The passes of many groups are sorted together in one ``np.sort`` of packed
  int64 keys (:func:`pass_orders`), and each group's latest pass is kept as
  documents in a cache, so a draw of a pass already made is one gather. New
  passes are appended to the cache (an arena of twice the larger groups'
  members; full, it keeps only each group's latest pass). A cache is a speed
  knob only: the same ``(group, draw)`` always gives the same document.

Every constant here (``SMALL_PASS``, ``TABLE_ROWS``, the key layout and its 32
bits) is part of ``SCHEDULE_VERSION`` 4: ``tests/schedule/test_golden.py`` pins them.
"""

from __future__ import annotations

import numpy as np

from clusterclip.schedule import kernels
from clusterclip.schedule.feistel import GAMMA, group_keys, mix64, pass_keys
from clusterclip.schedule.groups import tokens_by_lookup
from clusterclip.schedule.protocols import written
from clusterclip.schedule.seeds import PURPOSE_SMALL_TABLE, seed_sequence
from clusterclip.schedule.sorting import SHORT_BITS, quicksort_is_slow, radix_order

__all__ = ["KEY_BITS", "SMALL_PASS", "TABLE_ROWS", "PassTable", "pass_orders"]

#: Groups of at most this many members read their passes from the table.
SMALL_PASS = 32
#: Permutations per size in that table (a power of two).
TABLE_ROWS = 4096
#: Bits of a member's sort key in a larger group's pass.
KEY_BITS = 32

_GAMMA = np.uint64(GAMMA)
_ONE = np.uint64(1)
_S32 = np.uint64(32)
_DROP = np.uint64(64 - KEY_BITS)
#: Most sort keys made at once, and passes sorted together (a speed knob only: a
#: batch's arrays stay in cache).
_BATCH = 2**17
#: Passes at least this long are cached by slices, one at a time (a speed knob only).
_LONG_PASS = 2**12


def pass_orders(
    keys: np.ndarray, sizes: np.ndarray, offsets: np.ndarray | None = None
) -> np.ndarray:
    """The member orders of passes with pass keys ``keys`` and sizes ``sizes``, concatenated.

    Parameters
    ----------
    keys : ndarray of uint64, shape (J,)
        The pass key ``P`` of each pass.
    sizes : ndarray of int64, shape (J,)
        Members of each pass's group (>= 1).
    offsets : ndarray of int64, shape (J,), optional
        Added to pass ``j``'s entries (where its group's members start in a
        member table): the entries are then indices into that table, added
        while each batch is in cache.

    Returns
    -------
    ndarray of int64, shape (sizes.sum(),)
        For pass ``j``, entries ``start_j .. start_j + sizes[j] - 1`` (``start_j`` =
        the sizes before it) list the member positions ``0 .. sizes[j] - 1`` sorted
        by ``(mix64(P + (i + 1) * GAMMA) >> 32, i)``, plus ``offsets[j]``.

    Examples
    --------
    >>> order = pass_orders(np.array([7, 7], np.uint64), np.array([5, 3]))
    >>> sorted(order[:5].tolist()), sorted(order[5:].tolist())
    ([0, 1, 2, 3, 4], [0, 1, 2])
    >>> moved = pass_orders(np.array([7, 7], np.uint64), np.array([5, 3]), np.array([10, 100]))
    >>> bool((moved == order + np.repeat([10, 100], [5, 3])).all())
    True
    """
    keys = np.asarray(keys, dtype=np.uint64)
    sizes = np.asarray(sizes, dtype=np.int64)
    out = np.empty(int(sizes.sum()), dtype=np.int64)
    if not sizes.size:
        return out
    if offsets is None:
        offsets = np.zeros(sizes.size, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    width = max(int(sizes.max()) - 1, 1).bit_length()  # bits of a member position
    if KEY_BITS + width > 63:  # passes of 2**31 members and more: one lexsort each
        start = 0
        for key, size, offset in zip(keys.tolist(), sizes.tolist(), offsets.tolist(), strict=True):
            out[start : start + size] = _sorted_by_keys(np.uint64(key), size)
            out[start : start + size] += offset
            start += size
        return out
    per_batch = 2 ** (63 - KEY_BITS - width)  # passes one packed sort can tell apart
    ends = np.cumsum(sizes)
    first = 0
    while first < sizes.size:
        # A long pass is sorted alone; short ones together, as many as fit beside
        # the keys and at most _BATCH members in all.
        base = ends[first] - sizes[first]
        last = first + 1
        if sizes[first] < _LONG_PASS:
            last = int(np.searchsorted(ends, base + _BATCH, side="right"))
            long = np.flatnonzero(sizes[first:last] >= _LONG_PASS)
            last = min(max(last, first + 1), first + per_batch, sizes.size)
            if long.size:
                last = min(last, first + int(long[0]))
        batch = slice(first, last)
        _sort_batch(keys[batch], sizes[batch], offsets[batch], width, out[base : ends[last - 1]])
        first = last
    return out


def _sort_batch(
    keys: np.ndarray, sizes: np.ndarray, offsets: np.ndarray, width: int, out: np.ndarray
) -> None:
    """:func:`pass_orders` of passes that fit one packed sort: ``pass | key | position``.

    The keys are made ``_BATCH`` at a time (each step stays in cache), then sorted at once.
    """
    n = out.size
    if sizes.size < 2**SHORT_BITS and quicksort_is_slow():
        _radix_batch(keys, sizes, offsets, out)
        return
    packed = out  # filled in place, sorted, then reduced to the positions
    if sizes.size == 1:
        for first in range(0, n, _BATCH):
            part = packed[first : first + _BATCH]
            _packed_keys(keys[0], np.arange(first, first + part.size), width, part)
        packed.sort()
        packed &= (1 << width) - 1
        packed += offsets[0]
        return
    # the pass of every entry once; the rest are gathers in order
    owner = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    position = np.arange(n, dtype=np.int64)
    position -= np.take(np.cumsum(sizes) - sizes, owner)
    _packed_keys(np.take(keys, owner), position, width, packed)
    shifted = owner << (KEY_BITS + width)
    packed |= shifted
    del shifted
    packed.sort()
    packed &= (1 << width) - 1
    packed += np.take(offsets, owner)  # owner is ascending, as the sorted passes are


def _radix_batch(keys: np.ndarray, sizes: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> None:
    """:func:`_sort_batch` by radix passes: stable by sort key, then stable by pass.

    The same order as the packed sort (positions ascend inside a pass before
    the passes, so ties of the key keep position order), for machines where
    numpy's sort of int64 is the slow one (:func:`~clusterclip.schedule.sorting.quicksort_is_slow`).
    """
    starts = np.cumsum(sizes) - sizes
    if sizes.size == 1:
        order = radix_order(_sort_keys(keys[0], np.arange(out.size, dtype=np.int64)), KEY_BITS)
        order += offsets[0]
        out[:] = order
        return
    owner = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    position = np.arange(out.size, dtype=np.int64)
    position -= np.take(starts, owner)
    order = radix_order(_sort_keys(np.take(keys, owner), position), KEY_BITS)
    by_pass = np.argsort(np.take(owner, order).astype(np.uint16), kind="stable")
    order = np.take(order, by_pass)  # the batch's entries, by pass, then key, then position
    # owner is ascending: pass j's entries start at starts[j]; they become member indices
    order += np.take(offsets - starts, owner)
    out[:] = order


def _sort_keys(key: np.ndarray, position: np.ndarray) -> np.ndarray:
    """``mix64(key + (position + 1) * GAMMA) >> 32`` (int64): the members' sort keys."""
    word = position.astype(np.uint64)
    word += _ONE
    word *= _GAMMA
    word += key
    mix64(word)
    word >>= _DROP  # the key's high KEY_BITS bits
    return word.view(np.int64)


def _packed_keys(key: np.ndarray, position: np.ndarray, width: int, out: np.ndarray) -> None:
    """``(mix64(key + (position + 1) * GAMMA) >> 32) << width | position`` into ``out``."""
    packed = _sort_keys(key, position)
    packed <<= width
    packed |= position
    out[:] = packed


def _sorted_by_keys(key: np.uint64, size: int) -> np.ndarray:
    """:func:`pass_orders` of one pass too long to pack its positions beside the keys."""
    position = np.arange(size, dtype=np.int64)
    word = position.astype(np.uint64)
    word += _ONE
    word *= _GAMMA
    word += key
    mix64(word)
    word >>= _DROP
    return position[np.lexsort((position, word))]


def _remainders(values: np.ndarray, divisors: np.ndarray) -> np.ndarray:
    """``values % divisors`` (int64) for ``values < 2**32`` and ``1 <= divisors <= SMALL_PASS``.

    By float64 division, exact here (both are integers far below 2**53, and a
    quotient that is not an integer is at least ``1 / SMALL_PASS`` from the next
    one, much more than the rounding), and several times faster than an integer
    modulo of uint64.

    >>> _remainders(np.array([2**32 - 1, 31, 64], np.uint64), np.array([32, 7, 32])).tolist()
    [31, 3, 0]
    """
    value = values.astype(np.float64)
    divisor = divisors.astype(np.float64)
    quotient = value / divisor
    np.floor(quotient, out=quotient)
    quotient *= divisor
    value -= quotient
    return value.astype(np.int64)


class PassTable:
    """Member table of ``G`` groups whose passes are version 4's (a :class:`GroupTable`).

    Memory: ``members`` (N), a cache of twice the members of the groups of more
    than ``SMALL_PASS`` members (documents, the dtype of ``members``), five int64
    per group, and the small groups' table (``TABLE_ROWS`` bytes per member of
    every size present, at most 2.1 MB).

    Parameters
    ----------
    members : ndarray of int32 or int64
        Document ids of all groups, concatenated group after group.
    sizes : ndarray of int64, shape (G,)
        Members per group (all >= 1).
    keys : ndarray of int64, shape (G,)
        Key of each group (the cluster id; 0 for a corpus group).
    seed, purpose : int

    Examples
    --------
    >>> table = PassTable(np.arange(40), np.array([2, 38]), np.array([7, 9]), seed=0, purpose=2)
    >>> sorted(table.lookup(np.zeros(4, np.int64), np.arange(4)).tolist())  # two passes of 0, 1
    [0, 0, 1, 1]
    >>> sorted(table.lookup(np.ones(38, np.int64), np.arange(38)).tolist()) == list(range(2, 40))
    True
    """

    def __init__(
        self, members: np.ndarray, sizes: np.ndarray, keys: np.ndarray, *, seed: int, purpose: int
    ) -> None:
        self.members = members
        sizes = np.asarray(sizes, dtype=np.int64)
        self.keys = np.asarray(keys, dtype=np.int64)
        self.seed = seed
        self.purpose = purpose
        small = sizes <= SMALL_PASS
        present = np.flatnonzero(np.bincount(sizes[small], minlength=1))
        self._present = present.tolist()
        starts = np.zeros(SMALL_PASS + 1, dtype=np.int64)
        starts[present] = TABLE_ROWS * (np.cumsum(present) - present)
        # One row per group, read in one gather per draw: member offset, size,
        # group key (its uint64 bits), and either where its size's rows start in
        # the table (small) or the pass its cache holds (-1: none). Four int64 (32
        # bytes): numpy gathers such rows several times faster than rows of five.
        self._records = np.zeros((sizes.size, 4), dtype=np.int64)
        self._records[:, 0] = np.cumsum(sizes) - sizes
        self._records[:, 1] = sizes
        self._records[:, 2] = group_keys(seed, purpose, self.keys).view(np.int64)
        self._records[:, 3] = np.where(small, starts[np.minimum(sizes, SMALL_PASS)], -1)
        self.offsets = self._records[:, 0]  # views of the rows
        self.sizes = self._records[:, 1]
        self._keys = self._records[:, 2].view(np.uint64)
        #: Where each larger group's cached pass starts in the cache (read only for them).
        self._cached_at = np.zeros(sizes.size, dtype=np.int64)
        self._table: np.ndarray | None = None
        large = int(sizes[~small].sum())
        self._largest = int(sizes.max()) if sizes.size else 0
        self._cache = np.empty(2 * large, dtype=members.dtype)
        self._used = 0  # cache entries written since it was last emptied

    def __len__(self) -> int:
        return len(self.sizes)

    def _small_table(self) -> np.ndarray:
        """The small groups' permutations (uint8), for the sizes present; made on first use.

        Each size's rows come from a stream of their own, so the table does not
        depend on which other sizes are present.
        """
        if self._table is None:
            parts = []
            for size in self._present:
                words = seed_sequence(self.seed, PURPOSE_SMALL_TABLE, self.purpose, size)
                rng = np.random.Generator(np.random.PCG64(words))
                rows = np.tile(np.arange(size, dtype=np.uint8), (TABLE_ROWS, 1))
                parts.append(rng.permuted(rows, axis=1, out=rows).ravel())
            self._table = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        return self._table

    def _from_table(self, record: np.ndarray, passes: np.ndarray, cursor: np.ndarray) -> np.ndarray:
        """Member positions of draws of small groups (``cursor`` is overwritten).

        Row ``P mod TABLE_ROWS`` of the group's size, read from ``(P >> 32) mod
        size`` on, cyclically. Every intermediate is non-negative and below
        2**63, so its uint64 and int64 views agree.
        """
        size = np.ascontiguousarray(record[:, 1])
        keys = pass_keys(np.ascontiguousarray(record[:, 2]).view(np.uint64), passes)
        rows = (keys & np.uint64(TABLE_ROWS - 1)).view(np.int64)
        keys >>= _S32
        turned = cursor
        turned += _remainders(keys, size)
        turned -= size * (turned >= size)
        turned += record[:, 3]
        rows *= size
        turned += rows
        return np.take(self._small_table(), turned).astype(np.int64)

    def lookup(
        self,
        group: np.ndarray,
        draw: np.ndarray,
        *,
        first: np.ndarray | None = None,
        end: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Documents of draw numbers ``draw`` of groups ``group`` (int64, vectorised).

        ``first`` and ``end`` are accepted for the :class:`GroupTable` interface
        and not needed; ``out``, when given, receives the documents (the
        compiled loop writes there directly).
        """
        group = np.ascontiguousarray(group, dtype=np.int64)
        draw = np.ascontiguousarray(draw, dtype=np.int64)
        compiled = self._compiled_lookup(group, draw, out)
        if compiled is not None:  # the same documents, in C (clusterclip.schedule.kernels)
            return compiled
        return written(self._lookup_numpy(group, draw), out)

    def _lookup_numpy(self, group: np.ndarray, draw: np.ndarray) -> np.ndarray:
        record = np.take(self._records, group, axis=0)
        size = record[:, 1]
        passes, cursor = np.divmod(draw, size)
        small = size <= SMALL_PASS
        if small.all():
            where = self._from_table(record, passes, cursor)
            where += record[:, 0]
            return np.take(self.members, where).astype(np.int64)
        if not small.any():
            return self._from_cache(group, record, passes, cursor)
        out = np.empty(group.size, dtype=np.int64)
        rest = np.flatnonzero(small)
        where = self._from_table(record[rest], passes[rest], cursor[rest])
        where += record[rest, 0]
        out[rest] = np.take(self.members, where)
        big = np.flatnonzero(~small)
        out[big] = self._from_cache(group[big], record[big], passes[big], cursor[big])
        return out

    def _compiled_lookup(
        self, group: np.ndarray, draw: np.ndarray, out: np.ndarray | None
    ) -> np.ndarray | None:
        """:meth:`lookup` by the compiled loop (into ``out`` if given), making room in the cache."""
        if not kernels.compiled():
            return None
        table = self._small_table() if self._present else np.zeros(0, np.uint8)
        if out is None:
            out = np.empty(group.size, dtype=np.int64)
        first = 0
        while True:
            done = kernels.lookup(
                group, draw, first, self._records, self._cached_at, self._cache, self._used,
                self.members, table, out, self._largest,
            )  # fmt: skip
            if done is None:
                return None
            first, self._used = done
            if first == group.size:
                return out
            self._make_room(int(self.sizes[group[first]]))

    def _from_cache(
        self, group: np.ndarray, record: np.ndarray, passes: np.ndarray, cursor: np.ndarray
    ) -> np.ndarray:
        """Documents of draws of larger groups: their cached pass, else a new one."""
        where = np.take(self._cached_at, group)
        where += cursor
        docs = np.take(self._cache, where).astype(np.int64)
        missed = np.flatnonzero(record[:, 3] != passes)
        if missed.size:
            docs[missed] = self._new_passes(group[missed], passes[missed], cursor[missed])
        return docs

    def _new_passes(self, group: np.ndarray, passes: np.ndarray, cursor: np.ndarray) -> np.ndarray:
        """Documents of draws whose pass is not cached: make each (group, pass) once.

        The passes made go to the cache; each group's latest one is its cached
        pass, unless the cache holds a later one.
        """
        order = np.lexsort((passes, group))
        group, passes = group[order], passes[order]
        new = np.ones(group.size, dtype=bool)
        new[1:] = (group[1:] != group[:-1]) | (passes[1:] != passes[:-1])
        pair_of = np.cumsum(new) - 1
        pair_group, pair_pass = group[new], passes[new]
        sizes = self.sizes[pair_group]
        keys = pass_keys(self._keys[pair_group], pair_pass)
        made = pass_orders(keys, sizes, self.offsets[pair_group])  # indices into members
        starts = np.cumsum(sizes) - sizes
        at = self._room(made.size)
        documents = self._cache[at : at + made.size]
        np.take(self.members, made, out=documents)
        docs = np.empty(group.size, dtype=np.int64)
        docs[order] = documents[starts[pair_of] + cursor[order]]
        latest = np.ones(pair_group.size, dtype=bool)
        latest[:-1] = pair_group[1:] != pair_group[:-1]
        kept = np.flatnonzero(latest)
        kept = kept[pair_pass[kept] > self._records[pair_group[kept], 3]]
        self._records[pair_group[kept], 3] = pair_pass[kept]
        self._cached_at[pair_group[kept]] = at + starts[kept]
        return docs

    def _room(self, n: int) -> int:
        """Where ``n`` new cache entries go; when full, keep each group's cached pass only."""
        self._make_room(n)
        at = self._used
        self._used += n
        return at

    def _make_room(self, n: int) -> None:
        """Room for ``n`` more cache entries: when full, keep each group's cached pass only."""
        if self._used + n > self._cache.size:
            # column 3 of a small group is its table's start, not a cached pass
            cached = np.flatnonzero((self._records[:, 3] >= 0) & (self.sizes > SMALL_PASS))
            sizes = self.sizes[cached]
            source = np.repeat(self._cached_at[cached] - (np.cumsum(sizes) - sizes), sizes)
            source += np.arange(int(sizes.sum()), dtype=np.int64)
            kept = self._cache[source]  # every cached pass, packed at the front
            self._cache[: kept.size] = kept
            self._cached_at[cached] = np.cumsum(sizes) - sizes
            self._used = int(kept.size)
        if self._used + n > self._cache.size:  # passes asked for at once: room for them
            grown = np.empty(self._used + n, dtype=self._cache.dtype)
            grown[: self._used] = self._cache[: self._used]
            self._cache = grown

    def tokens_of_first(self, counts: np.ndarray, lengths: np.ndarray) -> int:
        """Total tokens of the first ``counts[g]`` draws of every group (exact).

        Whole passes contribute the group's total; the partial passes their
        orders' prefixes, looked up at once.
        """
        return tokens_by_lookup(self, counts, lengths)
