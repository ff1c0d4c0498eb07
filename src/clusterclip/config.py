"""Run configuration: the stages' option classes grouped, TOML files, command-line overrides.

Each stage declares its options once, as a frozen dataclass
(:class:`~clusterclip.embed.options.EmbedOptions`,
:class:`~clusterclip.cluster.options.ClusterOptions`,
:class:`~clusterclip.dedup.options.DedupOptions`,
:class:`~clusterclip.schedule.options.ScheduleOptions`,
:class:`~clusterclip.report.options.ReportOptions`); :class:`RunConfig` groups
them with the run-wide settings (:class:`RunOptions`, :class:`~clusterclip.engines.RayOptions`).
The TOML schema, the flags of every sub-command and ``docs/configuration.md``
come from those classes (:mod:`clusterclip.options`). A config file looks like::

    inputs = ["corpus/*.jsonl.gz"]
    workdir = "work"
    seed = 0

    [embed]
    encoder = "sentence-transformers"
    text_field = "text"

    [cluster]
    n_clusters = 200

    [schedule]
    policy = "clusterclip"
    max_repeats = 4
    epochs = 3

Unknown keys are errors that name the key and list the valid ones. Options
given on the command line override the file; a budget flag (``--num-samples``,
``--num-tokens``, ``--epochs``) replaces whichever budget the file set.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterclip.cluster.options import ClusterOptions
from clusterclip.dedup.options import DedupOptions
from clusterclip.embed.options import EmbedOptions
from clusterclip.engines.options import RayOptions
from clusterclip.errors import ClusterClipError, hint, invalid, spell
from clusterclip.options import check_fields, from_mapping, option, options_table
from clusterclip.report.options import ReportOptions
from clusterclip.schedule.options import ScheduleOptions

__all__ = [
    "SECTIONS",
    "ClusterOptions",
    "DedupOptions",
    "EmbedOptions",
    "RayOptions",
    "ReportOptions",
    "RunConfig",
    "RunOptions",
    "ScheduleOptions",
    "apply_overrides",
    "config_from_mapping",
    "configuration_table",
    "load_config",
]

BUDGET_KEYS = ("num_samples", "num_tokens", "epochs")
#: Stage options that the run-wide ``seed`` sets (one ``--seed`` for every stage).
SEEDED = ("embed", "cluster", "schedule")


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Run-wide settings of ``clusterclip run`` (TOML top level).

    >>> RunOptions().engine
    'local'
    """

    seed: int = option(
        0, "Seed of every random choice (tfidf fit, k-means, schedule).", kind="seed"
    )
    engine: str = option(
        "local",
        "Where the per-document steps run (embed, the cluster fit and assignment, dedup, the "
        "schedule's build, the report's keywords, token exports): in this process, or on a "
        "Ray cluster.",
        choices=("local", "ray"),
    )
    portable: bool = option(
        False,
        "Results that do not depend on the CPU's bfloat16/AMX support: float32 encoding "
        "in torch (embed.precision, embed.runtime) and the exact torch-fp32 k-means backend (cluster.backend) "
        "instead of what `auto` picks for this machine.",
        kind="bool",
    )

    def __post_init__(self) -> None:
        check_fields(self)


#: What ``portable = true`` fixes: (section, option, value `auto` becomes, values allowed).
PORTABLE = (
    ("embed", "precision", "float32", ("auto", "float32")),
    ("embed", "runtime", "torch", ("auto", "torch")),
    ("cluster", "backend", "torch-fp32", ("auto", "torch-fp32", "numpy", "faiss")),
)


#: TOML section -> options class ("" = top level).
SECTIONS: dict[str, Any] = {
    "": RunOptions,
    "embed": EmbedOptions,
    "cluster": ClusterOptions,
    "dedup": DedupOptions,
    "schedule": ScheduleOptions,
    "report": ReportOptions,
    "ray": RayOptions,
}


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Every option of a pipeline run, grouped by stage.

    >>> config = RunConfig(cluster=ClusterOptions(n_clusters=50),
    ...                    schedule=ScheduleOptions(max_repeats=2, epochs=3.0))
    >>> config.schedule.policy
    'clusterclip'
    """

    inputs: list[str] = field(default_factory=list)
    workdir: str | None = None
    seed: int = RunOptions.seed
    engine: str = RunOptions.engine
    portable: bool = RunOptions.portable
    embed: EmbedOptions = field(default_factory=EmbedOptions)
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    dedup: DedupOptions = field(default_factory=DedupOptions)
    schedule: ScheduleOptions = field(default_factory=ScheduleOptions)
    report: ReportOptions = field(default_factory=ReportOptions)
    ray: RayOptions = field(default_factory=RayOptions)

    def __post_init__(self) -> None:
        RunOptions(seed=self.seed, engine=self.engine, portable=self.portable)  # validates all
        for section, name, _, allowed in PORTABLE if self.portable else ():
            value = getattr(getattr(self, section), name)
            if value not in allowed:
                raise invalid(
                    f"{section}.{name}",
                    f"one of {', '.join(allowed)} with portable = true (its choice depends on "
                    "the CPU)",
                    value,
                    f"Drop {hint(name, value)}, or drop {hint('portable', True)}.",
                )
        given = self.ray.engine_options()
        if self.engine != "ray" and given:
            names = ", ".join(f"`{spell(name)}`" for name in given)
            raise ClusterClipError(
                f"{names} apply to the Ray engine only. Add {hint('engine', 'ray')}, or drop them."
            )

    def stage_options(self, section: str) -> Any:
        """The options of one stage, with the run-wide seed (and ``portable``) applied."""
        options = getattr(self, section)
        for where, name, value, _ in PORTABLE if self.portable else ():
            if where == section and getattr(options, name) == "auto":
                if value == "torch-fp32" and importlib.util.find_spec("torch") is None:
                    value = "numpy"  # the same exact fp32 product, without torch
                options = dataclasses.replace(options, **{name: value})
        return dataclasses.replace(options, seed=self.seed) if section in SEEDED else options

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict (the TOML layout)."""
        return dataclasses.asdict(self)


def _top_level(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Top-level keys: inputs, workdir, seed, engine, portable, report (bool)."""
    top: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("inputs", "workdir"):
            if key == "inputs" and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            ):
                raise invalid("inputs", f"a list of paths{where}", value)
            if key == "workdir" and not isinstance(value, str):
                raise invalid("workdir", f"a path{where}", value)
            top[key] = value
        elif key in ("seed", "engine", "portable"):
            top[key] = getattr(from_mapping(RunOptions, {key: value}, where=where), key)
        else:
            valid = ["inputs", "workdir", "seed", "engine", "portable"] + [
                f"[{s}]" for s in SECTIONS if s
            ]
            raise ClusterClipError(
                f"unknown option `{key}`{where}. Valid keys at the top level: {', '.join(valid)}."
            )
    return top


def config_from_mapping(data: dict[str, Any], *, where: str = "") -> RunConfig:
    """Build a :class:`RunConfig` from the nested TOML layout, validating every key.

    >>> config_from_mapping({"cluster": {"n_clusters": 8}}).cluster.n_clusters
    8
    """
    plain = {k: v for k, v in data.items() if k not in SECTIONS or not k}
    sections: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        if not section or section not in data:
            continue
        table = data[section]
        if not isinstance(table, dict):
            raise invalid(section, f"a table ([{section}]){where}", table)
        table = dict(table)
        if section in SEEDED and "seed" in table:
            raise ClusterClipError(
                f"unknown option `{section}.seed`{where}: the seed is set once, at the top "
                "level (`seed = 0`), for every stage."
            )
        hidden = ("seed",) if section in SEEDED else ()
        sections[section] = from_mapping(cls, table, section=section, where=where, hidden=hidden)
    return RunConfig(**_top_level(plain, where), **sections)


def load_config(path: str | os.PathLike[str]) -> RunConfig:
    """Read a TOML config file into a :class:`RunConfig`.

    Relative ``inputs`` and ``workdir`` are resolved against the file's folder,
    so a config works from any current directory.

    >>> load_config("run.toml").cluster.n_clusters  # doctest: +SKIP
    200
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from clusterclip.errors import require_extra

        tomllib = require_extra("tomli", "io")
    path = Path(path)
    if not path.is_file():
        raise invalid("config", "an existing TOML file", str(path))
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ClusterClipError(f"{path}: not valid TOML ({error}).") from error
    config = config_from_mapping(data, where=f" in {path}")
    base = path.resolve().parent
    changes: dict[str, Any] = {}
    if config.inputs:
        changes["inputs"] = [_anchor(p, base) for p in config.inputs]
    if config.workdir:
        changes["workdir"] = _anchor(config.workdir, base)
    return dataclasses.replace(config, **changes)


def _anchor(path: str, base: Path) -> str:
    return path if Path(path).is_absolute() else str(base / path)


def apply_overrides(config: RunConfig, overrides: dict[str, dict[str, Any]]) -> RunConfig:
    """Return ``config`` with ``{section: {name: value}}`` overrides (``""``: top level).

    A budget override clears the other budget keys (the command line wins).

    >>> c = apply_overrides(RunConfig(), {"schedule": {"num_samples": 1000}, "": {"seed": 3}})
    >>> (c.schedule.num_samples, c.seed)
    (1000, 3)
    """
    changes: dict[str, Any] = dict(overrides.get("", {}))
    for section, values in overrides.items():
        if not section or not values:
            continue
        values = dict(values)
        if section == "schedule" and any(k in values for k in BUDGET_KEYS):
            for key in BUDGET_KEYS:
                values.setdefault(key, None)
        changes[section] = dataclasses.replace(getattr(config, section), **values)
    return dataclasses.replace(config, **changes)


def configuration_table() -> str:
    """The Markdown table of every option (``docs/configuration.md`` is made from it)."""
    return options_table(SECTIONS, exclude={f"{section}.seed" for section in SEEDED})
