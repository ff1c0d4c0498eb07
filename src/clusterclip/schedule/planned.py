"""The budget-planned order: plan every cluster's draws, then spread them evenly.

The paper's online rule front-loads small clusters: they reach ``max_repeats``
passes early and vanish for the rest of training. The planned order fixes the
*number* of draws of each cluster for the whole budget first and only then
decides *when* they happen:

1. **Plan** (:func:`plan_draws`): water-filling. Every cluster gets a share of
   the budget proportional to its weight (equal weights for ``uniform`` /
   ``clusterclip``, ``|C_k|**alpha`` for ``temperature``, or custom weights);
   a cluster whose share exceeds its cap ``max_repeats * |C_k|`` is fixed at the
   cap and the rest of the budget is shared again among the others, until no
   share exceeds its cap. Shares are floored and the leftover draws go to the
   largest fractional parts (ties: smaller cluster index).
2. **Spread** (:class:`PlannedOrder`): draw ``j`` of cluster ``k`` (``0 <= j < n_k``)
   gets the time ``tau = (j + phi_k) / n_k`` with a phase ``phi_k`` in [0, 1)
   drawn once per cluster from ``seed_sequence(seed, PURPOSE_PHASE)``; the
   schedule lists all draws by ``(tau, k)``. Each cluster's draws are thus
   evenly spaced over the whole schedule and any window of ``w`` positions
   holds ``w * n_k / T`` draws of cluster ``k``, +-1.

Any block ``[t0, t1)`` of the order is produced without the earlier ones: the
number of draws of cluster ``k`` with ``tau < x`` is ``ceil(x * n_k - phi_k)``
(clipped to ``[0, n_k]``), so a threshold below ``t0`` and one above ``t1`` are
found in O(K) and only the draws between them are generated and sorted.
"""

from __future__ import annotations

import math

import numpy as np

from clusterclip.schedule import kernels
from clusterclip.schedule.groups import PURPOSE_PHASE, seed_sequence

__all__ = ["PlannedOrder", "draws_below", "exact_sum", "plan_draws", "planned_phases"]


def plan_draws(weights: np.ndarray, caps: np.ndarray | None, total: int) -> np.ndarray:
    """Water-filling allocation of ``total`` draws over clusters.

    Parameters
    ----------
    weights : ndarray of float64, shape (K,)
        Positive cluster weights.
    caps : ndarray of int64, shape (K,), or None
        Most draws each cluster may receive (``max_repeats * size``); None = no cap.
    total : int
        Draws wanted.

    Returns
    -------
    ndarray of int64, shape (K,)
        ``n_k <= caps[k]``; ``sum(n) == min(total, sum(caps))``.

    Examples
    --------
    >>> plan_draws(np.ones(3), np.array([2, 10, 10]), 12).tolist()
    [2, 5, 5]
    """
    n_clusters = len(weights)
    plan = np.zeros(n_clusters, dtype=np.int64)
    free = np.ones(n_clusters, dtype=bool)
    remaining = int(total)
    shares = np.zeros(n_clusters, dtype=np.float64)
    while True:
        idx = np.flatnonzero(free)
        if idx.size == 0:
            return plan  # every cluster capped: budget larger than sum(caps)
        weight_sum = exact_sum(weights[idx])
        shares[idx] = remaining * weights[idx] / weight_sum
        if caps is None:
            break
        over = idx[shares[idx] >= caps[idx]]
        if over.size == 0:
            break
        plan[over] = caps[over]
        remaining -= int(caps[over].sum())
        free[over] = False
    floors = np.floor(shares[idx]).astype(np.int64)
    plan[idx] = floors
    leftover = remaining - int(floors.sum())
    fraction = shares[idx] - floors
    if leftover > 0:
        # Largest fractional part first; ties go to the smaller cluster index.
        order = np.lexsort((idx, -fraction))
        plan[idx[order[:leftover]]] += 1
    elif leftover < 0:  # rounding pushed a share over an integer: take back
        order = np.lexsort((-idx, fraction))
        order = order[plan[idx[order]] > 0]
        plan[idx[order[:-leftover]]] -= 1
    return plan


def exact_sum(values: np.ndarray) -> float:
    """The sum of ``values`` correctly rounded, as ``math.fsum`` gives it (exact, order-free).

    Equal values (the uniform weights of most policies) need no loop: ``m``
    copies of ``w`` sum to ``m * w`` exactly, and one float multiplication
    rounds that product correctly, as ``fsum`` rounds the sum (``m < 2**53``).

    >>> exact_sum(np.full(10, 0.1)) == math.fsum([0.1] * 10)
    True
    >>> exact_sum(np.array([0.1, 0.2, 0.3])) == math.fsum([0.1, 0.2, 0.3])
    True
    """
    if values.size and values.size < 2**53 and values.min() == values.max():
        total = float(values.size) * float(values[0])
        if math.isfinite(total):  # else fsum says why (an overflow)
            return total
    compiled = kernels.exact_sum(np.ascontiguousarray(values, dtype=np.float64))
    if compiled is not None:  # fsum's algorithm in C: the same float
        return compiled
    return math.fsum(values.tolist())


def planned_phases(seed: int, n_clusters: int) -> np.ndarray:
    """Phase ``phi_k`` in [0, 1) of every cluster (by cluster index)."""
    rng = np.random.Generator(np.random.PCG64(seed_sequence(seed, PURPOSE_PHASE)))
    return rng.random(n_clusters)


def _sort_by_time(tau: np.ndarray) -> np.ndarray:
    """Stable argsort of ``tau`` (generated cluster by cluster, so ties keep cluster order).

    Two fast passes instead of one slow float sort: a stable radix sort on a
    16-bit bucket of ``tau`` (monotone in ``tau``), then a stable sort of the
    nearly sorted result, which only reorders inside buckets. Equal to
    ``np.argsort(tau, kind="stable")``.
    """
    low, high = float(tau.min()), float(tau.max())
    if high <= low:
        return np.arange(tau.size)
    scale = 65535.0 / (high - low)
    bucket = np.minimum((tau - low) * scale, 65535.0).astype(np.uint16)
    coarse = np.argsort(bucket, kind="stable")
    fine = np.argsort(tau[coarse], kind="stable")
    return coarse[fine]


def draws_below(x: float, n: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Exact count of the draws ``(j + phi) / n`` of each cluster below ``x`` (0 < x < 1).

    >>> draws_below(0.5, np.array([4, 3]), np.array([0.25, 0.5])).tolist()
    [2, 1]
    """
    count = np.clip(np.ceil(x * n - phi), 0, n).astype(np.int64)
    # The closed form is exact in real arithmetic; fix the float edge cases
    # against the very expression used for tau.
    for _ in range(8):
        down = (count > 0) & (((count - 1) + phi) / n >= x)
        up = (count < n) & ((count + phi) / n < x)
        if not (down.any() or up.any()):
            break
        count = count - down + up
    return count


class PlannedOrder:
    """Random-access view of the planned order of ``sum(plan)`` draws.

    Parameters
    ----------
    plan : ndarray of int64, shape (K,)
        Draws per cluster (:func:`plan_draws`).
    phases : ndarray of float64, shape (K,)
        :func:`planned_phases`.
    """

    def __init__(self, plan: np.ndarray, phases: np.ndarray) -> None:
        self.plan = np.asarray(plan, dtype=np.int64)
        self.total = int(self.plan.sum())
        self.clusters = np.flatnonzero(self.plan > 0)  # clusters that appear at all
        self.n = self.plan[self.clusters]
        self.phi = phases[self.clusters]

    def _below(self, x: float) -> np.ndarray:
        """Exact count of draws of each (appearing) cluster with ``tau < x``."""
        return draws_below(x, self.n, self.phi)

    def _bounds(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        margin = len(self.n) + 2
        step = margin / self.total
        if t0 <= margin:
            low = np.zeros_like(self.n)
        else:
            x = (t0 - margin) / self.total
            low = self._below(x)
            while low.sum() > t0:
                x = max(0.0, x - step)
                low = self._below(x)
        if t1 + margin >= self.total:
            high = self.n.copy()
        else:
            x = (t1 + margin) / self.total
            high = self._below(x)
            while high.sum() < t1:
                x += step
                high = self.n.copy() if x >= 1.0 else self._below(x)
        return low, high

    def window(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        """Cluster index and draw number of positions ``t0 .. t1-1``.

        Returns
        -------
        (clusters, draws) : two int64 arrays of length ``t1 - t0``.
        """
        clusters, draws, _, _ = self.window_with_spans(t0, t1)
        return clusters, draws

    def window_with_spans(
        self, t0: int, t1: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`window` plus, per cluster (length K), the range of draw
        numbers ``[first, end)`` that the window covers (zeros if empty)."""
        n_all = len(self.plan)
        t1 = min(t1, self.total)
        if t1 <= t0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(n_all, np.int64), np.zeros(n_all, np.int64)
        low, high = self._bounds(t0, t1)
        span = high - low
        within = int(span.sum())
        which = np.repeat(np.arange(len(self.n)), span)
        starts = np.cumsum(span) - span
        draws = np.arange(within, dtype=np.int64)
        draws += np.repeat(low - starts, span)
        # tau = (j + phi_k) / n_k, the very expression of the definition.
        tau = (draws + np.repeat(self.phi, span)) / np.repeat(self.n, span)
        order = _sort_by_time(tau)
        skip = t0 - int(low.sum())
        chosen = order[skip : skip + (t1 - t0)]
        first = np.zeros(n_all, dtype=np.int64)
        first[self.clusters] = low + np.bincount(which[order[:skip]], minlength=len(self.n))
        end = first.copy()
        end[self.clusters] += np.bincount(which[chosen], minlength=len(self.n))
        return self.clusters[which[chosen]], draws[chosen], first, end

    def counts_before(self, t: int) -> np.ndarray:
        """Draws of every cluster (length K) among the first ``t`` positions."""
        counts = np.zeros(len(self.plan), dtype=np.int64)
        if t <= 0:
            return counts
        if t >= self.total:
            return self.plan.copy()
        low, _ = self._bounds(t, t)
        counts[self.clusters] = low
        if int(low.sum()) < t:
            clusters, _ = self.window(int(low.sum()), t)
            np.add.at(counts, clusters, 1)
        return counts
