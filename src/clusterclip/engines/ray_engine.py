"""The Ray engine: the embed stage and the assignment step on a Ray Data pipeline.

The stages stay in charge of the work directory (what to compute, which shards
are finished, atomic writes, the manifest); this module only decides *where*
the per-shard and per-block work runs. Both functions are drop-in replacements
for the stages' local executors and return exactly what those return, so the
work directory a Ray run writes is the one a local run writes.

Embedding (:func:`run_shards_ray`)
    One Ray Data job per run: a reader takes the driver's shards (contiguous
    index ranges of documents) in order and ``map_batches`` with an actor class
    (one batch = one shard) embeds them on a pool of ``num_workers`` actors.
    Each actor builds the encoder once from the picklable
    :class:`~clusterclip.embed.EncoderSpec`, so the model loads once per actor,
    not once per shard. Results come back in shard order, and the driver hands
    over at most ``max_in_flight`` shards ahead of the results it received.

Assignment (:func:`assign_ray`)
    The centroids are put in the object store once (``ray.put``) and shared by
    every actor; the rows are cut into blocks described by (file, start, stop),
    and each actor memory-maps the float16 embedding file itself, so no
    embedding is shipped from the driver.

Faults
    Actors are created with ``max_restarts=-1`` and ``max_task_retries=-1``: a
    worker that dies is restarted and its shard or block re-run, and because the
    driver writes results by shard id no document is lost or duplicated. A
    killed driver loses only unfinished shards; rerunning the stage skips the
    finished ones.

Ray is optional: it is imported inside these functions through
:func:`clusterclip.errors.require_extra`, which names the install line
(``pip install 'clusterclip[ray]'``) when it is missing.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.progress import progress_bar

__all__ = [
    "FAULT_MARKER_ENV",
    "SHARD_DELAY_ENV",
    "RayOptions",
    "assign_ray",
    "connect",
    "run_shards_ray",
]

#: Test hook: path of a marker file. When set in the driver's environment, the
#: first worker that reaches its second item creates the marker and kills its own
#: process (``os._exit``), once per marker, so tests can check Ray's retries.
FAULT_MARKER_ENV = "CLUSTERCLIP_RAY_FAULT_MARKER"
#: Test hook: seconds each worker sleeps before every shard or block, so a test
#: can kill the driver while the job is still running.
SHARD_DELAY_ENV = "CLUSTERCLIP_RAY_SHARD_DELAY"

#: Shards per worker handed to Ray ahead of the results when ``max_in_flight`` is not given.
_DEFAULT_SHARDS_PER_WORKER = 4


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide a Ray job runs (the ``engine_options`` of ``engine="ray"``).

    Parameters
    ----------
    address : str or None
        Ray cluster to join (``"auto"``, ``"HOST:6379"``, ``"ray://HOST:10001"``).
        ``None`` joins the cluster named by ``RAY_ADDRESS`` or the last one
        started on this machine, else starts a local instance.
    num_workers : int or None
        Actors in the pool. ``None``: one per GPU of the cluster when
        ``num_gpus_per_worker > 0``, else one per CPU.
    num_gpus_per_worker : float
        GPUs reserved by each actor (``0`` runs on CPUs; ``1`` is one model per GPU).
    num_cpus_per_worker : float
        CPUs reserved by each actor.
    num_cpus : int or None
        CPUs of a *locally started* instance (ignored when joining a cluster).
    max_in_flight : int or None
        Shards the embed step hands to Ray ahead of the results it got back;
        bounds the texts held in the object store. ``None``: 4 per worker.

    Examples
    --------
    >>> RayOptions(num_workers=4, num_gpus_per_worker=1).num_workers
    4
    """

    address: str | None = None
    num_workers: int | None = None
    num_gpus_per_worker: float = 0.0
    num_cpus_per_worker: float = 1.0
    num_cpus: int | None = None
    max_in_flight: int | None = None

    def __post_init__(self) -> None:
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise invalid(
                "ray_address",
                "a Ray address such as 'auto' or 'HOST:6379', or None",
                self.address,
                "Omit it to start or join a local Ray instance.",
            )
        _check_count("num_workers", self.num_workers, "Omit it to use every GPU or CPU.")
        _check_count("num_cpus", self.num_cpus, "Omit it to let Ray count the CPUs.")
        _check_count("max_in_flight", self.max_in_flight, "Omit it for 4 shards per worker.")
        for name in ("num_gpus_per_worker", "num_cpus_per_worker"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise invalid(name, "a number >= 0", value, f"Pass e.g. {name}=1.")
        if self.num_cpus_per_worker == 0 and self.num_gpus_per_worker == 0:
            raise invalid(
                "num_cpus_per_worker",
                "> 0 when num_gpus_per_worker is 0",
                self.num_cpus_per_worker,
                "Each worker must reserve a CPU or a GPU.",
            )


def _check_count(name: str, value: Any, fix: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise invalid(name, "an int in [1, inf) or None", value, fix)


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
    require_extra("ray.data", "ray")
    # Ray Data logs two INFO lines per dataset; the stage's own bar says enough.
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    if ray.is_initialized():
        return ray
    kwargs: dict[str, Any] = {
        "address": options.address,
        "ignore_reinit_error": True,
        "include_dashboard": False,
        "log_to_driver": True,
    }
    if options.address is None and options.num_cpus is not None:
        kwargs["num_cpus"] = options.num_cpus
    try:
        ray.init(**kwargs)
    except ValueError as error:
        if "num_cpus" not in kwargs or "existing cluster" not in str(error):
            raise
        # `address=None` found a running instance; it keeps its own CPU count.
        del kwargs["num_cpus"]
        ray.init(**kwargs)
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


@dataclass(frozen=True)
class _Hooks:
    """Test hooks read from the driver's environment and shipped to the actors.

    The environment of already-running Ray workers is the one their node
    started with, so the driver reads the variables and passes the values.
    """

    fault_marker: str | None = None
    delay: float = 0.0

    @classmethod
    def from_environment(cls) -> _Hooks:
        delay = os.environ.get(SHARD_DELAY_ENV, "")
        return cls(
            fault_marker=os.environ.get(FAULT_MARKER_ENV) or None,
            delay=float(delay) if delay else 0.0,
        )

    def before_item(self, done_by_this_actor: int) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.fault_marker and done_by_this_actor == 1:
            try:
                descriptor = os.open(self.fault_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(descriptor, f"killed worker pid {os.getpid()}\n".encode())
            os.close(descriptor)
            os._exit(1)


def _map_in_order(
    ray: Any,
    dataset: Any,
    worker: type,
    *,
    constructor_kwargs: dict[str, Any],
    options: RayOptions,
    pool_size: int,
) -> Iterator[dict[str, Any]]:
    """Run ``worker`` over the rows of ``dataset`` (one row per call) on an actor pool.

    Yields one numpy batch per input row, in input order, as soon as it is done.
    """
    with warnings.catch_warnings():
        # Recent Ray deprecates extra remote args, but only they spell out the
        # restart policy on every supported version.
        warnings.simplefilter("ignore", DeprecationWarning)
        mapped = dataset.map_batches(
            worker,
            fn_constructor_kwargs=constructor_kwargs,
            batch_size=1,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=pool_size),
            num_cpus=options.num_cpus_per_worker,
            num_gpus=options.num_gpus_per_worker or None,
            # A dead actor is restarted and its shard re-run, as often as needed.
            max_restarts=-1,
            max_task_retries=-1,
        )
    context = mapped.context
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    # Every row (a shard or a block) is its own block: emitted downstream the
    # moment it is produced instead of being packed with the next ones.
    context.target_max_block_size = 1
    yield from mapped.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=0)


# --------------------------------------------------------------------- embed


class _ShardFeeder:
    """Ray actor between the driver's lazy shard stream and the Ray Data pipeline.

    The driver puts shards by position (at most ``max_in_flight`` ahead of the
    results it has received); the pipeline's reader takes them in order.
    """

    def __init__(self) -> None:
        import asyncio

        self.items: dict[int, Any] = {}
        self.end: int | None = None
        self.changed = asyncio.Condition()

    async def put(self, position: int, item: Any) -> None:
        async with self.changed:
            self.items[position] = item
            self.changed.notify_all()

    async def close(self, count: int) -> None:
        async with self.changed:
            self.end = count
            self.changed.notify_all()

    async def take(self, position: int) -> Any:
        """The item at ``position`` once it is there, or ``None`` past the end."""
        async with self.changed:
            await self.changed.wait_for(
                lambda: position in self.items or (self.end is not None and position >= self.end)
            )
            return self.items.pop(position, None)


def _read_shards(batch: dict[str, np.ndarray], feeder: Any) -> Iterator[dict[str, Any]]:
    """The pipeline's source: one output row per shard, taken from the feeder in order."""
    import ray

    position = 0
    while (item := ray.get(feeder.take.remote(position))) is not None:
        shard, texts = item
        yield {"shard_id": np.asarray([shard], dtype=np.int64), "texts": [ray.get(texts[0])]}
        position += 1


class _EmbedWorker:
    """Ray Data actor: builds the encoder once, embeds one shard per call."""

    def __init__(self, spec: Any, hooks: _Hooks) -> None:
        from clusterclip.embed.job import embed_shard

        self.encoder = spec.build()
        self.embed_shard = embed_shard
        self.hooks = hooks
        self.done = 0

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        ids, arrays, counts = [], [], []
        for shard_id, texts in zip(batch["shard_id"], batch["texts"], strict=True):
            self.hooks.before_item(self.done)
            # The very function the local executor runs, on the same texts.
            rows, tokens = self.embed_shard(self.encoder, [str(text) for text in texts])
            arrays.append(np.ascontiguousarray(rows, dtype=np.float16))
            counts.append(np.asarray(tokens, dtype=np.int64))
            ids.append(int(shard_id))
            self.done += 1
        return {"shard_id": np.asarray(ids, dtype=np.int64), "embeddings": arrays, "tokens": counts}


def run_shards_ray(
    spec: Any,
    shard_iter: Iterable[tuple[int, list[str]]],
    *,
    address: str | None = None,
    num_workers: int | None = None,
    num_gpus_per_worker: float = 0.0,
    num_cpus_per_worker: float = 1.0,
    num_cpus: int | None = None,
    max_in_flight: int | None = None,
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Embed shards of documents on a Ray actor pool; yield ``(shard_id, embeddings, tokens)``.

    The Ray twin of :func:`clusterclip.embed.run_shards_local` (``engine="ray"``
    of :func:`clusterclip.embed`): same arguments, same results, same order.

    Parameters
    ----------
    spec : EncoderSpec
        Picklable encoder description; each actor calls ``spec.build()`` once.
    shard_iter : iterable of (int, list of str)
        Shard id and the texts of its ``ok`` documents, in index order.
        Consumed lazily: at most ``max_in_flight`` shards are taken ahead of
        the results handed back.
    address, num_workers, num_gpus_per_worker, num_cpus_per_worker, num_cpus, max_in_flight
        See :class:`RayOptions`.

    Yields
    ------
    (int, numpy.ndarray, numpy.ndarray)
        Shard id, float16 ``(len(texts), dim)`` unit rows and int64 token counts,
        in the order of ``shard_iter``. Each actor runs :func:`clusterclip.embed.embed_shard`,
        the function of the local executor, so results equal the local ones
        (bit for bit on the same hardware and libraries).

    Notes
    -----
    The pipeline is ``read (one task, 0 CPUs) -> map_batches(actor pool)``; the
    reader takes shards from a small feeder actor that the driver fills as
    results come back, so one Ray Data job (and one model load per actor)
    serves a stream of any length. A worker that dies is restarted and its
    shard re-run (``max_restarts=-1``, ``max_task_retries=-1``); the reader is
    not retried (``max_retries=0``): if it dies the job fails and a rerun
    resumes from the shards already written.

    Examples
    --------
    >>> from clusterclip.embed import EncoderSpec
    >>> spec = EncoderSpec(encoder="static", device="cpu")
    >>> shards = [(0, ["In the beginning"]), (1, ["God created the heaven"])]
    >>> for shard, rows, tokens in run_shards_ray(spec, shards, num_workers=2):  # doctest: +SKIP
    ...     print(shard, rows.shape, rows.dtype, tokens.tolist())
    0 (1, 256) float16 [3]
    1 (1, 256) float16 [4]
    """
    options = RayOptions(
        address=address,
        num_workers=num_workers,
        num_gpus_per_worker=num_gpus_per_worker,
        num_cpus_per_worker=num_cpus_per_worker,
        num_cpus=num_cpus,
        max_in_flight=max_in_flight,
    )
    iterator = iter(shard_iter)
    first = next(iterator, None)
    if first is None:  # nothing left to embed (e.g. every shard finished before)
        return
    ray = connect(options)
    pool_size = _pool_size(ray, options)
    window = options.max_in_flight or _DEFAULT_SHARDS_PER_WORKER * pool_size
    feeder = ray.remote(num_cpus=0)(_ShardFeeder).remote()
    held: dict[int, Any] = {}  # shard -> its texts in the object store, until embedded
    state = {"fed": 0, "closed": False}
    pending = itertools.chain([first], iterator)

    def feed() -> None:
        """Hand the next shard to the feeder (or tell it the stream ended)."""
        if state["closed"]:
            return
        item = next(pending, None)
        if item is None:
            feeder.close.remote(state["fed"])
            state["closed"] = True
            return
        shard, texts = int(item[0]), list(item[1])
        # Wrapped in a list so that the reader, not Ray, fetches the texts.
        held[shard] = ray.put(texts)
        feeder.put.remote(state["fed"], (shard, [held[shard]]))
        state["fed"] += 1

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            source = ray.data.from_items([{"reader": 0}]).map_batches(
                _read_shards,
                fn_kwargs={"feeder": feeder},
                batch_size=1,
                num_cpus=0,
                max_retries=0,
            )
        for _ in range(window):
            feed()
        for result in _map_in_order(
            ray,
            source,
            _EmbedWorker,
            constructor_kwargs={"spec": spec, "hooks": _Hooks.from_environment()},
            options=options,
            pool_size=pool_size,
        ):
            for shard, rows, tokens in zip(
                result["shard_id"], result["embeddings"], result["tokens"], strict=True
            ):
                del held[int(shard)]
                feed()
                yield int(shard), np.asarray(rows, dtype=np.float16), np.asarray(tokens, np.int64)
    finally:
        ray.kill(feeder)


# -------------------------------------------------------------------- assign


class _AssignWorker:
    """Ray Data actor: fetches the broadcast centroids once, assigns one block per call."""

    def __init__(
        self,
        centroids: list[Any],
        assign: Callable[..., tuple[np.ndarray, np.ndarray]],
        hooks: _Hooks,
    ) -> None:
        import ray

        # A list keeps Ray from resolving the reference in the constructor call.
        # The object store hands out read-only views; backends (torch) want a
        # writable array, so each actor keeps its own small copy (K x d floats).
        self.centroids = np.array(ray.get(centroids[0]), dtype=np.float32)
        self.assign = assign
        self.hooks = hooks
        self.done = 0
        self.files: dict[str, np.ndarray] = {}

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        starts, labels, scores = [], [], []
        for path, start, stop, offset in zip(
            batch["path"], batch["start"], batch["stop"], batch["offset"], strict=True
        ):
            self.hooks.before_item(self.done)
            path = str(path)
            if path not in self.files:
                self.files[path] = np.load(path, mmap_mode="r")
            block = np.asarray(self.files[path][int(start) : int(stop)])
            block_labels, block_scores = self.assign(block, self.centroids)
            starts.append(int(offset))
            labels.append(np.asarray(block_labels, dtype=np.int32))
            scores.append(np.asarray(block_scores, dtype=np.float32))
            self.done += 1
        return {"offset": np.asarray(starts, dtype=np.int64), "labels": labels, "scores": scores}


def _blocks(paths: Sequence[Path], block_rows: int) -> list[dict[str, Any]]:
    """(file, start, stop, global offset) of every block, in row order."""
    blocks, offset = [], 0
    for path in paths:
        rows = int(np.load(path, mmap_mode="r").shape[0])
        for start in range(0, rows, block_rows):
            stop = min(start + block_rows, rows)
            blocks.append(
                {"path": str(path), "start": start, "stop": stop, "offset": offset + start}
            )
        offset += rows
    return blocks


def assign_ray(
    paths: Sequence[str | os.PathLike[str]],
    centroids: np.ndarray,
    *,
    assign: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    block_rows: int = 65536,
    address: str | None = None,
    num_workers: int | None = None,
    num_gpus_per_worker: float = 0.0,
    num_cpus_per_worker: float = 1.0,
    num_cpus: int | None = None,
    max_in_flight: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Assign every row of the embedding shard files to its nearest centroid on Ray.

    Parameters
    ----------
    paths : sequence of path
        ``.npy`` files of shape ``(rows, dim)``, stacked by rows in this order
        (``embeddings/part-*.npy``). Workers memory-map them, so every worker
        must see them at the same path (a shared file system on a multi-node cluster).
    centroids : numpy.ndarray
        ``(K, dim)`` centroids, put in the object store once.
    assign : callable
        ``assign(block, centroids) -> (labels int32 (n,), scores float32 (n,))``,
        the pure per-block function of the cluster stage.
    block_rows : int
        Rows per task.
    address, num_workers, num_gpus_per_worker, num_cpus_per_worker, num_cpus, max_in_flight
        See :class:`RayOptions`; ``max_in_flight`` is accepted so that one
        ``engine_options`` serves both stages, and unused here (a block is
        described by a path and two numbers, and Ray Data bounds its own queue).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``labels`` int32 and ``scores`` float32 of length ``sum(rows)``: exactly
        what ``assign`` gives on the stacked rows, whatever the number of workers.

    Examples
    --------
    >>> labels, scores = assign_ray(parts, centroids, assign=assign)  # doctest: +SKIP
    """
    _check_count("block_rows", block_rows, "Pass e.g. block_rows=65536.")
    options = RayOptions(
        address=address,
        num_workers=num_workers,
        num_gpus_per_worker=num_gpus_per_worker,
        num_cpus_per_worker=num_cpus_per_worker,
        num_cpus=num_cpus,
        max_in_flight=max_in_flight,
    )
    blocks = _blocks([Path(p) for p in paths], int(block_rows))
    total = blocks[-1]["offset"] + blocks[-1]["stop"] - blocks[-1]["start"] if blocks else 0
    labels = np.full(total, -1, dtype=np.int32)
    scores = np.zeros(total, dtype=np.float32)
    filled = np.zeros(total, dtype=bool)
    if not blocks:
        return labels, scores
    ray = connect(options)
    centroids_ref = ray.put(np.ascontiguousarray(centroids, dtype=np.float32))
    constructor = {
        "centroids": [centroids_ref],
        "assign": assign,
        "hooks": _Hooks.from_environment(),
    }
    dataset = ray.data.from_items(blocks, override_num_blocks=len(blocks))
    with progress_bar(total=total, desc="assign (ray)", unit="doc") as bar:
        for result in _map_in_order(
            ray,
            dataset,
            _AssignWorker,
            constructor_kwargs=constructor,
            options=options,
            pool_size=min(_pool_size(ray, options), len(blocks)),
        ):
            for offset, block_labels, block_scores in zip(
                result["offset"], result["labels"], result["scores"], strict=True
            ):
                stop = int(offset) + len(block_labels)
                if filled[int(offset) : stop].any():
                    raise ClusterClipError(
                        f"Ray returned rows {offset}..{stop} twice; rerun the cluster stage."
                    )
                labels[int(offset) : stop] = block_labels
                scores[int(offset) : stop] = block_scores
                filled[int(offset) : stop] = True
                bar.update(len(block_labels))
    if not filled.all():
        raise ClusterClipError(
            f"Ray returned {int(filled.sum())} of {total} rows; rerun the cluster stage."
        )
    return labels, scores
