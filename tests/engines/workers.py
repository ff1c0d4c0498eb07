"""Test-only workers and wrappers for the engines: the injection point of the fault tests.

Production code has no test hooks: a stage hands its worker factory to
:func:`clusterclip.engines.map_shards`, so a test wraps that factory (see
:func:`wrapping`) in one of the classes below. Ray workers import this module
by name, so the repository root must be on their ``PYTHONPATH``
(``tests/engines/conftest.py`` sees to it).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any

Factory = Callable[[], Callable[[Any], Any]]


class Tagged:
    """A trivial worker: ``payload * factor``, with the process and the build it came from.

    Each build (each call of the factory) draws a fresh id, so a test can count
    how often the per-process state was built.
    """

    def __init__(self, factor: int) -> None:
        self.factor = factor
        self.build = uuid.uuid4().hex

    def __call__(self, payload: int) -> tuple[int, int, str]:
        return payload * self.factor, os.getpid(), self.build


class KillOnce:
    """Wraps a worker factory; the first process to reach its second task dies, once.

    The marker file makes it once per test: the process that creates it exits
    with ``os._exit`` (as a crash or an OOM kill would), so Ray restarts the
    actor and retries its tasks, and the restarted actor finds the marker.
    """

    def __init__(self, worker: Factory, marker: str) -> None:
        self.worker, self.marker = worker, marker

    def __call__(self) -> Callable[[Any], Any]:
        function, done = self.worker(), [0]

        def run(payload: Any) -> Any:
            if done[0] == 1:
                try:
                    descriptor = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass
                else:
                    os.write(descriptor, f"killed worker pid {os.getpid()}\n".encode())
                    os.close(descriptor)
                    os._exit(1)
            done[0] += 1
            return function(payload)

        return run


class Slow:
    """Wraps a worker factory; every task first sleeps ``seconds`` (so a driver can be killed)."""

    def __init__(self, worker: Factory, seconds: float) -> None:
        self.worker, self.seconds = worker, seconds

    def __call__(self) -> Callable[[Any], Any]:
        function = self.worker()

        def run(payload: Any) -> Any:
            time.sleep(self.seconds)
            return function(payload)

        return run


def wrapping(map_shards: Callable[..., Any], wrap: Callable[[Factory], Factory]) -> Callable:
    """``map_shards`` with every worker wrapped by ``wrap`` (monkeypatched into a stage module)."""

    def wrapped(tasks: Any, worker: Factory, **arguments: Any) -> Any:
        return map_shards(tasks, wrap(worker), **arguments)

    return wrapped


class NodeRecorder:
    """Wraps a worker factory; every build appends its Ray node's id to ``path``.

    A test then knows which nodes hold actors (to remove one) and sees an
    actor rebuilt elsewhere as one more line.
    """

    def __init__(self, worker: Factory, path: str) -> None:
        self.worker, self.path = worker, path

    def __call__(self) -> Callable[[Any], Any]:
        import ray

        with open(self.path, "a", encoding="utf-8") as out:
            out.write(ray.get_runtime_context().get_node_id() + "\n")
        return self.worker()
