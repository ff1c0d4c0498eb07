"""Executors: map a worker over a stream of tasks, in-process or on Ray; they know no stage.

A stage says *what* to compute: a stream of ``(task_id, payload)`` tasks (a
shard's texts, a block of embedding rows) and a picklable *worker factory*
(:class:`~clusterclip.embed.EmbedWorker`, :class:`~clusterclip.cluster.AssignWorker`)
that builds the per-process state once (an encoder, the centroids) and returns
the callable run on every payload. An engine decides *where* it runs:

``"local"`` (:mod:`clusterclip.engines.local`)
    in this process, one task after the other.
``"ray"`` (:mod:`clusterclip.engines.ray_engine`)
    on a pool of Ray actors, each building the worker once, with restarts and
    retries when a worker dies.

Both yield ``(task_id, result)`` in task order, so the stage writes the same
files whichever engine ran, and a run can switch engines and still resume.

Nothing heavy is imported here: an engine's module loads when it runs, and
Ray only when the Ray engine runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from clusterclip.engines.options import RayOptions
from clusterclip.errors import invalid, require_extra

__all__ = [
    "ENGINES",
    "RayOptions",
    "Task",
    "WorkerFactory",
    "map_shards",
    "resolve_options",
    "run_task",
]

Payload = TypeVar("Payload")
Result = TypeVar("Result")
#: One unit of work: an id the stage chose (shard number, first row) and the worker's input.
Task = tuple[int, Any]
#: Picklable, called once per process; returns the function run on every payload.
WorkerFactory = Callable[[], Callable[[Any], Any]]

#: engine name -> module defining ``map_shards(tasks, worker, options)``; imported when used.
ENGINES: dict[str, str] = {
    "local": "clusterclip.engines.local",
    "ray": "clusterclip.engines.ray_engine",
}


def resolve_options(engine: str, options: Mapping[str, Any] | None) -> RayOptions | None:
    """Check an engine name and turn the public ``engine_options`` dict into typed options.

    Parameters
    ----------
    engine : {"local", "ray"}
        A name of :data:`ENGINES`.
    options : mapping or None
        ``engine_options`` of :func:`clusterclip.embed` / :func:`clusterclip.cluster`;
        must be empty for ``"local"``; the fields of :class:`RayOptions` for ``"ray"``.

    Returns
    -------
    RayOptions or None
        ``None`` for the local engine.

    Raises
    ------
    MissingDependencyError
        For ``"ray"`` without Ray installed (the message names
        ``pip install 'clusterclip[ray]'``).

    Examples
    --------
    >>> resolve_options("ray", {"num_workers": 2}).num_workers  # doctest: +SKIP
    2
    >>> resolve_options("local", None) is None
    True
    """
    if engine not in ENGINES:
        raise invalid("engine", f"one of {list(ENGINES)}", engine, "Pass engine='local'.")
    if engine == "local":
        if options:
            raise invalid(
                "engine_options",
                "empty for engine='local'",
                dict(options),
                "Drop them, or pass engine='ray' to use Ray options.",
            )
        return None
    ray_options = RayOptions.from_mapping(options or {})
    # Fail before a stage prepares anything (a TF-IDF fit, a model download).
    require_extra("ray", "ray")
    return ray_options


def map_shards(
    tasks: Iterable[tuple[int, Payload]],
    worker: Callable[[], Callable[[Payload], Result]],
    *,
    engine: str = "local",
    options: RayOptions | None = None,
) -> Iterator[tuple[int, Result]]:
    """Run ``worker()(payload)`` on every task; yield ``(task_id, result)`` in task order.

    Parameters
    ----------
    tasks : iterable of (int, payload)
        Consumed lazily: the Ray engine takes at most ``options.max_in_flight``
        tasks ahead of the results it has handed back, the local engine one.
    worker : callable
        Picklable factory (a top-level class or a :func:`functools.partial` of
        one), called once per process (actor) to build the per-process state;
        it returns the function called with each payload. Results must be
        picklable for Ray.
    engine : {"local", "ray"}
        A name of :data:`ENGINES`.
    options : RayOptions, optional
        For ``"ray"`` (default ``RayOptions()``); must be ``None`` for ``"local"``.

    Yields
    ------
    (int, result)
        Each task's id and its worker's result, in the order of ``tasks``,
        exactly once each even when a Ray worker dies and its tasks are retried.

    Examples
    --------
    >>> import functools, operator
    >>> factory = functools.partial(functools.partial, operator.mul, 10)
    >>> list(map_shards([(0, 1), (1, 2)], factory))
    [(0, 10), (1, 20)]
    """
    if engine not in ENGINES:
        raise invalid("engine", f"one of {list(ENGINES)}", engine, "Pass engine='local'.")
    if engine == "local" and options is not None:
        raise invalid("options", "None for engine='local'", options, "Pass engine='ray'.")
    module = importlib.import_module(ENGINES[engine])
    return module.map_shards(tasks, worker, options)


def run_task(
    worker: Callable[[], Callable[[Payload], Result]],
    payload: Payload,
    *,
    engine: str = "local",
    options: RayOptions | None = None,
) -> Result:
    """``worker()(payload)`` as the one task of :func:`map_shards`: a step that is one
    sequential piece of work (the k-means fit, the schedule's draw, the report's numbers)
    runs where the engine runs tasks, not in the caller.

    >>> import functools, operator
    >>> run_task(functools.partial(functools.partial, operator.mul, 10), 4)
    40
    """
    # the whole stream, so that the engine's pool (a thread, Ray actors) is released here
    (_, result), *_ = list(map_shards([(0, payload)], worker, engine=engine, options=options))
    return result
