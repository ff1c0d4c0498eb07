"""``clusterclip inspect``: size, keywords and nearest documents of each cluster."""

from __future__ import annotations

import argparse
import json

HELP = "show each cluster's size, top keywords and the documents nearest its centroid"
DESCRIPTION = (
    "Describe the clusters of a clustered work directory: size, top keywords "
    "(class-based TF-IDF over the cluster's texts) and the documents nearest the "
    "centroid. Reads the corpus once."
)
EXAMPLE = """example:
  clusterclip inspect --workdir work                 # every cluster
  clusterclip inspect --workdir work --cluster 3 --top 15
  clusterclip inspect --workdir work --json > clusters.json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir", required=True, help="work directory with a completed cluster stage"
    )
    parser.add_argument(
        "--cluster",
        type=int,
        action="append",
        default=None,
        metavar="K",
        help="cluster id (repeatable; default all)",
    )
    parser.add_argument("--top", type=int, default=10, help="keywords per cluster (default 10)")
    parser.add_argument(
        "--examples", type=int, default=3, help="nearest documents per cluster (default 3)"
    )
    parser.add_argument(
        "--width", type=int, default=160, help="characters of each example shown (default 160)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _shorten(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 3, 0)] + "..."


def run(args: argparse.Namespace) -> int:
    from clusterclip.describe.inspect import inspect_clusters
    from clusterclip.errors import spelled_as_flags

    # inspect_clusters' keywords as this command spells them, for its error messages
    flags = {"clusters": "--cluster", "n_keywords": "--top", "n_examples": "--examples"}
    with spelled_as_flags(flags):
        report = inspect_clusters(
            args.workdir, clusters=args.cluster, n_keywords=args.top, n_examples=args.examples
        )
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    total = sum(entry["size"] for entry in report) or 1
    for entry in report:
        print(
            f"cluster {entry['cluster']}  size {entry['size']:,} ({100 * entry['size'] / total:.1f}% of shown)"
        )
        print(f"  keywords  {', '.join(entry['keywords']) or '-'}")
        for example in entry["examples"]:
            name = example["id"] if example["id"] is not None else f"#{example['index']}"
            print(f"  {example['score']:.3f}  [{name}] {_shorten(example['text'], args.width)}")
        print()
    print(f"{len(report)} clusters shown, {total:,} documents")
    return 0
