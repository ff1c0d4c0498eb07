"""The schedule core: which document the trainer sees next (pure numpy).

>>> import numpy as np
>>> from clusterclip.schedule import build_schedule
>>> build_schedule(np.array([0, 0, 1]), max_repeats=2, num_samples=5, seed=0).indices.size
5
>>> from clusterclip.schedule import SchedulePolicy
>>> SchedulePolicy(max_repeats=2, num_samples=5, seed=0).build(np.array([0, 0, 1])).indices.size
5
"""

from clusterclip.schedule.api import build_schedule, iter_schedule
from clusterclip.schedule.config import SCHEDULE_VERSION, ScheduleConfig, labels_fingerprint
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.policy import POLICIES, Policy, SchedulePolicy
from clusterclip.schedule.stats import ScheduleStats

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
