"""Small numpy helpers that every package may use (numpy only).

``np.unique(values)`` without ``return_*`` takes numpy's hash-table path since
numpy 2.3, which on many distinct integers is far slower than a sort: 46x on
10^6 int64 values on an AVX2-only AMD EPYC (family 23 model 49), numpy 2.4.6
(``benchmarks/bench_driver_helpers.py``). :func:`distinct` gives the same sorted
values from one sort.
"""

from __future__ import annotations

import numpy as np

__all__ = ["distinct", "run_ranks"]


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an array (flattened): ``np.unique(values)``, by one sort.

    Integer and boolean arrays are sorted and their repeats dropped; any other
    dtype (floats, where ``np.unique`` folds NaNs together, strings, objects) is
    handed to ``np.unique``.

    >>> distinct(np.array([3, 1, 3, -1, 1])).tolist()
    [-1, 1, 3]
    >>> distinct(np.zeros(0, dtype=np.int64)).dtype
    dtype('int64')
    """
    values = np.asarray(values)
    if values.dtype.kind not in "biu":
        return np.unique(values)
    ordered = np.sort(values, axis=None)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def run_ranks(values: np.ndarray) -> np.ndarray:
    """Each element's place in its run of equal neighbours (0 for a run's first), int64.

    On sorted values, each element's rank within its group: the documents of
    a cluster after a sort by cluster, the words of a cluster by score.

    >>> run_ranks(np.array([4, 4, 7, 7, 7, 9])).tolist()
    [0, 1, 0, 1, 2, 0]
    >>> run_ranks(np.zeros(0)).tolist()
    []
    """
    values = np.asarray(values)
    if values.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return np.arange(values.size) - np.repeat(starts, np.diff(np.r_[starts, values.size]))
