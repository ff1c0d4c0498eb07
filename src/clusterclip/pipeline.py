"""The whole method in one call: embed -> cluster -> dedup -> schedule -> report.

The dedup stage (near-duplicate groups) runs when ``schedule.duplicates`` is
``"group"`` (the default).

:func:`run` hands each stage to the one runner (:func:`clusterclip.runner.run_stage`)
with ``on_change="redo"``: a stage is skipped when its whole configuration and
its inputs' fingerprints are unchanged and its outputs are present; it resumes
when a previous run stopped half-way; otherwise it runs again and says why
(the options that changed, or the upstream output that changed).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from clusterclip.config import (
    ClusterOptions,
    EmbedOptions,
    ReportOptions,
    RunConfig,
    ScheduleOptions,
)
from clusterclip.errors import ClusterClipError, hint, invalid, spell
from clusterclip.plan import StageLedger

__all__ = [
    "ClusterOptions",
    "EmbedOptions",
    "ReportOptions",
    "RunConfig",
    "ScheduleOptions",
    "StageLedger",
    "plan_budget",
    "run",
]


def plan_budget(options: ScheduleOptions, n_usable: int) -> dict[str, int | None]:
    """Turn the budget options into ``build_schedule``'s ``num_samples`` / ``num_tokens``.

    ``epochs=E`` means ``round(E * n_usable)`` draws; no budget means one epoch.

    >>> plan_budget(ScheduleOptions(epochs=2.5), 1000)
    {'num_samples': 2500, 'num_tokens': None}
    """
    return options.budget(n_usable)


def resolve_config(
    config: RunConfig | None,
    inputs: Any = None,
    workdir: str | os.PathLike[str] | None = None,
    n_clusters: int | None = None,
) -> tuple[RunConfig, Any]:
    """Merge the keyword shortcuts into ``config``; check what the run needs before any work.

    Returns the config and the corpus to embed (paths, or a ``datasets.Dataset``).
    """
    config = config or RunConfig()
    source: Any = config.inputs
    if inputs is not None:
        source = inputs
        if isinstance(inputs, (str, os.PathLike)):
            config = dataclasses.replace(config, inputs=[os.fspath(inputs)])
        elif isinstance(inputs, (list, tuple)):
            config = dataclasses.replace(config, inputs=[os.fspath(p) for p in inputs])
    if workdir is not None:
        config = dataclasses.replace(config, workdir=os.fspath(workdir))
    if n_clusters is not None:
        cluster = dataclasses.replace(config.cluster, n_clusters=n_clusters)
        config = dataclasses.replace(config, cluster=cluster)
    if source is None or (isinstance(source, (list, tuple, str)) and not source):
        raise invalid(
            "inputs",
            "at least one corpus file, directory or glob",
            source,
            "Pass INPUT... on the command line or `inputs = [...]` in the config.",
        )
    if not config.workdir:
        raise invalid(
            "workdir", "a directory path", config.workdir, "Pass --workdir W (created if missing)."
        )
    if os.path.exists(config.workdir) and not os.path.isdir(config.workdir):
        raise invalid(
            "workdir", "a directory (created if missing)", config.workdir, "It is a file."
        )
    if config.cluster.n_clusters is None:
        raise ClusterClipError(
            f"`{spell('n_clusters')}` is required (an int in [1, inf)): how many clusters to "
            f"balance. Pass {hint('n_clusters', 100)} (a few hundred documents per cluster is "
            "typical)."
        )
    _check_budget_fits(config.schedule)
    return config, source


def _check_budget_fits(options: ScheduleOptions) -> None:
    """Refuse now a document budget whose schedule cannot fit in memory.

    Only when its length is sure to be the budget: a repetition cap with
    ``on_exhausted="stop"`` may end the schedule sooner (known once the
    corpus is clustered; the schedule stage checks again then).
    """
    from clusterclip.schedule.memory_check import check_fits
    from clusterclip.schedule.policy import POLICIES

    capped = POLICIES[options.policy].effective_max_repeats(options.max_repeats) is not None
    if options.num_samples is not None and not (capped and options.on_exhausted == "stop"):
        check_fits(options.num_samples)


def run(
    inputs: Any = None,
    *,
    workdir: str | os.PathLike[str] | None = None,
    n_clusters: int | None = None,
    config: RunConfig | None = None,
    log: Callable[[str], None] | None = None,
    ledger: StageLedger | None = None,
) -> dict[str, Any]:
    """Run embed -> cluster -> dedup -> schedule -> report, skipping up-to-date stages.

    Parameters
    ----------
    inputs : path, glob, directory, sequence of them, or datasets.Dataset
        The corpus (default: ``config.inputs``).
    workdir : path
        Work directory (default: ``config.workdir``).
    n_clusters : int
        Number of clusters K (default: ``config.cluster.n_clusters``).
    config : RunConfig, optional
        Every other option, grouped by stage; see ``docs/configuration.md``.
    log : callable, optional
        Receives one line per stage decision (``print`` for the CLI).
    ledger : StageLedger, optional
        Filled as the stages finish: after an interruption it says which ran.

    Returns
    -------
    dict
        ``{"workdir", "stages": {stage: {"action", "reason", "seconds"}},
        "n_documents", "n_usable", "n_clusters", "budget", "schedule": {...stats},
        "schedule_path", "report_path", "notices", "duplicates"}``: ``notices``
        counts what was replaced, skipped or excluded
        (:func:`clusterclip.report.notices.collect_notices`), ``duplicates`` the
        near-duplicate groups and the documents they withheld. The schedule is
        deterministic: the same corpus, options and seed give a byte-identical
        ``schedule.npy``.

    Examples
    --------
    >>> import clusterclip
    >>> from clusterclip.pipeline import RunConfig, ScheduleOptions
    >>> result = clusterclip.run(["corpus.jsonl"], workdir="work", n_clusters=50,
    ...                          config=RunConfig(schedule=ScheduleOptions(epochs=3.0)))  # doctest: +SKIP
    >>> result["stages"]["embed"]["action"]  # doctest: +SKIP
    'ran'
    """
    from clusterclip.cluster.stage import ClusterStage
    from clusterclip.dedup.stage import DedupStage
    from clusterclip.embed.job import EmbedStage
    from clusterclip.io import WorkDir
    from clusterclip.plan import plan_stages
    from clusterclip.progress import progress_enabled
    from clusterclip.report.stage import ReportStage
    from clusterclip.schedule.stage import ScheduleStage

    config, source = resolve_config(config, inputs, workdir, n_clusters)
    work = WorkDir(config.workdir)
    engine_options = config.ray.engine_options()
    progress = progress_enabled()  # the k-means iterations and assignment, as for embed
    offered = [
        (EmbedStage(source, engine=config.engine, engine_options=engine_options), "embed"),
        (
            ClusterStage(engine=config.engine, engine_options=engine_options, progress=progress),
            "cluster",
        ),
        # in the plan when the schedule's inputs name its groups
        (DedupStage(engine=config.engine, engine_options=engine_options), "dedup"),
        (ScheduleStage(engine=config.engine, engine_options=engine_options), "schedule"),
        (ReportStage(engine=config.engine, engine_options=engine_options), "report"),
    ]
    plan = plan_stages(
        [(stage, config.stage_options(section)) for stage, section in offered],
        ["report" if config.report.enabled else "schedule"],
    )
    with work.lock(log=log):  # one run at a time: its summary is its own stages'
        outcomes = plan.run(work, on_change="redo", log=log, ledger=ledger)
        return _result(work, outcomes)


def _result(work: Any, outcomes: dict[str, Any]) -> dict[str, Any]:
    """The summary dict of a run, read back through the work directory."""
    from clusterclip.report.notices import run_findings

    labels = work.labels()
    n_usable = int((labels >= 0).sum())
    saved = work.schedule()
    stages = {name: outcome.to_dict() for name, outcome in outcomes.items()}
    if "report" not in outcomes:
        stages["report"] = {"action": "disabled", "reason": "report.enabled = false"}
    result: dict[str, Any] = {
        "workdir": str(work.path),
        "stages": stages,
        "n_documents": int(len(labels)),
        "n_usable": n_usable,
        "n_clusters": int(labels.max()) + 1 if n_usable else 0,
        "budget": outcomes["schedule"].summary.get("budget")
        or {
            "num_samples": saved.config.get("num_samples"),
            "num_tokens": saved.config.get("num_tokens"),
        },
        "schedule": {"config": saved.config, "stats": saved.meta.get("stats", {})},
        "schedule_path": str(saved.path),
        "report_path": str(outcomes["report"].result) if "report" in outcomes else None,
    }
    result["warnings"] = (
        list(outcomes["dedup"].summary.get("warnings", [])) if "dedup" in outcomes else []
    )
    result.update(run_findings(work, report_written="report" in outcomes))  # notices, duplicates
    for name in ("embed", "cluster", "dedup"):
        if name in outcomes and outcomes[name].action != "skipped":
            result[name] = outcomes[name].summary
    result["resolved"] = resolved_choices(work)
    return result


def resolved_choices(work: Any) -> dict[str, Any]:
    """What ``auto`` settings became on this machine, and the seed stability, from the manifest.

    ``{"encoder", "device", "precision", "runtime", "kmeans_backend", "kmeans_backend_reason",
    "threads", "cpu", "stability"}``:
    the choices that make results differ between machines (docs/clustering.md,
    "Identical across machines?").
    """
    from clusterclip.cluster.blas import cpu_model

    embed = (work.entry("embed") or {}).get("encoder", {})
    cluster = (work.entry("cluster") or {}).get("summary", {})
    return {
        "encoder": embed.get("encoder"),
        "device": embed.get("device"),
        "precision": embed.get("precision"),
        "runtime": embed.get("runtime"),
        "kmeans_backend": cluster.get("backend"),
        "kmeans_backend_reason": (cluster.get("backend_choice") or {}).get("reason"),
        "threads": cluster.get("threads"),
        "cpu": cpu_model(),
        "stability": cluster.get("stability"),
    }
