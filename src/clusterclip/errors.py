"""One exception type for every user-facing error, and one message template.

Every message names the parameter (or file), the rule it broke, the value it
got, and how to fix it, e.g.::

    `max_repeats` must be an int in [1, inf); got 0. Pass max_repeats=1 or more.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ClusterClipError", "MissingDependencyError", "invalid", "require_extra"]


class ClusterClipError(ValueError):
    """Base class of every error clusterclip raises on bad input or state."""


class MissingDependencyError(ClusterClipError, ImportError):
    """An optional dependency is not installed; the message names the pip line."""


def invalid(name: str, rule: str, got: Any, fix: str | None = None) -> ClusterClipError:
    """Build the standard validation error.

    Parameters
    ----------
    name : str
        Parameter, option, file or field at fault (shown in backticks).
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
    message = f"`{name}` must be {rule}; got {shown}."
    if fix:
        message += f" {fix}"
    return ClusterClipError(message)


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
