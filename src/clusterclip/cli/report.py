"""``clusterclip report``: the HTML + JSON report of a work directory's schedule."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write report.html (+ PNGs, report.json) showing what the schedule does to the corpus"
DESCRIPTION = (
    "Write a self-contained report.html (figures embedded), the figures as PNG files and\n"
    "report.json (every number) for the schedule in a work directory: cluster sizes, share\n"
    "of draws per cluster under random / uniform / this schedule, sampling dynamics with\n"
    "clip events, repetitions per document, documents never seen, and a cluster table."
)
EXAMPLE = """example:
  clusterclip report --workdir work
  clusterclip report --workdir work --out-dir reports/run-7
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", required=True, type=Path, help="work directory")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where to write the report (default: the work directory)",
    )
    from clusterclip.cli.flags import add_engine_flags, add_section

    add_section(parser, "report", "report", exclude=("enabled",))
    add_engine_flags(parser, "reading the corpus for the keywords")


def print_report_summary(path: Path, *, findings: bool = True) -> None:
    """The report's headline numbers; ``findings``: its near-duplicate groups and warnings too."""
    from clusterclip.io import WorkDir
    from clusterclip.report.duplicates import duplicates_line
    from clusterclip.report.notices import warning_lines

    data = WorkDir(path.parent).report()  # report.json sits next to report.html
    s = data["summary"]
    print(f"report:      {path}")
    print(
        f"  policy {s['policy']}, max_repeats {s['max_repeats']}, "
        f"{s['schedule_length']:,} draws ({s['epochs_equivalent']:.2f} epochs equivalent)"
    )
    print(
        f"  {s['n_clusters']} clusters, sizes {s['smallest_cluster']:,}..{s['largest_cluster']:,}"
        f" ({s['imbalance']:.1f}x); {s['n_clipped_clusters']} clipped"
    )
    print(
        f"  never seen {s['never_seen']:,} of {s['n_usable']:,} documents "
        f"({s['never_seen_fraction']:.1%}); most repeats of one document: "
        f"{s['max_repeats_observed']}"
    )
    stability = data.get("stability")
    if stability:
        print(
            f"  stability: ARI {stability['ari']:.2f} with another k-means seed "
            f"({stability['sample_size']:,} documents)"
        )
    d = data["dynamics"]
    if d["share_rarest_10pct"]:
        print(
            f"  rarest 10% of clusters get {d['policy_share_rarest_10pct']:.1%} of draws "
            f"(random: {d['random_share_rarest_10pct']:.1%}, "
            f"uniform: {d['uniform_share_rarest_10pct']:.1%})"
        )
    if findings and "duplicates" in data:
        print(f"  duplicates: {duplicates_line(data['duplicates'])}")
    for text in warning_lines(data.get("notices") or {}) if findings else ():
        print(f"  warning: {text}")


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import engine_from_args, section_values
    from clusterclip.errors import ClusterClipError
    from clusterclip.plan import plan_stages
    from clusterclip.report import ReportOptions, report_target, write_report
    from clusterclip.report.stage import ReportStage

    if args.out_dir is not None and Path(args.out_dir).is_file():
        raise ClusterClipError(f"--out-dir {args.out_dir} is a file; pass a folder.")
    options = ReportOptions(**section_values(args, "report"))
    engine, engine_options = engine_from_args(args)
    work, elsewhere = report_target(args.workdir, args.out_dir)
    if elsewhere is not None:  # a copy in another folder: no stage to run, nothing recorded
        path = write_report(
            work, elsewhere, n_slices=options.n_slices, n_keywords=options.n_keywords,
            engine=engine, engine_options=engine_options,
        )  # fmt: skip
    else:
        stage = ReportStage(engine=engine, engine_options=engine_options)
        plan = plan_stages([(stage, options)], ["report"])
        path = plan.run(work)["report"].result
    print_report_summary(path)
    return 0
