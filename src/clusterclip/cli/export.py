"""``clusterclip export``: write a clustered work directory in another tool's layout."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from clusterclip.errors import ClusterClipError

HELP = "export the schedule for a trainer: jsonl, token files, Megatron, MDS, LitData, folders"
DESCRIPTION = (
    "Export a work directory. Formats:\n"
    "  ordered-jsonl    the documents in schedule order, sharded (original records)\n"
    "  flat-tokens      one token array in schedule order (nanoGPT / OLMo style) + offsets\n"
    "  megatron         a Megatron-Core indexed dataset (.bin/.idx) whose sequences are the\n"
    "                   schedule; repeated documents share their bytes\n"
    "  sample-index     the schedule as a flat int64 .npy of document indices (what\n"
    "                   `--format megatron` wrote before it wrote an indexed dataset)\n"
    "  mds              a MosaicML streaming dataset in schedule order\n"
    "  litdata          a LitData optimized dataset laid out for --world-size ranks x\n"
    "                   --loader-workers DataLoader workers x --loader-batch-size\n"
    "  cluster-folders  the ClusterClip authors' layout: cluster_<k>/data_<j>.jsonl\n"
    "Token formats need --tokenizer (recorded with its vocabulary size and end-of-document\n"
    "token in the export's JSON sidecar). mds and litdata store every draw by value:\n"
    "repeated documents cost disk again (the cost is printed first). See docs/adapters.md."
)
EXAMPLE = """example:
  clusterclip export --workdir work --format ordered-jsonl --out ordered/ --shard-size 50000
  clusterclip export --workdir work --format flat-tokens --out flat/ --tokenizer gpt2
  clusterclip export --workdir work --format megatron --out megatron/ --tokenizer ./tokenizer/
  clusterclip export --workdir work --format sample-index --out index/
  clusterclip export --workdir work --format mds --out mds/
  clusterclip export --workdir work --format litdata --out lit/ --world-size 8 \\
      --loader-workers 4 --loader-batch-size 16
  clusterclip export --workdir work --format cluster-folders --out clusters/
"""

TOKEN_FORMATS = ("flat-tokens", "megatron")


def _cluster_folders(workdir: str, out: str, shard_size: int | None, tokens: Any) -> Any:
    from clusterclip.adapters.folders import export_cluster_folders

    kwargs = {} if shard_size is None else {"shard_size": shard_size}
    return export_cluster_folders(workdir, out, **kwargs)


def _ordered_jsonl(workdir: str, out: str, shard_size: int | None, tokens: Any) -> Any:
    from clusterclip.adapters import export as module

    kwargs = {} if shard_size is None else {"shard_size": shard_size}
    return module.export_ordered_jsonl(workdir, out, **kwargs)


def _sample_index(workdir: str, out: str, shard_size: int | None, tokens: Any) -> Any:
    from clusterclip.adapters.export import export_sample_index

    return export_sample_index(workdir, out)


def _flat_tokens(workdir: str, out: str, shard_size: int | None, tokens: Any) -> Any:
    from clusterclip.adapters.flat import export_flat_tokens

    return export_flat_tokens(
        workdir, out, tokenizer=tokens.tokenizer, eos_token=tokens.eos_token,
        append_eos=tokens.append_eos,
    )  # fmt: skip


def _megatron(workdir: str, out: str, shard_size: int | None, tokens: Any) -> Any:
    from clusterclip.adapters.megatron import export_megatron

    return export_megatron(
        workdir, out, tokenizer=tokens.tokenizer, eos_token=tokens.eos_token,
        append_eos=tokens.append_eos,
    )  # fmt: skip


def _mds(workdir: str, out: str, shard_size: int | None, tokens: Any) -> Any:
    from clusterclip.adapters.mds import export_mds

    return export_mds(workdir, out)


def _litdata(workdir: str, out: str, shard_size: int | None, tokens: Any, **topology: int) -> Any:
    from clusterclip.adapters.litdata_export import export_litdata

    return export_litdata(workdir, out, **topology)


#: Format name -> function(workdir, out, shard_size or None, TokenOptions) -> summary.
FORMATS: dict[str, Callable[..., Any]] = {
    "cluster-folders": _cluster_folders,
    "ordered-jsonl": _ordered_jsonl,
    "flat-tokens": _flat_tokens,
    "megatron": _megatron,
    "sample-index": _sample_index,
    "mds": _mds,
    "litdata": _litdata,
}
SHARDED = ("cluster-folders", "ordered-jsonl")
#: The trainer's topology, which only the litdata layout depends on:
#: setting -> (flag, keyword of export_litdata, help). Not --num-workers / --batch-size:
#: those are the Ray actors and the encoder's batch in the other commands (the old
#: spellings still work here, with a note).
TOPOLOGY = {
    "world_size": ("--world-size", "world_size", "ranks that will read the dataset (default 1)"),
    "loader_workers": (
        "--loader-workers",
        "num_workers",
        "DataLoader workers per rank of the training loop (default 0; formerly --num-workers)",
    ),
    "loader_batch_size": (
        "--loader-batch-size",
        "batch_size",
        "samples per batch on each rank of the training loop (default 1; formerly --batch-size)",
    ),
}
_OLD_TOPOLOGY_FLAGS = {"loader_workers": "--num-workers", "loader_batch_size": "--batch-size"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.adapters.options import TokenOptions
    from clusterclip.cli.flags import add_renamed
    from clusterclip.options import add_flags, parse_count

    parser.add_argument("--workdir", required=True, help="work directory to export")
    parser.add_argument("--format", required=True, choices=sorted(FORMATS), help="output layout")
    parser.add_argument("--out", required=True, help="output folder (must not exist or be empty)")
    parser.add_argument(
        "--shard-size",
        type=parse_count,
        default=None,
        help="documents per output file (jsonl formats)",
    )
    add_flags(parser.add_argument_group("tokens (flat-tokens, megatron)"), TokenOptions)
    group = parser.add_argument_group("trainer topology (litdata)")
    for name, (flag, _keyword, meaning) in TOPOLOGY.items():
        kwargs = {"dest": name, "type": parse_count, "default": None, "help": meaning}
        if name in _OLD_TOPOLOGY_FLAGS:
            add_renamed(group, flag, _OLD_TOPOLOGY_FLAGS[name], metavar="N", **kwargs)
        else:
            group.add_argument(flag, metavar="N", **kwargs)


def _token_options(args: argparse.Namespace) -> Any:
    from clusterclip.adapters.options import TokenOptions
    from clusterclip.options import flag_names, from_args

    given = from_args(args, TokenOptions)
    if args.format not in TOKEN_FORMATS:
        if given:
            flags = ", ".join(flag_names(TokenOptions)[name] for name in given)
            raise ClusterClipError(
                f"{flags}: only for the token formats ({', '.join(TOKEN_FORMATS)}), not "
                f"--format {args.format}. Drop {'it' if len(given) == 1 else 'them'}."
            )
        return None
    options = TokenOptions(**given)
    if options.tokenizer is None:
        what = {"megatron": "a Megatron-Core indexed dataset", "flat-tokens": "a token array"}
        before = (
            " The document-index .npy it wrote before is now --format sample-index."
            if args.format == "megatron"
            else ""
        )
        raise ClusterClipError(
            f"--format {args.format} writes {what[args.format]} and needs --tokenizer "
            "NAME_OR_PATH: a tokenizer.json, a Hugging Face tokenizer directory, or a hub name "
            f"already in the local cache.{before}"
        )
    return options


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import typed_flag

    if args.shard_size is not None and args.format not in SHARDED:
        raise ClusterClipError(
            f"--shard-size does not apply to --format {args.format} (only to "
            f"{', '.join(SHARDED)}). Drop it."
        )
    given = [name for name in TOPOLOGY if getattr(args, name) is not None]
    topology = {TOPOLOGY[name][1]: getattr(args, name) for name in given}
    if topology and args.format != "litdata":
        flags = ", ".join(typed_flag(args, name, TOPOLOGY[name][0]) for name in given)
        raise ClusterClipError(f"{flags} apply only to --format litdata. Drop them.")
    if not (args.format == "sample-index" and args.out.endswith(".npy")):
        from clusterclip.adapters.output import check_export_folder

        check_export_folder(args.out)  # a file or a folder with files: refused before any work
    tokens = _token_options(args)
    summary = FORMATS[args.format](args.workdir, args.out, args.shard_size, tokens, **topology)
    if isinstance(summary, dict):
        details = ", ".join(
            f"{key} {value:,}" if isinstance(value, int) else f"{key} {value}"
            for key, value in summary.items()
            if key not in ("out", "prefix", "topology")
        )
        print(f"export {args.format}: {details} -> {args.out}")
    else:
        print(f"export {args.format}: wrote {args.out}")
    return 0
