"""The schedule stage's work as one engine task: the worker reads the inputs and writes the files.

The schedule is one sequential draw over the labels, so it is one task, not
many. What moves is *where* it runs: the driver hands :class:`ScheduleWorker`
to :func:`clusterclip.engines.map_shards` with the options as the payload; the
worker opens the work directory itself, reads the labels (and the token
counts, near-duplicate groups and cluster tree it needs), builds the schedule,
writes ``schedule.npy`` and ``schedule.json`` through
:class:`~clusterclip.io.artifacts.ScheduleArtifact`, and sends back only what
is as small as the cluster count: the file fingerprints, the statistics, the
settings, the summary numbers and the warnings. On the Ray engine no label and
no draw passes through the driver; the local engine runs the same worker in
its own process (and keeps the schedule it built, so the Python caller gets it
without reading the file back). The draw uses no BLAS, and what it does on
its helper thread (lookups, the next slab, the input hash) does not depend on
when it runs, so the files are byte-identical on both engines.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, spelled_as_flags

__all__ = ["ScheduleWorker", "check_inputs"]

#: Per-cluster arrays of the stats, kept out of the manifest (they are in schedule.json).
BULKY = ("draws_per_cluster", "clip_step", "planned_draws", "cluster_ids")


class ScheduleWorker:
    """Check, or build and save, a work directory's schedule wherever the engine runs it.

    Pass ``functools.partial(ScheduleWorker, workdir, keep, flags)`` as the ``worker`` of
    :func:`clusterclip.engines.run_task`, and ``(step, options)`` as the task's
    payload: ``step`` is ``"check"`` (:func:`check_inputs`: refuse what
    cannot be built, before the manifest changes) or ``"build"``; ``options`` a
    :class:`~clusterclip.schedule.options.ScheduleOptions`.

    Parameters
    ----------
    workdir : str
        The work directory (every Ray node must see it at this path).
    keep : bool
        Also return the built :class:`~clusterclip.schedule.io.Schedule` itself
        (``"schedule"``); for a worker in the caller's own process only, since
        it holds every draw.
    flags : mapping or None
        The caller's :func:`~clusterclip.errors.flags_in_use`: under the command
        line, the worker's errors and warnings name the command's flags
        (``--num-samples``), wherever it runs.

    Returns (when called with ``"build"``) a dict: ``outputs`` (the files'
    fingerprints), ``stats`` (:class:`~clusterclip.schedule.stats.ScheduleStats`),
    ``config`` (:class:`~clusterclip.schedule.config.ScheduleConfig`), ``summary``
    (what the manifest records), ``warnings`` (``(message, category, filename,
    lineno)`` of each warning raised meanwhile) and ``schedule`` (or None).
    ``"check"`` returns an empty dict.

    Examples
    --------
    >>> from clusterclip.schedule.options import ScheduleOptions
    >>> done = ScheduleWorker("work", False)(("build", ScheduleOptions()))  # doctest: +SKIP
    >>> sorted(done)  # doctest: +SKIP
    ['config', 'outputs', 'schedule', 'stats', 'summary', 'warnings']
    """

    def __init__(
        self, workdir: str, keep: bool = False, flags: Mapping[str, str] | None = None
    ) -> None:
        self.workdir, self.keep = str(workdir), bool(keep)
        self.flags = None if flags is None else dict(flags)

    def __call__(self, payload: tuple[str, Any]) -> dict[str, Any]:
        from clusterclip.io import WorkDir

        step, options = payload
        if step not in ("check", "build"):
            raise ValueError(f"step must be 'check' or 'build', got {step!r}")
        work = WorkDir(self.workdir)
        spelling = nullcontext() if self.flags is None else spelled_as_flags(self.flags)
        with spelling:
            if step == "check":
                check_inputs(work, options)
                return {}
            return _build_and_save(work, options, keep=self.keep)


def _build_and_save(work: Any, options: Any, *, keep: bool) -> dict[str, Any]:
    from clusterclip.io.artifacts import ScheduleArtifact
    from clusterclip.schedule.stage import build_with_progress
    from clusterclip.schedule.stats import summarise

    labels = work.labels()
    lengths = work.n_tokens() if options.num_tokens is not None else None
    schedule, budget, caught = build_with_progress(
        labels, options, lengths=lengths, duplicate_of=duplicate_of(work, options),
        levels=levels(work, options),
    )  # fmt: skip
    outputs = ScheduleArtifact(work).write(schedule.indices, schedule.sidecar_meta())
    stats = {k: v for k, v in schedule.stats.to_dict().items() if k not in BULKY}
    summary = {
        "budget": budget,
        "stats": stats,
        "warnings": [str(w.message) for w in caught],
        "overview": asdict(summarise(schedule.stats, labels)),
    }
    return {
        "outputs": outputs,
        "stats": schedule.stats,
        "config": schedule.config,
        "summary": summary,
        "warnings": [(w.message, w.category, w.filename, w.lineno) for w in caught],
        "schedule": schedule if keep else None,
    }


def duplicate_of(work: Any, options: Any) -> np.ndarray | None:
    """The near-duplicate groups when ``options.duplicates == "group"`` (stale ones refused)."""
    return work.duplicate_of() if options.duplicates == "group" else None


def levels(work: Any, options: Any) -> np.ndarray | None:
    """The cluster tree (N, L - 1) for ``policy="hierarchical"``, else None."""
    if not options.kind.uses_levels:
        return None
    found = work.levels()  # ancestors of every document's cluster, or None (flat run)
    if found is None:
        raise ClusterClipError(
            f"work directory {work.path} has no cluster tree: its cluster stage wrote no "
            f"levels, and policy 'hierarchical' draws down them. Run `clusterclip cluster "
            f"--workdir {work.path} --levels ...` first, or pick another --policy "
            "(e.g. clusterclip)."
        )
    return found


def check_inputs(work: Any, options: Any) -> None:
    """Refuse a schedule that cannot be built or cannot fit in memory.

    Stale or missing near-duplicate groups, a flat cluster stage under
    ``policy="hierarchical"``, and a budget whose schedule would not fit are
    refused with a :class:`~clusterclip.errors.ClusterClipError`.
    """
    from clusterclip.schedule.memory_check import check_fits

    labels = work.labels()
    lengths = work.n_tokens() if options.num_tokens is not None else None
    duplicate_of(work, options)
    levels(work, options)
    draws, estimated = draws_at_most(options, labels, lengths)
    check_fits(draws, estimated=estimated)


def draws_at_most(
    options: Any, labels: np.ndarray, lengths: np.ndarray | None
) -> tuple[int | None, bool]:
    """``(length, estimated)`` of the schedule, without building it.

    A document budget gives the length; a token budget its mean (``estimated``).
    A repetition cap with ``on_exhausted="stop"`` ends the schedule after at most
    ``max_repeats`` appearances of every usable document.

    >>> from clusterclip.schedule.options import ScheduleOptions
    >>> draws_at_most(ScheduleOptions(num_samples=10, max_repeats=1), np.array([0, 1, -1]), None)
    (2, False)
    """
    from clusterclip.schedule.memory_check import expected_draws

    n_usable = int((labels >= 0).sum())
    budget = options.budget(n_usable)
    draws, estimated = budget["num_samples"], False
    if draws is None:
        draws = expected_draws(
            None, num_tokens=budget["num_tokens"], labels=labels, lengths=lengths
        )
        estimated = True
    cap = options.kind.effective_max_repeats(options.max_repeats)
    if draws is not None and cap is not None and options.on_exhausted == "stop":
        draws = min(draws, cap * n_usable)
    return draws, estimated
