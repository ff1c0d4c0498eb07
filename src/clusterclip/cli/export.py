"""``clusterclip export``: write a clustered work directory in another tool's layout.

The layouts, their settings and their checks are the exporters registered in
:data:`clusterclip.adapters.exporters.EXPORTERS`; this command lists them, adds
the flags of their options classes, and refuses a flag the chosen ``--format``
does not take.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from clusterclip.adapters.exporters import EXPORTERS, formats_on, formats_using
from clusterclip.errors import ClusterClipError

HELP = "export the schedule for a trainer: jsonl, token files, Megatron, MDS, LitData, folders"


def _description() -> str:
    lines = ["Export a work directory. Formats:"]
    for name, exporter in EXPORTERS.items():
        wrapped = textwrap.wrap(exporter.help, width=88 - 19)
        lines.append(f"  {name:<17}{wrapped[0]}")
        lines.extend(f"{'':19}{line}" for line in wrapped[1:])
    return "\n".join(lines) + (
        "\nToken formats need --tokenizer (recorded with its vocabulary size and end-of-document\n"
        "token in the export's JSON sidecar). mds and litdata store every draw by value:\n"
        "repeated documents cost disk again (the cost is printed first). See docs/adapters.md."
    )


DESCRIPTION = _description()
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


def _option_classes() -> list[type]:
    """Every exporter's options class, once each, in the registry's order."""
    return list(dict.fromkeys(exporter.options for exporter in EXPORTERS.values()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from clusterclip.cli.flags import add_engine_flags, add_former_spellings
    from clusterclip.options import add_flags

    parser.add_argument("--workdir", required=True, help="work directory to export")
    parser.add_argument("--format", required=True, choices=sorted(EXPORTERS), help="output layout")
    parser.add_argument("--out", required=True, help="output folder (must not exist or be empty)")
    for cls in _option_classes():
        if getattr(cls, "title", ""):
            group = parser.add_argument_group(f"{cls.title} ({', '.join(formats_using(cls))})")
            add_flags(group, cls)
            add_former_spellings(group, cls)
    # --num-workers stays the former spelling of --loader-workers here: Ray takes every CPU
    add_engine_flags(
        parser, f"reading, tokenising and writing the documents ({', '.join(formats_on('ray'))})",
        exclude=("num_workers",),
    )  # fmt: skip


def _refuse_other_formats_flags(args: argparse.Namespace) -> None:
    """Refuse flags that only other formats take, naming them as typed."""
    from clusterclip.cli.flags import typed_flag
    from clusterclip.options import flag_names, from_args

    chosen = EXPORTERS[args.format].options
    for cls in _option_classes():
        given = list(from_args(args, cls)) if cls is not chosen else []
        if given:
            flags = ", ".join(typed_flag(args, name, flag_names(cls)[name]) for name in given)
            verb, it = ("does", "it") if len(given) == 1 else ("do", "them")
            raise ClusterClipError(
                f"{flags} {verb} not apply to --format {args.format} (only to "
                f"{', '.join(formats_using(cls))}). Drop {it}."
            )


def run(args: argparse.Namespace) -> int:
    from clusterclip.cli.flags import engine_from_args
    from clusterclip.io import WorkDir
    from clusterclip.options import from_args

    _refuse_other_formats_flags(args)
    engine, engine_options = engine_from_args(args)
    exporter = EXPORTERS[args.format]
    options: Any = exporter.options(**from_args(args, exporter.options))
    exporter.check(args.out, options)
    summary = exporter.export(
        WorkDir(args.workdir), args.out, options, engine=engine, engine_options=engine_options
    )
    print(summary.line())
    return 0
