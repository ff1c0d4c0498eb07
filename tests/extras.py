"""Optional dependencies in tests: skip locally, fail in CI.

A test that needs an extra calls :func:`require` (instead of
``pytest.importorskip``). Where the extra is missing it is skipped, with the
``pip install`` line in the reason, on a developer's machine; under ``CI=true``
(GitHub Actions and most CI services set it) the missing extra is an error,
because CI installs every extra (``make test``) and a silent skip would hide an
untested adapter.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

__all__ = ["in_ci", "require"]


def in_ci() -> bool:
    """True under a CI service (``CI`` set to anything but ``0`` / ``false`` / empty)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or skip (fail under CI) naming ``pip install 'clusterclip[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        reason = f"{module} is not installed: pip install 'clusterclip[{extra}]' ({error})"
        if in_ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
