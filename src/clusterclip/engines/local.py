"""The local engine: every task in this process, one after the other, in order.

The tasks run on one worker thread while this thread takes the next task from
the stream and the caller handles the previous result, so reading a shard,
encoding the one before and writing the one before that overlap (a tokenizer
or BLAS call releases the GIL). Results still come back in task order, and the
worker runs one task at a time, always on the same thread (where it was built).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
    At most two tasks are held at once: the one running and the next one.

    Examples
    --------
    >>> factory = lambda: str.upper
    >>> list(map_shards([(3, "a"), (5, "b")], factory))
    [(3, 'A'), (5, 'B')]
    """
    tasks = iter(tasks)
    first = next(tasks, None)
    if first is None:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="clusterclip-local") as pool:
        run = pool.submit(worker).result()
        pending: tuple[int, Future[Result]] = (first[0], pool.submit(run, first[1]))
        try:
            for task_id, payload in tasks:
                running = pending
                pending = (task_id, pool.submit(run, payload))
                yield running[0], running[1].result()
            yield pending[0], pending[1].result()
        finally:
            pending[1].cancel()
