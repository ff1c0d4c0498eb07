"""The schedule stage's settings: the sampling policy plus the budget in epochs.

Declared once here; ``clusterclip run``, ``clusterclip schedule``, the TOML
``[schedule]`` table and ``docs/configuration.md`` are generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterclip.errors import invalid, spell
from clusterclip.options import check_fields, option
from clusterclip.schedule.config import SUPPORTED_VERSIONS
from clusterclip.schedule.policy import (
    DEFAULT_MAX_REPEATS,
    DEFAULT_ON_EXHAUSTED,
    DEFAULT_ORDER,
    DEFAULT_POLICY,
    EXHAUSTION_RULES,
    ORDERS,
    POLICIES,
    SchedulePolicy,
)

__all__ = ["ScheduleOptions"]


@dataclass(frozen=True, kw_only=True)
class ScheduleOptions:
    """Settings of the schedule stage: policy, clip, budget, order, seed.

    The budget is one of ``num_samples``, ``num_tokens`` or ``epochs`` (``E``
    x usable documents); none given means one epoch.

    >>> ScheduleOptions(epochs=2.5).budget(1000)
    {'num_samples': 2500, 'num_tokens': None}
    """

    policy: str = option(
        DEFAULT_POLICY,
        "Sampling policy: clusterclip (uniform over clusters + clip), uniform (no clip), "
        "temperature (weights |C_k|^alpha), random (shuffled passes), hierarchical "
        "(uniform per level of the cluster tree of `cluster --levels`, + clip).",
        choices=tuple(POLICIES),
    )
    max_repeats: int | None = option(
        DEFAULT_MAX_REPEATS,
        "Repetition cap R per document (none, inf or infinity: no cap). For a budget of "
        "several passes, about twice the passes (docs/results.md, 'Which to pick').",
        kind="int_or_none",
        minimum=1,
    )
    num_samples: int | None = option(
        None, "Budget: schedule length in documents.", kind="int", minimum=1
    )
    num_tokens: int | None = option(
        None, "Budget: tokens (uses the encoder's token counts).", kind="int", minimum=1
    )
    epochs: float | None = option(
        None,
        "Budget: E x usable documents (default 1 when no budget is given).",
        kind="float",
        above=0,
    )
    alpha: float | None = option(
        None, "Temperature policy exponent: weights |C_k|^alpha.", kind="float"
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
    duplicates: str = option(
        "group",
        "group: near-duplicate groups (the dedup stage) share one repetition budget, their "
        "members taking turns; off: every document is its own unit.",
        choices=("group", "off"),
    )
    cluster_weights: tuple[float, ...] | None = option(
        None, "Custom weight per cluster id (TOML list only).", kind="list_float", cli=False
    )
    seed: int = option(0, "Seed of the schedule.", kind="seed")
    schedule_version: int | None = option(
        None,
        "Draw rule: the rule of new schedules (4, when unset), or the version an earlier "
        "schedule or checkpoint records (1, 2, 3) to reproduce it (docs/sampler.md).",
        kind="int",
        choices=SUPPORTED_VERSIONS,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        given = [k for k in ("num_samples", "num_tokens", "epochs") if getattr(self, k) is not None]
        if len(given) > 1:
            raise invalid(
                given[1],
                f"left out when {spell(given[0])} is given (one budget)",
                getattr(self, given[1]),
                "Give exactly one budget (a command-line budget flag replaces the config file's).",
            )
        self.policy_value()  # policy, alpha and weights together, before any stage runs

    def policy_value(self, n_usable: int | None = None) -> SchedulePolicy:
        """These settings as a validated :class:`SchedulePolicy` (the budget for ``n_usable``).

        Without ``n_usable`` an epochs budget stands in as one draw: only the
        checks that do not depend on the corpus are made.

        >>> ScheduleOptions(policy="uniform", num_samples=10).policy_value().policy
        'uniform'
        """
        budget = self.budget(1 if n_usable is None else n_usable)
        return SchedulePolicy(
            policy=self.policy, max_repeats=self.max_repeats, alpha=self.alpha,
            cluster_weights=self.cluster_weights, order=self.order,
            on_exhausted=self.on_exhausted, seed=self.seed,
            schedule_version=self.schedule_version, **budget,
        )  # fmt: skip

    def budget(self, n_usable: int) -> dict[str, Any]:
        """``build_schedule``'s ``num_samples`` / ``num_tokens`` for ``n_usable`` documents.

        ``epochs=E`` means ``round(E * n_usable)`` draws; no budget means one epoch.
        """
        if self.num_tokens is not None:
            return {"num_samples": None, "num_tokens": int(self.num_tokens)}
        if self.num_samples is not None:
            return {"num_samples": int(self.num_samples), "num_tokens": None}
        epochs = 1.0 if self.epochs is None else float(self.epochs)
        return {"num_samples": max(1, int(round(epochs * n_usable))), "num_tokens": None}
