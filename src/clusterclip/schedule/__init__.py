"""The schedule core: which document the trainer sees next (numpy; optional C loops, same bytes).

Importing the package loads the settings (:class:`SchedulePolicy`, the recorded
:class:`ScheduleConfig`) but no engine; :func:`build_schedule` and
:func:`iter_schedule` load it on first use, so that building the CLI's parser
or reading a recorded config stays light.

>>> import numpy as np
>>> from clusterclip.schedule import build_schedule
>>> build_schedule(np.array([0, 0, 1]), max_repeats=2, num_samples=5, seed=0).indices.size
5
>>> from clusterclip.schedule import SchedulePolicy
>>> build_schedule(np.array([0, 0, 1]), SchedulePolicy(max_repeats=2, num_samples=5, seed=0)).indices.size
5
"""

from __future__ import annotations

import importlib
from typing import Any

from clusterclip.schedule.config import SCHEDULE_VERSION, ScheduleConfig, labels_fingerprint
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.policy import POLICIES, Policy, SchedulePolicy
from clusterclip.schedule.stats import ScheduleStats

#: The front door, imported with the engine on first access.
_ENGINE = {
    "build_schedule": "clusterclip.schedule.api",
    "iter_schedule": "clusterclip.schedule.api",
}

__all__ = [
    "POLICIES",
    "SCHEDULE_VERSION",
    "Policy",
    "Schedule",
    "ScheduleConfig",
    "SchedulePolicy",
    "ScheduleStats",
    "build_schedule",
    "iter_schedule",
    "labels_fingerprint",
]


def __getattr__(name: str) -> Any:
    module = _ENGINE.get(name)
    if module is None:  # a sub-module (`clusterclip.schedule.api`), as when __init__ imported it
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
