"""Documents grouped by cluster: the present clusters, their sizes, members and caps.

The schedule draws each cluster's documents as whole shuffled passes, so it
needs the documents of every cluster together (ascending inside a cluster) and
the clusters' sizes, for any ids: dense (``0 .. K-1``) or sparse (hashes, ids
up to 2**62). :func:`grouped_by_label` does it with one sort of
``label << b | document``; :func:`present_clusters` and
:func:`members_by_group` are the other path (ids too wide to pack beside the
document bits). Memory: N int64 plus the result, beyond the labels; labels are
read :data:`LABEL_CHUNK` at a time so that no other temporary is as large.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from clusterclip.schedule import kernels
from clusterclip.schedule.sorting import SHORT_BITS, quicksort_is_slow, radix_order
from clusterclip.threads import available_cpus, spread

__all__ = [
    "LABEL_CHUNK",
    "NO_CAP",
    "GroupIndex",
    "group_caps",
    "grouped_by_label",
    "is_dense",
    "label_chunks",
    "member_dtype",
    "members_by_group",
    "present_clusters",
]


def member_dtype(n_documents: int) -> type:
    """int32 document ids when they fit: halves the member table and the cache."""
    return np.int32 if n_documents < 2**31 else np.int64


#: Labels are read this many at a time, so that no temporary is as large as them.
LABEL_CHUNK = 2**20

#: A cap no schedule reaches: no clip (``max_repeats=None``, or a cap this large).
NO_CAP = np.iinfo(np.int64).max // 4


def label_chunks(labels: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, labels.shape[0], LABEL_CHUNK):
        yield start, labels[start : start + LABEL_CHUNK]


def is_dense(labels: np.ndarray, max_label: int) -> bool:
    """Whether per-id tables (``max_label + 1`` entries) cost no more than the labels."""
    return max_label < max(labels.shape[0], 1024)


def present_clusters(labels: np.ndarray, max_label: int) -> tuple[np.ndarray, np.ndarray]:
    """Ascending ids of the non-empty clusters and their sizes (int64, shape (K,)).

    Dense ids: a count per id. Sparse ids: one sort of a copy of the labels
    (transient, as large as the labels), so nothing is indexed by id.
    """
    if is_dense(labels, max_label):
        counts = np.zeros(max_label + 1, dtype=np.int64)
        for _, part in label_chunks(labels):
            counts += np.bincount(part[part >= 0], minlength=max_label + 1)
        ids = np.flatnonzero(counts)
        return ids.astype(np.int64), counts[ids]
    ids, sizes = np.unique(labels, return_counts=True)
    usable = ids >= 0
    return ids[usable], sizes[usable].astype(np.int64)


class GroupIndex:
    """Group index of labels (-1: negative label or cluster not drawn), dense or sparse ids."""

    def __init__(self, group_ids: np.ndarray, max_label: int, dense: bool) -> None:
        self.group_ids = group_ids
        self.table = None
        if dense:  # label + 1 -> group
            self.table = np.full(max_label + 2, -1, dtype=np.int64)
            self.table[group_ids + 1] = np.arange(group_ids.size)

    def __call__(self, part: np.ndarray) -> np.ndarray:
        if self.table is not None:
            return self.table[np.maximum(part, -1) + 1]
        # Sorted queries: each search starts where the previous one ended (2-3x faster).
        order = np.argsort(part)
        where = np.empty(part.size, dtype=np.int64)
        where[order] = np.searchsorted(self.group_ids, part[order])
        np.minimum(where, self.group_ids.size - 1, out=where)
        return np.where(self.group_ids[where] == part, where, -1)


#: Documents per group are sorted as ``group << _DOC_BITS | document`` (one int64 sort).
_DOC_BITS = 34


def members_by_group(labels: np.ndarray, group_of: GroupIndex) -> np.ndarray:
    """Document ids grouped by group index, ascending inside groups (others left out).

    Fewer than 2**15 - 1 groups: a stable radix sort of int16 group indices;
    more: one sort of ``group << 34 | document`` (several times faster than a
    stable sort of int32 keys). Memory: N int64 plus the result, beyond the labels.
    """
    n = labels.shape[0]
    n_groups = group_of.group_ids.size
    member_type = member_dtype(n)
    if n_groups < 2**15 - 1 or n >= 2**_DOC_BITS or n_groups >= 2 ** (62 - _DOC_BITS):
        keys = np.empty(n, dtype=np.int16 if n_groups < 2**15 - 1 else np.int64)
        for start, part in label_chunks(labels):
            keys[start : start + part.size] = group_of(part)
        order = np.argsort(keys, kind="stable")  # a radix sort for int16 keys
        skipped = int(np.count_nonzero(keys < 0))
        return order[skipped:].astype(member_type)
    packed = np.empty(n, dtype=np.int64)
    for start, part in label_chunks(labels):
        packed[start : start + part.size] = group_of(part) << _DOC_BITS
        packed[start : start + part.size] |= np.arange(start, start + part.size)
    packed.sort()
    skipped = int(np.searchsorted(packed, 0))  # negative: no group
    members = np.empty(n - skipped, dtype=member_type)
    low = (1 << _DOC_BITS) - 1
    for start in range(0, members.size, LABEL_CHUNK):
        chunk = packed[skipped + start : skipped + start + LABEL_CHUNK]
        members[start : start + chunk.size] = chunk & low
    return members


def grouped_by_label(
    labels: np.ndarray, max_label: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Non-empty clusters and their documents from one sort of ``label << b | document``.

    Returns the ascending ids of the non-empty clusters, their sizes (int64)
    and the documents of each, concatenated in id order, ascending inside a
    cluster (negative labels left out); None when the labels do not fit beside
    ``b = bit_length(N - 1)`` document bits in an int64 (then
    :func:`present_clusters` and :func:`members_by_group` do it). One sort
    replaces a count or a sort of the labels, a group index per document and a
    sort of those, whatever the ids (dense or sparse). Memory: N int64 plus the
    result, beyond the labels.
    """
    n = labels.shape[0]
    by_counts = _grouped_by_counts(labels, max_label)
    if by_counts is not None:
        return by_counts
    bits = max(n - 1, 1).bit_length()
    if max_label >= 2 ** (63 - bits):
        return None
    packed = np.empty(n, dtype=np.int64)
    for start, part in label_chunks(labels):
        block = packed[start : start + part.size]
        np.maximum(part, -1, out=block)  # every negative label first, as -1
        block <<= bits
        block |= np.arange(start, start + part.size)
    packed.sort()
    skipped = int(np.searchsorted(packed, 0))
    members = np.empty(n - skipped, dtype=member_dtype(n))
    heads = []  # where each cluster's documents start in members
    low = (1 << bits) - 1
    previous = -1
    for start in range(0, members.size, LABEL_CHUNK):
        chunk = packed[skipped + start : skipped + start + LABEL_CHUNK]
        members[start : start + chunk.size] = chunk & low
        label = chunk >> bits
        change = np.empty(label.size, dtype=bool)
        change[0] = int(label[0]) != previous  # labels here are >= 0: a head at 0
        np.not_equal(label[1:], label[:-1], out=change[1:])
        heads.append(np.flatnonzero(change) + start)
        previous = int(label[-1])
    starts = np.concatenate(heads) if heads else np.zeros(0, dtype=np.int64)
    ids = packed[skipped + starts] >> bits
    sizes = np.diff(starts, append=members.size)
    return ids, sizes, members


#: Labels ordered at once by :func:`_place_by_chunks` (a chunk stays in cache).
_COUNT_CHUNK = 2**18
#: Fewest documents per part of :func:`_grouped_by_counts`; parts are ordered on
#: threads of their own (a speed knob only: the members are the same).
_PART_DOCUMENTS = 2**21
#: Most parts (and threads) of :func:`_grouped_by_counts`.
_MAX_PARTS = 4


def _grouped_by_counts(
    labels: np.ndarray, max_label: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`grouped_by_label` by counts, for dense ids where numpy's sort is the slow one.

    Each cluster's documents start where the counts of the clusters before it
    end. The documents are cut into parts (one per CPU, up to ``_MAX_PARTS``,
    each of at least ``_PART_DOCUMENTS``), and part ``j``'s documents of a
    cluster go after those of the parts before it, so the parts are ordered
    at once, on threads of their own: the same result as the packed sort,
    whatever the number of parts. The documents are placed in C where the
    compiled loops run (:func:`~clusterclip.schedule.kernels.place`). None where
    the ids are sparse, wider than 32 bits, or, without the compiled loops, the
    sort is fast here (:func:`~clusterclip.schedule.sorting.quicksort_is_slow`).
    """
    n = labels.shape[0]
    if n == 0 or not is_dense(labels, max_label) or max_label + 2 > 2**32:
        return None
    in_c = kernels.compiled() and labels.dtype in (np.int32, np.int64)  # a counting sort in C
    if not in_c and not quicksort_is_slow():
        return None  # numpy's AVX2 sort of N packed keys is faster (not so on Zen 4)
    parts = max(1, min(available_cpus(), _MAX_PARTS, n // _PART_DOCUMENTS))
    bounds = [n * j // parts for j in range(parts + 1)]
    counts = np.zeros((parts, max_label + 2), dtype=np.int64)  # of label + 1 (0: negative)

    def count(j: int) -> None:
        if kernels.count(labels[bounds[j] : bounds[j + 1]], counts[j]):
            return  # the same counts, in C
        for _, part in label_chunks(labels[bounds[j] : bounds[j + 1]]):
            counts[j] += np.bincount(np.maximum(part, -1) + 1, minlength=max_label + 2)

    spread(count, range(parts), workers=parts)
    total = counts.sum(axis=0)
    skipped = int(total[0])
    # Where part j's first document of each label + 1 goes in the members.
    following = np.cumsum(counts, axis=0)
    following -= counts
    following += np.cumsum(total) - total - skipped
    members = np.empty(n - skipped, dtype=member_dtype(n))
    place = _place_short if max_label + 2 <= 2**SHORT_BITS else _place_by_chunks

    def order(j: int) -> None:
        part = labels[bounds[j] : bounds[j + 1]]
        if not kernels.place(part, bounds[j], following[j], members):  # the same, in C
            place(part, bounds[j], following[j], counts[j], members)

    spread(order, range(parts), workers=parts)
    ids = np.flatnonzero(total[1:])
    return ids.astype(np.int64, copy=False), total[1:][ids], members


def _place_short(
    labels: np.ndarray, first: int, following: np.ndarray, counts: np.ndarray, members: np.ndarray
) -> None:
    """Write documents ``first ..`` of ``labels`` (all ``label + 1 < 2**16``) to their places.

    One radix pass (numpy's stable argsort of uint16) orders the part by label;
    label ``l``'s run of it goes to ``following[l]`` on.
    """
    keys = np.empty(labels.shape[0], dtype=np.uint16)
    for start, part in label_chunks(labels):
        keys[start : start + part.size] = np.maximum(part, -1) + 1  # negative: 0, first
    order = np.argsort(keys, kind="stable")
    del keys
    skipped = int(counts[0])
    shift = following - (np.cumsum(counts) - counts)  # sorted position -> place, per label
    where = np.arange(skipped, order.size, dtype=np.int64)
    where += np.repeat(shift[1:], counts[1:])
    order += first
    members[where] = order[skipped:]


def _place_by_chunks(
    labels: np.ndarray, first: int, following: np.ndarray, counts: np.ndarray, members: np.ndarray
) -> None:
    """:func:`_place_short` for wider labels, ``_COUNT_CHUNK`` at a time (``following`` is advanced).

    Each chunk's documents are ordered by label (radix passes, in cache) and
    written after the ones of earlier chunks.
    """
    bits = (following.size - 1).bit_length()
    for start in range(0, labels.shape[0], _COUNT_CHUNK):
        part = np.maximum(labels[start : start + _COUNT_CHUNK], -1).astype(np.int64)
        part += 1
        order = radix_order(part, bits)
        ordered = np.take(part, order)
        head = np.empty(ordered.size, dtype=bool)
        head[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
        heads = np.flatnonzero(head)
        runs = np.diff(heads, append=ordered.size)
        label = ordered[heads]
        where = np.arange(ordered.size, dtype=np.int64)
        where += np.repeat(np.take(following, label) - heads, runs)
        following[label] += runs
        skipped = int(np.searchsorted(ordered, 1))  # negative labels are not members
        order += first + start
        members[where[skipped:]] = order[skipped:]


def group_caps(sizes: np.ndarray, max_repeats: int | None) -> tuple[np.ndarray, int | None]:
    """Per group cap ``max_repeats * size`` (``NO_CAP`` where that is out of reach).

    Returns the caps and the draws before every group is clipped, or None when
    no cap can end the schedule (no clip, or one of at least ``NO_CAP`` draws: no
    schedule is that long). Exact for any ``max_repeats``: nothing overflows.

    >>> caps, total = group_caps(np.array([1, 3]), 2)
    >>> caps.tolist(), total
    ([2, 6], 8)
    """
    if max_repeats is None:
        return np.full(len(sizes), NO_CAP, dtype=np.int64), None
    repeats = min(int(max_repeats), NO_CAP)
    reach = NO_CAP // sizes  # the largest R whose cap stays below NO_CAP
    caps = np.where(repeats <= reach, np.minimum(repeats, reach) * sizes, NO_CAP)
    total = repeats * int(sizes.sum())  # == sum(caps) unless some cap is NO_CAP
    return caps, (total if total < NO_CAP else None)
