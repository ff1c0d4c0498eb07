"""The local engine: every task in this process, one after the other, in order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from clusterclip.engines.options import RayOptions

__all__ = ["map_shards"]

Payload = TypeVar("Payload")
Result = TypeVar("Result")


def map_shards(
    tasks: Iterable[tuple[int, Payload]],
    worker: Callable[[], Callable[[Payload], Result]],
    options: RayOptions | None = None,
) -> Iterator[tuple[int, Result]]:
    """Build the worker on the first task, then run it on every task in order.

    ``options`` is accepted for the engine contract and must be ``None``. A
    stream with no task builds no worker (e.g. every shard finished before).

    Examples
    --------
    >>> factory = lambda: str.upper
    >>> list(map_shards([(3, "a"), (5, "b")], factory))
    [(3, 'A'), (5, 'B')]
    """
    run = None
    for task_id, payload in tasks:
        if run is None:
            run = worker()
        yield task_id, run(payload)
