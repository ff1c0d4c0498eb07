"""The schedule stage's options: the :class:`~clusterclip.schedule.policy.SchedulePolicy` plus
``epochs`` and ``duplicates``.

The policy's fields are declared once, in :mod:`clusterclip.schedule.policy`;
this class adds only what the stage needs besides them: a budget in epochs of the
work directory's usable documents, and whether near-duplicate groups share a
repetition budget. ``clusterclip run``, ``clusterclip schedule``, the TOML
``[schedule]`` table and ``docs/configuration.md`` are generated from it. Like
the policy, this module imports no engine.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from clusterclip.errors import invalid, spell
from clusterclip.options import option, option_with_default
from clusterclip.schedule.config import check_schedule_version
from clusterclip.schedule.policy import SchedulePolicy

__all__ = ["ScheduleOptions"]

#: The three ways to give the stage a budget (at most one).
BUDGETS = ("num_samples", "num_tokens", "epochs")


@dataclass(frozen=True, kw_only=True)
class ScheduleOptions(SchedulePolicy):
    """Settings of the schedule stage: the policy, plus ``epochs`` and ``duplicates``.

    The budget is one of ``num_samples``, ``num_tokens`` or ``epochs`` (``E``
    x usable documents); none given means one epoch. ``seed`` defaults to 0 (the
    run-wide seed sets it under ``clusterclip run``), and ``schedule_version``
    stays None when unset, as the options are recorded in the manifest.
    :meth:`policy_value` gives the policy the stage applies.

    >>> options = ScheduleOptions(epochs=2.5)
    >>> options.budget(1000)
    {'num_samples': 2500, 'num_tokens': None}
    >>> options.policy_value(1000).num_samples
    2500
    """

    seed: int = option_with_default(SchedulePolicy, "seed", 0)
    epochs: float | None = option(
        None,
        "Budget: E x usable documents (default 1 when no budget is given).",
        kind="float",
        above=0,
    )
    duplicates: str = option(
        "group",
        "group: near-duplicate groups (the dedup stage) share one repetition budget, their "
        "members taking turns; off: every document is its own unit.",
        choices=("group", "off"),
    )

    def _check_version(self) -> None:
        """Checked, but kept as given (None: the rule of new schedules, recorded as None)."""
        check_schedule_version(self.schedule_version, self.seed)

    def _check_budget(self) -> None:
        given = [k for k in BUDGETS if getattr(self, k) is not None]
        if len(given) > 1:
            raise invalid(
                given[1],
                f"left out when {spell(given[0])} is given (one budget)",
                getattr(self, given[1]),
                "Give exactly one budget (a command-line budget flag replaces the config file's).",
            )

    def policy_value(self, n_usable: int | None = None) -> SchedulePolicy:
        """The :class:`SchedulePolicy` the stage applies (the budget for ``n_usable`` documents).

        Without ``n_usable`` an epochs budget stands in as one draw: only the
        checks that do not depend on the corpus are made.

        >>> ScheduleOptions(policy="uniform", num_samples=10).policy_value().policy
        'uniform'
        """
        settings = {f.name: getattr(self, f.name) for f in fields(SchedulePolicy)}
        return SchedulePolicy(**{**settings, **self.budget(1 if n_usable is None else n_usable)})

    def budget(self, n_usable: int) -> dict[str, Any]:
        """``num_samples`` / ``num_tokens`` of the policy for ``n_usable`` documents.

        ``epochs=E`` means ``round(E * n_usable)`` draws; no budget means one epoch.
        """
        if self.num_tokens is not None:
            return {"num_samples": None, "num_tokens": int(self.num_tokens)}
        if self.num_samples is not None:
            return {"num_samples": int(self.num_samples), "num_tokens": None}
        epochs = 1.0 if self.epochs is None else float(self.epochs)
        return {"num_samples": max(1, int(round(epochs * n_usable))), "num_tokens": None}
