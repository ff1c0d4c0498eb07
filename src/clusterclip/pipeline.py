"""The whole method in one call: embed -> cluster -> schedule -> report.

:func:`run` executes the stages in order inside one work directory and skips
every stage whose outputs are complete and were made from the same inputs and
options. It decides per stage, and says why:

- ``skipped``: the stage completed before with the same *spec* (its options
  plus the fingerprints of what it consumes) and its outputs are present;
- ``ran``: first run, options changed (the message lists them), an upstream
  output changed (a stage before it was redone), outputs missing, or a
  previous run stopped half-way (the embed stage then *resumes* its shards).

Each stage's spec is recorded in the manifest under the ``pipeline`` entry
before the stage starts (``complete: false``) and marked complete after, so an
interrupted run resumes rather than restarts. Input files are fingerprinted by
content (whole file up to 64 MiB, else size + first/middle/last MiB).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.config import (
    ClusterOptions,
    EmbedOptions,
    ReportOptions,
    RunConfig,
    ScheduleOptions,
)
from clusterclip.errors import ClusterClipError, invalid

__all__ = [
    "ClusterOptions",
    "EmbedOptions",
    "ReportOptions",
    "RunConfig",
    "ScheduleOptions",
    "plan_budget",
    "run",
]

STAGES = ("embed", "cluster", "schedule", "report")
_OUTPUTS = {
    "embed": ("documents.parquet", "embeddings"),
    "cluster": ("clusters.parquet", "centroids.npy"),
    "schedule": ("schedule.npy", "schedule.json"),
    "report": ("report.html", "report.json"),
}


def _input_fingerprints(inputs: Any) -> Any:
    """What the embed stage reads, as comparable JSON."""
    if not isinstance(inputs, (str, os.PathLike, list, tuple)):
        # A datasets.Dataset: its content fingerprint.
        return {"dataset": getattr(inputs, "_fingerprint", None) or repr(type(inputs))}
    from clusterclip.io.readers import expand_inputs, fingerprint_input

    return [
        {"path": str(Path(path).resolve()), **fingerprint_input(path)}
        for path in expand_inputs(inputs)
    ]


def _changes(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Readable differences between two specs: option values, or what upstream changed."""
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if (
            key in ("options", "upstream")
            and not prefix
            and isinstance(a, dict)
            and isinstance(b, dict)
        ):
            lines.extend(_changes(a, b, f"{key}:"))
            continue
        if prefix == "upstream:":
            lines.append(f"upstream {key} changed")
        elif key == "inputs" and not prefix:
            lines.append("inputs changed")
        else:
            lines.append(f"{key}: {a!r} -> {b!r}")
    return lines


class _Runner:
    """Bookkeeping of one pipeline run: specs, decisions, log lines."""

    def __init__(self, workdir: Path, log: Callable[[str], None]) -> None:
        from clusterclip.io import read_manifest

        self.workdir = workdir
        self.log = log
        entry = read_manifest(workdir)["stages"].get("pipeline") or {}
        self.recorded: dict[str, Any] = dict(entry.get("specs", {}))
        self.report: dict[str, dict[str, Any]] = {}
        self.force_downstream = False

    def decide(self, stage: str, spec: dict[str, Any]) -> tuple[bool, str, bool]:
        """(run it?, why, resume?) for one stage."""
        from clusterclip.io import check_upstream, read_stage

        entry = read_stage(self.workdir, stage)
        recorded = self.recorded.get(stage)
        missing = [n for n in _OUTPUTS[stage] if not (self.workdir / n).exists()]
        if recorded is not None and recorded.get("spec") != spec:
            return (
                True,
                "; ".join(_changes(recorded.get("spec", {}), spec)) or "spec changed",
                False,
            )
        if entry is None:
            if recorded is not None and not recorded.get("complete"):
                return True, "previous run stopped before the end: resuming", True
            return True, "first run", True
        if recorded is None:
            return True, "made outside `clusterclip run`: checking it against these options", True
        if not recorded.get("complete"):
            return True, "previous run stopped before the end: resuming", True
        if missing:
            return True, f"outputs missing ({', '.join(missing)})", False
        # Only inputs that are other stages' outputs ("cluster.clusters"); the embed
        # stage's inputs are corpus files, compared through the spec above.
        upstream = (
            {}
            if stage == "embed"
            else {k: v for k, v in entry.get("inputs", {}).items() if k.partition(".")[0] in STAGES}
        )
        stale = check_upstream(self.workdir, stage, upstream)
        if stale:
            return True, "; ".join(stale), False
        return False, "up to date", False

    def start(self, stage: str, spec: dict[str, Any]) -> None:
        self.recorded[stage] = {"spec": spec, "complete": False}
        self._save()

    def finish(self, stage: str, seconds: float) -> None:
        self.recorded[stage]["complete"] = True
        self.recorded[stage]["seconds"] = round(seconds, 3)
        self._save()

    def _save(self) -> None:
        from clusterclip.io import write_stage

        # `complete` is only a manifest formality here: per-stage state is in `specs`.
        write_stage(self.workdir, "pipeline", {"specs": self.recorded, "complete": True})

    def note(self, stage: str, action: str, reason: str, seconds: float | None = None) -> None:
        self.report[stage] = {"action": action, "reason": reason}
        if seconds is not None:
            self.report[stage]["seconds"] = round(seconds, 3)
        timing = f" in {seconds:.1f} s" if seconds is not None else ""
        self.log(f"{stage:<9} {action}{timing} ({reason})")


def _upstream(workdir: Path, keys: Sequence[str]) -> dict[str, Any]:
    from clusterclip.io import read_manifest

    stages = read_manifest(workdir)["stages"]
    found = {}
    for key in keys:
        stage, _, output = key.partition(".")
        found[key] = stages.get(stage, {}).get("outputs", {}).get(output)
    return found


def _load_usable(workdir: Path) -> tuple[np.ndarray, np.ndarray | None]:
    from clusterclip.report.data import load_labels

    labels = load_labels(workdir)
    lengths = None
    documents = workdir / "documents.parquet"
    if documents.exists():
        from clusterclip.errors import require_extra

        pq = require_extra("pyarrow.parquet", "io")
        table = pq.read_table(documents, columns=["index", "n_tokens"])
        order = np.argsort(table.column("index").to_numpy(), kind="stable")
        lengths = table.column("n_tokens").to_numpy().astype(np.int64)[order]
    return labels, lengths


def plan_budget(options: Any, n_usable: int) -> dict[str, int | None]:
    """Turn the budget options into ``build_schedule``'s ``num_samples`` / ``num_tokens``.

    ``epochs=E`` means ``round(E * n_usable)`` draws; no budget means one epoch.

    >>> plan_budget(ScheduleOptions(epochs=2.5), 1000)
    {'num_samples': 2500, 'num_tokens': None}
    """
    given = [k for k in ("num_samples", "num_tokens", "epochs") if getattr(options, k) is not None]
    if len(given) > 1:
        raise invalid(
            "budget",
            "one of num_samples, num_tokens, epochs",
            {k: getattr(options, k) for k in given},
            "Give exactly one budget (a command-line budget flag replaces the config file's).",
        )
    if options.num_tokens is not None:
        return {"num_samples": None, "num_tokens": int(options.num_tokens)}
    if options.num_samples is not None:
        return {"num_samples": int(options.num_samples), "num_tokens": None}
    epochs = 1.0 if options.epochs is None else float(options.epochs)
    if not epochs > 0:
        raise invalid("epochs", "a number > 0", options.epochs, "Pass --epochs 1 or more.")
    return {"num_samples": max(1, int(round(epochs * n_usable))), "num_tokens": None}


def _embed_kwargs(config: RunConfig) -> dict[str, Any]:
    options = dataclasses.asdict(config.embed)
    kwargs = {k: v for k, v in options.items() if v is not None}
    kwargs["engine"] = config.engine
    kwargs["seed"] = config.seed
    return kwargs


def _cluster_kwargs(config: RunConfig) -> dict[str, Any]:
    options = dataclasses.asdict(config.cluster)
    kwargs = {**options, "seed": config.seed, "engine": config.engine}
    # One set of Ray settings serves both distributed steps (embed and assign).
    if config.embed.engine_options:
        kwargs["engine_options"] = dict(config.embed.engine_options)
    return kwargs


def run(
    inputs: Any = None,
    *,
    workdir: str | os.PathLike[str] | None = None,
    n_clusters: int | None = None,
    config: RunConfig | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run embed -> cluster -> schedule -> report, skipping up-to-date stages.

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

    Returns
    -------
    dict
        ``{"workdir", "stages": {stage: {"action", "reason", "seconds"}},
        "n_documents", "n_usable", "n_clusters", "budget", "schedule": {...stats},
        "schedule_path", "report_path"}``. The schedule is deterministic: the
        same corpus, options and seed give a byte-identical ``schedule.npy``.

    Examples
    --------
    >>> import clusterclip
    >>> from clusterclip.pipeline import RunConfig, ScheduleOptions
    >>> result = clusterclip.run(["corpus.jsonl"], workdir="work", n_clusters=50,
    ...                          config=RunConfig(schedule=ScheduleOptions(epochs=3.0)))  # doctest: +SKIP
    >>> result["stages"]["embed"]["action"]  # doctest: +SKIP
    'ran'
    """
    config = config or RunConfig()
    if inputs is not None:
        config = dataclasses.replace(
            config,
            inputs=[
                os.fspath(p)
                for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)
            ]
            if isinstance(inputs, (str, os.PathLike, list, tuple))
            else config.inputs,
        )
        source: Any = inputs
    else:
        source = config.inputs
    if workdir is not None:
        config = dataclasses.replace(config, workdir=os.fspath(workdir))
    if n_clusters is not None:
        config = dataclasses.replace(
            config, cluster=dataclasses.replace(config.cluster, n_clusters=n_clusters)
        )
    if not source:
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
    if config.cluster.n_clusters is None:
        raise invalid(
            "n_clusters",
            "an int in [1, inf)",
            None,
            "Pass --n-clusters K (a few hundred documents per cluster is typical).",
        )
    workdir_path = Path(config.workdir)
    workdir_path.mkdir(parents=True, exist_ok=True)
    runner = _Runner(workdir_path, log or (lambda line: None))
    result: dict[str, Any] = {"workdir": str(workdir_path)}

    # -- embed ------------------------------------------------------------------
    from clusterclip.embed import embed

    embed_kwargs = _embed_kwargs(config)
    spec = {"options": embed_kwargs, "inputs": _input_fingerprints(source)}
    spec = _jsonable(spec)
    go, why, resume = runner.decide("embed", spec)
    if go:
        runner.start("embed", spec)
        began = time.perf_counter()
        embedded = embed(source, workdir=workdir_path, overwrite=not resume, **embed_kwargs)
        runner.finish("embed", time.perf_counter() - began)
        runner.note("embed", "ran", why, time.perf_counter() - began)
        result["embed"] = _jsonable(getattr(embedded, "summary", {}))
    else:
        runner.note("embed", "skipped", why)

    # -- cluster ----------------------------------------------------------------
    from clusterclip.cluster import cluster

    cluster_kwargs = _cluster_kwargs(config)
    spec = _jsonable(
        {
            "options": cluster_kwargs,
            "upstream": _upstream(workdir_path, ["embed.documents", "embed.embeddings"]),
        }
    )
    go, why, _resume = runner.decide("cluster", spec)
    if go:
        runner.start("cluster", spec)
        began = time.perf_counter()
        clustered = cluster(workdir_path, overwrite=True, **cluster_kwargs)
        runner.finish("cluster", time.perf_counter() - began)
        runner.note("cluster", "ran", why, time.perf_counter() - began)
        result["cluster"] = _jsonable(getattr(clustered, "summary", {}))
    else:
        runner.note("cluster", "skipped", why)

    # -- schedule ---------------------------------------------------------------
    labels, lengths = _load_usable(workdir_path)
    n_usable = int((labels >= 0).sum())
    budget = plan_budget(config.schedule, n_usable)
    schedule_options = {
        k: v for k, v in dataclasses.asdict(config.schedule).items() if k != "epochs"
    }
    schedule_options.update(budget)
    schedule_options["seed"] = config.seed
    upstream_keys = ["cluster.clusters"] + (["embed.documents"] if budget["num_tokens"] else [])
    spec = _jsonable(
        {"options": schedule_options, "upstream": _upstream(workdir_path, upstream_keys)}
    )
    go, why, _resume = runner.decide("schedule", spec)
    schedule_path = workdir_path / "schedule.npy"
    if go:
        runner.start("schedule", spec)
        began = time.perf_counter()
        _build_schedule(workdir_path, labels, lengths, schedule_options, upstream_keys)
        runner.finish("schedule", time.perf_counter() - began)
        runner.note("schedule", "ran", why, time.perf_counter() - began)
    else:
        runner.note("schedule", "skipped", why)

    # -- report -----------------------------------------------------------------
    report_path = None
    if config.report.enabled:
        from clusterclip.report import build_report

        report_options = {
            "n_slices": config.report.n_slices,
            "n_keywords": config.report.n_keywords,
        }
        spec = _jsonable(
            {
                "options": report_options,
                "upstream": _upstream(workdir_path, ["cluster.clusters", "schedule.schedule"]),
            }
        )
        go, why, _resume = runner.decide("report", spec)
        if go:
            runner.start("report", spec)
            began = time.perf_counter()
            report_path = build_report(workdir_path, **report_options)
            runner.finish("report", time.perf_counter() - began)
            runner.note("report", "ran", why, time.perf_counter() - began)
        else:
            report_path = workdir_path / "report.html"
            runner.note("report", "skipped", why)
    else:
        runner.report["report"] = {"action": "disabled", "reason": "report.enabled = false"}

    import json

    sidecar = json.loads((workdir_path / "schedule.json").read_text("utf-8"))
    result.update(
        {
            "stages": runner.report,
            "n_documents": int(len(labels)),
            "n_usable": n_usable,
            "n_clusters": int(labels.max()) + 1 if n_usable else 0,
            "budget": budget,
            "schedule": {"config": sidecar.get("config", {}), "stats": sidecar.get("stats", {})},
            "schedule_path": str(schedule_path),
            "report_path": str(report_path) if report_path else None,
        }
    )
    return result


def _build_schedule(
    workdir: Path,
    labels: np.ndarray,
    lengths: np.ndarray | None,
    options: dict[str, Any],
    upstream_keys: list[str],
) -> None:
    from clusterclip.io import fingerprint_file, versions, write_stage
    from clusterclip.schedule import build_schedule

    kwargs = dict(options)
    if kwargs.get("num_tokens") is not None:
        if lengths is None or not lengths.any():
            raise ClusterClipError(
                "a token budget needs token counts, but documents.parquet has none. Use "
                "--num-samples or --epochs, or an encoder that counts tokens."
            )
        kwargs["lengths"] = lengths
    if kwargs.get("cluster_weights") is not None:
        kwargs["cluster_weights"] = np.asarray(kwargs["cluster_weights"], dtype=np.float64)
    schedule = build_schedule(labels, **kwargs)
    path = schedule.save(workdir / "schedule.npy")
    write_stage(
        workdir,
        "schedule",
        {
            "config": _jsonable(schedule.config.to_dict()),
            "inputs": _upstream(workdir, upstream_keys),
            "outputs": {"schedule": fingerprint_file(path)},
            "versions": versions(),
            "complete": True,
        },
    )


def _jsonable(value: Any) -> Any:
    """Plain JSON types only (what the manifest stores and compares)."""
    import json

    from clusterclip.io import json_default

    return json.loads(json.dumps(value, default=json_default, sort_keys=True))
