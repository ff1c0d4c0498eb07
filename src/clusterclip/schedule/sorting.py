"""Stable orders of non-negative integers by 16-bit radix passes, where they pay.

The schedule orders entries by small integers in its hot paths (documents by
cluster, chunk positions by group, pass members by key). An order by value,
then position, has one answer, so how it is computed is a speed knob only: the
bytes of a schedule never depend on it.

numpy sorts 16-bit integers stably with a radix sort (one pass, O(n)); for wider
ones it uses a vectorised quicksort whose speed depends on the CPU. On an AMD
Zen 4 its AVX-512 kernel (compress-stores, microcoded there) sorted 10^7 int64
in 0.64 s where numpy's AVX2 kernel took 0.12 s on the same machine
(``benchmarks/bench_sorts.py --both``; docs/performance.md, "The same table on an
AMD EPYC Zen 4"). So:

* up to 2**20 values below 2**16 are ordered by one radix pass on every CPU
  (faster than a sort of packed ``value << b | position`` keys, with either kernel);
* more of them, or wider values, take radix passes (:func:`radix_order`) only where
  numpy's sort of int64 is the slow one (:func:`quicksort_is_slow`, a probe run
  once per process: it changes speed, never a result).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import numpy as np

__all__ = ["SHORT_BITS", "quicksort_is_slow", "radix_order", "radix_passes", "stable_order"]

#: Values below 2**SHORT_BITS take one radix pass.
SHORT_BITS = 16
_DIGIT = np.int64(2**SHORT_BITS - 1)
#: Most values ordered by one pass on every machine (more leave the cache: numpy's
#: AVX2 sort is faster), and most ordered in one piece by :func:`radix_order`.
_FEW = 2**20
#: Keys in the probe (a chunk of the sizes the schedule sorts).
_PROBE = 2**16


def radix_order(values: np.ndarray, bits: int) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` for non-negative int64 below ``2**bits``.

    One stable radix pass of numpy per 16-bit digit, least significant first.
    More than ``2**20`` values of more than 16 bits are first split by their top
    8 bits (one pass), then each part is ordered by the rest while it is in cache.

    >>> radix_order(np.array([70000, 3, 70000, 2, 3]), 17).tolist()
    [3, 1, 4, 0, 2]
    """
    if values.size > _FEW and bits > SHORT_BITS:
        return _split_order(values, bits)
    order = np.argsort((values & _DIGIT).astype(np.uint16), kind="stable")
    for shift in range(SHORT_BITS, max(bits, 1), SHORT_BITS):
        digit = np.take(values, order)
        digit >>= shift
        digit &= _DIGIT
        order = np.take(order, np.argsort(digit.astype(np.uint16), kind="stable"))
    return order


def quicksort_is_slow() -> bool:
    """Whether two radix passes order 2**16 int64 faster than numpy sorts them packed, here.

    Measured once per process (best of three, a few milliseconds), unless
    :func:`radix_passes` says. Only speed depends on the answer.

    >>> isinstance(quicksort_is_slow(), bool)
    True
    """
    return _probe() if _FORCED is None else _FORCED


def _split_order(values: np.ndarray, bits: int) -> np.ndarray:
    """:func:`radix_order` of many values: by the top 8 bits, then each part by the rest.

    The split is a stable pass, so entries of equal value keep their order in a
    part, and the part's own stable order keeps it too.
    """
    shift = bits - 8
    top = (values >> shift).astype(np.uint8)
    order = np.argsort(top, kind="stable")
    ends = np.cumsum(np.bincount(top, minlength=256)).tolist()
    rest = np.take(values, order)
    rest &= (1 << shift) - 1
    start = 0
    for end in ends:
        if end - start > 1:
            part = order[start:end]
            part[:] = np.take(part, radix_order(rest[start:end], shift))
        start = end
    return order


@contextmanager
def radix_passes(on: bool) -> Iterator[None]:
    """Take (``on=True``) or skip the radix passes of wide values, whatever the probe says.

    For tests, which compare both ways on one machine; not thread-safe.

    >>> with radix_passes(True):
    ...     quicksort_is_slow()
    True
    """
    global _FORCED
    before, _FORCED = _FORCED, bool(on)
    try:
        yield
    finally:
        _FORCED = before


#: What :func:`radix_passes` has set (None: the probe decides).
_FORCED: bool | None = None


@cache
def _probe() -> bool:
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**20, _PROBE)
    packed = (values << 16) | np.arange(_PROBE)
    sort_time = radix_time = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        np.sort(packed)
        sort_time = min(sort_time, time.perf_counter() - start)
        start = time.perf_counter()
        radix_order(values, 20)
        radix_time = min(radix_time, time.perf_counter() - start)
    return radix_time < sort_time


def stable_order(values: np.ndarray, bound: int | None = None) -> np.ndarray | None:
    """``np.argsort(values, kind="stable")`` by radix passes, or None where a sort is faster.

    Parameters
    ----------
    values : ndarray of int64
        Non-negative.
    bound : int, optional
        A bound above every value (the maximum + 1 when not given).

    Returns
    -------
    ndarray of int64, or None
        The order of up to 2**20 values below 2**16, or on a machine where
        :func:`quicksort_is_slow` of values below 2**48; None otherwise (the
        caller sorts).

    Examples
    --------
    >>> stable_order(np.array([2, 0, 2, 1])).tolist()
    [1, 3, 0, 2]
    """
    if bound is None:
        bound = int(values.max()) + 1 if values.size else 0
    bits = max(bound - 1, 1).bit_length()
    passes = -(-bits // SHORT_BITS)
    if passes == 1 and values.size <= _FEW:
        return np.argsort(values.astype(np.uint16), kind="stable")
    if passes <= 3 and quicksort_is_slow():
        return radix_order(values, bits)
    return None
