"""Progress bars for long stages: tqdm when installed, a plain line otherwise.

Bars go to stderr and switch off when ``CLUSTERCLIP_PROGRESS=0`` or stderr is
not a terminal and ``CLUSTERCLIP_PROGRESS`` is unset (CI logs stay readable).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def progress_enabled() -> bool:
    setting = os.environ.get("CLUSTERCLIP_PROGRESS")
    if setting is not None:
        return setting not in ("0", "false", "no", "")
    return sys.stderr.isatty()


class _Silent:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.n = kwargs.get("initial", 0)

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(*, total: int | None, desc: str, unit: str = "doc", initial: int = 0) -> Any:
    """A context-manager progress bar with ``update(n)``, ``set_postfix_str``, ``close``.

    >>> with progress_bar(total=10, desc="embed") as bar:
    ...     bar.update(10)
    """
    if not progress_enabled():
        return _Silent(initial=initial)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Silent(initial=initial)
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=True,
        initial=initial,
        dynamic_ncols=True,
        file=sys.stderr,
    )
