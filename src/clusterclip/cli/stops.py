"""How a command stops early and says so: Ctrl-C, SIGTERM, and a reader that left stdout.

- SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``), so a
  terminated command unwinds like Ctrl-C: temporary files are removed, a
  stage's manifest entry stays "not complete" (a rerun resumes it), and the
  command says what it did not do (exit status 128 + 15).
- :class:`GuardedStdout` writes the lines a command prints while it works; when
  the reader has left (``clusterclip run ... | head``), further output goes to
  ``/dev/null`` and the work goes on, so the pipe never decides what gets done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["GuardedStdout", "Terminated", "exit_status", "say", "sigterm_raises", "stop_behind"]

#: Exit statuses, as a shell reports a process killed by the signal (128 + number).
SIGINT_STATUS, SIGPIPE_STATUS, SIGTERM_STATUS = 130, 141, 143


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Inside this block SIGTERM raises :class:`Terminated`; the old handler comes back after.

    Only in the main thread (where Python delivers signals); elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_status(stop: KeyboardInterrupt) -> int:
    """130 for Ctrl-C (SIGINT), 143 for SIGTERM."""
    return SIGTERM_STATUS if isinstance(stop, Terminated) else SIGINT_STATUS


def stop_behind(error: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM that ``error`` was raised while unwinding from, if any.

    A stop lands wherever the main thread is, even inside the standard
    library: raised between a lock's release and its reacquiring (in
    ``threading.Condition.wait``), it makes the lock's ``with`` block fail on
    the way out (``RuntimeError: release unlocked lock``), and that error hides
    the stop. What happened is still the stop: the command says so, not a
    traceback.

    >>> try:
    ...     try:
    ...         raise Terminated()
    ...     except KeyboardInterrupt:
    ...         raise RuntimeError("release unlocked lock")
    ... except RuntimeError as error:
    ...     type(stop_behind(error)).__name__
    'Terminated'
    """
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__context__
    return None


def stop_name(stop: KeyboardInterrupt) -> str:
    """How the user stopped the command, in words."""
    return "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted (Ctrl-C)"


def say(text: str) -> None:
    """One line on stderr, unless stderr itself is gone (``2>&1 | head``)."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


class GuardedStdout:
    """Print lines to stdout; once the reader has left, drop them and remember it.

    >>> out = GuardedStdout()
    >>> out.line("embed     ran in 1.0 s (first run)")
    embed     ran in 1.0 s (first run)
    >>> out.broken, out.lines
    (False, 1)
    """

    def __init__(self) -> None:
        self.broken = False
        self.lines = 0

    def line(self, text: str) -> None:
        """Print ``text`` and flush it now (a log shows it as it happens)."""
        self.call(lambda: print(text, flush=True))
        if not self.broken:
            self.lines += 1

    def call(self, write: Callable[[], Any]) -> None:
        """Run ``write`` (which prints); a broken pipe ends the output, not the command."""
        if self.broken:
            return
        try:
            write()
            sys.stdout.flush()
        except BrokenPipeError:
            self.broken = True
            # Whatever is still buffered, and every later print, goes nowhere; Python's
            # final flush then has nothing to complain about.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
