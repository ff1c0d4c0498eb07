"""The schedule policy as a value: :class:`SchedulePolicy` and the registered policies.

Every setting of a schedule is declared once, here, on a field of
:class:`SchedulePolicy` (default, allowed choices and one line of help in the
field's ``metadata``), so the CLI flags, the TOML keys, the documentation table
and the keyword functions (:func:`clusterclip.build_schedule`, ...) all take
them from one place::

    >>> import dataclasses
    >>> {f.name: f.default for f in dataclasses.fields(SchedulePolicy)}["max_repeats"]
    4

A policy value validates everything that does not need the labels when it is
made (``__post_init__``); what needs them (the length of ``cluster_weights``,
``lengths`` for a token budget) is checked when it is applied to labels by
:meth:`SchedulePolicy.build`, :meth:`SchedulePolicy.stream` or
:meth:`SchedulePolicy.config_for`.

The policies themselves are small objects in the :data:`POLICIES` registry
(:mod:`clusterclip.schedule.policies`, re-exported here).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from clusterclip.errors import hint, invalid, spell
from clusterclip.io import fingerprint_array
from clusterclip.options import check_seed
from clusterclip.schedule.config import (
    SUPPORTED_VERSIONS,
    ScheduleConfig,
    check_schedule_version,
    labels_fingerprint,
    labels_out_of_range,
    out_of_range_message,
    validate_labels,
    validate_lengths,
)
from clusterclip.schedule.hierarchy import Hierarchy, validate_levels
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.memory_check import check_fits, expected_draws
from clusterclip.schedule.policies import POLICIES, Policy, TemperaturePolicy
from clusterclip.schedule.prepare import Prepared
from clusterclip.schedule.rules import draw_rule
from clusterclip.schedule.stream import ScheduleStream, outside_package, rechunk
from clusterclip.schedule.units import Units, validate_duplicate_of

__all__ = [
    "DEFAULT_MAX_REPEATS",
    "DEFAULT_ON_EXHAUSTED",
    "DEFAULT_ORDER",
    "DEFAULT_POLICY",
    "EXHAUSTION_RULES",
    "ORDERS",
    "POLICIES",
    "Policy",
    "SchedulePolicy",
    "TemperaturePolicy",
]

#: The defaults, declared once (the keyword functions and the sampler use these).
DEFAULT_POLICY = "clusterclip"
DEFAULT_MAX_REPEATS = 4
DEFAULT_ORDER = "online"
DEFAULT_ON_EXHAUSTED = "stop"

#: ``order`` choices: the paper's online clip, or per-cluster draws planned for the budget.
ORDERS = ("online", "planned")
#: ``on_exhausted`` choices: what happens when every cluster is clipped before the budget.
EXHAUSTION_RULES = ("stop", "random", "error")


# --------------------------------------------------------------------------- the value


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise invalid(name, f"an int in [{low}, inf)", value, f"Pass {hint(name, low)} or more.")
    return int(value)


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise invalid(name, f"one of {listed}", value)
    return value


def _listed(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


@dataclass(frozen=True, kw_only=True)
class SchedulePolicy:
    """Every user setting of a schedule, validated, as one frozen value.

    Parameters
    ----------
    policy : {"clusterclip", "uniform", "temperature", "random", "hierarchical"}
        See :data:`POLICIES`. ``hierarchical`` draws down the cluster tree
        given as ``levels`` when applied (online order, default draw rule).
    max_repeats : int or None
        Most appearances of any document (R); None = no clip.
    num_samples, num_tokens : int or None
        The budget, exactly one: draws, or tokens (needs ``lengths`` when applied).
    alpha : float or None
        Temperature exponent (``policy="temperature"`` only, required there).
    cluster_weights : sequence of float or None
        Weight per cluster id (``uniform``/``clusterclip`` only); kept as a tuple.
    order : {"online", "planned"}
        The paper's online clip, or per-cluster draws planned for the budget.
    on_exhausted : {"stop", "random", "error"}
        What happens when every cluster is clipped before the budget is met.
    seed : int
        In [0, 2**63-1]; required. Distinct seeds give distinct schedules.
    schedule_version : {None, 1, 2, 3, 4}
        The draw rule. None (default): the rule of new schedules,
        ``SCHEDULE_VERSION`` (4). 1 (seeds below 2**32) or 2 (above): the
        default rule of earlier releases; 3: the earlier opt-in rule; pass the
        version a checkpoint or saved schedule records to resume it exactly
        (docs/sampler.md, "Schedule versions").

    Notes
    -----
    Each field's default, choices and help are in ``dataclasses.fields(SchedulePolicy)``
    (``metadata["help"]``, ``metadata.get("choices")``). Applying the same value
    to the same labels (and lengths) gives a byte-identical schedule for a given
    ``SCHEDULE_VERSION``, whichever route is used (:meth:`build`,
    :meth:`iterate`, :meth:`stream`, :func:`clusterclip.build_schedule`,
    :class:`clusterclip.ClusterClipSampler`).

    Examples
    --------
    >>> labels = np.array([0, 0, 0, 0, 1, 2, 2])
    >>> policy = SchedulePolicy(max_repeats=2, num_samples=10, seed=0)
    >>> schedule = policy.build(labels)
    >>> schedule.indices.shape, schedule.config.policy
    ((10,), 'clusterclip')
    >>> SchedulePolicy(num_samples=10, seed=0, order="spread")
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `order` must be one of 'online', 'planned'; got 'spread'.
    """

    policy: str = field(
        default=DEFAULT_POLICY,
        metadata={
            "help": "Sampling policy: "
            + "; ".join(f"{p.name}: {p.help}" for p in POLICIES.values())
            + ".",
            "choices": tuple(POLICIES),
        },
    )
    max_repeats: int | None = field(
        default=DEFAULT_MAX_REPEATS,
        metadata={"help": "Repetition cap R per document (None: no cap)."},
    )
    num_samples: int | None = field(
        default=None, metadata={"help": "Budget: schedule length in documents."}
    )
    num_tokens: int | None = field(
        default=None,
        metadata={"help": "Budget: tokens (needs the tokens of every document)."},
    )
    alpha: float | None = field(
        default=None,
        metadata={"help": "Temperature policy exponent: cluster weights |C_k|**alpha."},
    )
    cluster_weights: tuple[float, ...] | None = field(
        default=None,
        metadata={"help": "Custom weight per cluster id (uniform/clusterclip); 0 excludes one."},
    )
    order: str = field(
        default=DEFAULT_ORDER,
        metadata={
            "help": "online: the paper's clip (small clusters early); planned: per-cluster "
            "draws planned for the budget, spread evenly.",
            "choices": ORDERS,
        },
    )
    on_exhausted: str = field(
        default=DEFAULT_ON_EXHAUSTED,
        metadata={
            "help": "When every cluster is clipped before the budget: stop early, continue "
            "with random passes, or fail.",
            "choices": EXHAUSTION_RULES,
        },
    )
    seed: int = field(
        metadata={"help": "Seed of every random choice (an int in [0, 2**63-1]; required)."}
    )
    schedule_version: int | None = field(
        default=None,
        metadata={
            "help": "Draw rule: None for the rule of new schedules (4), or the version a "
            "checkpoint records (1, 2, 3) to resume it exactly.",
            "choices": SUPPORTED_VERSIONS,
        },
    )

    def __post_init__(self) -> None:
        # The order of the checks is the order of the messages users saw before.
        kind = POLICIES[_check_choice("policy", self.policy, tuple(POLICIES))]
        _check_choice("order", self.order, ORDERS)
        _check_choice("on_exhausted", self.on_exhausted, EXHAUSTION_RULES)
        self._set("seed", check_seed(self.seed))
        self._set("schedule_version", check_schedule_version(self.schedule_version, self.seed))
        if self.max_repeats is not None:
            self._set("max_repeats", _check_int("max_repeats", self.max_repeats, 1))
        self._check_budget()
        self._check_alpha(kind)
        self._check_weights(kind)
        self._check_levels_rule(kind)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalising a frozen value once, when made

    def _check_budget(self) -> None:
        if (self.num_samples is None) == (self.num_tokens is None):
            raise invalid(
                f"{spell('num_samples')}/{spell('num_tokens')}",
                "exactly one budget",
                {"num_samples": self.num_samples, "num_tokens": self.num_tokens},
                f"Pass {spell('num_samples')} (draws) or {spell('num_tokens')} (tokens, with "
                f"{spell('lengths')}), not both.",
            )
        if self.num_samples is not None:
            self._set("num_samples", _check_int("num_samples", self.num_samples, 1))
        if self.num_tokens is not None:
            self._set("num_tokens", _check_int("num_tokens", self.num_tokens, 1))

    def _check_alpha(self, kind: Policy) -> None:
        alpha = self.alpha
        takers = [p.name for p in POLICIES.values() if p.accepts_alpha]
        if not kind.accepts_alpha:
            if alpha is not None:
                raise invalid(
                    "alpha",
                    f"None unless {hint('policy', takers[0])}",
                    alpha,
                    f"Pass {hint('policy', takers[0])} to weight clusters by size**alpha.",
                )
            return
        if (
            alpha is None
            or isinstance(alpha, bool)
            or not isinstance(alpha, (int, float, np.number))
        ):
            raise invalid(
                "alpha",
                f"a finite float for {hint('policy', kind.name)}",
                alpha,
                f"Pass e.g. {hint('alpha', 0.5)} (0 = uniform, 1 = natural sizes).",
            )
        if not math.isfinite(float(alpha)):
            raise invalid("alpha", "a finite float", alpha, f"Pass e.g. {hint('alpha', 0.5)}.")
        self._set("alpha", float(alpha))

    def _check_weights(self, kind: Policy) -> None:
        if self.cluster_weights is None:
            return
        if not kind.accepts_weights:
            takers = [p.name for p in POLICIES.values() if p.accepts_weights]
            raise invalid(
                "cluster_weights",
                f"None unless policy is {_listed(takers)}",
                f"weights with {hint('policy', kind.name)}",
                "Custom weights replace the equal cluster weights of those policies.",
            )
        try:
            array = np.asarray(self.cluster_weights, dtype=np.float64)
        except (TypeError, ValueError):
            raise invalid(
                "cluster_weights", "a 1-D array of numbers", self.cluster_weights
            ) from None
        if array.ndim != 1:
            raise invalid(
                "cluster_weights",
                "a 1-D array with one weight per cluster id",
                f"shape {array.shape}",
            )
        if not np.all(np.isfinite(array)) or (array.size and array.min() < 0):
            raise invalid(
                "cluster_weights", "finite and non-negative", "negative or non-finite values"
            )
        self._set("cluster_weights", tuple(float(w) for w in array))

    def _check_levels_rule(self, kind: Policy) -> None:
        if not kind.uses_levels:
            return
        if self.order != "online":
            raise invalid(
                "order",
                f"'online' with {hint('policy', kind.name)}",
                self.order,
                f"{hint('order', 'planned')} does not support {hint('policy', kind.name)} "
                "(its plan is per cluster, not per level): use the online order.",
            )
        if not draw_rule(self.schedule_version).draws_trees:
            raise invalid(
                "schedule_version",
                f"the default rule (None) with {hint('policy', kind.name)}",
                self.schedule_version,
                f"The version-{self.schedule_version} windows draw over a flat cluster list; "
                f"leave {spell('schedule_version')} unset.",
            )

    # -- the registered policy and the recorded config ----------------------
    @property
    def kind(self) -> Policy:
        """The registered :class:`Policy` named by ``policy``."""
        return POLICIES[self.policy]

    @classmethod
    def from_config(cls, config: ScheduleConfig) -> SchedulePolicy:
        """The policy value a recorded :class:`ScheduleConfig` was made from.

        >>> config = SchedulePolicy(num_samples=5, seed=1).config_for(np.array([0, 1]))
        >>> SchedulePolicy.from_config(config) == SchedulePolicy(num_samples=5, seed=1)
        True
        """
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})

    def _resolve(
        self, labels: Any, lengths: Any, duplicate_of: Any = None, levels: Any = None
    ) -> tuple[np.ndarray, np.ndarray | None, ScheduleConfig, Units | None, Hierarchy | None]:
        """Validated labels and lengths, the config they give, the units and the cluster tree."""
        out_of_range = labels_out_of_range(labels)
        labels = validate_labels(labels)
        if levels is not None and not self.kind.uses_levels:
            raise invalid(
                "levels",
                f"None unless {hint('policy', 'hierarchical')}",
                f"levels with {hint('policy', self.policy)}",
                f"Pass {hint('policy', 'hierarchical')} to draw down the cluster tree.",
            )
        hierarchy = validate_levels(levels, labels)
        units, optional = None, {}  # config fields recorded only when used
        if duplicate_of is not None:
            representatives = validate_duplicate_of(duplicate_of, labels)
            units = Units(representatives, labels)
            optional = {
                "duplicates": "group",
                "duplicates_fingerprint": fingerprint_array(representatives),
            }
        if hierarchy is not None:  # the tree, not the rows: excluded rows do not count
            optional["levels_fingerprint"] = hierarchy.fingerprint()
        if out_of_range:  # excluded like negative labels, but said and recorded
            warnings.warn(
                f"clusterclip: {out_of_range_message(out_of_range, labels.size)}",
                UserWarning,
                stacklevel=outside_package(),
            )
            optional["labels_out_of_range"] = out_of_range
        lengths_array = None if lengths is None else validate_lengths(lengths, labels.shape[0])
        if self.num_tokens is not None and lengths_array is None:
            raise invalid(
                "lengths",
                f"given when {spell('num_tokens')} is used",
                None,
                f"Pass {spell('lengths')} (tokens per document) with {spell('num_tokens')}.",
            )
        return (
            labels,
            lengths_array,
            ScheduleConfig(
                policy=self.policy,
                max_repeats=self.kind.effective_max_repeats(self.max_repeats),
                num_samples=self.num_samples,
                num_tokens=self.num_tokens,
                alpha=self.alpha,
                cluster_weights=self._weights_for(labels),
                order=self.order,
                on_exhausted=self.on_exhausted,
                seed=self.seed,
                n_documents=int(labels.shape[0]),
                labels_fingerprint=labels_fingerprint(labels),
                lengths_fingerprint=None
                if lengths_array is None
                else fingerprint_array(lengths_array),
                schedule_version=self.schedule_version,
                **optional,
            ),
            units,
            hierarchy,
        )

    def _weights_for(self, labels: np.ndarray) -> tuple[float, ...] | None:
        """``cluster_weights`` checked against the labels, cut to one per cluster id."""
        if self.cluster_weights is None:
            return None
        array = np.asarray(self.cluster_weights, dtype=np.float64)
        n_labels = int(labels.max()) + 1
        if array.shape[0] < n_labels:
            raise invalid(
                "cluster_weights",
                f"a 1-D array with one weight per cluster id (length >= {n_labels})",
                f"shape {array.shape}",
            )
        present = np.unique(labels[labels >= 0])
        if not np.any(array[present] > 0):
            raise invalid(
                "cluster_weights",
                "positive for at least one non-empty cluster",
                "all zero",
                "Give some cluster a weight > 0.",
            )
        return self.cluster_weights[:n_labels]

    # -- applying it ----------------------------------------------------------
    def config_for(
        self, labels: Any, lengths: Any = None, *, duplicate_of: Any = None, levels: Any = None
    ) -> ScheduleConfig:
        """The recorded, fingerprinted :class:`ScheduleConfig` for these inputs.

        Parameters
        ----------
        labels : array_like of int, shape (N,)
            Cluster id of every document; negative ids are excluded.
        lengths : array_like of int, shape (N,), optional
            Tokens per document (required with ``num_tokens``).
        duplicate_of : array_like of int, shape (N,), optional
            Representative of every document's near-duplicate group (its own
            index when it has no copy): each group is drawn as one unit whose
            members take turns (:mod:`clusterclip.schedule.units`). None: no grouping.
        levels : array_like of int, shape (N, L - 1), optional
            ``policy="hierarchical"`` only: the ancestors of every document's
            cluster, coarsest first (:mod:`clusterclip.schedule.hierarchy`);
            rows of excluded documents are ignored. None: a flat run (the
            ``clusterclip`` rule).

        Examples
        --------
        >>> SchedulePolicy(policy="uniform", num_samples=4, seed=0).config_for(
        ...     np.array([0, 1])).max_repeats is None
        True
        """
        return self._resolve(labels, lengths, duplicate_of, levels)[2]

    def stream(
        self, labels: Any, lengths: Any = None, *, duplicate_of: Any = None, levels: Any = None
    ) -> ScheduleStream:
        """The streaming engine of this policy over ``labels`` (what the adapters read).

        ``stream(...).blocks(start)`` yields the global schedule from position
        ``start``; ``.config`` is :meth:`config_for` of the same inputs. Memory is
        O(N + K), independent of the budget.

        Examples
        --------
        >>> stream = SchedulePolicy(num_samples=6, seed=0).stream(np.array([0, 0, 1]))
        >>> int(sum(block.size for block in stream.blocks(0)))
        6
        """
        labels, lengths_array, config, units, hierarchy = self._resolve(
            labels, lengths, duplicate_of, levels
        )
        return ScheduleStream(Prepared(labels, lengths_array, config, self.kind, units, hierarchy))

    def build(
        self, labels: Any, lengths: Any = None, *, duplicate_of: Any = None, levels: Any = None
    ) -> Schedule:
        """The whole schedule in memory: indices, statistics and config.

        Same result as :func:`clusterclip.build_schedule` with these settings.

        Examples
        --------
        >>> labels = np.array([0, 0, 1, 2, 2, 2])
        >>> SchedulePolicy(max_repeats=1, num_samples=4, seed=3).build(labels).indices.size
        4
        """
        stream = self.stream(labels, lengths, duplicate_of=duplicate_of, levels=levels)
        draws = expected_draws(
            stream.end, num_tokens=self.num_tokens, labels=stream.prep.labels,
            lengths=stream.prep.lengths,
        )  # fmt: skip
        check_fits(draws, estimated=stream.end is None)  # refuse now, not after filling memory
        return stream.collect()

    def iterate(
        self,
        labels: Any,
        lengths: Any = None,
        *,
        start: int = 0,
        block_size: int = 65536,
        duplicate_of: Any = None,
        levels: Any = None,
    ) -> Iterator[np.ndarray]:
        """The global schedule in int64 blocks of ``block_size`` from position ``start``.

        The concatenated blocks equal ``build(labels, lengths).indices[start:]``.

        Examples
        --------
        >>> policy = SchedulePolicy(num_samples=9, seed=1)
        >>> [len(b) for b in policy.iterate(np.array([0, 0, 1]), start=3, block_size=4)]
        [4, 2]
        """
        start = _check_int("start", start, 0)
        block_size = _check_int("block_size", block_size, 1)
        stream = self.stream(labels, lengths, duplicate_of=duplicate_of, levels=levels)
        return rechunk(stream.blocks(start), block_size)
