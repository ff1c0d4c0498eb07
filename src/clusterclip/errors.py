"""One exception type for every user-facing error, and one message template.

Every message names the parameter (or file), the rule it broke, the value it
got, and how to fix it, e.g.::

    `max_repeats` must be an int in [1, inf); got 0. Pass max_repeats=1 or more.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "ClusterClipError",
    "ClusterClipWarning",
    "MissingDependencyError",
    "flags_in_use",
    "given_as",
    "hint",
    "invalid",
    "none_word",
    "plural",
    "require_extra",
    "spell",
    "spelled_as_flags",
]

#: Keyword -> command-line flag while a CLI command runs (None under Python).
_FLAGS: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "clusterclip_flags", default=None
)

#: Keyword -> how the user gave a value that another setting produced (see :func:`given_as`).
_GIVEN: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "clusterclip_given", default=None
)


class ClusterClipError(ValueError):
    """Base class of every error clusterclip raises on bad input or state."""


class ClusterClipWarning(UserWarning):
    """A result the user asked for differs from what they get (e.g. a budget cut short).

    The command line prints each as one line, ``clusterclip CMD: warning: ...``.
    """


class MissingDependencyError(ClusterClipError, ImportError):
    """An optional dependency is not installed; the message names the pip line."""


@contextlib.contextmanager
def spelled_as_flags(flags: Mapping[str, str]) -> Iterator[None]:
    """Inside this block, errors name options by their flags (``--max-repeats``).

    The CLI wraps each command in it with the command's own flags; under Python
    the same errors name the keyword (``max_repeats``).

    >>> with spelled_as_flags({"max_repeats": "--max-repeats"}):
    ...     print(spell("max_repeats"), "|", hint("max_repeats", 1))
    --max-repeats | --max-repeats 1
    >>> print(spell("max_repeats"), "|", hint("max_repeats", 1))
    max_repeats | max_repeats=1
    """
    token = _FLAGS.set(dict(flags))
    try:
        yield
    finally:
        _FLAGS.reset(token)


def flags_in_use() -> dict[str, str] | None:
    """The flags of :func:`spelled_as_flags` in effect here, or None under Python.

    A task that runs in another thread or process takes them along, so that its
    errors name options as the command that started it does.

    >>> with spelled_as_flags({"max_repeats": "--max-repeats"}):
    ...     print(flags_in_use())
    {'max_repeats': '--max-repeats'}
    >>> print(flags_in_use())
    None
    """
    flags = _FLAGS.get()
    return None if flags is None else dict(flags)


@contextlib.contextmanager
def given_as(given: Mapping[str, str]) -> Iterator[None]:
    """Inside this block, :func:`hint` shows ``given[name]`` for the values the user did not type.

    A stage that turns one setting into another (``epochs=3`` into a budget of
    ``num_samples``) wraps the work in it, so that messages name what the user
    passed, never an option they did not.

    >>> with given_as({"num_samples": "epochs=3.0 (300 documents)"}):
    ...     print(hint("num_samples", 300))
    epochs=3.0 (300 documents)
    >>> print(hint("num_samples", 300))
    num_samples=300
    """
    token = _GIVEN.set(dict(given))
    try:
        yield
    finally:
        _GIVEN.reset(token)


def spell(name: str) -> str:
    """``name`` as the user typed it: its flag under the CLI, else the keyword."""
    flags = _FLAGS.get()
    return flags.get(name, name) if flags else name


def none_word() -> str:
    """How the user writes "no value": ``none`` on the command line, ``None`` in Python."""
    return "none" if _FLAGS.get() else "None"


def hint(name: str, value: Any) -> str:
    """How to pass ``value`` for option ``name``: ``--flag VALUE`` or ``name=VALUE``.

    Inside :func:`given_as` a value the user gave another way is shown that way.
    """
    given = _GIVEN.get()
    if given and name in given:
        return given[name]
    flags = _FLAGS.get()
    if flags and name in flags:
        shown = (
            "none" if value is None else str(value).lower() if isinstance(value, bool) else value
        )
        return f"{flags[name]} {shown}"
    return f"{name}={value!r}"


def invalid(name: str, rule: str, got: Any, fix: str | None = None) -> ClusterClipError:
    """Build the standard validation error.

    Parameters
    ----------
    name : str
        Parameter, option, file or field at fault (shown in backticks; under the
        CLI an option is shown as its flag, see :func:`spelled_as_flags`).
    rule : str
        What it must be, e.g. ``"an int in [1, inf)"``.
    got : Any
        The offending value (its ``repr`` is shown, shortened).
    fix : str, optional
        One sentence telling the user what to do instead.

    Examples
    --------
    >>> raise invalid("max_repeats", "an int in [1, inf)", 0, "Pass 1 or more.")
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `max_repeats` must be an int in [1, inf); got 0. Pass 1 or more.
    """
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    message = f"`{spell(name)}` must be {rule}; got {shown}."
    if fix:
        message += f" {fix}"
    return ClusterClipError(message)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word`` in agreement, for messages and summaries.

    >>> plural(1, "cluster"), plural(1_250, "document"), plural(2, "was", "were")
    ('1 cluster', '1,250 documents', '2 were')
    """
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def require_extra(module: str, extra: str) -> Any:
    """Import an optional dependency or fail with the exact install line.

    >>> np = require_extra("numpy", "io")
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingDependencyError(
            f"`{module}` is needed for this step but is not installed: "
            f"pip install 'clusterclip[{extra}]'  (import error: {error})"
        ) from error
