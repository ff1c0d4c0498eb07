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
  clusterclip inspect --workdir work --cluster 3 --keywords 15
  clusterclip inspect --workdir work --json > clusters.json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.cli.flags import add_renamed
    from clusterclip.options import parse_count

    parser.add_argument(
        "--workdir", required=True, help="work directory with a completed cluster stage"
    )
    parser.add_argument(
        "--cluster",
        type=parse_count,
        action="append",
        default=None,
        metavar="K",
        help="cluster id (repeatable; default all)",
    )
    add_renamed(
        parser, "--keywords", "--top", type=parse_count, default=10, metavar="N",
        help="keywords per cluster (default 10; formerly --top)",
    )  # fmt: skip
    parser.add_argument(
        "--examples", type=parse_count, default=3, help="nearest documents per cluster (default 3)"
    )
    parser.add_argument(
        "--width",
        type=parse_count,
        default=160,
        help="characters of each example shown (default 160)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _shorten(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 3, 0)] + "..."


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import typed_flag
    from clusterclip.describe.inspect import inspect_clusters
    from clusterclip.errors import plural, spelled_as_flags

    # inspect_clusters' keywords as this command spells them, for its error messages
    keywords = typed_flag(args, "keywords", "--keywords")
    flags = {"clusters": "--cluster", "n_keywords": keywords, "n_examples": "--examples"}
    with spelled_as_flags(flags):
        report = inspect_clusters(
            args.workdir, clusters=args.cluster, n_keywords=args.keywords, n_examples=args.examples
        )
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    total = sum(entry["size"] for entry in report)
    for entry in report:
        print(
            f"cluster {entry['cluster']}  size {entry['size']:,} "
            f"({100 * entry['size'] / max(total, 1):.1f}% of shown)"
        )
        print(f"  keywords  {', '.join(entry['keywords']) or '-'}")
        for example in entry["examples"]:
            name = example["id"] if example["id"] is not None else f"#{example['index']}"
            print(f"  {example['score']:.3f}  [{name}] {_shorten(example['text'], args.width)}")
        print()
    print(f"{plural(len(report), 'cluster')} shown, {plural(total, 'document')}")
    return 0
