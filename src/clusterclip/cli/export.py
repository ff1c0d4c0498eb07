"""``clusterclip export``: write a clustered work directory in another tool's layout."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from clusterclip.errors import ClusterClipError

HELP = "export documents per cluster, in schedule order, or as a Megatron-style index"
DESCRIPTION = (
    "Export a work directory. Formats: cluster-folders (the ClusterClip authors' layout: "
    "cluster_<k>/data_<j>.jsonl, original record + label + score), ordered-jsonl (the "
    "documents in schedule order, sharded), megatron (a Megatron-LM style sample index)."
)
EXAMPLE = """example:
  clusterclip export --workdir work --format cluster-folders --out clusters/
  clusterclip export --workdir work --format ordered-jsonl --out ordered/ --shard-size 50000
  clusterclip export --workdir work --format megatron --out index/
"""


def _cluster_folders(workdir: str, out: str, shard_size: int | None) -> dict[str, Any]:
    from clusterclip.adapters.folders import export_cluster_folders

    kwargs = {} if shard_size is None else {"shard_size": shard_size}
    return export_cluster_folders(workdir, out, **kwargs)


def _ordered_jsonl(workdir: str, out: str, shard_size: int | None) -> Any:
    from clusterclip.adapters import export as module

    kwargs = {} if shard_size is None else {"shard_size": shard_size}
    return module.export_ordered_jsonl(workdir, out, **kwargs)


def _megatron(workdir: str, out: str, shard_size: int | None) -> Any:
    if shard_size is not None:
        raise ClusterClipError("--shard-size does not apply to --format megatron. Drop it.")
    from clusterclip.adapters.export import export_sample_index

    return export_sample_index(workdir, out)


#: Format name -> function(workdir, out, shard_size or None) -> summary.
FORMATS: dict[str, Callable[[str, str, int | None], Any]] = {
    "cluster-folders": _cluster_folders,
    "ordered-jsonl": _ordered_jsonl,
    "megatron": _megatron,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", required=True, help="work directory to export")
    parser.add_argument("--format", required=True, choices=sorted(FORMATS), help="output layout")
    parser.add_argument("--out", required=True, help="output folder (must not exist or be empty)")
    parser.add_argument(
        "--shard-size", type=int, default=None, help="documents per output file (jsonl formats)"
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ClusterClipError(f"--out {args.out} is a file; pass a folder (created if missing).")
    summary = FORMATS[args.format](args.workdir, args.out, args.shard_size)
    if isinstance(summary, dict):
        details = ", ".join(f"{key} {value}" for key, value in summary.items() if key != "out")
        print(f"export {args.format}: {details} -> {args.out}")
    else:
        print(f"export {args.format}: wrote {args.out}")
    return 0
