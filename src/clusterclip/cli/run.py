"""``clusterclip run``: embed -> cluster -> schedule -> report in one command."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

HELP = "run the whole pipeline: embed, cluster, schedule, report (skips up-to-date stages)"
DESCRIPTION = (
    "Embed every document, cluster the embeddings with spherical k-means, build the\n"
    "ClusterClip schedule (schedule.npy + schedule.json) and write the report, all in one\n"
    "work directory. A rerun skips the stages whose outputs are complete and match their\n"
    "inputs and options; a changed input or option redoes the stages downstream of it and\n"
    "says why. Options can come from a TOML file (--config); flags override it. Every\n"
    "option is listed in docs/configuration.md."
)
EXAMPLE = """examples:
  clusterclip run corpus/*.jsonl.gz --workdir work --n-clusters 200 --epochs 3
  clusterclip run data.parquet --workdir work --n-clusters 50 --policy clusterclip \\
      --max-repeats 2 --num-samples 1000000 --encoder static --text-field content
  clusterclip run --config run.toml --seed 1          # the file's options, seed 1
"""


def _max_repeats(text: str) -> int | None:
    if text.lower() in ("none", "inf"):
        return None
    try:
        return int(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected an int or 'none', got {text!r}") from error


def _key_value(text: str) -> tuple[str, Any]:
    import json

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)  # numbers, true/false, null, quoted strings
    except json.JSONDecodeError:
        return key, value


def add_stage_arguments(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """One flag per command-line option of :data:`clusterclip.config.OPTIONS`.

    Defaults are left unset (``SUPPRESS``) so that only the flags actually given
    override the config file.
    """
    from clusterclip.config import OPTIONS

    groups = {
        "": parser.add_argument_group("run"),
        "embed": parser.add_argument_group("embed"),
        "cluster": parser.add_argument_group("cluster"),
        "schedule": parser.add_argument_group(
            "schedule (budget: one of --num-samples, --num-tokens, --epochs)"
        ),
        "report": parser.add_argument_group("report"),
    }
    for option in OPTIONS:
        if not option.cli or option.key in skip:
            continue
        group = groups[option.section]
        dest = option.key.replace(".", "__")
        default = option.default
        hidden = default in (None, [], "") or isinstance(default, bool)
        shown = "" if hidden else f" (default: {default})"
        common: dict[str, Any] = {"dest": dest, "default": argparse.SUPPRESS}
        if option.kind == "bool":
            group.add_argument(
                option.flag,
                action="store_const",
                const=not default,
                help=option.help + shown,
                **common,
            )
            continue
        if option.kind == "table":
            group.add_argument(
                option.flag,
                type=_key_value,
                action="append",
                metavar="KEY=VALUE",
                help=option.help,
                **common,
            )
            continue
        kind = {"int": int, "float": float, "str": str, "int_or_none": _max_repeats}[option.kind]
        group.add_argument(
            option.flag,
            type=kind,
            choices=option.choices,
            metavar=option.name.upper() if not option.choices else None,
            help=option.help + shown,
            **common,
        )


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``{"section.name": value}`` for every stage flag given on the command line."""
    from clusterclip.config import OPTIONS

    found = {}
    for option in OPTIONS:
        dest = option.key.replace(".", "__")
        if option.cli and hasattr(args, dest):
            value = getattr(args, dest)
            found[option.key] = dict(value) if option.kind == "table" else value
    return found


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


def print_summary(result: dict[str, Any], seconds: float) -> None:
    """The one-screen summary printed after a run."""
    from clusterclip.cli.report import print_report_summary

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
    if result.get("report_path"):
        print_report_summary(Path(result["report_path"]))
        print(f"open the report: file://{Path(result['report_path']).resolve()}")
    print(
        "feed a trainer: clusterclip.adapters.torch.ClusterClipSampler, "
        "clusterclip.adapters.hf, or `clusterclip export` (docs/adapters.md)"
    )


def run(args: argparse.Namespace) -> int:
    from clusterclip.pipeline import run as run_pipeline

    config = build_config(args)
    began = time.perf_counter()
    result = run_pipeline(config=config, log=lambda line: print(line, flush=True))
    print_summary(result, time.perf_counter() - began)
    return 0
