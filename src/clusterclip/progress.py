"""Progress of long stages on stderr: a bar on a terminal, plain lines anywhere else.

``CLUSTERCLIP_PROGRESS`` chooses (stdout, where summaries go, is never touched):

- unset: a tqdm bar when stderr is a terminal; otherwise (nohup, CI, a log file,
  a pipe) plain lines: one when a step starts, then one at most every 30 s as
  work completes, and one when it ends;
- ``0`` (or ``false``, ``no``, ``off``, empty): nothing;
- ``Ns`` (``10s``, ``0.5s``): plain lines every N seconds, terminal or not;
- anything else (e.g. ``1``): the bar, even when stderr is not a terminal.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_INTERVAL",
    "SILENCE",
    "PlainLines",
    "progress_bar",
    "progress_enabled",
    "progress_mode",
    "read_setting",
]

#: Seconds between two plain progress lines when ``CLUSTERCLIP_PROGRESS`` does not say.
DEFAULT_INTERVAL = 30.0
#: How to silence progress and set the interval, in one sentence (``--help`` shows it).
SILENCE = (
    "progress: on stderr, a bar on a terminal, else a plain line every 30 s; "
    "CLUSTERCLIP_PROGRESS=0 silences it, CLUSTERCLIP_PROGRESS=10s sets the interval."
)
_OFF = ("0", "false", "no", "off", "")
_SECONDS = re.compile(r"(\d+(?:\.\d*)?|\.\d+)s")


class ProgressMode(NamedTuple):
    """``kind`` is ``off``, ``bar`` or ``lines``; ``interval`` the seconds between lines."""

    kind: str
    interval: float = DEFAULT_INTERVAL


def progress_mode() -> ProgressMode:
    """What ``CLUSTERCLIP_PROGRESS`` and the terminal ask for (:func:`read_setting`)."""
    return read_setting(os.environ.get("CLUSTERCLIP_PROGRESS"), terminal=_stderr_is_terminal())


def read_setting(setting: str | None, *, terminal: bool) -> ProgressMode:
    """The progress mode of a ``CLUSTERCLIP_PROGRESS`` value (None: unset).

    >>> read_setting(None, terminal=False)
    ProgressMode(kind='lines', interval=30.0)
    >>> read_setting("5s", terminal=True), read_setting("0", terminal=True).kind
    (ProgressMode(kind='lines', interval=5.0), 'off')
    """
    if setting is None:
        return ProgressMode("bar" if terminal else "lines")
    setting = setting.strip().lower()
    if setting in _OFF:
        return ProgressMode("off")
    seconds = _SECONDS.fullmatch(setting)
    if seconds:
        return ProgressMode("lines", float(seconds.group(1)))
    return ProgressMode("bar")


def progress_enabled() -> bool:
    """Whether long steps show progress (a bar or plain lines)."""
    return progress_mode().kind != "off"


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


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


class PlainLines(_Silent):
    """Progress as plain stderr lines: at the start, every ``interval`` seconds, at the end.

    A line is written on :meth:`update` once ``interval`` seconds have passed
    since the previous one, so a log shows the work moving without a terminal's
    carriage returns. A stderr that cannot be written to (closed pipe) ends the
    lines, never the work.

    >>> import io
    >>> out = io.StringIO()
    >>> ticks = iter([0.0, 40.0, 50.0])
    >>> with PlainLines(total=10, desc="embed", unit="doc", interval=30, file=out,
    ...                 clock=lambda: next(ticks)) as bar:
    ...     bar.update(4)
    >>> print(out.getvalue(), end="")
    progress: embed: started, 10 doc to go
    progress: embed: 4 of 10 doc (40%) after 40 s, 0.1 doc/s, about 1 min 00 s left
    progress: embed: done, 4 doc in 50 s
    """

    def __init__(
        self,
        *,
        total: int | None,
        desc: str,
        unit: str = "doc",
        initial: int = 0,
        interval: float = DEFAULT_INTERVAL,
        file: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(initial=initial)
        self.total, self.desc, self.unit, self.interval = total, desc, unit, interval
        self.file, self.clock, self.postfix, self.closed = file, clock, "", False
        self.started = self.last = clock()
        self.first = initial
        to_go = f", {total - initial:,} {unit} to go" if total is not None else ""
        resumed = f" (resumed at {initial:,})" if initial else ""
        self._write(f"started{resumed}{to_go}")

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            self._write(self._status(now))

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        elapsed = self.clock() - self.started
        self._write(f"done, {self.n:,} {self.unit} in {_duration(elapsed)}")

    def _status(self, now: float) -> str:
        elapsed = now - self.started
        done = self.n - self.first
        rate = done / elapsed if elapsed > 0 else 0.0
        count = f"{self.n:,}"
        if self.total:
            count += f" of {self.total:,} {self.unit} ({self.n / self.total:.0%})"
        else:
            count += f" {self.unit}"
        line = f"{count} after {_duration(elapsed)}, {_rate(rate)} {self.unit}/s"
        if self.total and rate > 0 and self.n < self.total:
            line += f", about {_duration((self.total - self.n) / rate)} left"
        return line + (f" ({self.postfix})" if self.postfix else "")

    def _write(self, text: str) -> None:
        file = self.file if self.file is not None else sys.stderr
        try:
            file.write(f"progress: {self.desc}: {text}\n")
            file.flush()
        except (OSError, ValueError):  # stderr closed or a broken pipe: stop writing
            self.interval = float("inf")
            self.closed = True


def _rate(rate: float) -> str:
    """``1,234``, ``12.3``, ``0.012``: whole numbers from 100 up, 3 significant digits below.

    >>> _rate(2934.6), _rate(12.34), _rate(0.01234)
    ('2,935', '12.3', '0.0123')
    """
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``.

    >>> _duration(42.4), _duration(185), _duration(7620)
    ('42 s', '3 min 05 s', '2 h 07 min')
    """
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def progress_bar(*, total: int | None, desc: str, unit: str = "doc", initial: int = 0) -> Any:
    """A context-manager progress bar with ``update(n)``, ``set_postfix_str``, ``close``.

    What it shows follows :func:`progress_mode`: a tqdm bar, plain lines, or nothing.

    >>> with progress_bar(total=10, desc="embed") as bar:
    ...     bar.update(10)
    """
    mode = progress_mode()
    if mode.kind == "off":
        return _Silent(initial=initial)
    if mode.kind == "lines":
        return PlainLines(
            total=total, desc=desc, unit=unit, initial=initial, interval=mode.interval
        )
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return PlainLines(
            total=total, desc=desc, unit=unit, initial=initial, interval=mode.interval
        )
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=True,
        initial=initial,
        dynamic_ncols=True,
        file=sys.stderr,
    )
