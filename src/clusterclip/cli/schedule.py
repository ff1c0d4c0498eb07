"""``clusterclip schedule``: build a schedule from cluster labels and save it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HELP = "build the training order (schedule.npy + schedule.json) from cluster labels"
DESCRIPTION = (
    "Build a ClusterClip schedule: clusters drawn uniformly (or by weight), documents in "
    "shuffled passes, every document clipped at --max-repeats. With --workdir the labels "
    "(and token counts) come from a clustered work directory and the schedule is that "
    "directory's schedule stage (skipped when up to date, like `clusterclip run`). Without "
    "it, labels come from a .npy array or a parquet column (--labels) and the schedule is "
    "written to --out; negative labels are excluded. With --workdir and --duplicates group "
    "(the default) the near-duplicate groups of the dedup stage (run first if missing) are "
    "drawn as units that share one repetition budget. Prints a one-screen summary."
)
EXAMPLE = """examples:
  clusterclip schedule --workdir work --max-repeats 4 --num-samples 1000000 --seed 0
  clusterclip schedule --workdir work --num-tokens 2000000000 --order planned
  clusterclip schedule --labels labels.npy --num-samples 100000 --out schedule.npy
  clusterclip schedule --workdir work --engine ray --ray-address auto
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.cli.flags import add_engine_flags, add_section

    source = parser.add_argument_group("where (one of --workdir or --labels)")
    source.add_argument(
        "--workdir", type=Path, help="clustered work directory: read its labels, write its schedule"
    )
    source.add_argument("--labels", type=Path, help=".npy array or .parquet file of labels")
    source.add_argument(
        "--label-column",
        default="cluster",
        help="parquet column holding the labels (default: cluster)",
    )
    source.add_argument(
        "--lengths", type=Path, help=".npy or .parquet file of tokens per document (--num-tokens)"
    )
    source.add_argument(
        "--length-column",
        default="n_tokens",
        help="parquet column of the lengths (default: n_tokens)",
    )
    source.add_argument(
        "--cluster-weights", type=Path, help=".npy array: weight per cluster id (with --labels)"
    )
    source.add_argument(
        "--out", type=Path, help="output .npy with --labels (sidecar .json next to it)"
    )
    add_section(
        parser, "schedule", "schedule (budget: one of --num-samples, --num-tokens, --epochs)"
    )
    add_engine_flags(
        parser,
        "with --workdir, the build is one task on a worker, and a dedup stage it needs "
        "first runs on the engine too",
    )


def _read_column(path: Path, column: str, what: str) -> Any:
    import numpy as np

    from clusterclip.errors import ClusterClipError, require_extra

    if not path.exists():
        raise ClusterClipError(f"{path}: no such file (--{what}).")
    if path.suffix == ".npy":
        with open(path, "rb") as handle:
            if handle.read(6) != b"\x93NUMPY":
                raise ClusterClipError(
                    f"{path} is not an .npy file (save the array with numpy.save)."
                )
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as error:  # not an .npy file, or one holding objects
            raise ClusterClipError(f"{path} is not a readable .npy array ({error}).") from error
    if path.suffix != ".parquet":
        raise ClusterClipError(f"{path}: --{what} must be a .npy or .parquet file.")
    parquet = require_extra("pyarrow.parquet", "io")
    try:
        names = parquet.read_schema(path).names
    except Exception as error:  # pyarrow raises several types for a bad file
        raise ClusterClipError(f"{path} is not a readable parquet file ({error}).") from error
    if column not in names:
        raise ClusterClipError(
            f"{path}: no column {column!r} (columns: {', '.join(names)}). "
            f"Pass --{what[:-1] if what.endswith('s') else what}-column NAME."
        )
    wanted = [column] + (["index"] if "index" in names and column != "index" else [])
    table = parquet.read_table(path, columns=wanted)
    data = table.column(column)
    if data.null_count:
        if what != "labels":
            raise ClusterClipError(f"{path}: column {column!r} has {data.null_count} nulls.")
        data = data.fill_null(-1)  # a document without a cluster is excluded
    values = data.to_numpy()
    if "index" in wanted:  # rows may be in any order: put them in document order
        index = table.column("index").to_numpy()
        if not np.array_equal(index, np.arange(index.size)):
            if not np.array_equal(np.sort(index), np.arange(index.size)):
                raise ClusterClipError(f"{path}: column 'index' is not a permutation of 0..N-1.")
            ordered = np.empty_like(values)
            ordered[index] = values
            values = ordered
    return values


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import engine_from_args, section_values
    from clusterclip.errors import ClusterClipError
    from clusterclip.schedule.options import ScheduleOptions

    options = ScheduleOptions(**section_values(args, "schedule"))
    engine, engine_options = engine_from_args(args)
    if (args.workdir is None) == (args.labels is None):
        raise ClusterClipError(
            "give exactly one of --workdir W (a clustered work directory) or --labels FILE "
            "(with --out FILE)."
        )
    if args.workdir is not None:
        for flag, value in (("--out", args.out), ("--lengths", args.lengths),
                            ("--cluster-weights", args.cluster_weights)):  # fmt: skip
            if value is not None:
                raise ClusterClipError(
                    f"{flag} applies with --labels only; with --workdir the schedule is "
                    "W/schedule.npy and the token counts come from W. Drop it."
                )
        return _run_workdir(args.workdir, options, engine, engine_options)
    if engine != "local":
        raise ClusterClipError(
            f"--engine {engine} applies with --workdir only: a --labels file is scheduled in "
            "this process. Drop --engine, or schedule a work directory."
        )
    if args.out is None:
        raise ClusterClipError("--labels needs --out FILE (the schedule .npy to write).")
    if options.policy == "hierarchical":  # a labels file carries no tree: it would run flat
        raise ClusterClipError(
            "--policy hierarchical needs the cluster tree, which a --labels file does not "
            "carry: use --workdir W after `clusterclip cluster --levels ...`, or pass levels "
            "through the Python API (build_schedule(labels, policy='hierarchical', levels=...))."
        )
    return _run_files(args, options)


def _run_workdir(workdir: Path, options: Any, engine: str, engine_options: Any) -> int:
    from clusterclip.dedup.options import DedupOptions
    from clusterclip.dedup.stage import DedupStage
    from clusterclip.io import WorkDir
    from clusterclip.plan import plan_stages, recorded_options
    from clusterclip.schedule.stage import ScheduleStage
    from clusterclip.schedule.stats import ScheduleSummary

    work = WorkDir(workdir)
    work.require("cluster")  # before the lock claims it: a missing --workdir is named as such
    # The near-duplicate groups, when the schedule reads them, are refreshed first (first run,
    # or redone for new clusters) with the settings of an earlier `clusterclip dedup` or `run`.
    dedup_stage = DedupStage(engine=engine, engine_options=engine_options)
    dedup = (dedup_stage, recorded_options(work, "dedup", DedupOptions))
    stage = ScheduleStage(engine=engine, engine_options=engine_options)
    plan = plan_stages([dedup, (stage, options)], ["schedule"])
    outcome = plan.run(work, log=print)["schedule"]
    warnings_seen = outcome.summary.get("warnings", [])
    overview = outcome.summary.get("overview")  # the stage's numbers (older manifests: none)
    numbers = work.labels() if overview is None else ScheduleSummary(**overview)
    print(summary(outcome.result, numbers, work.path_of("schedule"), warnings_seen, options))
    return 0


def _run_files(args: argparse.Namespace, options: Any) -> int:
    import dataclasses

    import numpy as np

    from clusterclip.errors import ClusterClipError
    from clusterclip.schedule.stage import build_with_progress

    labels = _checked_labels(args.labels, _read_column(args.labels, args.label_column, "labels"))
    lengths = None
    if args.lengths is not None:
        lengths = _read_column(args.lengths, args.length_column, "lengths")
    if args.cluster_weights is not None:  # a file's weights replace the options'
        weights = _read_column(args.cluster_weights, "weight", "cluster-weights")
        if np.asarray(weights).dtype.kind not in "iuf":
            raise ClusterClipError(
                f"{args.cluster_weights}: --cluster-weights must hold numbers (one weight per "
                f"cluster id); got dtype {np.asarray(weights).dtype}. Save a float array."
            )
        options = dataclasses.replace(options, cluster_weights=weights)
    schedule, _budget, caught = build_with_progress(labels, options, lengths=lengths)
    out = schedule.save(args.out)
    seen = [str(w.message) for w in caught]
    print(summary(schedule, np.asarray(labels, dtype=np.int64), out, seen, options))
    return 0


def _checked_labels(path: Path, labels: Any) -> Any:
    """The labels read from ``path``, or the labels error naming that file."""
    from clusterclip.errors import ClusterClipError
    from clusterclip.schedule.config import validate_labels

    try:
        validate_labels(labels)
    except ClusterClipError as error:
        raise ClusterClipError(f"{path}: {error}") from None
    return labels  # as read: the schedule counts unsigned labels beyond int64 and warns


def summary(
    schedule: Any, labels: Any, out: Path, warnings_seen: list[str], options: Any = None
) -> str:
    """The one-screen summary printed at the end of ``clusterclip schedule``.

    The numbers are :func:`clusterclip.schedule.stats.summarise`'s; this only lays them out.
    ``labels`` are the labels the schedule was built from, or those numbers
    already summarised (a :class:`~clusterclip.schedule.stats.ScheduleSummary`: the
    schedule stage's, made where the schedule was built).

    ``options`` (the :class:`~clusterclip.schedule.options.ScheduleOptions` given)
    lets the budget line say ``epochs=3.0`` when that is what the user passed.
    """
    from clusterclip.errors import plural
    from clusterclip.schedule.advice import budget_passes, clip_advice, rule_advice
    from clusterclip.schedule.stats import ScheduleSummary, summarise

    stats, config = schedule.stats, schedule.config
    numbers = labels if isinstance(labels, ScheduleSummary) else summarise(stats, labels)
    n_usable = numbers.n_usable
    lines = [f"clusterclip schedule: wrote {out} (+ {out.with_suffix('.json').name})"]
    lines.append(
        f"  documents      {numbers.n_documents:,} ({n_usable:,} usable, "
        f"{numbers.n_documents - n_usable:,} excluded)"
    )
    lines.append(
        f"  clusters       {numbers.n_clusters:,} (sizes {numbers.size_min:,}.."
        f"{numbers.size_max:,}, median {numbers.size_median:,})"
    )
    policy = f"{config.policy}, max_repeats={config.max_repeats}, order={config.order}, seed={config.seed}"
    if config.alpha is not None:
        policy += f", alpha={config.alpha}"
    lines.append(f"  policy         {policy}")
    budget = (
        f"num_samples={config.num_samples:,}"
        if config.num_samples is not None
        else f"num_tokens={config.num_tokens:,}"
    )
    if options is not None and options.num_samples is None and options.num_tokens is None:
        budget = f"epochs={options.epochs or 1.0} = {config.num_samples:,} documents"
    status = "met" if stats.budget_met else "NOT met"
    lines.append(f"  draws          {stats.n_draws:,} (budget {budget}: {status})")
    if stats.exhausted_at is not None:
        after = {"stop": "stopped there", "random": "random passes after that", "error": ""}[
            config.on_exhausted
        ]
        lines.append(
            f"  exhausted      every cluster clipped at draw {stats.exhausted_at:,}; {after}"
        )
    if stats.n_tokens is not None:
        lines.append(f"  tokens         {stats.n_tokens:,}")
    seen = numbers.n_distinct
    lines.append(f"  distinct docs  {seen:,} seen ({100 * seen / max(n_usable, 1):.1f}% of usable)")
    lines.append(f"  max repeats    {stats.max_repeats_per_document} per document")
    if numbers.n_clipped:
        lines.append(
            f"  clipped        {numbers.n_clipped:,} of {numbers.n_clusters:,} clusters; first at "
            f"draw {numbers.clip_first:,}, median {numbers.clip_median:,}, last {numbers.clip_last:,}"
        )
    else:
        lines.append(f"  clipped        0 of {numbers.n_clusters:,} clusters")
    share, natural = numbers.smallest_share, numbers.smallest_natural
    ratio = f"{share / natural:.1f}x" if natural else "n/a"
    lines.append(
        f"  smallest 10%   {plural(numbers.n_smallest, 'cluster')} "
        f"({plural(numbers.smallest_documents, 'doc')}): "
        f"{100 * share:.2f}% of draws vs {100 * natural:.2f}% under random sampling ({ratio})"
    )
    for message in warnings_seen:
        lines.append(f"  warning        {message}")
    for advice in (
        clip_advice(
            config.policy,
            config.max_repeats,
            passes=budget_passes(
                n_usable,
                num_samples=config.num_samples,
                num_tokens=config.num_tokens,
                n_draws=stats.n_draws,
                n_tokens=stats.n_tokens,
            ),
        ),
        rule_advice(config.policy, config.order, config.schedule_version, numbers.n_clusters),
    ):
        if advice:
            lines.append(f"  advice         {advice}")
    return "\n".join(lines)
