"""The names earlier releases imported from ``clusterclip.schedule.engine``.

The engine is now one module per responsibility:

* :mod:`clusterclip.schedule.prepare` -- :class:`Prepared` (groups, weights, caps);
* :mod:`clusterclip.schedule.protocols` -- the declared interfaces
  (``GroupTable``, ``OnlineSource``, ``DrawRule``);
* :mod:`clusterclip.schedule.rules` -- ``DRAW_RULES``, one rule per ``schedule_version``;
* :mod:`clusterclip.schedule.choosers` -- the cluster choices of versions 1 and 2;
* :mod:`clusterclip.schedule.sources` -- the sources of the cluster part of versions 1 to 3;
* :mod:`clusterclip.schedule.stream` -- :class:`ScheduleStream`, :func:`rechunk`.

This module only re-exports them, so that code written against it keeps working.
"""

from __future__ import annotations

from clusterclip.schedule.choosers import HierarchicalChooser, OnlineChooser, block_uniforms
from clusterclip.schedule.prepare import NO_CAP, Prepared
from clusterclip.schedule.protocols import DrawRule
from clusterclip.schedule.rules import DRAW_RULES
from clusterclip.schedule.stream import ScheduleStream, materialise, rechunk

__all__ = [
    "DRAW_RULES",
    "NO_CAP",
    "DrawRule",
    "HierarchicalChooser",
    "OnlineChooser",
    "Prepared",
    "ScheduleStream",
    "block_uniforms",
    "materialise",
    "rechunk",
]
