"""Flags generated from the stages' option classes, shared by every sub-command.

A flag's ``dest`` is ``<section>__<field>`` so that :func:`overrides_from_args`
can put each value back into its section; :func:`flag_map` lists the flags of a
parser for :func:`clusterclip.errors.spelled_as_flags`.
"""

from __future__ import annotations

import argparse
from typing import Any

from clusterclip.options import add_flags, from_args

__all__ = ["add_engine_flags", "add_section", "engine_from_args", "flag_map", "section_values"]


def add_section(
    parser: argparse.ArgumentParser,
    section: str,
    title: str,
    *,
    exclude: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
) -> None:
    """Flags of one section of :data:`clusterclip.config.SECTIONS` in an argument group."""
    from clusterclip.config import SECTIONS

    group = parser.add_argument_group(title)
    add_flags(group, SECTIONS[section], exclude=exclude, required=required, prefix=f"{section}__")


def section_values(args: argparse.Namespace, section: str) -> dict[str, Any]:
    """``{field: value}`` of one section's flags given on the command line."""
    from clusterclip.config import SECTIONS

    return from_args(args, SECTIONS[section], prefix=f"{section}__")


def add_engine_flags(parser: argparse.ArgumentParser, what: str) -> None:
    """``--engine`` and the Ray settings (one spelling in embed, cluster and run)."""
    add_section(parser, "", "engine", exclude=("seed",))
    add_section(parser, "ray", f"Ray engine (--engine ray: {what}; see docs/scaling.md)")


def engine_from_args(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """``(engine, engine_options)`` from the engine flags, checked together."""
    from clusterclip.config import RunConfig
    from clusterclip.engines import RayOptions

    engine = section_values(args, "").get("engine", RunConfig.engine)
    ray = RayOptions(**section_values(args, "ray"))
    RunConfig(engine=engine, ray=ray)  # refuses Ray settings without --engine ray
    return engine, ray.engine_options()


def flag_map(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``{keyword: flag}`` of every option of ``parser`` (for errors that name flags)."""
    found = {}
    for action in parser._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.dest not in ("help", "version"):
            found[action.dest.rpartition("__")[2]] = longs[0]
    return found
