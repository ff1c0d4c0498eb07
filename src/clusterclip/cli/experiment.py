"""``clusterclip experiment lm``: train small GPTs under each sampling policy and compare."""

from __future__ import annotations

import argparse

HELP = "reproduction harness: train a small GPT per sampling policy, compare held-out loss"
DESCRIPTION = (
    "Train a small GPT-2 (built from a config, nothing downloaded) on a real corpus under\n"
    "each sampling policy at an equal token budget and compare held-out loss on the\n"
    "natural mix, macro over clusters, on the rarest 25% of clusters and per category.\n"
    "Same code as `python -m clusterclip.experiments.lm`; see docs/results.md."
)
EXAMPLE = """example:
  clusterclip experiment lm --corpus kjv --workdir runs/kjv --out results/kjv \\
      --encoder tfidf --n-clusters 100 --tail-docs 6000 --tokens 200000 --epochs 1 \\
      --policies random,uniform,clusterclip-r4,planned-r4 --seeds 0,1,2
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.experiments.lm import add_arguments as add_lm_arguments

    subparsers = parser.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    lm = subparsers.add_parser(
        "lm",
        help="language-model experiment (python -m clusterclip.experiments.lm)",
        description=DESCRIPTION,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_lm_arguments(lm)


def run(args: argparse.Namespace) -> int:
    from clusterclip.experiments.lm import run as run_lm

    return run_lm(args)
