"""One source of options: stage dataclasses -> command-line flags, TOML keys, docs, error hints.

Every stage declares its settings once, as a frozen dataclass whose fields carry
their default, allowed values and help text in ``metadata`` (see :func:`option`).
This module turns such a class into

- the flags of any sub-command (:func:`add_flags`, :func:`from_args`),
- the validation of a TOML table (:func:`from_mapping`),
- the table in ``docs/configuration.md`` (:func:`options_table`),
- the keyword -> flag map that makes errors name the flag under the CLI
  (:func:`flag_names`, used with :func:`clusterclip.errors.spelled_as_flags`).

So a setting has one name (``max_repeats`` in Python and TOML, ``--max-repeats``
on the command line), one parser and one default everywhere.

Field metadata
--------------
``help``      one line shown in ``--help`` and the docs table (required)
``kind``      ``str``, ``int``, ``float``, ``bool``, ``int_or_none`` (``none``/``inf``
              mean None), ``list_float`` (TOML only), ``list_int`` (``100,3000`` on the
              command line, a list in TOML; ``minimum`` applies to each), ``seed`` (an int in
              [0, 2**63-1], see :func:`check_seed`); default ``str``
``choices``   allowed values
``minimum``   smallest allowed number
``above``     the number must be greater than this (an open bound, e.g. ``epochs > 0``)
``flag``      the flag when it is not ``--`` + the name with dashes
``flag_help`` what the flag does, for a ``bool`` whose flag turns a ``True`` default off
              (``--no-report``): ``help`` says what the setting means, which the flag inverts
``cli``       False: TOML / Python only

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True, kw_only=True)
... class Demo:
...     n_iter: int = option(20, "Lloyd iterations.", kind="int", minimum=1)
>>> flag_names(Demo)
{'n_iter': '--n-iter'}
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from clusterclip.errors import ClusterClipError, hint, invalid, none_word, spelled_as_flags

__all__ = [
    "SEED_MAX",
    "add_flags",
    "check_fields",
    "check_seed",
    "flag_names",
    "from_args",
    "from_mapping",
    "option",
    "option_with_default",
    "options_table",
    "parse_count",
    "parse_int_list",
    "parse_repeats",
]

_NONE_WORDS = ("none", "inf", "infinity")

#: Largest seed: every seed of every stage is an int in [0, SEED_MAX] (int64's range),
#: and no two of them give the same random streams.
SEED_MAX = 2**63 - 1


def option(
    default: Any,
    help: str,
    *,
    kind: str = "str",
    choices: tuple[Any, ...] | None = None,
    minimum: float | None = None,
    above: float | None = None,
    flag: str | None = None,
    flag_help: str | None = None,
    cli: bool = True,
) -> Any:
    """A dataclass field that declares one setting (see the module docstring).

    ``default=dataclasses.MISSING`` declares a required setting (a keyword with no default).
    """
    metadata = {"help": help, "kind": kind, "choices": choices, "minimum": minimum}
    metadata["above"] = above
    metadata.update({"flag": flag, "flag_help": flag_help, "cli": cli})
    return _field(default, metadata)


def option_with_default(cls: Any, name: str, default: Any) -> Any:
    """The field ``name`` of the options class ``cls``, declared anew with another default.

    For a subclass whose context supplies a default the base leaves required
    (the schedule stage's ``seed`` comes from the run-wide seed, 0 unless
    given): help, kind and checks stay those of the one declaration in ``cls``.

    >>> @dataclasses.dataclass(frozen=True, kw_only=True)
    ... class Base:
    ...     seed: int = option(dataclasses.MISSING, "Seed.", kind="seed")
    >>> @dataclasses.dataclass(frozen=True, kw_only=True)
    ... class Stage(Base):
    ...     seed: int = option_with_default(Base, "seed", 0)
    >>> Stage().seed, dataclasses.fields(Stage)[0].metadata["help"]
    (0, 'Seed.')
    """
    declared = {f.name: f for f in dataclasses.fields(cls)}[name]
    return _field(default, dict(declared.metadata))


def _field(default: Any, metadata: dict[str, Any]) -> Any:
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _fields(cls: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def _flag(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def flag_names(*classes: Any) -> dict[str, str]:
    """``{keyword: flag}`` of every command-line option of the given classes."""
    return {
        f.name: _flag(f) for cls in classes for f in _fields(cls) if f.metadata.get("cli", True)
    }


# --------------------------------------------------------------------------- validation


def check_seed(value: Any, name: str = "seed") -> int:
    """Return ``value`` as a seed (an int in [0, 2**63-1]) or raise the standard error.

    The one definition of a valid seed, for every stage and the run-wide
    ``seed``. Every seed in the range is its own stream: none is read modulo
    2**32 or gives the same draws as another.

    >>> check_seed(2**40)
    1099511627776
    >>> check_seed(2**63)
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `seed` must be an int in [0, 2**63-1]; got 9223372036854775808. Pass e.g. seed=0.
    """
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not is_int or not 0 <= value <= SEED_MAX:
        raise invalid(name, "an int in [0, 2**63-1]", value, f"Pass e.g. {hint(name, 0)}.")
    return int(value)


def parse_count(text: str) -> int:
    """Parse an integer typed on the command line: ``1000000``, ``1_000_000`` or ``1e6``.

    Scientific notation is read exactly (no float rounding) and must name a
    whole number; the option's own check then applies its range.

    >>> parse_count("1e6"), parse_count("2.5e3"), parse_count("1_000")
    (1000000, 2500, 1000)
    >>> parse_count("1.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: invalid int value: '1.5' (expected a whole number such as 1000000 or 1e6)
    """
    import decimal

    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = decimal.Decimal(text.strip().replace("_", ""))
    except decimal.InvalidOperation:
        value = None
    # beyond 1e1000 no count makes sense, and int() of 1e999999999 would take minutes
    if value is not None and value.is_finite() and value.adjusted() > 1000:
        value = None
    if value is None or not value.is_finite() or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(
            f"invalid int value: {text!r} (expected a whole number such as 1000000 or 1e6)"
        ) from None
    return int(value)


def parse_repeats(text: str) -> int | None:
    """Parse a repetition cap: an int, or ``none`` / ``inf`` / ``infinity`` for no cap.

    >>> parse_repeats("4"), parse_repeats("inf")
    (4, None)
    """
    if text.strip().lower() in _NONE_WORDS:
        return None
    try:
        return parse_count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected an int or one of {', '.join(_NONE_WORDS)}; got {text!r}"
        ) from None


def parse_int_list(text: str) -> tuple[int, ...]:
    """Parse comma-separated ints (``""`` or ``none``: the empty tuple).

    >>> parse_int_list("100,3000"), parse_int_list("")
    ((100, 3000), ())
    """
    if text.strip().lower() in ("", "none"):
        return ()
    try:
        return tuple(parse_count(part) for part in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated ints such as 100,3000; got {text!r}"
        ) from None


def _rule(field: dataclasses.Field) -> str:
    kind = field.metadata.get("kind", "str")
    minimum = field.metadata.get("minimum")
    if kind == "seed":
        return "an int in [0, 2**63-1]"
    if kind == "list_int":
        return "a list of ints" + ("" if minimum is None else f" in [{int(minimum)}, inf)")
    above = field.metadata.get("above")
    unbounded = f" or {none_word()} (no limit)" if kind == "int_or_none" else ""
    if kind in ("int", "int_or_none", "float") and (minimum is not None or above is not None):
        low = minimum if above is None else above
        low = int(low) if kind != "float" else low
        bracket = "[" if above is None else "("
        text = f"{'an int' if kind != 'float' else 'a number'} in {bracket}{low}, inf)"
        return text + unbounded
    return {
        "str": "a string",
        "int": "an int",
        "int_or_none": "an int" + unbounded,
        "float": "a finite number",
        "bool": "true or false",
        "list_float": "a list of numbers",
    }[kind]


def _check_one(field: dataclasses.Field, value: Any) -> Any:
    """Validate one value; return it normalised (ints stay ints, floats become float)."""
    kind = field.metadata.get("kind", "str")
    if kind == "seed":  # never None, also where it is required (no default)
        return check_seed(value, field.name)
    if value is None and (_default(field) is None or kind == "int_or_none"):
        return None
    if kind == "int_or_none" and isinstance(value, str) and value.strip().lower() in _NONE_WORDS:
        return None
    # numpy's ints and floats count (a budget computed with numpy is an np.int64)
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if is_int and kind in ("int", "int_or_none"):
        value = int(value)
    ok = {
        "str": isinstance(value, str),
        "int": is_int,
        "int_or_none": is_int,
        "float": isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value),
        "bool": isinstance(value, bool),
        "list_float": isinstance(value, (list, tuple))
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
        "list_int": isinstance(value, (list, tuple))
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
    }[kind]
    minimum = field.metadata.get("minimum")
    if ok and minimum is not None and kind in ("int", "int_or_none", "float"):
        ok = value >= minimum
    if ok and minimum is not None and kind == "list_int":
        ok = all(v >= minimum for v in value)
    above = field.metadata.get("above")
    if ok and above is not None and kind in ("int", "int_or_none", "float"):
        ok = value > above
    if not ok:
        default = _default(field)
        fix = None if default is None else f"Default: {_shown(default)}."
        raise invalid(field.name, _rule(field), value, fix)
    choices = field.metadata.get("choices")
    if choices and value not in choices:
        raise invalid(field.name, f"one of {', '.join(map(str, choices))}", value)
    if kind == "float":
        return float(value)
    if kind == "list_float":
        return tuple(float(v) for v in value)
    if kind == "list_int":
        normalised = tuple(int(v) for v in value)
        return value if normalised == value else normalised
    return value


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return (
        "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


def check_fields(instance: Any) -> None:
    """Validate every declared field of a frozen options dataclass (call from ``__post_init__``).

    Raises
    ------
    ClusterClipError
        Naming the field (its flag under the CLI), the rule, the value and the default.
    """
    for field in _fields(type(instance)):
        value = getattr(instance, field.name)
        normalised = _check_one(field, value)
        if normalised is not value:
            object.__setattr__(instance, field.name, normalised)


def from_mapping(
    cls: Any,
    data: Mapping[str, Any],
    *,
    section: str = "",
    where: str = "",
    hidden: Iterable[str] = (),
) -> Any:
    """Build ``cls`` from a TOML table, refusing unknown keys (and naming the valid ones).

    Parameters
    ----------
    section : str
        The table's name, shown in errors (``[schedule]``).
    where : str
        Where the table came from, shown in errors (``" in run.toml"``).
    hidden : iterable of str
        Fields set elsewhere (the run-wide ``seed``): not listed as valid keys.

    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True, kw_only=True)
    ... class Demo:
    ...     n_iter: int = option(20, "Lloyd iterations.", kind="int")
    >>> from_mapping(Demo, {"n_iter": 5}).n_iter
    5
    """
    known = [f.name for f in _fields(cls) if f.name not in set(hidden)]
    scope = f"[{section}]" if section else "the top level"
    for key in data:
        if key not in known:
            shown = f"{section}.{key}" if section else key
            raise ClusterClipError(
                f"unknown option `{shown}`{where}. Valid keys in {scope}: {', '.join(known)}."
            )
    try:
        with spelled_as_flags({}):  # a file's values are named by their keys, not by flags
            return cls(**dict(data))
    except ClusterClipError as error:
        raise ClusterClipError(f"{scope}{where}: {error}") from error


# --------------------------------------------------------------------------- command line


def add_flags(
    parser: argparse.ArgumentParser | Any,
    cls: Any,
    *,
    exclude: Iterable[str] = (),
    required: Iterable[str] = (),
    prefix: str = "",
) -> None:
    """Add one flag per command-line field of ``cls`` to ``parser`` (or an argument group).

    Defaults are not filled in by argparse (``SUPPRESS``): :func:`from_args`
    takes only the flags actually given, so a config file or the dataclass
    default supplies the rest, and ``--help`` shows the dataclass default.
    """
    skip, needed = set(exclude), set(required)
    for field in _fields(cls):
        if not field.metadata.get("cli", True) or field.name in skip:
            continue
        kind = field.metadata.get("kind", "str")
        default = _default(field)
        help_text = field.metadata.get("flag_help") or field.metadata["help"]
        if default is not None and kind != "bool" and field.name not in needed:
            help_text += f" (default: {_shown(default)})"
        common: dict[str, Any] = {"dest": prefix + field.name, "help": help_text}
        if field.name in needed:
            common["required"] = True
        else:
            common["default"] = argparse.SUPPRESS
        if kind == "bool":
            parser.add_argument(_flag(field), action="store_const", const=not default, **common)
            continue
        parse = {
            "int": parse_count,
            "seed": parse_count,
            "float": float,
            "str": str,
            "int_or_none": parse_repeats,
            "list_int": parse_int_list,
        }[kind]
        choices = field.metadata.get("choices")
        parser.add_argument(
            _flag(field),
            type=parse,
            choices=choices,
            metavar=None if choices else field.name.upper(),
            **common,
        )


def from_args(args: argparse.Namespace, cls: Any, *, prefix: str = "") -> dict[str, Any]:
    """``{field: value}`` for every flag of ``cls`` given on the command line."""
    found = {}
    for field in _fields(cls):
        if hasattr(args, prefix + field.name):
            found[field.name] = getattr(args, prefix + field.name)
    return found


# --------------------------------------------------------------------------- docs


def options_table(sections: Mapping[str, Any], *, exclude: Iterable[str] = ()) -> str:
    """Markdown table of every option of ``{"section": OptionsClass}`` (``""``: top level)."""
    rows = ["| TOML key | command line | type | default | meaning |", "|---|---|---|---|---|"]
    skipped = set(exclude)
    for section, cls in sections.items():
        for field in _fields(cls):
            key = f"{section}.{field.name}" if section else field.name
            if key in skipped:
                continue
            flag = f"`{_flag(field)}`" if field.metadata.get("cli", True) else "TOML only"
            kind = {"seed": "int"}.get(
                field.metadata.get("kind", "str"), field.metadata.get("kind", "str")
            )
            kind = kind.replace("_", " ")
            if field.metadata.get("choices"):
                kind = " \\| ".join(f"`{c}`" for c in field.metadata["choices"])
            default = _default(field)
            shown = "-" if default in (None, [], ()) else f"`{_shown(default)}`"
            meaning = field.metadata["help"].replace("|", "\\|")
            rows.append(f"| `{key}` | {flag} | {kind} | {shown} | {meaning} |")
    return "\n".join(rows)
