"""Which stages a command runs, in which order: derived from what each stage reads.

``clusterclip run``, every sub-command that runs a stage (``embed``, ``cluster``,
``dedup``, ``schedule``, ``report``) and the LM harness each hand
:func:`plan_stages` the stages they can run, with their options, and the stages
they want; the one-stage commands offer just their own. The plan follows each
wanted stage's inputs upstream (``cluster.clusters`` is the ``cluster`` stage's),
keeps the stages it reaches, and orders them so that every stage runs after the
ones it reads. An upstream stage the command does not offer (``clusterclip
cluster`` runs no ``embed``; the ``schedule`` sub-command neither ``embed`` nor
``cluster``) is *given*: it must already be complete in the work directory, which
the stage's own ``inputs`` checks (``work directory W has no completed `embed`
stage. Run `clusterclip embed INPUT... --workdir W` first.``). The library's
one-stage functions (:func:`clusterclip.embed`, :func:`clusterclip.cluster`,
:func:`clusterclip.report.build_report`) hand their stage to the runner directly.

The inputs are the ones each stage declares to the runner (``inputs(work,
options)``, whose keys the manifest records), asked of a probe that records the
keys instead of reading fingerprints: one declaration, so the plan cannot
disagree with what the runner checks for freshness. So whether the schedule
needs the ``dedup`` stage is the schedule's ``duplicates`` option, as its inputs
say, and nowhere else.

>>> class Reads:
...     def __init__(self, name, *keys):
...         self.name, self.keys = name, keys
...     def inputs(self, work, options):
...         return {key: work.output(key) for key in self.keys}
>>> plan = plan_stages(
...     [(Reads("embed"), None), (Reads("cluster", "embed.embeddings"), None),
...      (Reads("dedup", "cluster.clusters"), None),
...      (Reads("schedule", "cluster.clusters"), None)],
...     ["schedule"],
... )
>>> plan.names, plan.given
(['embed', 'cluster', 'schedule'], ())
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterclip.io import WorkDir
from clusterclip.runner import Stage, StageRun, run_stage

__all__ = [
    "PlannedStage",
    "StageLedger",
    "StagePlan",
    "declared_inputs",
    "plan_stages",
    "recorded_options",
]


@dataclass
class StageLedger:
    """Which stages of a run finished, which one was running, which never started.

    :meth:`StagePlan.run` fills it as it goes, so a caller that sees the run stop
    (Ctrl-C, SIGTERM, an error) can say what was done and what was not.

    >>> ledger = StageLedger(planned=["embed", "cluster", "report"])
    >>> ledger.finished["embed"] = "ran"; ledger.running = "cluster"
    >>> ledger.describe()
    'embed ran; cluster stopped part-way; not run: report'
    >>> ledger.finished.update(cluster="ran", report="skipped"); ledger.running = None
    >>> ledger.describe()
    'every stage finished (embed ran, cluster ran, report skipped)'
    """

    planned: list[str] = field(default_factory=list)
    finished: dict[str, str] = field(default_factory=dict)  # stage -> ran / resumed / skipped
    running: str | None = None

    def not_run(self) -> list[str]:
        """The planned stages that did not finish, in pipeline order."""
        return [name for name in self.planned if name not in self.finished]

    def describe(self) -> str:
        """What ran, what stopped part-way and what did not run, in one line."""
        done = ", ".join(f"{name} {action}" for name, action in self.finished.items())
        missing = [name for name in self.not_run() if name != self.running]
        if not missing and self.running is None:
            return f"every stage finished ({done})"
        parts = [done] if done else []
        if self.running is not None:
            parts.append(f"{self.running} stopped part-way")
        if missing:
            parts.append(f"not run: {', '.join(missing)}")
        return "; ".join(parts)


class _InputProbe:
    """Stands in for the work directory while a stage's ``inputs`` says what it reads.

    Records every ``output(key)`` asked for; a stage's ``inputs`` may also
    ``require`` or look up an ``entry`` (answered as present) and fingerprint its
    corpus files (answered with nothing). Anything else is a stage whose
    ``inputs`` does more than declare, which the plan refuses to guess about.
    """

    def __init__(self) -> None:
        self.keys: list[str] = []

    def output(self, key: str) -> None:
        self.keys.append(key)

    def require(self, stage: str) -> dict[str, Any]:
        return {}

    def entry(self, stage: str) -> dict[str, Any]:
        return {}

    def input_fingerprints(
        self, paths: Sequence[Any], *, write: bool = False, hash_files: Any = None
    ) -> list[Any]:
        return [None] * len(paths)

    def __getattr__(self, name: str) -> Any:
        raise TypeError(
            f"a stage's inputs() asked the work directory for {name!r}: it may only name "
            "outputs (work.output), require or look up stages, and fingerprint its corpus "
            "files, so that clusterclip.plan can derive the order of the stages from it."
        )


def declared_inputs(stage: Stage, options: Any) -> tuple[str, ...]:
    """The outputs (``"stage.output"``) that ``stage`` reads with ``options``, in its order.

    >>> class Report:
    ...     name = "report"
    ...     def inputs(self, work, options):
    ...         return {key: work.output(key) for key in ("schedule.schedule", "cluster.clusters")}
    >>> declared_inputs(Report(), None)
    ('schedule.schedule', 'cluster.clusters')
    """
    probe = _InputProbe()
    stage.inputs(probe, options)  # type: ignore[arg-type]
    return tuple(probe.keys)


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a plan: the stage, its options and the planned stages it reads."""

    stage: Stage
    options: Any
    upstream: tuple[str, ...]


@dataclass(frozen=True)
class StagePlan:
    """The stages to run, in order; ``given``: upstream stages that must already be complete."""

    steps: tuple[PlannedStage, ...]
    given: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """The stage names, in the order they run."""
        return [step.stage.name for step in self.steps]

    def run(
        self,
        work: WorkDir,
        *,
        on_change: str = "redo",
        force: bool = False,
        log: Callable[[str], None] | None = None,
        ledger: StageLedger | None = None,
    ) -> dict[str, StageRun]:
        """Hand each stage to :func:`~clusterclip.runner.run_stage`; ``{name: StageRun}``.

        The work directory's lock is held from the first decision to the last
        record, so the outcomes are one run's. ``on_change`` and ``force`` are the
        runner's, for every stage; ``ledger`` is filled as the stages finish.
        """
        ledger = ledger if ledger is not None else StageLedger()
        ledger.planned = self.names
        outcomes: dict[str, StageRun] = {}
        with work.lock(log=log):
            for step in self.steps:
                name = step.stage.name
                ledger.running = name
                outcomes[name] = run_stage(
                    step.stage, work, step.options, on_change=on_change, force=force, log=log
                )
                ledger.finished[name] = outcomes[name].action
                ledger.running = None
        return outcomes


def plan_stages(stages: Sequence[tuple[Stage, Any]], wanted: Iterable[str]) -> StagePlan:
    """The stages ``wanted`` and those they read, from ``stages`` (``(stage, options)`` pairs).

    Parameters
    ----------
    stages : sequence of (Stage, options)
        What the command can run, in the order to prefer where the inputs leave
        a choice (pipeline order).
    wanted : iterable of str
        The stages the command is for (``["report"]`` for ``clusterclip run``).

    Returns
    -------
    StagePlan
        Every stage in ``wanted`` and, transitively, every offered stage whose
        outputs they read; each after the stages it reads. Upstream stages not
        offered are listed in ``given``.

    Raises
    ------
    ValueError
        A wanted stage not offered, or stages that read each other in a cycle.
    """
    offered = {stage.name: (stage, options) for stage, options in stages}
    order = list(offered)
    reads: dict[str, tuple[str, ...]] = {}
    given: set[str] = set()
    pending = list(wanted)
    for name in pending:
        if name not in offered:
            raise ValueError(f"stage {name!r} is wanted but not offered ({', '.join(order)})")
    while pending:
        name = pending.pop()
        if name in reads:
            continue
        stage, options = offered[name]
        upstream = tuple(
            dict.fromkeys(key.partition(".")[0] for key in declared_inputs(stage, options))
        )
        reads[name] = tuple(u for u in upstream if u in offered)
        given.update(u for u in upstream if u not in offered)
        pending.extend(reads[name])
    placed: list[str] = []
    while len(placed) < len(reads):
        ready = [
            n for n in order if n in reads and n not in placed and set(reads[n]) <= set(placed)
        ]
        if not ready:
            raise ValueError(
                f"stages read each other in a cycle: {sorted(set(reads) - set(placed))}"
            )
        placed.append(ready[0])
    steps = tuple(PlannedStage(offered[n][0], offered[n][1], reads[n]) for n in placed)
    return StagePlan(steps, tuple(sorted(given)))


def recorded_options(work: WorkDir, stage: str, cls: Any) -> Any:
    """The options ``stage`` last ran with in ``work`` (its manifest entry), else the defaults.

    For a stage a command runs on the way to another without taking its flags
    (``clusterclip schedule`` refreshing the near-duplicate groups keeps the
    settings of an earlier ``clusterclip dedup``).
    """
    from clusterclip.options import from_mapping

    recorded = (work.manifest()["stages"].get(stage) or {}).get("config")
    return from_mapping(cls, recorded) if recorded else cls()
