"""``clusterclip export``: write a clustered work directory in another tool's layout."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from clusterclip.errors import ClusterClipError

HELP = "export documents per cluster, in schedule order (jsonl, MDS, LitData), or as an index"
DESCRIPTION = (
    "Export a work directory. Formats: cluster-folders (the ClusterClip authors' layout: "
    "cluster_<k>/data_<j>.jsonl, original record + label + score), ordered-jsonl (the "
    "documents in schedule order, sharded), megatron (a Megatron-LM style sample index), "
    "mds (a MosaicML streaming dataset in schedule order), litdata (a LitData optimized "
    "dataset laid out for --world-size ranks x --num-workers workers x --batch-size). "
    "mds and litdata store every draw by value: repeated documents cost disk again."
)
EXAMPLE = """example:
  clusterclip export --workdir work --format cluster-folders --out clusters/
  clusterclip export --workdir work --format ordered-jsonl --out ordered/ --shard-size 50000
  clusterclip export --workdir work --format megatron --out index/
  clusterclip export --workdir work --format mds --out mds/
  clusterclip export --workdir work --format litdata --out lit/ --world-size 8 --num-workers 4 --batch-size 16
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


def _mds(workdir: str, out: str, shard_size: int | None) -> Any:
    if shard_size is not None:
        raise ClusterClipError("--shard-size does not apply to --format mds. Drop it.")
    from clusterclip.adapters.mds import export_mds

    return export_mds(workdir, out)


def _litdata(workdir: str, out: str, shard_size: int | None, **topology: int) -> Any:
    if shard_size is not None:
        raise ClusterClipError("--shard-size does not apply to --format litdata. Drop it.")
    from clusterclip.adapters.litdata_export import export_litdata

    return export_litdata(workdir, out, **topology)


#: Format name -> function(workdir, out, shard_size or None) -> summary.
FORMATS: dict[str, Callable[..., Any]] = {
    "cluster-folders": _cluster_folders,
    "ordered-jsonl": _ordered_jsonl,
    "megatron": _megatron,
    "mds": _mds,
    "litdata": _litdata,
}
#: The trainer's topology, which only the litdata layout depends on.
TOPOLOGY = ("world_size", "num_workers", "batch_size")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", required=True, help="work directory to export")
    parser.add_argument("--format", required=True, choices=sorted(FORMATS), help="output layout")
    parser.add_argument("--out", required=True, help="output folder (must not exist or be empty)")
    parser.add_argument(
        "--shard-size", type=int, default=None, help="documents per output file (jsonl formats)"
    )
    for name, meaning in (
        ("world_size", "ranks that will read the dataset (litdata; default 1)"),
        ("num_workers", "DataLoader workers per rank (litdata; default 0)"),
        ("batch_size", "samples per batch on each rank (litdata; default 1)"),
    ):
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=int, default=None, help=meaning)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    topology = {name: getattr(args, name) for name in TOPOLOGY if getattr(args, name) is not None}
    if topology and args.format != "litdata":
        flags = ", ".join("--" + name.replace("_", "-") for name in topology)
        raise ClusterClipError(f"{flags} apply only to --format litdata. Drop them.")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ClusterClipError(f"--out {args.out} is a file; pass a folder (created if missing).")
    summary = FORMATS[args.format](args.workdir, args.out, args.shard_size, **topology)
    if isinstance(summary, dict):
        details = ", ".join(
            f"{key} {value}" for key, value in summary.items() if key not in ("out", "topology")
        )
        print(f"export {args.format}: {details} -> {args.out}")
    else:
        print(f"export {args.format}: wrote {args.out}")
    return 0
