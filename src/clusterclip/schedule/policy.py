"""The schedule's settings as one value: :class:`SchedulePolicy`.

Every setting of a schedule is declared once, here, as an :func:`~clusterclip.options.option`
field of :class:`SchedulePolicy` (default, choices, help and checks). The schedule
stage's options (:class:`~clusterclip.schedule.options.ScheduleOptions`: this
policy plus ``epochs`` and ``duplicates``), and through them the CLI flags, the
TOML ``[schedule]`` keys and ``docs/configuration.md``, are generated from it;
the keyword shortcuts of :func:`clusterclip.build_schedule` and
:class:`clusterclip.ClusterClipSampler` are its fields::

    >>> import dataclasses
    >>> {f.name: f.default for f in dataclasses.fields(SchedulePolicy)}["max_repeats"]
    4

A policy value validates everything that does not need the labels when it is
made (``__post_init__``); what needs them (the length of ``cluster_weights``,
``lengths`` for a token budget) is checked when it is applied to labels
(:mod:`clusterclip.schedule.api`).

This module imports no engine (tested): the CLI builds its parser from it. The
policies themselves are small objects in the :data:`POLICIES` registry
(:mod:`clusterclip.schedule.policies`, re-exported here).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterclip.errors import hint, invalid, spell
from clusterclip.options import check_fields, option
from clusterclip.schedule.config import (
    SUPPORTED_VERSIONS,
    TREE_VERSIONS,
    ScheduleConfig,
    check_schedule_version,
)
from clusterclip.schedule.policies import POLICIES, Policy, TemperaturePolicy

if TYPE_CHECKING:  # applying a policy is the engine's work: imported when called
    from clusterclip.schedule.io import Schedule
    from clusterclip.schedule.stream import ScheduleStream

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
    "as_policy",
    "with_policy_keywords",
]

#: The defaults, declared once (the fields below use these).
DEFAULT_POLICY = "clusterclip"
DEFAULT_MAX_REPEATS = 4
DEFAULT_ORDER = "online"
DEFAULT_ON_EXHAUSTED = "stop"

#: ``order`` choices: the paper's online clip, or per-cluster draws planned for the budget.
ORDERS = ("online", "planned")
#: ``on_exhausted`` choices: what happens when every cluster is clipped before the budget.
EXHAUSTION_RULES = ("stop", "random", "error")


def _listed(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


@dataclass(frozen=True, kw_only=True)
class SchedulePolicy:
    """Every user setting of a schedule, validated, as one frozen value.

    Parameters
    ----------
    policy : {"random", "uniform", "clusterclip", "temperature", "hierarchical"}
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
        ``SCHEDULE_VERSION`` (4), which the value then holds. 1 (seeds below
        2**32) or 2 (above): the default rule of earlier releases; 3: the
        earlier opt-in rule; pass the version a checkpoint or saved schedule
        records to resume it exactly (docs/sampler.md, "Schedule versions").

    Notes
    -----
    Each field's default, choices and help are in ``dataclasses.fields(SchedulePolicy)``
    (``metadata["help"]``, ``metadata["choices"]``). Applying the same value to
    the same labels (and lengths) gives a byte-identical schedule for a given
    ``SCHEDULE_VERSION``, whichever route is used (:func:`clusterclip.build_schedule`,
    :func:`clusterclip.iter_schedule`, :func:`clusterclip.schedule.api.open_stream`,
    :class:`clusterclip.ClusterClipSampler`, or the methods below).

    Examples
    --------
    >>> from clusterclip import build_schedule
    >>> labels = np.array([0, 0, 0, 0, 1, 2, 2])
    >>> policy = SchedulePolicy(max_repeats=2, num_samples=10, seed=0)
    >>> schedule = build_schedule(labels, policy)
    >>> schedule.indices.shape, schedule.config.policy
    ((10,), 'clusterclip')
    >>> SchedulePolicy(num_samples=10, seed=0, order="spread")
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `order` must be one of online, planned; got 'spread'.
    """

    policy: str = option(
        DEFAULT_POLICY,
        "Sampling policy: " + "; ".join(f"{p.name}: {p.help}" for p in POLICIES.values()) + ".",
        choices=tuple(POLICIES),
    )
    max_repeats: int | None = option(
        DEFAULT_MAX_REPEATS,
        "Repetition cap R per document (none, inf or infinity: no cap). With R at or below "
        "the budget's passes, every cluster smaller than the mean runs out before the end; "
        "2x the passes trained best in the clip grid of docs/results.md.",
        kind="int_or_none",
        minimum=1,
    )
    num_samples: int | None = option(
        None, "Budget: schedule length in documents.", kind="int", minimum=1
    )
    num_tokens: int | None = option(
        None,
        "Budget: tokens (needs every document's token count: `lengths`, or the encoder's "
        "counts in a work directory).",
        kind="int",
        minimum=1,
    )
    alpha: float | None = option(
        None, "Temperature policy exponent: cluster weights |C_k|^alpha.", kind="float"
    )
    cluster_weights: tuple[float, ...] | None = option(
        None,
        "Custom weight per cluster id (uniform/clusterclip; 0 excludes a cluster). A TOML "
        "list, or an array in Python.",
        kind="list_float",
        cli=False,
    )
    order: str = option(
        DEFAULT_ORDER,
        "online: the paper's clip (small clusters early); planned: per-cluster draws "
        "planned for the budget, spread evenly (the more even choice across corpora at "
        "several passes, docs/results.md).",
        choices=ORDERS,
    )
    on_exhausted: str = option(
        DEFAULT_ON_EXHAUSTED,
        "When every cluster is clipped before the budget: stop early, continue randomly, or fail.",
        choices=EXHAUSTION_RULES,
    )
    seed: int = option(
        dataclasses.MISSING, "Seed of the schedule (an int in [0, 2**63-1]).", kind="seed"
    )
    schedule_version: int | None = option(
        None,
        "Draw rule: the rule of new schedules (4, when unset), or the version an earlier "
        "schedule or checkpoint records (1, 2, 3) to reproduce it (docs/sampler.md).",
        kind="int",
        choices=SUPPORTED_VERSIONS,
    )

    def __post_init__(self) -> None:
        self._normalise_weights()  # an array becomes the tuple the declared kind checks
        check_fields(self)
        self._check_version()
        self._check_budget()
        kind = self.kind
        self._check_alpha(kind)
        self._check_weights(kind)
        self._check_levels_rule(kind)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalising a frozen value once, when made

    def _check_version(self) -> None:
        """The draw rule, resolved: None becomes ``SCHEDULE_VERSION``."""
        self._set("schedule_version", check_schedule_version(self.schedule_version, self.seed))

    def _check_budget(self) -> None:
        if (self.num_samples is None) == (self.num_tokens is None):
            raise invalid(
                f"{spell('num_samples')}/{spell('num_tokens')}",
                "exactly one budget",
                {"num_samples": self.num_samples, "num_tokens": self.num_tokens},
                f"Pass {spell('num_samples')} (draws) or {spell('num_tokens')} (tokens, with "
                f"{spell('lengths')}), not both.",
            )

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
        if alpha is None:
            raise invalid(
                "alpha",
                f"a finite float for {hint('policy', kind.name)}",
                alpha,
                f"Pass e.g. {hint('alpha', 0.5)} (0 = uniform, 1 = natural sizes).",
            )

    def _normalise_weights(self) -> None:
        if self.cluster_weights is None:
            return
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

    def _check_weights(self, kind: Policy) -> None:
        if self.cluster_weights is not None and not kind.accepts_weights:
            takers = [p.name for p in POLICIES.values() if p.accepts_weights]
            raise invalid(
                "cluster_weights",
                f"None unless policy is {_listed(takers)}",
                f"weights with {hint('policy', kind.name)}",
                "Custom weights replace the equal cluster weights of those policies.",
            )

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
        if self.schedule_version is not None and self.schedule_version not in TREE_VERSIONS:
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
        return cls(**{f.name: getattr(config, f.name) for f in fields(SchedulePolicy)})

    # -- applying it (the engine is imported when a method is called) -------
    def config_for(
        self, labels: Any, lengths: Any = None, *, duplicate_of: Any = None, levels: Any = None
    ) -> ScheduleConfig:
        """The recorded, fingerprinted :class:`ScheduleConfig` for these inputs.

        Same as :func:`clusterclip.schedule.api.schedule_config` with this policy.

        >>> SchedulePolicy(policy="uniform", num_samples=4, seed=0).config_for(
        ...     np.array([0, 1])).max_repeats is None
        True
        """
        from clusterclip.schedule.api import schedule_config

        return schedule_config(labels, self, lengths=lengths, duplicate_of=duplicate_of,
                               levels=levels)  # fmt: skip

    def stream(
        self, labels: Any, lengths: Any = None, *, duplicate_of: Any = None, levels: Any = None
    ) -> ScheduleStream:
        """The streaming engine of this policy over ``labels``: :func:`~clusterclip.schedule.api.open_stream`.

        >>> stream = SchedulePolicy(num_samples=6, seed=0).stream(np.array([0, 0, 1]))
        >>> int(sum(block.size for block in stream.blocks(0)))
        6
        """
        from clusterclip.schedule.api import open_stream

        return open_stream(labels, self, lengths=lengths, duplicate_of=duplicate_of,
                           levels=levels)  # fmt: skip

    def build(
        self, labels: Any, lengths: Any = None, *, duplicate_of: Any = None, levels: Any = None
    ) -> Schedule:
        """The whole schedule in memory: :func:`clusterclip.build_schedule` with this policy.

        >>> labels = np.array([0, 0, 1, 2, 2, 2])
        >>> SchedulePolicy(max_repeats=1, num_samples=4, seed=3).build(labels).indices.size
        4
        """
        from clusterclip.schedule.api import build_schedule

        return build_schedule(labels, self, lengths=lengths, duplicate_of=duplicate_of,
                              levels=levels)  # fmt: skip

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
        """The global schedule in int64 blocks: :func:`clusterclip.iter_schedule` with this policy.

        >>> policy = SchedulePolicy(num_samples=9, seed=1)
        >>> [len(b) for b in policy.iterate(np.array([0, 0, 1]), start=3, block_size=4)]
        [4, 2]
        """
        from clusterclip.schedule.api import iter_schedule

        return iter_schedule(labels, self, lengths=lengths, start=start, block_size=block_size,
                             duplicate_of=duplicate_of, levels=levels)  # fmt: skip


#: The settings a keyword shortcut may name: the fields of :class:`SchedulePolicy` but ``policy``.
SETTINGS = tuple(f.name for f in fields(SchedulePolicy) if f.name != "policy")


def as_policy(policy: SchedulePolicy | str, settings: Mapping[str, Any]) -> SchedulePolicy:
    """The policy value a front-door function was given: the value, or a name plus its settings.

    The one home of the keyword shortcut: ``build_schedule(labels, "clusterclip",
    max_repeats=4, num_samples=10, seed=0)`` (or ``policy="clusterclip"``) is
    ``build_schedule(labels, SchedulePolicy(policy="clusterclip", max_repeats=4,
    num_samples=10, seed=0))``. Settings next to a value are refused (it holds them all).

    Raises
    ------
    TypeError
        A keyword that is no setting (as Python says for an unknown keyword).
    ClusterClipError
        Settings given with a :class:`SchedulePolicy` value; or an invalid setting.

    Examples
    --------
    >>> as_policy("uniform", {"num_samples": 5, "seed": 0}).policy
    'uniform'
    >>> value = SchedulePolicy(num_samples=5, seed=0)
    >>> as_policy(value, {}) is value
    True
    """
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r}; the schedule's settings are "
            f"{', '.join(SETTINGS)} (the fields of SchedulePolicy)."
        )
    if isinstance(policy, SchedulePolicy):
        if settings:
            raise invalid(
                "policy",
                "a SchedulePolicy without separate settings, or a policy name with them",
                f"a SchedulePolicy and {', '.join(sorted(settings))}",
                "Put the settings in the value: dataclasses.replace(policy, "
                f"{next(iter(sorted(settings)))}=...).",
            )
        if policy.num_samples is None and policy.num_tokens is None:  # stage options: epochs
            raise invalid(
                "policy",
                "a SchedulePolicy with a budget (num_samples or num_tokens)",
                "settings without one",
                "Stage options with an epochs budget give one for the corpus: "
                "options.policy_value(n_usable).",
            )
        if type(policy) is not SchedulePolicy:  # stage options: the policy they hold, resolved
            return SchedulePolicy(
                **{f.name: getattr(policy, f.name) for f in fields(SchedulePolicy)}
            )
        return policy
    if not isinstance(policy, str):
        raise invalid("policy", "a SchedulePolicy or a policy name", policy)
    return SchedulePolicy(policy=policy, **settings)


def with_policy_keywords(function: Callable[..., Any]) -> Callable[..., Any]:
    """Show the keyword shortcut's settings in ``function``'s signature (``help``, IDEs).

    A front-door function takes the settings as ``**settings`` (checked by
    :func:`as_policy`); its ``__signature__`` then lists them as keyword-only
    parameters with the policy's defaults, ``seed`` without one.

    >>> @with_policy_keywords
    ... def front(labels, policy="clusterclip", **settings): ...
    >>> inspect.signature(front).parameters["max_repeats"].default
    4
    """
    signature = inspect.signature(function)
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    shortcut = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=f.type,
        )
        for f in fields(SchedulePolicy)
        if f.name in SETTINGS
    ]
    function.__signature__ = signature.replace(parameters=[*own, *shortcut])  # type: ignore[attr-defined]
    return function
