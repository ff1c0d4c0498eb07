"""The registered policies: how each one weights clusters and whether it clips.

The policies (``random``, ``uniform``, ``clusterclip``, ``temperature``,
``hierarchical``) are small objects in the :data:`POLICIES` registry; the engine
asks them for the cluster weights and whether documents are drawn as one corpus
group, instead of branching on the policy's name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from clusterclip.errors import invalid, spell

__all__ = ["POLICIES", "Policy", "TemperaturePolicy", "cluster_cap"]


@dataclass(frozen=True)
class Policy:
    """How one named policy weights clusters and whether it clips.

    Attributes
    ----------
    name : str
        The value of ``policy=...``.
    help : str
        One line for ``--help`` and the documentation.
    clips : bool
        Whether ``max_repeats`` applies (``uniform`` never clips).
    accepts_alpha : bool
        Whether the policy takes (and needs) the temperature exponent ``alpha``.
    accepts_weights : bool
        Whether custom ``cluster_weights`` may replace its equal weights.
    single_group : bool
        Whether every usable document forms one group drawn in shuffled passes
        (``random``), instead of one group per cluster.
    uses_levels : bool
        Whether clusters are drawn down a tree given by ``levels``
        (``hierarchical``, :mod:`clusterclip.schedule.hierarchy`).

    Examples
    --------
    >>> POLICIES["uniform"].effective_max_repeats(4) is None
    True
    >>> POLICIES["clusterclip"].cluster_weights(np.array([3, 0, 5]), None, None).tolist()
    [1.0, 1.0, 1.0]
    """

    name: str
    help: str
    clips: bool = True
    accepts_alpha: bool = False
    accepts_weights: bool = False
    single_group: bool = False
    uses_levels: bool = False

    def effective_max_repeats(self, max_repeats: int | None) -> int | None:
        """The clip this policy applies for the ``max_repeats`` the user gave."""
        return max_repeats if self.clips else None

    def cluster_weights(
        self,
        sizes: np.ndarray,
        alpha: float | None,
        custom: tuple[float, ...] | None,
        *,
        cluster_ids: np.ndarray | None = None,
    ) -> np.ndarray:
        """Draw weight of every listed cluster (float64, shape (K,)).

        Parameters
        ----------
        sizes : ndarray of int, shape (K,)
            Documents per cluster (0 for an empty one).
        alpha : float or None
            The temperature exponent (policies with ``accepts_alpha`` only).
        custom : tuple of float or None
            The validated ``cluster_weights`` (one per cluster id), if given.
        cluster_ids : ndarray of int, shape (K,), optional
            The id of each listed cluster (indexes ``custom``); default ``0 .. K-1``.
        """
        if custom is not None:
            weights = np.asarray(custom, dtype=np.float64)
            return weights if cluster_ids is None else weights[cluster_ids]
        return np.ones(sizes.shape[0])


def _power(size: int, alpha: float) -> float:
    if size == 0:
        return 0.0
    try:
        return float(size) ** alpha
    except OverflowError:
        return math.inf


def _per_distinct(sizes: np.ndarray, value: Callable[[int], float]) -> np.ndarray:
    """``value(size)`` of every size (float64), called once per distinct size.

    Sizes are counts: where the largest is below a few times their number, a
    table indexed by size stands in for a sort (``np.unique``).

    >>> _per_distinct(np.array([3, 1, 3]), lambda size: size / 2).tolist()
    [1.5, 0.5, 1.5]
    >>> _per_distinct(np.array([40, 1]), lambda size: size / 2).tolist()  # by np.unique
    [20.0, 0.5]
    """
    sizes = np.asarray(sizes)
    counts = sizes.dtype.kind in "iu" and sizes.size > 0
    if counts and int(sizes.min()) >= 0 and int(sizes.max()) < 4 * sizes.size:
        distinct = np.flatnonzero(np.bincount(sizes))
        table = np.zeros(int(distinct[-1]) + 1, dtype=np.float64)
        table[distinct] = [value(size) for size in distinct.tolist()]
        return table[sizes]
    distinct, which = np.unique(sizes, return_inverse=True)
    values = np.array([value(size) for size in distinct.tolist()], dtype=np.float64)
    return values[which.reshape(-1)]


@dataclass(frozen=True)
class TemperaturePolicy(Policy):
    """Clusters weighted by ``|C_k| ** alpha`` (0 = uniform, 1 = natural sizes)."""

    def cluster_weights(
        self,
        sizes: np.ndarray,
        alpha: float | None,
        custom: tuple[float, ...] | None,
        *,
        cluster_ids: np.ndarray | None = None,
    ) -> np.ndarray:
        """``|C_k| ** alpha`` per cluster (0 for empty ones); see :meth:`Policy.cluster_weights`."""
        alpha = float(alpha)  # type: ignore[arg-type]  # validated: required by this policy
        # Python's float power, once per distinct size: identical on every machine
        # and to the oracle (numpy's SIMD power may differ in the last bit).
        weights = _per_distinct(sizes, lambda size: _power(size, alpha))
        bad = ~np.isfinite(weights) | ((sizes > 0) & (weights <= 0))
        if bad.any():
            raise invalid(
                "alpha",
                "small enough that |C_k|**alpha is finite and > 0",
                alpha,
                f"Pass {spell('alpha')} in about [-10, 10].",
            )
        return weights


#: The registered policies, by name (the order is the order shown to users).
POLICIES: dict[str, Policy] = {
    policy.name: policy
    for policy in (
        Policy(
            "random",
            "shuffled passes over the whole corpus (clusters ignored), clipped at max_repeats",
            single_group=True,
        ),
        Policy(
            "uniform", "clusters drawn uniformly, never clipped", clips=False, accepts_weights=True
        ),
        Policy(
            "clusterclip",
            "clusters drawn uniformly, documents clipped at max_repeats (the paper's method)",
            accepts_weights=True,
        ),
        TemperaturePolicy(
            "temperature",
            "clusters weighted by |C_k|**alpha, clipped at max_repeats if given",
            accepts_alpha=True,
        ),
        Policy(
            "hierarchical",
            "uniform over the top level of a cluster tree (levels), then over children, "
            "down to documents, clipped at max_repeats",
            uses_levels=True,
        ),
    )
}


def cluster_cap(policy: str, max_repeats: int | None) -> int | None:
    """The repetition cap at which clusters are clipped one by one, or None.

    None when there is no finite cap, when the policy never clips (``uniform``),
    when it draws the corpus as one group (``random``: its cap ends the whole
    schedule, not a cluster) and for a name this release does not register.
    ``max_repeats`` is the recorded (effective) cap of a schedule's config.

    >>> cluster_cap("clusterclip", 4), cluster_cap("random", 4), cluster_cap("uniform", None)
    (4, None, None)
    """
    kind = POLICIES.get(policy)
    if kind is None or not kind.clips or kind.single_group or max_repeats is None:
        return None
    return int(max_repeats)
