"""The statistics of the declared analysis (``experiments/ANALYSIS.md``), and nothing else.

Paired differences over seeds -> a two-sided sign-flip permutation p-value, a 95%
t-interval of the mean, Benjamini-Hochberg q-values across rows, and one verdict rule
that treats a gain and a harm alike (numpy, and SciPy for the t quantile).

>>> row = paired_test([-0.02, -0.03, -0.01, -0.025, -0.02, -0.015, -0.03, -0.02, -0.01, -0.02])
>>> round(row.mean, 4), round(row.p, 4), row.better
(-0.02, 0.002, 10)
>>> verdict(row.mean, row.low, row.high, q=0.01)
'lower loss'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "EXACT_UP_TO",
    "MONTE_CARLO_PATTERNS",
    "SMALLEST_EFFECT",
    "TESTED_FROM",
    "PairedTest",
    "bh_qvalues",
    "paired_test",
    "sign_flip_p",
    "t_interval",
    "verdict",
    "welch_interval",
]

#: Every sign pattern is enumerated up to this many pairs; beyond, a fixed random sample.
EXACT_UP_TO = 16
MONTE_CARLO_PATTERNS = 200_000
#: Rows with fewer pairs are reported (direction and size) but not tested: their smallest
#: possible p (2 / 2**5 = 0.0625 at 5 pairs) can never pass the threshold.
TESTED_FROM = 6
#: The smallest effect (nats) called worth a user's attention.
SMALLEST_EFFECT = 0.01
THRESHOLD = 0.05


@dataclass(frozen=True)
class PairedTest:
    """One row's paired differences summarised: ``mean``, 95% interval ``[low, high]``,
    the seeds with lower loss (``better``) out of ``n``, and ``p`` (None: not tested)."""

    n: int
    mean: float
    low: float
    high: float
    better: int
    p: float | None


def sign_flip_p(diffs: Sequence[float]) -> float:
    """Two-sided paired sign-flip permutation p-value of ``mean(diffs) == 0``.

    Exact (all ``2**n`` patterns, the observed one included) up to ``EXACT_UP_TO`` pairs;
    beyond, ``MONTE_CARLO_PATTERNS`` patterns from ``numpy.random.default_rng(0)`` with
    p = (1 + hits) / (1 + patterns). Ties count as hits (a relative tolerance of 1e-9).

    >>> sign_flip_p([1.0, 1.0, 1.0])
    0.25
    >>> sign_flip_p([0.0, 0.0])
    1.0
    """
    d = np.abs(np.asarray(diffs, dtype=np.float64))
    n = d.size
    observed = abs(float(np.sum(diffs)))
    tolerance = 1e-9 * max(observed, float(d.sum()), 1e-300)
    if n <= EXACT_UP_TO:
        patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        sums = np.abs(patterns @ d)
        return float(np.mean(sums >= observed - tolerance))
    rng = np.random.default_rng(0)
    hits = 0
    for start in range(0, MONTE_CARLO_PATTERNS, 20_000):
        count = min(20_000, MONTE_CARLO_PATTERNS - start)
        signs = rng.integers(0, 2, size=(count, n)) * 2 - 1
        hits += int(np.sum(np.abs(signs @ d) >= observed - tolerance))
    return (1 + hits) / (1 + MONTE_CARLO_PATTERNS)


def _t_quantile(df: float, level: float = 0.975) -> float:
    from scipy.stats import t

    return float(t.ppf(level, df))


def t_interval(diffs: Sequence[float]) -> tuple[float, float]:
    """95% t-interval of the mean: ``mean ± t(0.975, n-1) * sd / sqrt(n)``.

    >>> [round(x, 3) for x in t_interval([1.0, 2.0, 3.0])]
    [-0.484, 4.484]
    """
    d = np.asarray(diffs, dtype=np.float64)
    if d.size < 2:
        return (float("nan"), float("nan"))
    half = _t_quantile(d.size - 1) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return (float(d.mean()) - half, float(d.mean()) + half)


def welch_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """``mean(a) - mean(b)`` and its 95% Welch interval (Welch-Satterthwaite df).

    >>> [round(x, 2) for x in welch_interval([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])]
    [1.0, -1.27, 3.27]
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return (diff, float("nan"), float("nan"))
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return (diff, diff, diff)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = _t_quantile(df) * se
    return (diff, diff - half, diff + half)


def paired_test(diffs: Sequence[float]) -> PairedTest:
    """Summarise one row; ``p`` only from ``TESTED_FROM`` pairs on (see ANALYSIS.md)."""
    d = [float(x) for x in diffs]
    low, high = t_interval(d)
    p = sign_flip_p(d) if len(d) >= TESTED_FROM else None
    mean = float(np.mean(d)) if d else float("nan")
    return PairedTest(len(d), mean, low, high, sum(x < 0 for x in d), p)


def bh_qvalues(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg q-values, in the order given.

    >>> [round(q, 3) for q in bh_qvalues([0.01, 0.04, 0.03, 0.5])]
    [0.04, 0.053, 0.053, 0.5]
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.size == 0:
        return []
    order = np.argsort(p, kind="stable")
    ranked = p[order] * p.size / np.arange(1, p.size + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    q = np.empty_like(p)
    q[order] = np.minimum(ranked, 1.0)
    return q.tolist()


def verdict(mean: float, low: float, high: float, *, q: float | None) -> str:
    """The declared verdict: one standard for a gain and a harm.

    >>> verdict(0.02, 0.01, 0.03, q=0.04)
    'higher loss'
    >>> verdict(0.001, -0.004, 0.006, q=0.6)
    'no effect beyond ±0.01'
    >>> verdict(-0.02, -0.05, 0.01, q=0.2)
    'inconclusive'
    >>> verdict(-0.02, -0.03, -0.01, q=None)
    'not tested (too few seeds)'
    """
    if q is None:
        return "not tested (too few seeds)"
    if q <= THRESHOLD:
        return "lower loss" if mean < 0 else "higher loss"
    if low >= -SMALLEST_EFFECT and high <= SMALLEST_EFFECT:
        return "no effect beyond ±0.01"
    return "inconclusive"
