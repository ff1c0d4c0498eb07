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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs", nargs="+", metavar="INPUT",
        help="corpus files, directories or globs (.jsonl, .jsonl.gz, .jsonl.zst, .parquet)",
    )  # fmt: skip
    parser.add_argument("--workdir", required=True, help="work directory to write into")
    parser.add_argument(
        "--encoder", default="sentence-transformers",
        choices=["sentence-transformers", "static", "tfidf"],
        help="sentence-transformers (default, best quality), static (model2vec distilled from "
        "the model: fast on CPU), tfidf (no model at all)",
    )  # fmt: skip
    parser.add_argument(
        "--model", default=None,
        help="sentence-transformers/HF model name or path (default all-MiniLM-L6-v2)",
    )  # fmt: skip
    parser.add_argument(
        "--text-field", default=None,
        help="record field holding the text (default: content, else text)",
    )  # fmt: skip
    parser.add_argument(
        "--id-field", default=None, help="record field holding the id (default: id if present)"
    )
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=None,
        help="texts per batch (default: 4,096 padded tokens per batch on CPU, 128 texts on GPU)",
    )
    parser.add_argument(
        "--max-length", type=_positive_int, default=None, help="truncate texts to N tokens"
    )
    parser.add_argument(
        "--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:1, ..."
    )
    parser.add_argument(
        "--precision", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
        help="transformer compute precision (auto: float16 on GPU, bfloat16 on CPUs with "
        "AVX512-BF16/AMX, else float32)",
    )  # fmt: skip
    parser.add_argument(
        "--shard-size", type=_positive_int, default=None,
        help="documents per embeddings part file and unit of resume (default 20000)",
    )  # fmt: skip
    parser.add_argument(
        "--strict", action="store_true",
        help="fail at the first bad record instead of listing it in rejects.jsonl",
    )  # fmt: skip
    parser.add_argument(
        "--overwrite", action="store_true",
        help="redo the stage even if the work directory holds other embeddings",
    )  # fmt: skip
    parser.add_argument(
        "--trust-remote-code", action="store_true",
        help="let the model run its own Python code (only for models you trust)",
    )  # fmt: skip
    parser.add_argument(
        "--engine", default="local", choices=["local", "ray"],
        help="run shards in this process (local) or on a Ray cluster (ray)",
    )  # fmt: skip
    ray = parser.add_argument_group("Ray engine (--engine ray, see docs/scaling.md)")
    ray.add_argument(
        "--ray-address", default=None,
        help="Ray cluster address: auto, HOST:6379, ray://HOST:10001 "
        "(default: join the running local one or start one)",
    )  # fmt: skip
    ray.add_argument(
        "--num-workers", type=_positive_int, default=None,
        help="embedding actors, each loads the model once (default: one per GPU, else per CPU)",
    )  # fmt: skip
    ray.add_argument(
        "--num-gpus-per-worker", type=float, default=None,
        help="GPUs reserved by each actor (1: one model per GPU; default 0)",
    )  # fmt: skip


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
    rejected = sum(count for status, count in counts.items() if status != "ok")
    if rejected:
        lines.append(f"  {rejected:,} rejected record(s) listed in {workdir}/rejects.jsonl")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.cluster import engine_options
    from clusterclip.embed import DEFAULT_SHARD_SIZE, embed

    result = embed(
        args.inputs,
        workdir=args.workdir,
        encoder=args.encoder,
        model=args.model,
        text_field=args.text_field,
        id_field=args.id_field,
        batch_size=args.batch_size,
        max_length=args.max_length,
        device=args.device,
        precision=args.precision,
        strict=args.strict,
        overwrite=args.overwrite,
        shard_size=args.shard_size or DEFAULT_SHARD_SIZE,
        engine=args.engine,
        engine_options=engine_options(args),
        trust_remote_code=args.trust_remote_code,
    )
    print(format_summary(args.workdir, result.summary))
    return 0
