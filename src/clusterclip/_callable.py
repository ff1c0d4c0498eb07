"""Stage packages that can be called like the stage function of the same name.

``clusterclip.embed`` and ``clusterclip.cluster`` are both sub-packages and the
public stage functions. Importing a sub-package makes Python bind the module to
that attribute of its parent, hiding the function ``clusterclip.__init__``
exposes; making the module callable keeps ``clusterclip.embed(...)`` working
either way.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    _call_target: str  # "package.module:function", imported on first call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module_name, _, function = self._call_target.partition(":")
        return getattr(importlib.import_module(module_name), function)(*args, **kwargs)


def make_module_callable(name: str, target: str) -> None:
    """Make module ``name`` forward calls to ``target`` (``"module:function"``)."""
    module = sys.modules[name]
    module.__class__ = _CallableModule
    module._call_target = target
