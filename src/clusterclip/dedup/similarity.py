"""Each grouped document's cosine to its representative, as tasks an engine can run.

Once the groups are made (:func:`~clusterclip.dedup.detect.find_groups`), the
``similarity`` column of ``duplicates.parquet`` holds, for every document in a
group, the cosine of its embedding to its representative's: one product per
grouped document, reading two embedding rows. That is per-document work, so it
runs where the engine runs its tasks: the grouped documents, in index order,
are cut into runs of at most :data:`TASK_ROWS` (:func:`similarity_works`), and
:class:`SimilarityWorker` answers a run from the work directory's embeddings
(the driver sends document indices and receives one float32 per document,
never an embedding row). Each value is a float32 dot product of one row pair
(``einsum("ij,ij->i")`` over float32 rows), so it does not depend on how the
documents are cut into runs, nor on the engine.

>>> x = np.array([[1, 0], [0.6, 0.8], [0, 1]], dtype=np.float32)
>>> works = list(similarity_works(np.array([0, 0, 1]), budget=1))
>>> [w.docs.tolist() for w in works], [w.reps.tolist() for w in works]
([[1], [2]], [[0], [1]])
>>> [round(float(v), 2) for w in works for v in similarities(lambda rows: x[rows], w)]
[0.6, 0.8]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["TASK_ROWS", "SimilarityWork", "SimilarityWorker", "similarities", "similarity_works"]

#: Grouped documents one task reads at most (a speed knob only: the values do not depend on it).
TASK_ROWS = 2**16


@dataclass(frozen=True)
class SimilarityWork:
    """A run of grouped documents (``docs``, ascending) and their representatives (``reps``).

    >>> SimilarityWork(np.array([3, 5]), np.array([1, 1])).cost
    2
    """

    docs: np.ndarray
    reps: np.ndarray

    @property
    def cost(self) -> int:
        """Documents this run describes (a task's size)."""
        return int(self.docs.size)


def similarity_works(
    representative: np.ndarray,
    *,
    grouped: np.ndarray | None = None,
    budget: int | None = None,
) -> Iterator[SimilarityWork]:
    """The grouped documents (``representative[i] != i``) in runs of ``budget``, in index order.

    Parameters
    ----------
    representative : ndarray of int, shape (N,)
        Every document's group representative (its own index: not grouped).
    grouped : ndarray of int64, optional
        ``np.flatnonzero(representative != np.arange(N))`` when the caller has it.
    budget : int, optional
        Documents per run (default :data:`TASK_ROWS`).

    Yields
    ------
    SimilarityWork

    Examples
    --------
    >>> [w.docs.tolist() for w in similarity_works(np.array([0, 0, 2, 0, 2]), budget=2)]
    [[1, 3], [4]]
    """
    budget = TASK_ROWS if budget is None else int(budget)
    if grouped is None:
        grouped = np.flatnonzero(representative != np.arange(representative.size))
    for start in range(0, grouped.size, budget):
        docs = grouped[start : start + budget]
        yield SimilarityWork(docs, representative[docs])


def similarities(rows_of: Callable[[np.ndarray], np.ndarray], work: SimilarityWork) -> np.ndarray:
    """Cosine (float32) of each document of ``work`` to its representative.

    Both rows are read through ``rows_of`` and cast to float32; each value is
    the float32 dot product of one row pair, whatever else the run holds.

    >>> x = np.array([[1, 0], [0, 1]], dtype=np.float16)
    >>> similarities(lambda rows: x[rows], SimilarityWork(np.array([1]), np.array([0]))).tolist()
    [0.0]
    """
    own = np.asarray(rows_of(work.docs), dtype=np.float32)
    theirs = np.asarray(rows_of(work.reps), dtype=np.float32)
    return np.einsum("ij,ij->i", own, theirs)


class SimilarityWorker:
    """Answer a :class:`SimilarityWork` from a work directory's embeddings (a task's worker).

    Pass ``functools.partial(SimilarityWorker, workdir)`` as the worker of
    :func:`clusterclip.engines.map_shards`; each process opens the
    memory-mapped embeddings once.

    >>> worker = SimilarityWorker("work")  # doctest: +SKIP
    >>> worker(SimilarityWork(np.array([7]), np.array([2])))  # doctest: +SKIP
    array([0.93], dtype=float32)
    """

    def __init__(self, workdir: str) -> None:
        from clusterclip.io import WorkDir

        self.embeddings = WorkDir(workdir).embeddings()

    def __call__(self, work: SimilarityWork) -> np.ndarray:
        """The run's values (float32), in the order of ``work.docs``."""
        return similarities(self.embeddings.__getitem__, work)
