"""The Ray engine: a worker mapped over a task stream on a pool of Ray actors.

It knows no stage: the stage hands in its tasks and a picklable worker factory
and gets ``(task_id, result)`` back in task order, as from the local engine
(:mod:`clusterclip.engines.local`), so the files the stage writes do not
depend on the engine.

Pool
    ``num_workers`` actors, each reserving ``num_cpus_per_worker`` CPUs and
    ``num_gpus_per_worker`` GPUs. The factory is put in the object store once
    (whatever it holds, e.g. centroids, is shipped once) and every actor calls
    it once, so a model loads once per actor, not once per task.

Flow
    The driver takes tasks lazily and keeps at most ``max_in_flight`` of them
    submitted ahead of the results it has handed back, each to the actor with
    the fewest tasks queued; it waits for results in task order.

Faults
    Actors are created with ``max_restarts=-1`` and ``max_task_retries=-1``: a
    worker process that dies is restarted (its factory runs again) and its
    queued tasks re-run, and since results are matched to tasks by position,
    none is lost or duplicated. An exception raised by the worker itself is not
    retried; it reaches the caller (a :class:`~clusterclip.errors.ClusterClipError`
    as itself, without Ray's wrapper). A killed driver takes its actors with it.

Ray is optional: it is imported through :func:`clusterclip.errors.require_extra`
when a map starts, which names the install line (``pip install 'clusterclip[ray]'``)
when it is missing.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from clusterclip.engines.options import RayOptions
from clusterclip.errors import ClusterClipError, invalid, require_extra

__all__ = ["connect", "map_shards"]

Payload = TypeVar("Payload")
Result = TypeVar("Result")


def connect(options: RayOptions) -> Any:
    """Join or start the Ray instance named by ``options.address``; return ``ray``.

    Reuses an instance this process already joined. A locally started instance
    has no dashboard and ``options.num_cpus`` CPUs.

    Examples
    --------
    >>> ray = connect(RayOptions(num_cpus=2))  # doctest: +SKIP
    >>> ray.cluster_resources()["CPU"]  # doctest: +SKIP
    2.0
    """
    ray = require_extra("ray", "ray")
    if ray.is_initialized():
        return ray
    arguments: dict[str, Any] = {
        "address": options.address,
        "ignore_reinit_error": True,
        "include_dashboard": False,
        "log_to_driver": True,
    }
    if options.address is None and options.num_cpus is not None:
        arguments["num_cpus"] = options.num_cpus
    try:
        ray.init(**arguments)
    except ValueError as error:
        if "num_cpus" not in arguments or "existing cluster" not in str(error):
            raise
        # `address=None` found a running instance; it keeps its own CPU count.
        del arguments["num_cpus"]
        ray.init(**arguments)
    except ConnectionError as error:
        raise ClusterClipError(
            f"could not reach the Ray cluster at {options.address!r} ({error}). "
            "Start it with `ray start --head` or fix --ray-address."
        ) from error
    return ray


def _pool_size(ray: Any, options: RayOptions) -> int:
    """Actors to start: as asked, else as many as the cluster's GPUs or CPUs hold.

    A pool the cluster cannot hold would wait for resources forever, so it is
    refused up front.
    """
    resources = ray.cluster_resources()
    gpus, cpus = resources.get("GPU", 0.0), resources.get("CPU", 0.0)
    fits = int(cpus // options.num_cpus_per_worker) if options.num_cpus_per_worker else None
    if options.num_gpus_per_worker > 0:
        by_gpu = int(gpus // options.num_gpus_per_worker)
        fits = by_gpu if fits is None else min(fits, by_gpu)
        if by_gpu < 1:
            raise invalid(
                "num_gpus_per_worker",
                f"at most the cluster's GPUs ({gpus:g})",
                options.num_gpus_per_worker,
                "Pass --num-gpus-per-worker 0 to run on CPUs, or join a cluster with GPUs.",
            )
    if options.num_workers is None:
        return max(1, fits or 1)
    if fits is not None and options.num_workers > fits:
        raise invalid(
            "num_workers",
            f"at most {fits} on this Ray cluster ({cpus:g} CPUs, {gpus:g} GPUs; each worker "
            f"takes {options.num_cpus_per_worker:g} CPU and {options.num_gpus_per_worker:g} GPU)",
            options.num_workers,
            "Pass fewer workers, or add nodes to the cluster.",
        )
    return int(options.num_workers)


def _get(ray: Any, reference: Any) -> Any:
    """``ray.get``, with a :class:`ClusterClipError` raised by the worker raised as itself.

    Ray wraps a worker's exception in a ``RayTaskError`` whose message leads with
    the remote traceback; clusterclip's own errors (a bad record under ``strict``,
    a corpus without text) already say what went wrong and how to fix it, so the
    caller gets them exactly as the local engine raises them.
    """
    try:
        return ray.get(reference)
    except ray.exceptions.RayTaskError as error:
        if isinstance(error.cause, ClusterClipError):
            raise error.cause from None
        raise


class _Actor:
    """A Ray actor around one worker: the factory runs once, in the constructor."""

    def __init__(self, worker: Callable[[], Callable[[Any], Any]]) -> None:
        self.function = worker()

    def run(self, payload: Any) -> Any:
        return self.function(payload)


def map_shards(
    tasks: Iterable[tuple[int, Payload]],
    worker: Callable[[], Callable[[Payload], Result]],
    options: RayOptions | None = None,
) -> Iterator[tuple[int, Result]]:
    """Run ``worker()(payload)`` on every task on a Ray actor pool; yield results in task order.

    The Ray twin of :func:`clusterclip.engines.local.map_shards`; call it
    through :func:`clusterclip.engines.map_shards` with ``engine="ray"``.

    Parameters
    ----------
    tasks : iterable of (int, payload)
        Taken lazily, at most ``options.window(pool)`` ahead of the results
        handed back. An empty stream returns without connecting to Ray.
    worker : callable
        Picklable factory, called once in every actor (again after a restart).
    options : RayOptions, optional
        Cluster address and pool shape (default ``RayOptions()``). The pool
        never exceeds the tasks in flight, nor the tasks of a short stream.

    Yields
    ------
    (int, result)
        Each task's id and result, in the order of ``tasks``, once each.

    Examples
    --------
    >>> import functools, operator
    >>> factory = functools.partial(functools.partial, operator.mul, 10)
    >>> list(map_shards([(0, 1), (1, 2)], factory, RayOptions(num_workers=2)))  # doctest: +SKIP
    [(0, 10), (1, 20)]
    """
    options = options or RayOptions()
    iterator = iter(tasks)
    first = list(itertools.islice(iterator, 1))
    if not first:  # nothing to do (e.g. every shard finished before)
        return
    ray = connect(options)
    pool_size = _pool_size(ray, options)
    window = options.window(pool_size)
    buffered = first + list(itertools.islice(iterator, window - 1))
    pool_size = min(pool_size, len(buffered))
    actor_class = ray.remote(_Actor).options(
        num_cpus=options.num_cpus_per_worker,
        num_gpus=options.num_gpus_per_worker,
        # A dead worker is restarted and its tasks re-run, as often as needed.
        max_restarts=-1,
        max_task_retries=-1,
    )
    # Held until the map ends: a restarted actor builds its worker from it again.
    factory = ray.put(worker)
    actors = [actor_class.remote(factory) for _ in range(pool_size)]
    queued = [0] * pool_size  # tasks submitted to each actor and not yet collected
    in_flight: collections.deque[tuple[int, int, Any]] = collections.deque()

    def submit(task: tuple[int, Payload]) -> None:
        actor = queued.index(min(queued))
        in_flight.append((int(task[0]), actor, actors[actor].run.remote(task[1])))
        queued[actor] += 1

    try:
        for task in buffered:
            submit(task)
        while in_flight:
            task_id, actor, reference = in_flight.popleft()
            result = _get(ray, reference)
            queued[actor] -= 1
            for task in itertools.islice(iterator, 1):  # keep the pool busy while we yield
                submit(task)
            yield task_id, result
    finally:
        for actor_handle in actors:
            ray.kill(actor_handle)
