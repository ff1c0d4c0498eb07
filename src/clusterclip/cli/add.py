"""``clusterclip add``: embed new corpus files into a finished work directory."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "add new corpus files to a finished work directory (embeds only them)"
DESCRIPTION = (
    "Embed only the new files, with the encoder and settings the work directory's embed "
    "stage recorded, as new shards after its documents (documents.parquet is extended; the "
    "existing embedding parts are not touched). Their documents are assigned to the existing "
    "centroids (no k-means rerun), or with --refit the cluster stage reruns over the union. "
    "The manifest lists every addition (files, time, documents); the next `clusterclip run` "
    "with every file, old then new, embeds nothing and reruns dedup, schedule and report over "
    "the union. Refused when a file is already part of the corpus, when a corpus file changed "
    "since it was embedded, or without a finished embed stage."
)
EXAMPLE = """examples:
  clusterclip add new/*.jsonl.gz --workdir w              # assign to the existing centroids
  clusterclip add more.parquet --workdir w --refit        # rerun k-means over the union
  clusterclip run data/*.jsonl.gz new/*.jsonl.gz --workdir w --n-clusters 100 \\
      --epochs 3 --max-repeats 6                         # embeds nothing; schedules all
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.cli.flags import add_section

    parser.add_argument(
        "inputs", nargs="+", metavar="INPUT",
        help="the new corpus files, directories or globs (.jsonl, .jsonl.gz, .jsonl.zst, "
        ".parquet); none of them may be part of the corpus already",
    )  # fmt: skip
    parser.add_argument(
        "--workdir", required=True, help="work directory with a finished embed stage"
    )
    parser.add_argument(
        "--refit", action="store_true",
        help="rerun the cluster stage (k-means, its recorded settings) over the union instead "
        "of assigning the new documents to the existing centroids",
    )  # fmt: skip
    # The encoder and k-means settings are the work directory's: only where the work runs.
    add_section(parser, "", "engine", exclude=("seed", "portable"))
    add_section(
        parser, "ray", "Ray engine (--engine ray: one model per actor; see docs/scaling.md)"
    )


def format_summary(added: dict[str, Any]) -> str:
    """The one-screen summary printed at the end of ``clusterclip add``."""
    counts = added["counts"]
    last = added["first_index"] + added["documents"] - 1
    lines = [
        f"added {added['documents']:,} documents from {len(added['sources'])} file(s) to "
        f"{added['workdir']} (indices {added['first_index']:,} to {last:,})",
        "  by status: " + ", ".join(f"{status} {n:,}" for status, n in counts.items() if n),
        f"  embedded: {added['embedded_docs']:,} documents (the corpus already there: none)",
    ]
    clusters = {
        "assigned": "assigned to the existing centroids (no refit)",
        "refit": "k-means refit over the union (--refit)",
        "none": "not clustered: no up-to-date cluster stage; `clusterclip run` clusters the union",
    }
    lines.append(f"  clusters: {clusters[added['clusters']]}")
    lines.append(
        "  next: `clusterclip run OLD... NEW... --workdir W` (every file, old then new) "
        "reruns dedup, schedule and report over the union"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import engine_from_args
    from clusterclip.grow import add

    engine, engine_options = engine_from_args(args)
    added = add(
        args.inputs, workdir=args.workdir, refit=args.refit, engine=engine,
        engine_options=engine_options, log=lambda line: print(line, file=sys.stderr),
    )  # fmt: skip
    print(format_summary(added))
    return 0
