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

Every ``SeedSequence`` of the schedule is made by :func:`seed_sequence`, which
feeds numpy one 32-bit word per part when every part fits in 32 bits (the
words of ``SCHEDULE_VERSION`` 1) and a fixed-width layout otherwise, so that
two different ``(seed, purpose, parts)`` never share entropy.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CHOICE_BLOCK",
    "PERMUTATION_CHUNK",
    "PURPOSE_CHOICE",
    "PURPOSE_CLUSTER_PASS",
    "PURPOSE_FALLBACK_PASS",
    "PURPOSE_PHASE",
    "PURPOSE_RANDOM_PASS",
    "Groups",
    "chunk_permutations",
    "entropy_words",
    "passes_per_chunk",
    "seed_sequence",
]

# Purpose codes: the second word of every SeedSequence, so that streams drawn
# for different purposes never share entropy. Part of SCHEDULE_VERSION.
PURPOSE_CHOICE = 1  # cluster choices of one position block
PURPOSE_CLUSTER_PASS = 2  # pass permutations of one cluster
PURPOSE_RANDOM_PASS = 3  # pass permutations of the corpus, policy="random"
PURPOSE_FALLBACK_PASS = 4  # pass permutations of the corpus after exhaustion
PURPOSE_PHASE = 5  # phases of the planned order

#: Second word of the wide layout of :func:`entropy_words` (never a purpose code).
_WIDE = 0xFFFFFFFF
_WORD = 2**32

#: Positions per cluster-choice block: block b's uniforms come from
#: SeedSequence([seed, PURPOSE_CHOICE, b]). Part of SCHEDULE_VERSION.
CHOICE_BLOCK = 65536

#: A permutation chunk holds at least this many draws (ceil(C / size) passes).
PERMUTATION_CHUNK = 2048


def entropy_words(seed: int, purpose: int, *parts: int) -> list[int]:
    """The 32-bit words a schedule ``SeedSequence`` is made from.

    ``[seed, purpose, *parts]`` when all of them are below ``2**32`` (the
    layout every schedule has used; numpy reads one word per number). Any
    larger number (a seed in ``[2**32, 2**63)``, a cluster id or chunk beyond
    32 bits) switches to the wide layout ``[seed_low, 0xFFFFFFFF, seed_high,
    purpose, part_low, part_high, ...]``: its second word is never a purpose
    code and its length is fixed per purpose, so no two inputs share words
    (numpy would read a large seed as two words, which can spell a small seed
    followed by other parts).

    >>> entropy_words(7, PURPOSE_CHOICE, 3)
    [7, 1, 3]
    >>> entropy_words(2**32 + 7, PURPOSE_CHOICE, 3)
    [7, 4294967295, 1, 1, 3, 0]
    """
    if seed < _WORD and all(part < _WORD for part in parts):
        return [seed, purpose, *parts]
    words = [seed % _WORD, _WIDE, seed // _WORD, purpose]
    for part in parts:
        words += [part % _WORD, part // _WORD]
    return words


def seed_sequence(seed: int, purpose: int, *parts: int) -> np.random.SeedSequence:
    """``SeedSequence(entropy_words(seed, purpose, *parts))``: every schedule stream starts here."""
    return np.random.SeedSequence(entropy_words(seed, purpose, *parts))


def passes_per_chunk(size: int) -> int:
    """Number of passes generated together for a group of ``size`` members."""
    return max(1, -(-PERMUTATION_CHUNK // int(size)))


def chunk_permutations(seed: int, purpose: int, key: int, chunk: int, size: int) -> np.ndarray:
    """The permutations of passes ``chunk*P .. chunk*P + P - 1`` of one group.

    Parameters
    ----------
    seed, purpose, key, chunk : int
        Non-negative parts of the ``SeedSequence``; ``key`` is the cluster id.
    size : int
        Group size (>= 1).

    Returns
    -------
    ndarray of int64, shape (P, size)
        Row ``r`` is the permutation of pass ``chunk*P + r``.

    Examples
    --------
    >>> chunk_permutations(0, PURPOSE_CLUSTER_PASS, 3, 0, 600).shape  # 4 passes of 600
    (4, 600)
    """
    n_passes = passes_per_chunk(size)
    if size == 1:  # the only permutation of one member: no randomness to draw
        return np.zeros((n_passes, 1), dtype=np.int64)
    rng = np.random.default_rng(seed_sequence(seed, purpose, key, chunk))
    if n_passes == 1:
        return rng.permutation(size)[None, :]
    return rng.permuted(np.tile(np.arange(size, dtype=np.int64), (n_passes, 1)), axis=1)


class Groups:
    """Member table of ``G`` groups with a one-chunk permutation cache each.

    Memory: ``members`` (N) plus the cache (at most N + G * PERMUTATION_CHUNK).

    Parameters
    ----------
    members : ndarray of int64
        Document ids of all groups, concatenated group after group.
    sizes : ndarray of int64, shape (G,)
        Members per group (all >= 1).
    keys : ndarray of int64, shape (G,)
        Key of each group in the permutation SeedSequence (the cluster id).
    seed, purpose : int
    """

    def __init__(
        self,
        members: np.ndarray,
        sizes: np.ndarray,
        keys: np.ndarray,
        *,
        seed: int,
        purpose: int,
    ) -> None:
        self.members = members
        self.sizes = sizes.astype(np.int64)
        self.keys = keys.astype(np.int64)
        self.seed = seed
        self.purpose = purpose
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.passes = np.array([passes_per_chunk(s) for s in self.sizes], dtype=np.int64)
        slots = self.passes * self.sizes
        self.cache_offsets = np.concatenate([[0], np.cumsum(slots)[:-1]]).astype(np.int64)
        self.cache = np.empty(int(slots.sum()), dtype=members.dtype)
        self.cached_chunk = np.full(len(self.sizes), -1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.sizes)

    def permutations(self, group: int, chunk: int) -> np.ndarray:
        """Pass permutations of one chunk of one group, shape (P, size)."""
        return chunk_permutations(
            self.seed, self.purpose, int(self.keys[group]), int(chunk), int(self.sizes[group])
        )

    def _load(self, group: int, chunk: int) -> None:
        start = self.offsets[group]
        own = self.members[start : start + self.sizes[group]]
        rows = self.permutations(group, chunk)
        begin = self.cache_offsets[group]
        self.cache[begin : begin + rows.size] = own[rows.ravel()]
        self.cached_chunk[group] = chunk

    def lookup(
        self,
        group: np.ndarray,
        draw: np.ndarray,
        *,
        first: np.ndarray | None = None,
        end: np.ndarray | None = None,
    ) -> np.ndarray:
        """Documents of draw numbers ``draw`` of groups ``group`` (vectorised).

        Parameters
        ----------
        group, draw : ndarray of int, same shape
            Group index and draw number (0-based count of earlier draws).
        first, end : ndarray of int, shape (G,), optional
            Per group, the range ``[first, end)`` of the draws asked for. When
            given, groups whose draws lie in one permutation chunk (nearly all)
            take a fast path: one gather per position.

        Returns
        -------
        ndarray of int64 document ids.
        """
        group = np.asarray(group, dtype=np.int64)
        draw = np.asarray(draw, dtype=np.int64)
        if first is None or end is None:
            return self._lookup_general(group, draw)
        per_chunk = self.passes * self.sizes
        present = end > first
        first_chunk = first // per_chunk
        last_chunk = (end - 1) // per_chunk
        single = present & (first_chunk == last_chunk)
        for g in np.flatnonzero(single & (first_chunk != self.cached_chunk)):
            self._load(int(g), int(first_chunk[g]))
        base = self.cache_offsets - self.cached_chunk * per_chunk
        index = base[group] + draw
        crossing = present & ~single
        if not crossing.any():
            return self.cache[index].astype(np.int64)
        slow = np.flatnonzero(crossing[group])
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
        cached chunk: one gather per position, then one scatter.
        """
        n = order.shape[0]
        end = first + per_group
        per_chunk = self.passes * self.sizes
        present = per_group > 0
        first_chunk = first // per_chunk
        last_chunk = (end - 1) // per_chunk
        single = present & (first_chunk == last_chunk)
        for g in np.flatnonzero(single & (first_chunk != self.cached_chunk)):
            self._load(int(g), int(first_chunk[g]))
        start = np.cumsum(per_group) - per_group
        shift = self.cache_offsets - self.cached_chunk * per_chunk + first - start
        index = np.arange(n, dtype=np.int64)
        index += np.repeat(shift, per_group)
        crossing = present & ~single
        if crossing.any():
            slow = np.flatnonzero(np.repeat(crossing, per_group))
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
        size = self.sizes[group]
        per_chunk = self.passes[group] * size  # draws covered by one chunk
        chunk = draw // per_chunk
        within = draw - chunk * per_chunk  # offset inside the chunk's flat cache slot
        out = np.empty(group.shape[0], dtype=np.int64)
        todo = np.arange(group.shape[0])
        while todo.size:
            g = group[todo]
            ready = chunk[todo] == self.cached_chunk[g]
            hit = todo[ready]
            out[hit] = self.cache[self.cache_offsets[group[hit]] + within[hit]]
            todo = todo[~ready]
            if not todo.size:
                break
            # Load, per group still waiting, the earliest chunk it needs; a
            # group crossing several chunks in one call takes several rounds.
            waiting = group[todo]
            needed = np.full(len(self.sizes), np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(needed, waiting, chunk[todo])
            for g_id in np.unique(waiting):
                self._load(int(g_id), int(needed[g_id]))
        return out

    def tokens_of_first(self, counts: np.ndarray, lengths: np.ndarray) -> int:
        """Total tokens of the first ``counts[g]`` draws of every group.

        Whole passes contribute the group's total; the partial pass the
        prefix of its permutation. Used to resume a token budget without
        replaying documents.
        """
        counts = np.asarray(counts, dtype=np.int64)
        member_tokens = lengths[self.members]
        totals = np.add.reduceat(member_tokens, self.offsets) if len(self.sizes) else np.zeros(0)
        full_passes = counts // self.sizes
        total = int((full_passes * totals).sum())
        partial = counts - full_passes * self.sizes
        for g in np.flatnonzero(partial):
            p = int(full_passes[g])
            per = int(self.passes[g])
            row = self.permutations(int(g), p // per)[p % per]
            start = self.offsets[g]
            own = member_tokens[start : start + self.sizes[g]]
            total += int(own[row[: partial[g]]].sum())
        return total
