"""Pass permutations of ``SCHEDULE_VERSION`` 3: a keyed Feistel bijection, computed per draw.

Version 3 draws document ``j`` of a group of ``s`` members (a cluster, or the
whole corpus for ``policy="random"`` and the fallback passes) as::

    pass p = j // s,  cursor i = j % s,
    document = members[g][permute(i)]   with permute keyed by (seed, purpose, key, p)

``permute`` is a bijection on ``[0, s)`` evaluated element by element, so a
draw costs the same whatever the group size or the pass, and nothing per
(group, pass) is generated, cached or stored: the memory of the lookup is the
member table and one key per group.

The bijection (:func:`permute`)
-------------------------------
* ``b = bit_length(s - 1)`` bits (0 for ``s = 1``), so ``2**b < 2 s``.
* **Keys** (splitmix64 throughout, :func:`mix64`): a group key
  ``G = mix64(mix64(mix64(seed) ^ purpose) ^ key)`` (``key``: the cluster id, 0 for
  the corpus group) and a pass key ``P = mix64(G + (p + 1) * GAMMA)`` -- output
  ``p`` of a splitmix64 stream seeded with ``G``.
* **Rounds**: four rounds of a rotating (unbalanced) Feistel network on ``b``
  bits. Round ``r`` splits ``x`` into its low ``w`` bits ``lo`` (``w = b // 2``
  for even ``r``, ``b - b // 2`` for odd ``r``) and the high ``b - w`` bits
  ``hi``, and maps ``x -> (lo << (b - w)) | (hi ^ F_r(lo))`` with
  ``F_r(lo) = floor(((4 lo + r + 1) GAMMA xor P) MIX1 / 2**32) mod 2**(b - w)``
  (products mod 2**64; one multiply-xor-multiply, a quarter of a full mix:
  the key ``P`` is already mixed). Each round is
  a bijection of ``[0, 2**b)`` (``lo`` is read back from the top bits, then
  ``hi`` from the xor), so the network is.
* **Cycle walking**: a value ``>= s`` is mapped again until it falls in
  ``[0, s)``: the restriction of a bijection of ``[0, 2**b)`` to ``[0, s)``
  by cycle walking is a bijection of ``[0, s)``. Fewer than two rounds of the
  network per value on average (``2**b < 2 s``), done for the values still
  out of range only.

Small groups (a table instead)
------------------------------
A Feistel network on a handful of bits is far from a uniform choice among
permutations (the pair of places of two members is visibly biased). Groups
of at most ``SMALL_GROUP`` members therefore read their pass permutation
from a table: ``TABLE_ROWS`` uniformly random permutations of ``[0, s)`` per
size ``s``, drawn once from ``seed_sequence(seed, PURPOSE_SMALL_TABLE, purpose, s)``
(row ``r`` is the ``r``-th row of ``Generator.permuted`` on ``TABLE_ROWS`` copies
of ``arange(s)``); cursor ``i`` of pass ``p`` of a group reads entry
``(i + (P >> 32)) mod s`` of row ``P mod TABLE_ROWS``. So each pass is a random
permutation (from a pool of ``4096 s`` per size and seed) in which every
member's place is uniform, consecutive passes are independent, and a draw
costs one gather.

Large groups (a generator per pass)
-----------------------------------
The network costs a few hundred nanoseconds a draw whatever the size, while
a generated permutation costs a few tens once its pass is used up. Groups of
``LARGE_GROUP`` to ``HUGE_GROUP`` members therefore draw pass ``p`` as
``default_rng(seed_sequence(seed, purpose, key, p)).permutation(s)`` (the
same row as ``chunk_permutations(seed, purpose, key, p, s, rows=1)``). The row
of the pass a group is in is cached (one per group, least recently used ones
evicted past ``ROW_CACHE`` entries): a speed knob, never part of the result.
Bigger groups keep the bijection, so no row of more than ``HUGE_GROUP``
entries is ever held.

Every constant here (``GAMMA``, the mixing constants, four rounds, the keys'
layout) is part of ``SCHEDULE_VERSION`` 3: changing any of them changes the
schedules (``tests/schedule/test_golden.py`` pins them).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from clusterclip.schedule.groups import sorted_with_order, tokens_by_lookup
from clusterclip.schedule.protocols import written
from clusterclip.schedule.seeds import PURPOSE_SMALL_TABLE, generators, seed_sequence

__all__ = [
    "FEISTEL_ROUNDS",
    "HUGE_GROUP",
    "LARGE_GROUP",
    "ROW_CACHE",
    "SMALL_GROUP",
    "TABLE_ROWS",
    "FeistelGroups",
    "GAMMA",
    "group_keys",
    "mix64",
    "pass_keys",
    "permute",
]

#: splitmix64's increment (the golden ratio in 64 bits).
GAMMA = 0x9E3779B97F4A7C15
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_GAMMA = np.uint64(GAMMA)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
_ONE, _TWO = np.uint64(1), np.uint64(2)

#: Rounds of the Feistel network (part of SCHEDULE_VERSION 3).
FEISTEL_ROUNDS = 6

#: Groups of at most this many members read their passes from a table (version 3).
SMALL_GROUP = 32
#: Permutations per size in that table (a power of two; version 3).
TABLE_ROWS = 4096
#: Groups of at least this many members (and at most ``HUGE_GROUP``) draw each
#: pass's permutation from a generator (version 3; chosen by measurement).
LARGE_GROUP = 256
#: Above this many members a group goes back to the bijection (no row to hold).
HUGE_GROUP = 2**24
#: Cached permutation entries (int32) of the large groups: a speed knob only.
ROW_CACHE = 2**24


def mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function on uint64 (a bijection of 64-bit words), in place.

    >>> hex(int(mix64(np.array([0x9E3779B97F4A7C15], dtype=np.uint64))[0]))
    '0xe220a8397b1dcdaf'
    """
    z ^= z >> _S30
    z *= _MIX1
    z ^= z >> _S27
    z *= _MIX2
    z ^= z >> _S31
    return z


def group_keys(seed: int, purpose: int, keys: np.ndarray) -> np.ndarray:
    """The 64-bit key ``G`` of each group (uint64, shape of ``keys``).

    Parameters
    ----------
    seed : int
        In [0, 2**63-1].
    purpose : int
        The purpose code of the groups (cluster passes, random passes, fallback).
    keys : ndarray of int64
        Non-negative group keys (the cluster ids): distinct keys give distinct ``G``.
    """
    base = mix64(np.array([seed], dtype=np.uint64))
    base ^= np.uint64(purpose)
    base = mix64(base)
    return mix64(np.asarray(keys, dtype=np.int64).astype(np.uint64) ^ base)


def pass_keys(group_key: np.ndarray, passes: np.ndarray) -> np.ndarray:
    """The key ``P`` of pass ``passes`` of groups with keys ``group_key`` (uint64, elementwise)."""
    z = np.asarray(passes, dtype=np.int64).astype(np.uint64)
    z += _ONE
    z *= _GAMMA
    z += group_key
    return mix64(z)


_M32A, _M32B = np.uint32(0x7FEB352D), np.uint32(0x846CA68B)
_S16, _S15 = np.uint32(16), np.uint32(15)
_GAMMA32 = np.uint32(0x9E3779B9)


def mix32(z: np.ndarray) -> np.ndarray:
    """A 32-bit mixing bijection (Wellons' ``lowbias32``) on uint32, in place.

    >>> hex(int(mix32(np.array([1], dtype=np.uint32))[0]))
    '0x688990c0'
    """
    z ^= z >> _S16
    z *= _M32A
    z ^= z >> _S15
    z *= _M32B
    z ^= z >> _S16
    return z


def _network(x: np.ndarray, key: np.ndarray, bits: int) -> np.ndarray:
    """The Feistel rounds on ``bits``-bit values ``x``, in place.

    ``bits <= 32``: uint32 words, round ``r`` keyed by the low (even ``r``) or
    high (odd ``r``) half of ``P``; wider: uint64 words keyed by ``P``.
    """
    narrow = bits <= 32
    kind, mix, gamma = (np.uint32, mix32, _GAMMA32) if narrow else (np.uint64, mix64, _GAMMA)
    halves = (
        ((key & np.uint64(0xFFFFFFFF)).astype(np.uint32), (key >> _S32).astype(np.uint32))
        if narrow
        else (key, key)
    )
    half = bits // 2
    lo = np.empty_like(x)
    f = np.empty_like(x)
    two = kind(2)
    for r in range(FEISTEL_ROUNDS):
        low_bits = half if r % 2 == 0 else bits - half
        high_bits = bits - low_bits
        np.bitwise_and(x, kind((1 << low_bits) - 1), out=lo)
        x >>= kind(low_bits)  # x now holds hi
        # F_r(lo) = mix((4 lo + r + 1) * GAMMA ^ K_r), cut to the width of hi
        np.left_shift(lo, two, out=f)
        f += kind(r + 1)
        f *= gamma
        f ^= halves[r % 2]
        mix(f)
        f &= kind((1 << high_bits) - 1)
        x ^= f
        lo <<= kind(high_bits)
        x |= lo
    return x


def permute(values: np.ndarray, sizes: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Image of ``values`` under the keyed bijection of ``[0, sizes)`` (elementwise).

    Parameters
    ----------
    values : ndarray of int64, shape (n,)
        Each in ``[0, sizes)``.
    sizes : ndarray of int64, shape (n,)
        Domain size of each value (>= 1).
    keys : ndarray of uint64, shape (n,)
        The pass key ``P`` of each value (:func:`pass_keys`).

    Returns
    -------
    ndarray of int64, shape (n,)
        For a fixed ``(size, key)``, ``permute(arange(size))`` is a permutation.

    Examples
    --------
    >>> key = pass_keys(group_keys(0, 2, np.arange(1)), np.zeros(10, np.int64))
    >>> sorted(permute(np.arange(10), np.full(10, 10), key).tolist()) == list(range(10))
    True
    """
    values = np.asarray(values, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.uint64)
    out = np.zeros(values.shape, dtype=np.int64)
    # Values of one bit width at a time: every shift and mask is then a scalar.
    bits = bit_lengths(sizes)
    order = np.argsort(bits, kind="stable")  # a radix sort of uint8
    edges = np.searchsorted(bits[order], np.arange(66, dtype=np.uint8))
    for width in range(1, 65):
        which = order[edges[width] : edges[width + 1]]
        if which.size:
            out[which] = _permute_width(values[which], sizes[which], keys[which], width)
    return out


def bit_lengths(sizes: np.ndarray) -> np.ndarray:
    """``bit_length(s - 1)`` for every size (uint8): 0 for 1, 1 for 2, 2 for 3 and 4, ...

    >>> bit_lengths(np.array([1, 2, 3, 4, 5, 2**40, 2**40 + 1])).tolist()
    [0, 1, 2, 2, 3, 40, 41]
    """
    below = np.asarray(sizes, dtype=np.int64) - 1
    # frexp's exponent is the bit length (exact below 2**53; corrected above)
    _, exponent = np.frexp(below.astype(np.float64))
    bits = exponent.astype(np.int64)
    big = np.flatnonzero(below >= 2**53)
    for i in big.tolist():
        bits[i] = int(below[i]).bit_length()
    return bits.astype(np.uint8)


def _permute_width(
    values: np.ndarray, sizes: np.ndarray, keys: np.ndarray, width: int
) -> np.ndarray:
    kind = np.uint32 if width <= 32 else np.uint64
    x = _network(values.astype(kind), keys, width)
    limit = sizes.astype(kind)
    out_of_range = np.flatnonzero(x >= limit)
    while out_of_range.size:  # cycle walking, on the values still outside [0, s)
        walked = _network(x[out_of_range], keys[out_of_range], width)
        x[out_of_range] = walked
        out_of_range = out_of_range[walked >= limit[out_of_range]]
    return x.astype(np.int64)


class FeistelGroups:
    """Member table of ``G`` groups whose passes are :func:`permute` (version 3).

    The same lookups as :class:`~clusterclip.schedule.groups.Groups`, with no
    state: draw ``j`` of group ``g`` is computed from ``(g, j)`` alone. Memory:
    ``members`` (N) plus three int64 and one uint64 per group.

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
    >>> groups = FeistelGroups(np.arange(6), np.array([2, 4]), np.array([7, 9]), seed=0, purpose=2)
    >>> sorted(groups.lookup(np.ones(8, np.int64), np.arange(8)).tolist())  # two passes of 2..5
    [2, 2, 3, 3, 4, 4, 5, 5]
    """

    def __init__(
        self, members: np.ndarray, sizes: np.ndarray, keys: np.ndarray, *, seed: int, purpose: int
    ) -> None:
        self.members = members
        sizes = np.asarray(sizes, dtype=np.int64)
        self.keys = np.asarray(keys, dtype=np.int64)
        self.seed = seed
        self.purpose = purpose
        # The small sizes present and where each one's rows start in the table.
        present = np.flatnonzero(np.bincount(sizes[sizes <= SMALL_GROUP], minlength=1))
        self._present = present.tolist()
        self._starts = np.zeros(SMALL_GROUP + 1, dtype=np.int64)
        self._starts[present] = TABLE_ROWS * (np.cumsum(present) - present)
        # One row per group: member offset, size, group key (its uint64 bits) and,
        # for small groups, where its size's rows start in the table. A lookup
        # reads a group's row in one memory access (np.take of 32-byte rows).
        self._records = np.zeros((sizes.size, 4), dtype=np.int64)
        self._records[:, 0] = np.cumsum(sizes) - sizes
        self._records[:, 1] = sizes
        self._records[:, 2] = group_keys(seed, purpose, self.keys).view(np.int64)
        small = sizes <= SMALL_GROUP
        self._records[small, 3] = self._starts[sizes[small]]
        self.offsets = self._records[:, 0]  # views of the rows
        self.sizes = self._records[:, 1]
        self.group_keys = self._records[:, 2].view(np.uint64)
        self._small: np.ndarray | None = None
        # group -> (pass, its permutation as int32), least recently used first
        self._rows: OrderedDict[int, tuple[int, np.ndarray]] = OrderedDict()
        self._cached = 0

    def _table(self) -> np.ndarray:
        """The small groups' permutations (uint8), for the sizes present (size ``s``'s from ``_starts[s]``).

        Made once, on first use. Each size's rows come from a stream of their
        own, so the table does not depend on which other sizes are present.
        """
        if self._small is None:
            parts = []
            for size in self._present:
                rng = np.random.Generator(
                    np.random.PCG64(
                        seed_sequence(self.seed, PURPOSE_SMALL_TABLE, self.purpose, size)
                    )
                )
                rows = np.tile(np.arange(size, dtype=np.uint8), (TABLE_ROWS, 1))
                parts.append(rng.permuted(rows, axis=1, out=rows).ravel())
            self._small = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        return self._small

    def _from_table(
        self, size: np.ndarray, cursor: np.ndarray, keys: np.ndarray, start: np.ndarray
    ) -> np.ndarray:
        """Row ``P mod TABLE_ROWS`` of the table, read from ``(P >> 32) mod size`` on (cyclically).

        ``start``: where the rows of each draw's size begin (``_starts[size]``).
        ``cursor`` and ``keys`` are overwritten (the callers' scratch: no copies).
        Every intermediate is non-negative and below 2**63, so its uint64 and
        int64 views agree.
        """
        rows = (keys & np.uint64(TABLE_ROWS - 1)).view(np.int64)
        shift = keys
        shift >>= _S32
        shift %= size.view(np.uint64)
        turned = cursor
        turned += shift.view(np.int64)
        turned -= size * (turned >= size)
        turned += start
        rows *= size
        turned += rows
        return np.take(self._table(), turned).astype(np.int64)

    def __len__(self) -> int:
        return len(self.sizes)

    def positions(self, group: np.ndarray, draw: np.ndarray) -> np.ndarray:
        """Member position (in ``[0, size)``) of draws ``draw`` of groups ``group``."""
        return self._positions(group, draw, np.take(self._records, group, axis=0))

    def _positions(self, group: np.ndarray, draw: np.ndarray, record: np.ndarray) -> np.ndarray:
        """:meth:`positions`, given the groups' rows of ``_records``."""
        size = np.ascontiguousarray(record[:, 1])
        passes, cursor = np.divmod(draw, size)
        small = size <= SMALL_GROUP
        if small.all():  # one gather from the table
            keys = pass_keys(record[:, 2].view(np.uint64), passes)
            return self._from_table(size, cursor, keys, record[:, 3])
        out = np.empty(cursor.shape, dtype=np.int64)
        rows = (size >= LARGE_GROUP) & (size <= HUGE_GROUP)
        which = np.flatnonzero(rows)
        if which.size:
            out[which] = self._from_rows(group[which], passes[which], cursor[which])
        if which.size == cursor.size:
            return out
        middle = np.flatnonzero(~small & ~rows)
        if middle.size:
            keys = pass_keys(self.group_keys[group[middle]], passes[middle])
            out[middle] = permute(cursor[middle], size[middle], keys)
        rest = np.flatnonzero(small)
        if rest.size:
            keys = pass_keys(self.group_keys[group[rest]], passes[rest])
            out[rest] = self._from_table(size[rest], cursor[rest], keys, record[rest, 3])
        return out

    def pass_row(self, group: int, pass_: int) -> np.ndarray:
        """The permutation of pass ``pass_`` of a large group (``LARGE_GROUP <= size <= HUGE_GROUP``)."""
        (rng,) = generators(
            self.seed, self.purpose, self.keys[[group]], np.array([pass_], dtype=np.int64)
        )
        return rng.permutation(int(self.sizes[group])).astype(np.int32)

    def _from_rows(self, group: np.ndarray, passes: np.ndarray, cursor: np.ndarray) -> np.ndarray:
        """Positions of draws of large groups, a run of one (group, pass) at a time."""
        order = None
        if group.size > 1 and not bool((group[1:] >= group[:-1]).all()):
            order = sorted_with_order(group)[1]  # draws of a group stay in order
            group, passes, cursor = group[order], passes[order], cursor[order]
        change = np.flatnonzero((group[1:] != group[:-1]) | (passes[1:] != passes[:-1])) + 1
        starts = np.concatenate([[0], change]).tolist()
        ends = [*starts[1:], group.size]
        heads = list(zip(group[starts].tolist(), passes[starts].tolist(), strict=True))
        rows: dict[tuple[int, int], np.ndarray] = {}
        missing = []
        for head in dict.fromkeys(heads):
            hit = self._rows.get(head[0])
            if hit is not None and hit[0] == head[1]:
                rows[head] = hit[1]
                self._rows.move_to_end(head[0])
            else:
                missing.append(head)
        if missing:  # the generators of all new rows, made in bulk
            made = generators(
                self.seed,
                self.purpose,
                self.keys[[g for g, _ in missing]],
                np.array([p for _, p in missing], dtype=np.int64),
            )
            for (g, p), rng in zip(missing, made, strict=True):
                rows[(g, p)] = self._keep(g, p, rng.permutation(int(self.sizes[g])))
        out = np.empty(group.shape[0], dtype=np.int64)
        for head, start, end in zip(heads, starts, ends, strict=True):
            out[start:end] = rows[head][cursor[start:end]]
        if order is not None:
            unsorted = np.empty_like(out)
            unsorted[order] = out
            return unsorted
        return out

    def _keep(self, group: int, pass_: int, row: np.ndarray) -> np.ndarray:
        """Cache ``row`` as the pass ``group`` is in; evict the least recently used past ROW_CACHE."""
        row = row.astype(np.int32)
        old = self._rows.pop(group, None)
        if old is not None:
            self._cached -= old[1].size
        self._rows[group] = (pass_, row)
        self._cached += row.size
        while self._cached > ROW_CACHE and len(self._rows) > 1:
            _, (_, evicted) = self._rows.popitem(last=False)
            self._cached -= evicted.size
        return row

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

        ``first`` and ``end`` (the per-group draw ranges) are accepted for the
        interface of :class:`~clusterclip.schedule.groups.Groups` and not needed;
        ``out``, when given, receives the documents.
        """
        group = np.asarray(group, dtype=np.int64)
        draw = np.asarray(draw, dtype=np.int64)
        record = np.take(self._records, group, axis=0)
        where = self._positions(group, draw, record)
        where += record[:, 0]
        docs = np.take(self.members, where)  # take: faster than [where]
        return written(docs.astype(np.int64, copy=False), out)

    def tokens_of_first(self, counts: np.ndarray, lengths: np.ndarray) -> int:
        """Total tokens of the first ``counts[g]`` draws of every group (exact).

        Whole passes contribute the group's total; the partial passes their
        permutations' prefixes, all computed at once.
        """
        return tokens_by_lookup(self, counts, lengths)
