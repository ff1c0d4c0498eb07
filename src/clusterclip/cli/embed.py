"""``clusterclip embed``: embed a corpus into a work directory (resumable)."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "embed every document of a corpus (jsonl/jsonl.gz/jsonl.zst/parquet) into a work directory"
DESCRIPTION = (
    "Read every record of the inputs, write the document index (documents.parquet, "
    "rejects.jsonl) and float16 L2-normalised embeddings (embeddings/part-NNNNN.npy) "
    "into the work directory. Interrupted runs resume from the last finished shard; "
    "a rerun with changed inputs or settings refuses unless --overwrite is given."
)
EXAMPLE = """examples:
  clusterclip embed data/*.jsonl.gz --workdir w                 # all-MiniLM-L6-v2 (default)
  clusterclip embed shards/ --workdir w --encoder static        # fast, CPU-only
  clusterclip embed corpus.parquet --workdir w --encoder tfidf --text-field body
  clusterclip embed corpus.jsonl --workdir w --model jinaai/jina-embeddings-v2-base-en \\
      --trust-remote-code --max-length 1024 --device cuda
  clusterclip embed 'corpus/*.jsonl.zst' --workdir /shared/w --engine ray \\
      --ray-address auto --num-gpus-per-worker 1    # one model per GPU of a Ray cluster
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.cli.flags import add_engine_flags, add_section

    parser.add_argument(
        "inputs", nargs="+", metavar="INPUT",
        help="corpus files, directories or globs (.jsonl, .jsonl.gz, .jsonl.zst, .parquet)",
    )  # fmt: skip
    parser.add_argument("--workdir", required=True, help="work directory to write into")
    parser.add_argument(
        "--overwrite", action="store_true",
        help="redo the stage even if the work directory holds other embeddings",
    )  # fmt: skip
    add_section(parser, "embed", "embed")
    add_engine_flags(parser, "one model per actor")


def _size(n_bytes: int) -> str:
    value = float(n_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} TB"  # pragma: no cover


def format_summary(workdir: str, summary: dict[str, Any]) -> str:
    """The one-screen summary printed at the end of ``clusterclip embed``."""
    counts = summary["counts"]
    lines = [f"embedded {summary['documents']:,} documents into {workdir}"]
    lines.append(
        "  by status: " + ", ".join(f"{status} {count:,}" for status, count in counts.items())
    )
    lines.append(f"  dimensions: {summary['dim']}")
    rate = None if summary.get("up_to_date") else summary.get("docs_per_second")
    resumed = summary.get("shards_resumed", 0)
    lines.append(
        f"  throughput: {rate:,.0f} documents/s over {summary['seconds']:.1f} s"
        + (f" ({resumed} of {summary['shards']} shards resumed)" if resumed else "")
        if rate
        else "  throughput: nothing to do (already embedded with these inputs and settings)"
    )
    sizes = summary.get("bytes", {})
    lines.append(
        f"  output: embeddings {_size(sizes.get('embeddings', 0))} in {summary['shards']} "
        f"part(s), documents.parquet {_size(sizes.get('documents', 0))}"
    )
    if summary.get("replaced_utf8_lines"):
        lines.append(f"  invalid UTF-8 replaced on {summary['replaced_utf8_lines']:,} line(s)")
    if summary.get("blank_lines"):
        lines.append(f"  blank lines skipped: {summary['blank_lines']:,}")
    if counts.get("zero_vector"):
        lines.append(
            f"  {counts['zero_vector']:,} document(s) with text got an all-zero embedding "
            "(zero_vector): left out of clustering"
        )
    rejected = sum(count for status, count in counts.items() if status != "ok")
    if rejected:
        lines.append(f"  {rejected:,} rejected record(s) listed in {workdir}/rejects.jsonl")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import engine_from_args, section_values
    from clusterclip.embed.job import EmbedStage
    from clusterclip.embed.options import EmbedOptions
    from clusterclip.io import WorkDir
    from clusterclip.plan import plan_stages

    engine, engine_options = engine_from_args(args)
    options = EmbedOptions(**section_values(args, "embed"))
    stage = EmbedStage(args.inputs, engine=engine, engine_options=engine_options)
    plan = plan_stages([(stage, options)], ["embed"])
    work = WorkDir(args.workdir)
    outcome = plan.run(work, on_change="refuse", force=args.overwrite)["embed"]
    print(format_summary(args.workdir, outcome.result.summary))
    return 0
