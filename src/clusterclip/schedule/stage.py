"""The schedule stage: a work directory's labels -> ``schedule.npy`` + ``schedule.json``.

One task of the stage's engine (:mod:`clusterclip.schedule.task`) reads the
labels (and token counts for a token budget, the near-duplicate groups of the
dedup stage when ``duplicates="group"``, and the cluster tree of a hierarchical
cluster stage for ``policy="hierarchical"``) through
:class:`clusterclip.io.WorkDir`, streams the schedule (:func:`build_with_progress`,
with a progress bar) and saves it. The runner (:mod:`clusterclip.runner`)
decides whether it runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from clusterclip.engines import resolve_options, run_task
from clusterclip.errors import ClusterClipError, flags_in_use, given_as, hint
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import ScheduleArtifact
from clusterclip.runner import StageOutput
from clusterclip.schedule.api import open_stream
from clusterclip.schedule.config import validate_labels
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.memory_check import check_fits, expected_draws
from clusterclip.schedule.options import ScheduleOptions
from clusterclip.schedule.task import ScheduleWorker

__all__ = ["ScheduleStage", "build_with_progress"]


class ScheduleStage:
    """The schedule stage in the runner's contract.

    The check and the build run as one task of ``engine``
    (:class:`~clusterclip.schedule.task.ScheduleWorker`): on the Ray engine a
    worker reads the labels and writes the schedule, and the driver handles
    only its statistics.

    >>> stage = ScheduleStage()
    >>> stage.name, stage.artifacts
    ('schedule', ('schedule', 'schedule_meta'))
    """

    name = "schedule"
    artifacts = ("schedule", "schedule_meta")

    def __init__(
        self, *, engine: str = "local", engine_options: Mapping[str, Any] | None = None
    ) -> None:
        self.engine = engine
        self.ray_options = resolve_options(engine, engine_options)  # checked before any work

    def inputs(self, work: WorkDir, options: ScheduleOptions) -> dict[str, Any]:
        """The cluster labels, the document index when the budget is in tokens, the groups."""
        work.require("cluster")
        found = {"cluster.clusters": work.output("cluster.clusters")}
        if options.num_tokens is not None:
            found["embed.documents"] = work.output("embed.documents")
        if options.duplicates == "group":
            if work.entry("dedup") is None:
                raise ClusterClipError(
                    f"work directory {work.path} has no near-duplicate groups yet (no completed "
                    f"`dedup` stage). Run `clusterclip dedup --workdir {work.path}` first, or "
                    "pass --duplicates off (duplicates='off') to draw every document on its own."
                )
            found["dedup.duplicates"] = work.output("dedup.duplicates")
        # policy="hierarchical" reads the tree from the level_* columns of cluster.clusters
        return found

    def load(self, work: WorkDir, entry: Mapping[str, Any]) -> Schedule:
        """The saved schedule (its stats recomputed from the file)."""
        return Schedule.load(ScheduleArtifact(work).path)

    def check(self, work: WorkDir, options: ScheduleOptions) -> None:
        """Refuse a budget whose schedule cannot fit in memory, before the manifest changes."""
        self._task(work, "check", options)

    def run(self, work: WorkDir, options: ScheduleOptions, *, resume: bool) -> StageOutput:
        """Build the schedule from the current labels and save it atomically."""
        done = self._task(work, "build", options)
        for message, category, filename, lineno in done["warnings"]:
            # shown once more by the caller's summary; keep the user's filters
            warnings.warn_explicit(message, category, filename, lineno)
        saved = ScheduleArtifact(work)
        # the settings are stored once: the options in the manifest (what was asked, as for
        # every stage) and the resolved config in schedule.json (no copy in the manifest)
        record = {"path": str(saved.path)}
        schedule = done["schedule"]
        if schedule is None:  # built elsewhere: the draws stay in the file until read

            def schedule() -> Schedule:
                indices = np.load(saved.path, mmap_mode="r")
                return Schedule(indices=indices, stats=done["stats"], config=done["config"])

        return StageOutput(done["outputs"], done["summary"], record, schedule)

    def _task(self, work: WorkDir, step: str, options: ScheduleOptions) -> dict[str, Any]:
        """``step`` of :class:`~clusterclip.schedule.task.ScheduleWorker`, one engine task."""
        keep = self.engine == "local"
        worker = partial(ScheduleWorker, str(work.path.resolve()), keep, flags_in_use())
        return run_task(worker, (step, options), engine=self.engine, options=self.ray_options)


def build_with_progress(
    labels: Any,
    options: ScheduleOptions,
    *,
    lengths: Any = None,
    duplicate_of: Any = None,
    levels: Any = None,
) -> tuple[Schedule, dict[str, Any], list[warnings.WarningMessage]]:
    """Stream the schedule of ``options`` with a progress bar; collect its warnings.

    The policy applied is ``options.policy_value(n_usable)`` (an epochs budget
    resolved for the usable documents); ``duplicate_of`` (the near-duplicate
    groups) is used when ``options.duplicates == "group"``; ``levels`` (the
    cluster tree) with ``policy="hierarchical"``. Returns the schedule, the budget
    it was built for (``num_samples`` / ``num_tokens``) and the warnings raised meanwhile.
    """
    from clusterclip.progress import progress_bar

    # a string or float array is refused here, not by `>=`; the stream gets the labels as
    # given, so that it counts (and warns about) unsigned labels beyond int64
    checked = validate_labels(labels)
    budget = options.budget(int((checked >= 0).sum()))
    with warnings.catch_warnings(record=True) as caught, given_as(_budget_given(options, budget)):
        warnings.simplefilter("always", UserWarning)
        policy = options.policy_value(int((checked >= 0).sum()))
        groups = duplicate_of if options.duplicates == "group" else None
        stream = open_stream(labels, policy, lengths=lengths, duplicate_of=groups, levels=levels)
        draws = expected_draws(
            stream.end, num_tokens=budget["num_tokens"], labels=checked, lengths=lengths
        )
        check_fits(draws, estimated=stream.end is None)
        with progress_bar(total=stream.end, desc="schedule", unit="draw") as bar:
            schedule = stream.collect(progress=bar.update)
    return schedule, budget, list(caught)


def _budget_given(options: ScheduleOptions, budget: Mapping[str, Any]) -> dict[str, str]:
    """How the user gave a document budget that ``epochs`` (or no budget) produced.

    Messages about the budget then name ``--epochs 3.0 (1,869 documents)``, not a
    ``--num-samples`` the user never passed.

    >>> _budget_given(ScheduleOptions(epochs=3.0), {"num_samples": 300})
    {'num_samples': 'epochs=3.0 (300 documents)'}
    >>> _budget_given(ScheduleOptions(num_samples=300), {"num_samples": 300})
    {}
    """
    if options.num_samples is not None or budget.get("num_samples") is None:
        return {}
    documents = f"{budget['num_samples']:,} documents"
    if options.epochs is None:
        return {"num_samples": f"of one epoch ({documents}, the default budget)"}
    return {"num_samples": f"{hint('epochs', options.epochs)} ({documents})"}
