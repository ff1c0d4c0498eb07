"""Flags generated from the stages' option classes, shared by every sub-command.

A flag's ``dest`` is ``<section>__<field>`` so that :func:`overrides_from_args`
can put each value back into its section; :func:`flag_map` lists the flags of a
parser for :func:`clusterclip.errors.spelled_as_flags`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterclip.options import add_flags, from_args

__all__ = [
    "add_engine_flags",
    "add_former_spellings",
    "add_renamed",
    "add_section",
    "engine_from_args",
    "flag_map",
    "section_values",
    "typed_flag",
]


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


def add_engine_flags(
    parser: argparse.ArgumentParser, what: str, *, exclude: tuple[str, ...] = ()
) -> None:
    """``--engine`` and the Ray settings (one spelling in embed, cluster and run).

    ``exclude`` leaves out Ray settings whose flag the command spells otherwise
    (``export`` still reads ``--num-workers`` as its former ``--loader-workers``).
    """
    add_section(parser, "", "engine", exclude=("seed",))
    add_section(
        parser, "ray", f"Ray engine (--engine ray: {what}; see docs/scaling.md)", exclude=exclude
    )


def engine_from_args(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """``(engine, engine_options)`` from the engine flags, checked together."""
    from clusterclip.config import RunConfig
    from clusterclip.engines import RayOptions

    engine = section_values(args, "").get("engine", RunConfig.engine)
    ray = RayOptions(**section_values(args, "ray"))
    RunConfig(engine=engine, ray=ray)  # refuses Ray settings without --engine ray
    return engine, ray.engine_options()


class _OldSpelling(argparse.Action):
    """A flag's former name: still accepted, with a note on stderr naming the new one."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        print(
            f"{parser.prog}: note: {option_string} is deprecated; use {self.new} (same meaning)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)
        typed = dict(getattr(namespace, "_typed", {}))
        typed[self.dest] = option_string  # errors then name the flag the user typed
        namespace._typed = typed


def typed_flag(args: argparse.Namespace, dest: str, flag: str) -> str:
    """``flag``, or the old spelling the user typed for it (see :func:`add_renamed`)."""
    return getattr(args, "_typed", {}).get(dest, flag)


def add_renamed(parser: Any, flag: str, old: str, **kwargs: Any) -> None:
    """Add ``flag`` and its former spelling ``old`` (hidden from ``--help``, still accepted).

    For flags renamed so that one spelling means one thing across commands
    (``--top`` was keywords in ``inspect`` and groups in ``dedup``).

    >>> parser = argparse.ArgumentParser(prog="clusterclip inspect")
    >>> add_renamed(parser, "--keywords", "--top", type=int, default=10)
    >>> parser.parse_args(["--keywords", "3"]).keywords
    3
    """
    action = parser.add_argument(flag, **kwargs)
    parser.add_argument(
        old, dest=action.dest, type=kwargs.get("type"), metavar=action.metavar,
        default=argparse.SUPPRESS, help=argparse.SUPPRESS, action=_OldSpelling, new=flag,
    )  # fmt: skip


def add_former_spellings(group: Any, cls: Any) -> None:
    """The former flags of ``cls``'s fields (its ``renamed``: ``{field: old flag}``), hidden.

    Call after :func:`clusterclip.options.add_flags` put the current flags in ``group``;
    the old spelling takes the same values, says on stderr which flag replaces it, and
    errors then name the flag the user typed (:func:`typed_flag`).
    """
    current = {action.dest: action for action in group._group_actions}
    for name, old in getattr(cls, "renamed", {}).items():
        action = current[name]
        group.add_argument(
            old, dest=action.dest, type=action.type, metavar=action.metavar,
            default=argparse.SUPPRESS, help=argparse.SUPPRESS, action=_OldSpelling,
            new=action.option_strings[0],
        )  # fmt: skip


def flag_map(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``{keyword: flag}`` of every option of ``parser`` (for errors that name flags)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, _OldSpelling):
            continue
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.dest not in ("help", "version"):
            found[action.dest.rpartition("__")[2]] = longs[0]
    return found
