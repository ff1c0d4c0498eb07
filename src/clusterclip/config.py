"""Run configuration: one registry of options, TOML files, command-line overrides.

Every option of ``clusterclip run`` is declared once in :data:`OPTIONS`; the
dataclasses, the TOML validation, the command-line flags and the table in
``docs/configuration.md`` all come from it. A config file looks like::

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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError, invalid

__all__ = [
    "OPTIONS",
    "ClusterOptions",
    "EmbedOptions",
    "Option",
    "ReportOptions",
    "RunConfig",
    "ScheduleOptions",
    "apply_overrides",
    "config_from_mapping",
    "load_config",
    "options_table",
]

BUDGET_KEYS = ("num_samples", "num_tokens", "epochs")


@dataclass(frozen=True)
class Option:
    """One configurable option: where it lives, its type, default and help."""

    section: str  # "" for top-level keys, else "embed" / "cluster" / "schedule" / "report"
    name: str
    kind: str  # "str", "int", "float", "bool", "int_or_none", "list_str", "list_float", "table"
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    cli: bool = True  # exposed as a command-line flag

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}" if self.section else self.name

    @property
    def flag(self) -> str:
        base = self.name.replace("_", "-")
        if self.kind == "table":
            return f"--{base.removesuffix('s')}"
        if self.kind == "bool" and self.default is True:
            return f"--no-{base}" if self.section != "report" else "--no-report"
        return f"--{base}"


#: Every option, in documentation order.
OPTIONS: tuple[Option, ...] = (
    Option(
        "",
        "inputs",
        "list_str",
        [],
        "Corpus files, directories or globs (.jsonl, "
        ".jsonl.gz, .jsonl.zst, .parquet). Positional on the command line.",
        cli=False,
    ),
    Option("", "workdir", "str", None, "Work directory holding every stage's outputs.", cli=False),
    Option("", "seed", "int", 0, "Seed of every random choice (k-means init, schedule)."),
    Option(
        "",
        "engine",
        "str",
        "local",
        "Where embed and cluster run: in-process, or on a Ray cluster.",
        choices=("local", "ray"),
    ),
    # embed
    Option(
        "embed",
        "encoder",
        "str",
        "sentence-transformers",
        "Text encoder family.",
        choices=("sentence-transformers", "static", "tfidf"),
    ),
    Option(
        "embed",
        "model",
        "str",
        None,
        "Model name or path (default: all-MiniLM-L6-v2 for sentence-transformers).",
    ),
    Option(
        "embed",
        "text_field",
        "str",
        None,
        "Record field holding the text (default: `content`, else `text`).",
    ),
    Option(
        "embed", "id_field", "str", None, "Record field holding the id (default: `id` if present)."
    ),
    Option("embed", "batch_size", "int", None, "Encoder batch size (default: encoder's)."),
    Option(
        "embed",
        "max_length",
        "int",
        None,
        "Truncate texts to this many tokens (default: encoder's).",
    ),
    Option(
        "embed",
        "device",
        "str",
        "auto",
        "`auto` (CUDA when available), `cpu`, `cuda`, `cuda:1`, ...",
    ),
    Option(
        "embed",
        "precision",
        "str",
        "auto",
        "Transformer compute precision.",
        choices=("auto", "float32", "bfloat16", "float16"),
    ),
    Option(
        "embed",
        "strict",
        "bool",
        False,
        "Fail at the first bad record instead of listing it in rejects.jsonl.",
    ),
    Option(
        "embed",
        "shard_size",
        "int",
        None,
        "Documents per embedding shard (default: embed stage's, 20000).",
    ),
    Option(
        "embed",
        "trust_remote_code",
        "bool",
        False,
        "Allow models that ship their own code (e.g. jina-embeddings-v2).",
    ),
    Option(
        "embed",
        "engine_options",
        "table",
        None,
        "Settings of the Ray engine (`address`, `num_workers`, `num_gpus_per_worker`, "
        "`num_cpus_per_worker`, `num_cpus`, `max_in_flight`), e.g. TOML "
        '`{address = "auto", num_gpus_per_worker = 1}`; command line: repeat '
        "`--engine-option KEY=VALUE`.",
    ),
    # cluster
    Option("cluster", "n_clusters", "int", None, "Number of k-means clusters K (required)."),
    Option("cluster", "n_iter", "int", 20, "k-means iterations."),
    Option(
        "cluster",
        "max_points_per_centroid",
        "int",
        256,
        "Training subsample: at most this many points per centroid.",
    ),
    Option(
        "cluster", "init", "str", "k-means++", "Centroid initialisation (`k-means++` or `random`)."
    ),
    Option(
        "cluster",
        "backend",
        "str",
        "auto",
        "k-means implementation (`auto` picks faiss when installed).",
    ),
    # schedule
    Option(
        "schedule",
        "policy",
        "str",
        "clusterclip",
        "Sampling policy.",
        choices=("clusterclip", "uniform", "temperature", "random"),
    ),
    Option(
        "schedule",
        "max_repeats",
        "int_or_none",
        4,
        "Repetition cap R per document (`none`: no cap).",
    ),
    Option("schedule", "num_samples", "int", None, "Budget: schedule length in documents."),
    Option(
        "schedule", "num_tokens", "int", None, "Budget: tokens (uses the encoder's token counts)."
    ),
    Option(
        "schedule",
        "epochs",
        "float",
        None,
        "Budget: E x usable documents (default 1 when no budget is given).",
    ),
    Option("schedule", "alpha", "float", None, "Temperature policy exponent: weights |C_k|^alpha."),
    Option(
        "schedule",
        "order",
        "str",
        "online",
        "`online`: the paper's clip (small "
        "clusters early); `planned`: per-cluster draws planned, spread evenly.",
        choices=("online", "planned"),
    ),
    Option(
        "schedule",
        "on_exhausted",
        "str",
        "stop",
        "When every cluster is clipped before the budget: stop early, continue randomly, or fail.",
        choices=("stop", "random", "error"),
    ),
    Option(
        "schedule",
        "cluster_weights",
        "list_float",
        None,
        "Custom weight per cluster (TOML list only).",
        cli=False,
    ),
    # report
    Option("report", "enabled", "bool", True, "Write report.html / report.json / PNGs at the end."),
    Option("report", "n_slices", "int", 50, "Slices of training in the dynamics figure."),
    Option("report", "n_keywords", "int", 8, "Keywords per cluster in the report table."),
)

_BY_KEY = {option.key: option for option in OPTIONS}
SECTIONS = ("embed", "cluster", "schedule", "report")


def _fields(section: str) -> list[Any]:
    return [
        field(default_factory=lambda o=o: o.default)
        if isinstance(o.default, (list, dict))
        else field(default=o.default)
        for o in OPTIONS
        if o.section == section
    ]


def _section_class(name: str, section: str, doc: str) -> type:
    spec = [
        (o.name, Any, f)
        for o, f in zip([o for o in OPTIONS if o.section == section], _fields(section), strict=True)
    ]
    cls = dataclasses.make_dataclass(name, spec, frozen=True, kw_only=True)
    cls.__module__ = __name__
    cls.__doc__ = doc
    return cls


EmbedOptions = _section_class(
    "EmbedOptions", "embed", "Options of the embed stage (see ``clusterclip.embed.embed``)."
)
ClusterOptions = _section_class(
    "ClusterOptions", "cluster", "Options of the cluster stage (see ``clusterclip.cluster``)."
)
ScheduleOptions = _section_class(
    "ScheduleOptions", "schedule", "Options of the schedule stage (see ``build_schedule``)."
)
ReportOptions = _section_class("ReportOptions", "report", "Options of the report stage.")


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
    seed: int = 0
    engine: str = "local"
    embed: Any = field(default_factory=lambda: EmbedOptions())
    cluster: Any = field(default_factory=lambda: ClusterOptions())
    schedule: Any = field(default_factory=lambda: ScheduleOptions())
    report: Any = field(default_factory=lambda: ReportOptions())

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict (the TOML layout)."""
        return dataclasses.asdict(self)


def _check_value(option: Option, value: Any, where: str) -> Any:
    """Validate one value's type (from TOML or Python); return it normalised."""
    name = option.key
    if value is None and option.default is None:
        return None
    kind = option.kind
    if kind == "int_or_none":
        if value is None or (isinstance(value, str) and value.lower() in ("none", "inf")):
            return None
        kind = "int"
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "list_str": isinstance(value, (list, tuple))
        and all(isinstance(v, (str, os.PathLike)) for v in value),
        "list_float": isinstance(value, (list, tuple))
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
        "table": isinstance(value, dict),
    }[kind]
    if not ok:
        raise invalid(
            name,
            f"of type {option.kind.replace('_', ' ')}{where}",
            value,
            f"Default: {option.default!r}.",
        )
    if option.choices and value not in option.choices:
        raise invalid(name, f"one of {', '.join(option.choices)}{where}", value)
    if kind == "float":
        return float(value)
    if kind == "list_str":
        return [os.fspath(v) for v in value]
    if kind == "list_float":
        return [float(v) for v in value]
    return value


def _unknown_key_error(key: str, section: str, where: str) -> ClusterClipError:
    if section:
        valid = [o.name for o in OPTIONS if o.section == section]
        scope = f"[{section}]"
    else:
        valid = [o.name for o in OPTIONS if not o.section] + [f"[{s}]" for s in SECTIONS]
        scope = "the top level"
    return ClusterClipError(
        f"unknown option `{key}`{where}. Valid keys in {scope}: {', '.join(valid)}."
    )


def config_from_mapping(data: dict[str, Any], *, where: str = "") -> RunConfig:
    """Build a :class:`RunConfig` from the nested TOML layout, validating every key.

    Parameters
    ----------
    data : dict
        ``{"inputs": [...], "workdir": ..., "seed": ..., "embed": {...}, ...}``.
    where : str
        Shown in errors (e.g. ``" in run.toml"``).

    Raises
    ------
    ClusterClipError
        Unknown keys (the message names the key and the valid ones) and
        values of the wrong type or outside their choices.

    >>> config_from_mapping({"cluster": {"n_clusters": 8}}).cluster.n_clusters
    8
    """
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise invalid(key, f"a table ([{key}]){where}", value)
            for sub_key, sub_value in value.items():
                option = _BY_KEY.get(f"{key}.{sub_key}")
                if option is None:
                    raise _unknown_key_error(f"{key}.{sub_key}", key, where)
                sections[key][sub_key] = _check_value(option, sub_value, where)
            continue
        option = _BY_KEY.get(key)
        if option is None:
            raise _unknown_key_error(key, "", where)
        top[key] = _check_value(option, value, where)
    return RunConfig(
        **top,
        embed=EmbedOptions(**sections["embed"]),
        cluster=ClusterOptions(**sections["cluster"]),
        schedule=ScheduleOptions(**sections["schedule"]),
        report=ReportOptions(**sections["report"]),
    )


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


def apply_overrides(config: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Return ``config`` with ``{"section.name" or "name": value}`` overrides applied.

    A budget override clears the other budget keys (the command line wins).

    >>> c = apply_overrides(RunConfig(), {"schedule.num_samples": 1000, "seed": 3})
    >>> (c.schedule.num_samples, c.seed)
    (1000, 3)
    """
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    for key, value in overrides.items():
        option = _BY_KEY.get(key)
        if option is None:
            raise _unknown_key_error(key, key.partition(".")[0] if "." in key else "", "")
        value = _check_value(option, value, "")
        if option.section:
            sections[option.section][option.name] = value
        else:
            top[key] = value
    if any(k in sections["schedule"] for k in BUDGET_KEYS):
        for k in BUDGET_KEYS:
            sections["schedule"].setdefault(k, None)
    return dataclasses.replace(
        config,
        **top,
        **{s: dataclasses.replace(getattr(config, s), **v) for s, v in sections.items() if v},
    )


def options_table() -> str:
    """The Markdown table of every option (used for docs/configuration.md)."""
    rows = ["| TOML key | command line | type | default | meaning |", "|---|---|---|---|---|"]
    for o in OPTIONS:
        flag = (
            "positional `INPUT...`"
            if o.name == "inputs"
            else (
                "`--workdir`" if o.name == "workdir" else (f"`{o.flag}`" if o.cli else "TOML only")
            )
        )
        kind = o.kind.replace("_", " ")
        if o.choices:
            kind = " \\| ".join(f"`{c}`" for c in o.choices)
        default = "-" if o.default in (None, []) else f"`{o.default}`"
        rows.append(f"| `{o.key}` | {flag} | {kind} | {default} | {o.help} |")
    return "\n".join(rows)
