"""``clusterclip demo``: the whole method on the bundled King James Bible, offline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HELP = "run the whole pipeline on the bundled King James Bible (offline) and write the report"
DESCRIPTION = (
    "Run embed -> cluster -> schedule -> report on the King James Bible bundled inside the\n"
    "package (31,102 verses, public domain; fields id, book, chapter, verse, text) with an\n"
    "encoder that works offline, then print where the report is. Bible books are very\n"
    "unequal in size (Psalms 2,461 verses, 2 John 13), so the clusters are too: a good small\n"
    "example of what ClusterClip does to an imbalanced corpus. A rerun skips finished stages.\n"
    "\n"
    "By default the demo embeds 10,000 verses spread evenly over all 66 books with\n"
    "all-MiniLM-L6-v2: about 20 s on 2 idle CPU cores with AMX-BF16 (measured: 17 s,\n"
    "25 CPU-seconds; slower CPUs without bfloat16 take a few minutes). `--sample all` embeds\n"
    "all 31,102 verses (about 3x the embedding work; use --device cuda on a GPU);\n"
    "`--encoder tfidf` is fast on any size."
)
EXAMPLE = """examples:
  clusterclip demo                                  # 10,000 verses, all-MiniLM-L6-v2
  clusterclip demo --sample all --device cuda       # all 31,102 verses on a GPU
  clusterclip demo --sample all --encoder tfidf     # all verses, no transformer
  clusterclip demo --sample 3000 --n-clusters 20 --workdir /tmp/demo
"""

CORPUS = "kjv-verses.jsonl.gz"
N_VERSES = 31_102
DEFAULT_SAMPLE = 10_000
#: With 10,000 verses: 100 clusters of 12..255 verses; 1.5 epochs with at most 2
#: repeats clips about a third of the clusters, so the report shows the clip at work.
#: (The budget is applied in `run` only when no budget flag is given, so that
#: `--num-samples N` replaces it instead of conflicting with it.)
DEMO_DEFAULTS = {"cluster__n_clusters": 100, "schedule__max_repeats": 2}
DEMO_EPOCHS = 1.5


def _sample(text: str) -> int | None:
    if text == "all":
        return None
    try:
        return int(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected an int or 'all', got {text!r}") from error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.cli.run import add_stage_arguments

    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("clusterclip-demo"),
        help="work directory (default: ./clusterclip-demo)",
    )
    parser.add_argument(
        "--sample",
        type=_sample,
        default=DEFAULT_SAMPLE,
        metavar="N|all",
        help=f"embed N verses spread evenly over the Bible, or `all` 31,102 "
        f"(default: {DEFAULT_SAMPLE:,})",
    )
    parser.set_defaults(**DEMO_DEFAULTS)
    add_stage_arguments(parser)
    # Shown defaults of the demo differ from `clusterclip run`'s.
    for action in parser._actions:
        if action.dest == "cluster__n_clusters":
            action.help = "Number of k-means clusters K (demo default: 100)."
        elif action.dest == "schedule__max_repeats":
            action.help = "Repetition cap R per document (demo default: 2)."
        elif action.dest == "schedule__epochs":
            action.help = "Budget: E x usable documents (demo default: 1.5)."


def corpus_path() -> Any:
    """Context manager yielding a real path of the bundled corpus."""
    from importlib import resources

    return resources.as_file(resources.files("clusterclip.data") / CORPUS)


def check_sample(n: int) -> None:
    """Refuse a sample size outside the bundled corpus."""
    from clusterclip.errors import invalid

    if not 1 <= n <= N_VERSES:
        raise invalid(
            "sample", f"an int in [1, {N_VERSES}]", n, "Pass --sample all for every verse."
        )


def write_sample(source: Path, target: Path, n: int) -> Path:
    """Write ``n`` verses spread evenly over the corpus (same file -> untouched)."""
    import gzip

    from clusterclip.io import atomic_write_bytes

    check_sample(n)
    with gzip.open(source, "rb") as handle:
        lines = handle.read().splitlines(keepends=True)
    keep = {int(i * len(lines) / n) for i in range(n)}
    data = b"".join(line for i, line in enumerate(lines) if i in keep)
    if not target.exists() or target.read_bytes() != data:
        atomic_write_bytes(target, data)
    return target


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from clusterclip.cli.run import overrides_from_args, run_to_the_end
    from clusterclip.config import RunConfig, apply_overrides
    from clusterclip.io import WorkDir
    from clusterclip.pipeline import resolve_config
    from clusterclip.pipeline import run as run_pipeline

    overrides = overrides_from_args(args)
    if not {"num_samples", "num_tokens", "epochs"} & set(overrides["schedule"]):
        overrides["schedule"]["epochs"] = DEMO_EPOCHS
    config = apply_overrides(RunConfig(), overrides)
    if config.embed.text_field is None:
        config = dataclasses.replace(
            config, embed=dataclasses.replace(config.embed, text_field="text", id_field="id")
        )
    workdir = Path(args.workdir)
    if args.sample is not None:
        check_sample(args.sample)
    with corpus_path() as bundled:
        source = Path(bundled)
        if args.sample is not None:
            source = workdir / f"kjv-sample-{args.sample}.jsonl"
        config, _ = resolve_config(config, [str(source)], workdir)  # checked before any work

        def start(log: Any, ledger: Any) -> dict[str, Any]:
            with WorkDir(workdir).lock(log=log):  # claimed before the sample is written into it
                sample = source
                if args.sample is not None:
                    sample = write_sample(Path(bundled), source, args.sample)
                log(
                    f"clusterclip demo: {sample.name}, encoder {config.embed.encoder}, "
                    f"{config.cluster.n_clusters} clusters, work directory {workdir}"
                )
                return run_pipeline(
                    [str(sample)], workdir=workdir, config=config, log=log, ledger=ledger
                )

        return run_to_the_end(start, workdir=workdir, command="demo")
