"""``clusterclip dedup``: near-duplicate groups of a clustered work directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HELP = "group near-duplicate documents (they then share one repetition budget)"
DESCRIPTION = (
    "Find near-duplicate groups in a clustered work directory: exact copies (same text after\n"
    "Unicode NFKC, case folding and whitespace collapsing) anywhere in the corpus, and near\n"
    "copies (embedding cosine >= --dedup-threshold) inside each cluster and across its border\n"
    "with the second-nearest one, joined into groups in which every two distinct texts are\n"
    "near copies (complete linkage: never a chain of pairs). Each group's representative is\n"
    "its lowest document index, and its lowest pairwise cosine is shown. The\n"
    "schedule (--duplicates group, the default) draws a group as one unit whose members take\n"
    "turns, so all copies of a text together appear at most --max-repeats times. Writes\n"
    "duplicates.parquet and the manifest entry (a rerun with the same settings is skipped),\n"
    "then prints the groups found; --export writes them as jsonl."
)
EXAMPLE = """examples:
  clusterclip dedup --workdir work
  clusterclip dedup --workdir work --dedup-threshold 0.9 --overwrite --largest 20
  clusterclip dedup --workdir work --export groups.jsonl
  clusterclip dedup --workdir work --engine ray --num-workers 8
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.cli.flags import add_engine_flags, add_renamed, add_section
    from clusterclip.options import parse_count

    parser.add_argument(
        "--workdir", type=Path, required=True, help="work directory with a completed cluster stage"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace groups made with other settings"
    )
    add_renamed(
        parser, "--largest", "--top", type=parse_count, default=5, metavar="N",
        help="how many of the largest groups to show, with example texts (default: 5; "
        "formerly --top)",
    )  # fmt: skip
    parser.add_argument(
        "--export",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="write every group as one json line: representative, cluster, kind, duplicates",
    )
    add_section(parser, "dedup", "dedup")
    add_engine_flags(parser, "the comparisons, cluster by cluster")


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import engine_from_args, section_values, typed_flag
    from clusterclip.dedup.options import DedupOptions
    from clusterclip.dedup.stage import DedupStage, group_rows
    from clusterclip.errors import ClusterClipError
    from clusterclip.io import WorkDir
    from clusterclip.plan import plan_stages

    if args.largest < 0:
        flag = typed_flag(args, "largest", "--largest")
        raise ClusterClipError(
            f"`{flag}` must be an int in [0, inf); got {args.largest}. Pass 0 to show none."
        )
    if args.export is not None and args.export.is_dir():
        raise ClusterClipError(f"--export {args.export} is a directory. Pass a file name.")
    work = WorkDir(args.workdir)
    work.require("cluster")
    options = DedupOptions(**section_values(args, "dedup"))
    engine, engine_options = engine_from_args(args)
    stage = DedupStage(engine=engine, engine_options=engine_options)
    plan = plan_stages([(stage, options)], ["dedup"])
    outcome = plan.run(work, on_change="refuse", force=args.overwrite, log=print)["dedup"]
    rows = group_rows(work, top=None if args.export is not None else args.largest)
    shown = rows[: args.largest]  # only the largest are described, unless all are exported
    texts = _texts_of(work, shown, engine, engine_options)
    print(format_summary(outcome.summary, shown, texts))
    if args.export is not None:
        written = export_groups(rows, args.export)
        print(f"  exported       {len(rows):,} groups to {written}")
    return 0


def _texts_of(
    work: Any, rows: list[dict[str, Any]], engine: str, engine_options: Any
) -> dict[int, str]:
    """Texts of the representatives and first duplicates shown, read by tasks on the engine."""
    from clusterclip.describe import document_texts

    wanted = set()
    for row in rows:
        wanted.add(row["representative"]["index"])
        wanted.update(d["index"] for d in row["duplicates"][:1])
    if not wanted or not work.corpus_rereadable():
        return {}
    found = document_texts(work.path, wanted, engine=engine, engine_options=engine_options)
    return {index: document["text"] for index, document in found.items()}


def _clip(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_summary(
    summary: dict[str, Any], rows: list[dict[str, Any]], texts: dict[int, str]
) -> str:
    """The one-screen summary: counts, then the largest groups with example texts."""
    usable = max(summary.get("usable_documents", 0), 1)
    lines = [
        f"clusterclip dedup: {summary['groups']:,} groups of near-duplicates "
        f"(threshold {summary['threshold']}, exact copies {summary['exact']})",
        f"  documents      {summary['documents_in_groups']:,} in groups "
        f"({100 * summary['documents_in_groups'] / usable:.2f}% of {usable:,} usable); "
        f"{summary['duplicates']:,} are copies of a representative",
        f"  kinds          {summary['exact_groups']:,} exact groups (every member the same "
        f"normalised text), {summary['near_groups']:,} near groups" + _lowest(summary),
        f"  time           {summary['seconds']['total']:.1f} s (hash texts "
        f"{summary['seconds']['hash']:.1f} s, compare {summary['seconds']['compare']:.1f} s)",
    ]
    lines += [f"  warning        {text}" for text in summary.get("warnings", [])]
    for row in rows:
        head = row["representative"]
        name = head["id"] if head["id"] is not None else f"#{head['index']}"
        lowest = "" if row["kind"] == "exact" else f", lowest cosine {row['min_similarity']:.4f}"
        lines.append(
            f"  group of {row['size']:<5} {row['kind']:<5} cluster {row['cluster']}, "
            f"kept {name}{lowest}"
        )
        if head["index"] in texts:
            lines.append(f"      kept: {_clip(texts[head['index']])}")
        first = row["duplicates"][0]
        if first["index"] in texts:
            text = _clip(texts[first["index"]])
            lines.append(
                f"      exact copy: {text}"
                if first["exact"]
                else f"      near copy: {text} (cosine {first['similarity']:.4f})"
            )
    return "\n".join(lines)


def _lowest(summary: dict[str, Any]) -> str:
    """The lowest cosine between two texts of one group (every pair is at least the threshold)."""
    lowest = summary.get("min_similarity")
    if lowest is None:
        return ""
    return f"; lowest cosine inside a group {lowest:.4f} (every pair >= {summary['threshold']})"


def export_groups(rows: list[dict[str, Any]], path: Path) -> Path:
    """Write one json line per group, atomically."""
    import json

    from clusterclip.io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
