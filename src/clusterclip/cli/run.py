"""``clusterclip run``: embed -> cluster -> schedule -> report in one command."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HELP = "run the whole pipeline: embed, cluster, dedup, schedule, report (skips up-to-date stages)"
DESCRIPTION = (
    "Embed every document, cluster the embeddings with spherical k-means, group\n"
    "near-duplicates (--duplicates group, the default; off skips it), build the\n"
    "ClusterClip schedule (schedule.npy + schedule.json) and write the report, all in one\n"
    "work directory. A rerun skips the stages whose outputs are complete and match their\n"
    "inputs and options; a changed input or option redoes the stages downstream of it and\n"
    "says why. Options can come from a TOML file (--config); flags override it. Every\n"
    "option is listed in docs/configuration.md."
)
EXAMPLE = """examples:
  clusterclip run corpus/*.jsonl.gz --workdir work --n-clusters 200 --epochs 3 --max-repeats 6
  clusterclip run data.parquet --workdir work --n-clusters 50 --policy clusterclip \\
      --max-repeats 2 --num-samples 1000000 --encoder static --text-field content
  clusterclip run --config run.toml --seed 1          # the file's options, seed 1
"""


#: Sections of clusterclip.config.SECTIONS shown as flag groups, in order.
GROUPS = (
    ("", "run"),
    ("embed", "embed"),
    ("cluster", "cluster"),
    ("dedup", "dedup (near-duplicate groups; with --duplicates group)"),
    ("schedule", "schedule (budget: one of --num-samples, --num-tokens, --epochs)"),
    ("report", "report"),
)


def add_stage_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per command-line option of every stage (generated from the option classes).

    Defaults are left unset (``SUPPRESS``) so that only the flags actually given
    override the config file.
    """
    from clusterclip.cli.flags import add_section

    for section, title in GROUPS:
        exclude = ("seed",) if section in ("embed", "cluster", "schedule") else ()
        add_section(parser, section, title, exclude=exclude)
    add_section(parser, "ray", "Ray engine (--engine ray; see docs/scaling.md)")


def overrides_from_args(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{section: {name: value}}`` for every stage flag given on the command line."""
    from clusterclip.cli.flags import section_values
    from clusterclip.config import SECTIONS

    return {section: section_values(args, section) for section in SECTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="corpus files, directories or globs (.jsonl, .jsonl.gz, .jsonl.zst, .parquet)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="work directory (created if missing)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="TOML file with any of the options below (flags override it)",
    )
    add_stage_arguments(parser)


def build_config(args: argparse.Namespace) -> Any:
    import dataclasses

    from clusterclip.config import RunConfig, apply_overrides, load_config

    config = load_config(args.config) if args.config else RunConfig()
    config = apply_overrides(config, overrides_from_args(args))
    changes: dict[str, Any] = {}
    if args.inputs:
        changes["inputs"] = list(args.inputs)
    if args.workdir is not None:
        changes["workdir"] = str(args.workdir)
    return dataclasses.replace(config, **changes)


def machine_line(resolved: dict[str, Any]) -> str:
    """The choices that depend on this machine (``auto`` resolved), on one line."""
    threads = resolved.get("threads") or {}
    counts = ", ".join(f"{name} {n}" for name, n in threads.items() if name != "cpus")
    precision = resolved.get("precision")
    encoder = (
        f"{resolved.get('encoder')} on {resolved.get('device') or 'cpu'}"
        + (f" in {precision}" if precision else "")
        + (f" ({resolved['runtime']})" if resolved.get("runtime") else "")
    )
    reason = resolved.get("kmeans_backend_reason")
    backend = f"{resolved.get('kmeans_backend')}" + (f" ({reason})" if reason else "")
    return (
        f"machine:     {resolved.get('cpu')}; encoder {encoder}; k-means backend "
        f"{backend}; threads {counts or '?'} "
        f"({threads.get('cpus', '?')} CPUs)"
    )


def print_summary(result: dict[str, Any], seconds: float) -> None:
    """The one-screen summary printed after a run."""
    from clusterclip.cli.report import print_report_summary
    from clusterclip.report.duplicates import duplicates_line
    from clusterclip.report.notices import warning_lines
    from clusterclip.schedule.advice import budget_passes, clip_advice, rule_advice

    workdir = result["workdir"]
    actions = ", ".join(f"{name} {info['action']}" for name, info in result["stages"].items())
    print()
    print(f"clusterclip run: done in {seconds:.1f} s  ({actions})")
    print(f"work directory: {workdir}")
    print(
        f"documents:   {result['n_documents']:,} read, {result['n_usable']:,} usable, "
        f"{result['n_documents'] - result['n_usable']:,} excluded (see rejects.jsonl)"
    )
    config = result["schedule"]["config"]
    stats = result["schedule"]["stats"]
    budget = result["budget"]
    budget_text = (
        f"{budget['num_tokens']:,} tokens"
        if budget["num_tokens"]
        else f"{budget['num_samples']:,} documents"
    )
    print(
        f"schedule:    {result['schedule_path']}  policy {config.get('policy')}, "
        f"max_repeats {config.get('max_repeats')}, order {config.get('order')}, "
        f"seed {config.get('seed')}"
    )
    n_draws = stats.get("n_draws")
    met = stats.get("budget_met", True)
    print(
        f"  budget {budget_text}: {n_draws if n_draws is None else f'{n_draws:,}'} draws"
        + ("" if met else "  (stopped early: every cluster was clipped; see on_exhausted)")
    )
    for advice in (
        clip_advice(
            str(config.get("policy")),
            config.get("max_repeats"),
            passes=budget_passes(
                result["n_usable"],
                num_samples=budget["num_samples"],
                num_tokens=budget["num_tokens"],
                n_draws=n_draws or 0,
                n_tokens=stats.get("n_tokens"),
            ),
        ),
        rule_advice(
            str(config.get("policy")),
            str(config.get("order")),
            config.get("schedule_version"),
            int(result.get("n_clusters") or 0),
        ),
    ):
        if advice:
            print(f"advice:      {advice}")
    if result.get("duplicates"):
        print(f"duplicates:  {duplicates_line(result['duplicates'])}")
    for text in result.get("warnings", []):
        print(f"warning:     dedup: {text}")
    for text in warning_lines(result.get("notices") or {}):
        print(f"warning:     {text}")
    resolved = result.get("resolved")
    if resolved:
        print(machine_line(resolved))
        stability = resolved.get("stability")
        if stability:
            print(
                f"stability:   ARI {stability['ari']:.2f} between these clusters and another "
                f"seed's ({stability['sample_size']:,} documents; "
                f"{stability['pairs_kept']:.0%} of pairs kept together): "
                "how much of the balance is chance (1 = none)"
            )
    if result.get("report_path"):
        print_report_summary(Path(result["report_path"]), findings=False)
        print(f"open the report: file://{Path(result['report_path']).resolve()}")
    print(
        "feed a trainer: clusterclip.adapters.torch.ClusterClipSampler, "
        "clusterclip.adapters.hf, or `clusterclip export` (docs/adapters.md)"
    )


def run(args: argparse.Namespace) -> int:
    from clusterclip.pipeline import resolve_config
    from clusterclip.pipeline import run as run_pipeline

    config, _source = resolve_config(build_config(args))  # every option checked before any work
    return run_to_the_end(
        lambda log, ledger: run_pipeline(config=config, log=log, ledger=ledger),
        workdir=config.workdir,
    )


def run_to_the_end(
    start: Callable[[Callable[[str], None], Any], dict[str, Any]],
    *,
    workdir: Any,
    command: str = "run",
) -> int:
    """Run the pipeline (``start(log, ledger)``), print the summary, and say how it stopped.

    A reader that leaves stdout (``| head``) does not stop the work: the run goes
    on, then stderr says what ran (exit 141). Ctrl-C or SIGTERM stops it, and
    stderr names the stages that ran, the one stopped part-way and those not run
    (exit 130 / 143).
    """
    from clusterclip.cli.stops import (
        SIGPIPE_STATUS,
        GuardedStdout,
        exit_status,
        say,
        stop_behind,
        stop_name,
    )
    from clusterclip.pipeline import StageLedger

    began = time.perf_counter()
    ledger = StageLedger()
    out = GuardedStdout()
    try:
        result = start(out.line, ledger)
        out.call(lambda: print_summary(result, time.perf_counter() - began))
    except (KeyboardInterrupt, Exception) as error:
        stop = stop_behind(error)  # an error raised while unwinding from a stop is that stop
        if stop is None:
            raise
        say(
            f"clusterclip {command}: {stop_name(stop)}: {ledger.describe()}. Rerun the same "
            "command to finish: finished stages are skipped, an interrupted one resumes."
        )
        return exit_status(stop)
    if out.broken:
        say(
            f"clusterclip {command}: stdout was closed after {out.lines} line(s) (broken pipe, "
            f"e.g. `| head`); the run went on: {ledger.describe()}. The summary was not shown "
            f"(`clusterclip report --workdir {workdir}` prints the report's)."
        )
        return SIGPIPE_STATUS
    return 0
