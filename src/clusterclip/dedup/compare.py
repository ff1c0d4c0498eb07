"""The per-cluster work of near-duplicate detection, as tasks an engine can run.

Steps 2 and 3 of :mod:`clusterclip.dedup.detect` compare documents only inside
one cluster: its texts against each other (greedy cliques) and its *guests*
(texts whose second-nearest cluster it is) against its texts (near pairs across
the border). So each cluster is one unit of work, :class:`ClusterWork`, whose
answer, :class:`ClusterFound`, is a group per member and the border pairs. A
task is a run of consecutive clusters (:func:`compare_tasks`) and
:class:`CompareWorker` answers it in any process that can read the work
directory's embeddings: the driver sends document indices and receives
groups and pairs, never an embedding row. The local engine and Ray give the
same answers because every cluster is computed by the same function on the
same rows.

>>> x = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
>>> found = compare_cluster(lambda rows: x[rows], ClusterWork(np.arange(3), np.zeros(0, int)),
...                         threshold=0.9, block_size=2)
>>> found.group.tolist(), found.pair_a.size
([0, 0, 2], 0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ClusterFound",
    "ClusterWork",
    "CompareWorker",
    "NeighbourWorker",
    "cliques",
    "cluster_works",
    "compare_cluster",
    "compare_tasks",
]

#: Score entries a task holds at most when it groups several small clusters
#: (a speed knob only: answers do not depend on how clusters form tasks).
TASK_SCORES = 2**24


@dataclass(frozen=True)
class ClusterWork:
    """One cluster's comparisons: its texts and its guests (document indices, ascending)."""

    members: np.ndarray
    guests: np.ndarray

    @property
    def cost(self) -> int:
        """Scores this cluster computes (a task's size)."""
        size = int(self.members.size)
        return size * (size + int(self.guests.size))


@dataclass(frozen=True)
class ClusterFound:
    """What one cluster's comparisons found.

    ``group[i]`` is the row (in ``members``) of member ``i``'s group
    representative and ``low[i]`` the group's lowest score at that row (both
    None for a single member); ``pair_a`` (guests) and ``pair_b`` (members) are
    the near pairs across the border, as document indices.
    """

    group: np.ndarray | None
    low: np.ndarray | None
    pair_a: np.ndarray
    pair_b: np.ndarray


def cliques(matrix: np.ndarray, threshold: float, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy complete linkage of one cluster's rows, in row order.

    Row ``j`` joins the group of the lowest representative all of whose
    members it has a score >= ``threshold`` with, else starts its own. Returns
    each row's group (its representative's row) and each group's lowest score
    between two members (at the representative's row; 1 for a single row).

    >>> angles = np.radians([0, 20, 40])
    >>> x = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    >>> group, low = cliques(x, 0.9, 2)  # row 2 is near row 1 only: no chain
    >>> group.tolist(), [round(float(v), 2) for v in low]
    ([0, 0, 2], [0.94, 1.0, 1.0])
    """
    n = matrix.shape[0]
    group = np.arange(n, dtype=np.int64)
    size = np.ones(n, dtype=np.int64)
    low = np.ones(n, dtype=np.float32)
    members: dict[int, list[int]] = {}
    for start in range(0, n, block_size):
        stop = min(n, start + block_size)
        scores = matrix[start:stop] @ matrix[:stop].T  # each row against the rows up to it
        hit = scores >= threshold
        hit[:, start:stop] &= np.tri(stop - start, k=-1, dtype=bool)  # earlier rows only
        for row in np.flatnonzero(hit.any(axis=1)).tolist():
            linked, counts = np.unique(group[np.flatnonzero(hit[row])], return_counts=True)
            whole = linked[counts == size[linked]]  # groups this row is near to every member of
            if not whole.size:
                continue
            head = int(whole[0])
            these = members.setdefault(head, [head])
            low[head] = min(low[head], float(scores[row, these].min()))
            these.append(start + row)
            group[start + row] = head
            size[head] += 1
    return group, low


def compare_cluster(
    rows_of: Callable[[np.ndarray], np.ndarray],
    work: ClusterWork,
    *,
    threshold: float,
    block_size: int,
) -> ClusterFound:
    """The cliques of ``work.members`` and the near pairs (guest, member) of ``work.guests``.

    Guests are compared ``block_size`` at a time with every member.
    """
    members, guests = work.members, work.guests
    none = np.zeros(0, dtype=np.int64)
    if members.size < 2 and not guests.size:
        return ClusterFound(None, None, none, none)
    matrix = np.asarray(rows_of(members), dtype=np.float32)
    group, low = cliques(matrix, threshold, block_size) if members.size > 1 else (None, None)
    pair_a, pair_b = [], []
    for start in range(0, guests.size, block_size):
        block = guests[start : start + block_size]
        scores = np.asarray(rows_of(block), dtype=np.float32) @ matrix.T
        rows, cols = np.nonzero(scores >= threshold)
        if rows.size:
            pair_a.append(block[rows])
            pair_b.append(members[cols])
    return ClusterFound(
        group,
        low,
        np.concatenate(pair_a) if pair_a else none,
        np.concatenate(pair_b) if pair_b else none,
    )


def cluster_works(
    clusters: list[np.ndarray],
    labels: np.ndarray,
    texts: np.ndarray,
    neighbours: np.ndarray | None,
) -> Iterator[ClusterWork]:
    """The :class:`ClusterWork` of each cluster's texts, in order.

    ``clusters`` holds each cluster's texts (ascending); a cluster's guests are
    the ``texts`` whose second-nearest cluster (``neighbours``) it is, ascending
    (none without ``neighbours``).
    """
    none = np.zeros(0, dtype=np.int64)
    if neighbours is None:
        for members in clusters:
            yield ClusterWork(members, none)
        return
    visitors = np.flatnonzero(texts & (neighbours >= 0))
    visitors = visitors[np.argsort(neighbours[visitors], kind="stable")]
    bounds = np.searchsorted(neighbours[visitors], np.arange(int(labels.max(initial=-1)) + 2))
    for members in clusters:
        k = int(labels[members[0]])
        yield ClusterWork(members, visitors[bounds[k] : bounds[k + 1]])


def compare_tasks(
    works: Iterable[ClusterWork], budget: int | None = None
) -> Iterator[tuple[int, list[ClusterWork]]]:
    """Consecutive clusters in tasks of about ``budget`` scores (a large cluster alone).

    ``budget`` defaults to :data:`TASK_SCORES`.

    Yields ``(task id, works)``; the works keep their order, so the answers of
    the tasks in task order are the answers of the clusters in order.

    >>> works = [ClusterWork(np.arange(n), np.zeros(0, int)) for n in (3, 3, 10)]
    >>> [len(batch) for _, batch in compare_tasks(works, budget=20)]
    [2, 1]
    """
    budget = TASK_SCORES if budget is None else budget
    batch: list[ClusterWork] = []
    held = 0
    task = 0
    for work in works:
        if batch and held + work.cost > budget:
            yield task, batch
            task, batch, held = task + 1, [], 0
        batch.append(work)
        held += work.cost
    if batch:
        yield task, batch


class CompareWorker:
    """Answer a task of :func:`compare_tasks` from a work directory's embeddings.

    Pass ``functools.partial(CompareWorker, workdir, threshold, block_size)`` as
    the worker of :func:`clusterclip.engines.map_shards`; each process opens
    the memory-mapped embeddings once.

    >>> worker = CompareWorker("work", 0.9, 1024)  # doctest: +SKIP
    >>> worker([ClusterWork(np.arange(3), np.zeros(0, int))])[0].group  # doctest: +SKIP
    array([0, 1, 2])
    """

    def __init__(self, workdir: str, threshold: float, block_size: int) -> None:
        from clusterclip.io import WorkDir

        self.embeddings = WorkDir(workdir).embeddings()
        self.threshold = threshold
        self.block_size = block_size

    def __call__(self, works: list[ClusterWork]) -> list[ClusterFound]:
        """Every cluster's :class:`ClusterFound`, in order."""
        return [
            compare_cluster(
                self.embeddings.__getitem__,
                work,
                threshold=self.threshold,
                block_size=self.block_size,
            )  # fmt: skip
            for work in works
        ]


class NeighbourWorker:
    """Second-nearest clusters of a range of rows, from a work directory (a task's worker).

    Pass ``functools.partial(NeighbourWorker, workdir)`` to
    :func:`clusterclip.engines.map_shards` with payloads ``(start, labels)``: the
    first row and the labels of the range; each process opens the embeddings,
    centroids and tree once.
    """

    def __init__(self, workdir: str) -> None:
        from clusterclip.io import WorkDir

        work = WorkDir(workdir)
        self.embeddings = work.embeddings()
        self.centroids = work.centroids()
        self.tree = work.cluster_tree()

    def __call__(self, rows: tuple[int, np.ndarray]) -> np.ndarray:
        """Second-nearest cluster (int32) of the range's rows; -1 where the label is."""
        from clusterclip.dedup.detect import second_nearest

        start, labels = rows
        found = second_nearest(
            lambda local: self.embeddings[local + start], labels, self.centroids, tree=self.tree
        )
        return found.astype(np.int32)
