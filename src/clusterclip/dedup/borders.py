"""Merging groups across cluster borders, one connected set of groups per unit of work.

Step 3 of :mod:`clusterclip.dedup.detect` links a group of one cluster to a
group of the neighbouring cluster when a near pair crosses the border, and
merges the two when *all* their members are near copies of each other. The
pairs are taken in order of (lower, higher) representative, and a merge changes
which pairs are compared next, so the order matters; but a pair only ever
touches the groups of its own connected set of linked groups. So each set is
one unit of work, :class:`BorderWork`, merged in its own order by
:func:`merge_linked`, and the sets' answers (:class:`BorderMerged`) can be
computed anywhere, in any order, and applied in one pass: the same groups as
one sequential walk over every pair. :class:`BorderWorker` answers a task of
them from a work directory's embeddings (the driver sends document indices,
never an embedding row); :func:`border_works` cuts the work. A task travels as
one :class:`BorderBatch` and comes back as one :class:`BorderMerged` (the
sets' answers :func:`joined`): a few arrays per task, not a few per set, so the
driver's cost of sending and receiving does not grow with the sets.

>>> x = np.array([[1, 0], [1, 0], [0.96, 0.28], [0, 1]], dtype=np.float32)
>>> work = BorderWork(np.array([[0, 2]]), np.array([0, 2]),
...                   (np.array([0, 1]), np.array([2])), np.ones(2, np.float32))
>>> merged = merge_linked(lambda rows: x[rows], work, threshold=0.9)
>>> merged.heads.tolist(), merged.into.tolist(), round(float(merged.lowest[0]), 2)
([2], [0], 0.96)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from clusterclip.arrays import distinct

__all__ = [
    "BorderBatch",
    "BorderMerged",
    "BorderWork",
    "BorderWorker",
    "border_tasks",
    "border_works",
    "joined",
    "merge_linked",
    "unique_pairs",
]

#: Rows a task of linked sets reads at most (a large set alone; a speed knob only).
TASK_ROWS = 2**18


@dataclass(frozen=True)
class BorderWork:
    """One connected set of groups linked across borders, and the pairs to try, in order.

    ``pairs`` (m, 2): (lower, higher) representatives, sorted; ``heads``: every
    representative of the set, ascending; ``members[i]``: the texts of group
    ``heads[i]`` (document indices, ascending); ``lowest[i]``: that group's
    lowest score so far.
    """

    pairs: np.ndarray
    heads: np.ndarray
    members: tuple[np.ndarray, ...]
    lowest: np.ndarray

    @property
    def cost(self) -> int:
        """Rows this set reads (a task's size)."""
        return int(sum(m.size for m in self.members))


@dataclass(frozen=True)
class BorderMerged:
    """What merging one set found: ``heads[i]`` merged into the group of ``into[i]``
    (its final representative), and each surviving group's lowest score
    (``roots``, ``lowest``) where a merge lowered it."""

    heads: np.ndarray
    into: np.ndarray
    roots: np.ndarray
    lowest: np.ndarray


def merge_linked(
    rows_of: Callable[[np.ndarray], np.ndarray], work: BorderWork, *, threshold: float
) -> BorderMerged:
    """Merge the linked groups of one set, pair by pair in order (complete linkage).

    Two groups merge when every cross pair of their texts has a cosine >=
    ``threshold``; a merge keeps the lower representative. The set's rows are
    read once (``rows_of`` on every member, ascending) and each comparison
    takes its groups' rows from them, cast to float32 as read.
    """
    docs = np.concatenate(work.members)
    order = np.argsort(docs, kind="stable")
    rows = np.asarray(rows_of(docs[order]))
    position = np.empty(docs.size, np.int64)
    position[order] = np.arange(docs.size)
    starts = np.cumsum([0] + [m.size for m in work.members])
    head_list = work.heads.tolist()
    held = {h: position[starts[i] : starts[i + 1]] for i, h in enumerate(head_list)}
    lowest = dict(zip(head_list, work.lowest.tolist(), strict=True))
    merged_into: dict[int, int] = {}
    lowered: set[int] = set()

    def root(head: int) -> int:
        while head in merged_into:
            head = merged_into[head]
        return head

    for low_head, high_head in work.pairs.tolist():
        a, b = sorted((root(low_head), root(high_head)))
        if a == b:
            continue
        cross = np.asarray(rows[held[a]], np.float32) @ np.asarray(rows[held[b]], np.float32).T
        worst = float(cross.min())
        if worst < threshold:
            continue
        held[a] = np.sort(np.concatenate((held[a], held.pop(b))))
        merged_into[b] = a
        lowest[a] = min(lowest[a], lowest[b], worst)  # float32 values: exact as floats
        lowered.add(a)
    heads = np.array(sorted(merged_into), dtype=np.int64)
    survivors = np.array(sorted(h for h in lowered if h not in merged_into), dtype=np.int64)
    return BorderMerged(
        heads,
        np.array([root(h) for h in heads.tolist()], dtype=np.int64),
        survivors,
        np.array([lowest[h] for h in survivors.tolist()], dtype=np.float32),
    )


def border_works(
    found: Iterable[tuple[np.ndarray, np.ndarray]],
    representative: np.ndarray,
    texts: np.ndarray,
    lowest: np.ndarray,
) -> list[BorderWork]:
    """The connected sets of groups linked by the border pairs ``found``, each with its pairs.

    ``found`` yields ``(a, b)`` arrays of document indices near across a border;
    ``representative`` maps each document to its group, ``texts`` marks the
    documents that are texts (not copies), ``lowest`` holds each group's lowest
    score at its representative. Sets come in order of their lowest pair.
    """
    linked = []
    for a, b in found:
        ga, gb = representative[a], representative[b]
        keep = ga != gb
        if keep.any():
            linked.append(np.stack([np.minimum(ga, gb)[keep], np.maximum(ga, gb)[keep]], axis=1))
    if not linked:
        return []
    pairs = unique_pairs(np.concatenate(linked), representative.size)  # (lower, higher)
    heads, inverse = np.unique(pairs, return_inverse=True)
    inverse = inverse.reshape(pairs.shape)
    parent = np.arange(heads.size)
    from clusterclip.dedup.detect import connect

    connect(parent, inverse[:, 0], inverse[:, 1])  # a set's root: its lowest head
    involved = np.flatnonzero(texts & np.isin(representative, heads))
    group = np.searchsorted(heads, representative[involved])
    by_group = np.argsort(group, kind="stable")
    cuts = np.searchsorted(group[by_group], np.arange(heads.size + 1))
    members = [involved[by_group[cuts[i] : cuts[i + 1]]] for i in range(heads.size)]
    head_order = np.argsort(parent, kind="stable")  # heads by set, ascending inside one
    pair_set = parent[inverse[:, 0]]
    pair_order = np.argsort(pair_set, kind="stable")  # pairs by set, in their order inside one
    roots = distinct(parent)
    head_cuts = np.searchsorted(parent[head_order], roots, side="right")
    pair_cuts = np.searchsorted(pair_set[pair_order], roots, side="right")
    works = []
    for k in range(roots.size):
        in_set = head_order[(head_cuts[k - 1] if k else 0) : head_cuts[k]]
        works.append(
            BorderWork(
                pairs[pair_order[(pair_cuts[k - 1] if k else 0) : pair_cuts[k]]],
                heads[in_set],
                tuple(members[i] for i in in_set.tolist()),
                lowest[heads[in_set]].astype(np.float32),
            )
        )
    return works


def unique_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    """``np.unique(pairs, axis=0)`` for pairs of indices in ``[0, n)``: the distinct rows,
    sorted by (first, second), several times faster (one int64 key per pair).

    >>> unique_pairs(np.array([[2, 3], [0, 4], [2, 3], [0, 1]]), 5).tolist()
    [[0, 1], [0, 4], [2, 3]]
    """
    pairs = np.asarray(pairs, dtype=np.int64)
    if n >= 2**31:  # the key would overflow int64
        return np.unique(pairs, axis=0)
    keys = distinct(pairs[:, 0] * n + pairs[:, 1])
    return np.stack([keys // n, keys % n], axis=1)


def border_tasks(
    works: Iterable[BorderWork], budget: int | None = None
) -> Iterator[tuple[int, list[BorderWork]]]:
    """Consecutive sets in tasks of about ``budget`` rows (:data:`TASK_ROWS`; a large set alone).

    >>> one = BorderWork(np.zeros((1, 2), int), np.arange(2), (np.arange(3), np.arange(3)),
    ...                  np.ones(2, np.float32))
    >>> [len(batch) for _, batch in border_tasks([one] * 3, budget=12)]
    [2, 1]
    """
    from clusterclip.dedup.compare import compare_tasks

    return compare_tasks(works, TASK_ROWS if budget is None else budget)  # type: ignore[arg-type]


@dataclass(frozen=True)
class BorderBatch:
    """Consecutive :class:`BorderWork` packed into flat arrays: a task's payload.

    ``pairs``, ``heads`` and ``lowest`` hold every set's, set after set
    (``pair_counts``, ``head_counts`` per set); ``members`` every head's texts,
    head after head (``member_counts`` per head). :meth:`unpack` gives the
    sets back, equal to those packed.

    >>> one = BorderWork(np.array([[0, 2]]), np.array([0, 2]), (np.arange(2), np.array([2])),
    ...                  np.ones(2, np.float32))
    >>> batch = BorderBatch.pack([one, one])
    >>> batch.members.tolist(), [w.heads.tolist() for w in batch.unpack()]
    ([0, 1, 2, 0, 1, 2], [[0, 2], [0, 2]])
    """

    pairs: np.ndarray
    pair_counts: np.ndarray
    heads: np.ndarray
    head_counts: np.ndarray
    members: np.ndarray
    member_counts: np.ndarray
    lowest: np.ndarray

    @classmethod
    def pack(cls, works: list[BorderWork]) -> BorderBatch:
        """The sets ``works`` (at least one), in order, as one batch."""
        members = [m for work in works for m in work.members]
        return cls(
            np.concatenate([work.pairs for work in works]).astype(np.int64, copy=False),
            np.array([work.pairs.shape[0] for work in works], dtype=np.int64),
            np.concatenate([work.heads for work in works]).astype(np.int64, copy=False),
            np.array([work.heads.size for work in works], dtype=np.int64),
            np.concatenate(members).astype(np.int64, copy=False),
            np.array([m.size for m in members], dtype=np.int64),
            np.concatenate([work.lowest for work in works]).astype(np.float32, copy=False),
        )

    def unpack(self) -> list[BorderWork]:
        """The sets, in order."""
        pairs = np.split(self.pairs, np.cumsum(self.pair_counts)[:-1])
        heads = np.split(self.heads, np.cumsum(self.head_counts)[:-1])
        lowest = np.split(self.lowest, np.cumsum(self.head_counts)[:-1])
        members = np.split(self.members, np.cumsum(self.member_counts)[:-1])
        first = np.concatenate(([0], np.cumsum(self.head_counts)))
        return [
            BorderWork(pairs[k], heads[k], tuple(members[first[k] : first[k + 1]]), lowest[k])
            for k in range(self.pair_counts.size)
        ]


def joined(answers: list[BorderMerged]) -> BorderMerged:
    """The answers of disjoint sets as one :class:`BorderMerged` (their arrays end to end).

    >>> a = BorderMerged(np.array([3]), np.array([0]), np.array([0]), np.array([0.9], np.float32))
    >>> joined([a, a]).heads.tolist()
    [3, 3]
    """
    none = np.zeros(0, dtype=np.int64)
    return BorderMerged(
        np.concatenate([none, *(a.heads for a in answers)]),
        np.concatenate([none, *(a.into for a in answers)]),
        np.concatenate([none, *(a.roots for a in answers)]),
        np.concatenate([none.astype(np.float32), *(a.lowest for a in answers)]),
    )


class BorderWorker:
    """Answer a task of :func:`border_tasks`, packed as a :class:`BorderBatch`, from a
    work directory's embeddings.

    Pass ``functools.partial(BorderWorker, workdir, threshold)`` as the worker of
    :func:`clusterclip.engines.map_shards`; each process opens the embeddings once.

    >>> worker = BorderWorker("work", 0.9)  # doctest: +SKIP
    >>> worker(BorderBatch.pack(works)).heads  # doctest: +SKIP
    array([17, 40])
    """

    def __init__(self, workdir: str, threshold: float) -> None:
        from clusterclip.io import WorkDir

        self.embeddings = WorkDir(workdir).embeddings()
        self.threshold = threshold

    def __call__(self, batch: BorderBatch) -> BorderMerged:
        """Every set's :class:`BorderMerged`, :func:`joined` in order."""
        rows_of = self.embeddings.__getitem__
        return joined(
            [merge_linked(rows_of, work, threshold=self.threshold) for work in batch.unpack()]
        )
