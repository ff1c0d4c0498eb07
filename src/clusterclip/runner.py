"""One stage contract and one runner: skip, redo, resume or refuse, and say why.

A stage (embed, cluster, schedule, report) declares its options type, the
artifacts it writes, and two methods:

- ``inputs(work, options) -> {key: fingerprint}``: what it consumes, e.g.
  ``{"embed.embeddings": "3f2a..."}`` or one entry per corpus file;
- ``run(work, options, resume=bool) -> StageOutput``: do the work, write the
  artifacts atomically, return their fingerprints and a summary;
- optionally ``check(work, options)``: refuse, before anything is written or
  recorded, settings that only the inputs show to be impossible (e.g. a
  schedule too large for the memory), so a refused command leaves the work
  directory as it was;
- optionally ``resolved(config, entry)``: the configuration with each ``auto``
  replaced by what it resolves to (see :func:`_settled`), so that spelling out
  what ``auto`` already chose (``--portable``) does not redo the stage;
- optionally ``relocate(work, entry)``: on a skip, ``(entry, note)`` when the
  same inputs are found at new paths (recorded; never part of freshness), else None;
- optionally ``input_labels``: ``{input key: name}`` for the reasons (the embed
  stage keys its files by position and names them by the path given now).

:func:`run_stage` is the only code that decides whether a stage runs, and it
holds the work directory's lock (:meth:`~clusterclip.io.WorkDir.lock`) from the
decision to the record. A stage
is **fresh** (skipped) only when its manifest entry is complete, its whole
configuration (``options``, compared after resolving ``auto``) and its inputs'
fingerprints (of content, never of paths) are unchanged, and its artifacts are
present and not damaged (:meth:`~clusterclip.io.WorkDir.damaged`: headers and
sizes, cheap). Otherwise it

- **resumes** an entry that stopped half-way with the same configuration and inputs,
- **redoes** it (``on_change="redo"``, what ``clusterclip run`` does), or
- **refuses** (``on_change="refuse"``, the expensive stages run alone without
  ``--overwrite``), naming every option or input that changed.

The manifest entry is written before the work starts (``complete: false``) and
after it ends (``complete: true``, outputs, summary, versions, seconds).

>>> from clusterclip.runner import describe_changes
>>> describe_changes({"seed": 0, "n_iter": 20}, {"seed": 1, "n_iter": 20}, {}, {})
['seed: 0 -> 1']
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol

from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir, json_default

__all__ = ["Stage", "StageOutput", "StageRun", "describe_changes", "run_stage"]


@dataclass
class StageOutput:
    """What a stage's ``run`` returns.

    Attributes
    ----------
    outputs : dict
        ``{output name: fingerprint}``, recorded so later stages can check freshness.
    summary : dict
        Numbers for the one-screen summary (stored in the manifest).
    record : dict
        Extra manifest fields the stage's readers need (e.g. the embed stage's ``counts``).
    result : Any
        The in-memory result handed back to the Python caller (not stored), or a
        callable that makes it once the manifest records the stage as complete.
    """

    outputs: dict[str, str]
    summary: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    result: Any = None


@dataclass
class StageRun:
    """The runner's decision and outcome for one stage."""

    stage: str
    action: str  # "ran", "resumed", "skipped"
    reason: str
    seconds: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    result: Any = None

    def to_dict(self) -> dict[str, Any]:
        """``{"action", "reason", "seconds"}`` (what ``clusterclip.run`` reports per stage)."""
        out: dict[str, Any] = {"action": self.action, "reason": self.reason}
        if self.seconds is not None:
            out["seconds"] = round(self.seconds, 3)
        return out


class Stage(Protocol):
    """The contract every pipeline stage implements."""

    name: ClassVar[str]
    artifacts: ClassVar[tuple[str, ...]]  # keys of clusterclip.io.ARTIFACTS it writes

    def inputs(self, work: WorkDir, options: Any) -> dict[str, Any]: ...

    def run(self, work: WorkDir, options: Any, *, resume: bool) -> StageOutput: ...

    def load(self, work: WorkDir, entry: Mapping[str, Any]) -> Any: ...


def _plain(value: Any) -> Any:
    """Plain JSON types (what the manifest stores and compares)."""
    if hasattr(value, "__dataclass_fields__"):
        value = asdict(value)
    return json.loads(json.dumps(value, default=json_default, sort_keys=True))


def describe_changes(
    old_config: Mapping[str, Any],
    new_config: Mapping[str, Any],
    old_inputs: Mapping[str, Any],
    new_inputs: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """One line per option that changed (``name: old -> new``) and per changed input.

    ``labels`` names an input key for people (the embed stage's ``corpus file 1``
    is the file given now).
    """
    lines = [
        f"{key}: {old_config.get(key)!r} -> {new_config.get(key)!r}"
        for key in sorted(set(old_config) | set(new_config))
        if old_config.get(key) != new_config.get(key)
    ]
    labels = labels or {}
    for key in sorted(set(old_inputs) | set(new_inputs)):
        if old_inputs.get(key) == new_inputs.get(key):
            continue
        if key not in new_inputs:
            lines.append(f"input {key} no longer given")
        elif key not in old_inputs:
            lines.append(f"input {labels.get(key, key)} added")
        else:
            lines.append(f"input {labels.get(key, key)} changed")
    return lines


def _decide(
    stage: Stage, work: WorkDir, config: dict[str, Any], inputs: dict[str, Any]
) -> tuple[str, str]:
    """``(action, reason)`` with action in ``run``, ``resume``, ``skip``, ``changed``."""
    entry = work.manifest()["stages"].get(stage.name)
    if entry is None:
        return "run", "first run"
    old_config = entry.get("config", {})
    labels = getattr(stage, "input_labels", None)
    changes = describe_changes(old_config, config, entry.get("inputs", {}), inputs, labels)
    if not entry.get("complete"):
        if changes:
            return "changed", "; ".join(changes)
        return "resume", "previous run stopped before the end: resuming"
    settled = _settled(stage, old_config, config, entry)
    if settled:
        changes = [line for line in changes if line not in settled]
    if changes:
        return "changed", "; ".join(changes)
    missing = [work.path_of(a).name for a in stage.artifacts if not work.exists(a)]
    if missing:
        return "run", f"outputs missing ({', '.join(missing)})"
    damaged = [problem for a in stage.artifacts if (problem := work.damaged(a))]
    if damaged:
        return "run", f"outputs damaged: {'; '.join(damaged)}"
    if settled:
        return "skip", f"up to date: {'; '.join(settled)} resolves to the same settings"
    return "skip", "up to date"


def _settled(
    stage: Stage, old: dict[str, Any], new: dict[str, Any], entry: Mapping[str, Any]
) -> list[str]:
    """The option changes that do not change what the stage computes once ``auto`` is resolved.

    A stage may define ``resolved(config, entry)``: its configuration with each
    ``auto`` replaced by what it became (``entry`` given: read from the
    finished stage's record) or becomes on this machine (``entry`` None; left
    ``auto`` when only the work can tell), and options it does not use dropped.
    """
    resolved = getattr(stage, "resolved", None)
    if resolved is None or old == new:
        return []
    if describe_changes(resolved(old, entry), resolved(new, None), {}, {}):
        return []
    return describe_changes(old, new, {}, {})


def run_stage(
    stage: Stage,
    work: WorkDir,
    options: Any,
    *,
    on_change: str = "redo",
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> StageRun:
    """Run one stage if it is not fresh; record it in the manifest.

    Parameters
    ----------
    stage : Stage
    work : WorkDir
    options : dataclass
        The stage's frozen options; all of them are its configuration.
    on_change : {"redo", "refuse"}
        What a changed configuration or input does to a completed stage.
    force : bool
        Redo from scratch whatever the manifest says (``--overwrite``).
    log : callable, optional
        Receives one line per decision.

    Returns
    -------
    StageRun
        ``action`` is ``ran``, ``resumed`` or ``skipped``, with the reason.

    Raises
    ------
    ClusterClipError
        ``on_change="refuse"`` and something changed (every change is named).
    """
    with work.lock(log=log):  # one writer per work directory, from decision to record
        return _run_locked(stage, work, options, on_change=on_change, force=force, log=log)


def _run_locked(
    stage: Stage,
    work: WorkDir,
    options: Any,
    *,
    on_change: str,
    force: bool,
    log: Callable[[str], None] | None,
) -> StageRun:
    config = _plain(options)
    inputs = _plain(stage.inputs(work, options))
    action, reason = (
        ("run", "--overwrite: redoing it") if force else _decide(stage, work, config, inputs)
    )
    if action == "changed":
        if on_change == "refuse":
            shown = reason if len(reason) < 600 else reason[:597] + "..."
            raise ClusterClipError(
                f"work directory {work.path} holds `{stage.name}` outputs made with different "
                f"settings or inputs ({shown}). Pass --overwrite (overwrite=True) to redo it, or "
                "use another --workdir."
            )
        action = "run"
    if action == "skip":
        entry = work.manifest()["stages"][stage.name]
        relocate = getattr(stage, "relocate", None)
        moved = relocate(work, entry) if relocate is not None else None
        if moved is not None:  # the same inputs found elsewhere: record where they are now
            entry, note = moved
            work.record(stage.name, entry)
            reason = f"{reason}; {note}" if note else reason
        outcome = StageRun(stage.name, "skipped", reason, summary=entry.get("summary", {}))
        outcome.result = stage.load(work, entry)
        _say(log, outcome)
        return outcome
    resume = action == "resume"
    check = getattr(stage, "check", None)
    if check is not None:
        check(work, options)
    work.path.mkdir(parents=True, exist_ok=True)
    work.record(stage.name, {"config": config, "inputs": inputs, "complete": False})
    began = time.perf_counter()
    produced = stage.run(work, options, resume=resume)
    seconds = time.perf_counter() - began
    entry = {
        **produced.record,
        "config": config,
        "inputs": inputs,
        "outputs": produced.outputs,
        "summary": _plain(produced.summary),
        "seconds": round(seconds, 3),
        "complete": True,
    }
    work.record(stage.name, entry)
    outcome = StageRun(
        stage.name, "resumed" if resume else "ran", reason, seconds, produced.summary
    )
    outcome.result = produced.result() if callable(produced.result) else produced.result
    _say(log, outcome)
    return outcome


def _say(log: Callable[[str], None] | None, outcome: StageRun) -> None:
    if log is None:
        return
    timing = f" in {outcome.seconds:.1f} s" if outcome.seconds is not None else ""
    log(f"{outcome.stage:<9} {outcome.action}{timing} ({outcome.reason})")
