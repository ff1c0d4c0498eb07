"""Thread helpers and what the CPU offers: one BLAS / torch thread for many small
products, one helper thread, the tokenizer's threads, and the CPU's flags.

:func:`one_thread` is used by the k-means++ seeding, the node splits of
hierarchical k-means and the descent of a cluster tree: on a busy machine,
waking a second thread for each small product costs more than the product.
:func:`helper` is the one background thread the schedule engine hands work to
(version 3 looks up a window's documents there while it chooses the next window);
:func:`prefetched` runs the next item of a loop there (the static encoder
tokenises its next batch while it pools this one). :func:`native_bfloat16`
says from the CPU flags whether bfloat16 matmuls run natively (encoders,
k-means backends and benchmarks ask it).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any, TypeVar

__all__ = [
    "FasterWay",
    "OnDriverThreads",
    "available_cpus",
    "avx2_only",
    "blas_per_thread",
    "blas_threads",
    "cpu_flags",
    "driver_threads",
    "helper",
    "native_bfloat16",
    "on_driver_threads",
    "one_thread",
    "overlapped",
    "pinned_threads",
    "prefetched",
    "spread",
    "tokenizer_threads",
]

Item = TypeVar("Item")
Result = TypeVar("Result")
#: CPU flags of native bfloat16 matmuls (AVX512-BF16 dot products, AMX tiles).
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One BLAS / torch thread inside the block, for many small products in a row.

    Waking a second thread for a small product costs more than the product on a
    busy machine: 35x for a node split of hierarchical k-means (330 x 384 rows,
    33 centroids), and 6x for sequential k-means++ seeding (1,023 products of
    9 x 8,192 pool rows: 48 s on two threads, 7.7 s on one, load 6 on 2 cores).
    The thread counts are restored on exit.

    >>> with one_thread():
    ...     pass
    """
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with the cluster extra
        limits: Any = contextlib.nullcontext()
    else:
        limits = threadpool_limits(limits=1)
    with limits:
        if torch is not None:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if torch is not None:
                torch.set_num_threads(before)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it, else the count).

    >>> available_cpus() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """CPU feature flags of this machine (empty where /proc/cpuinfo is absent).

    >>> isinstance(cpu_flags(), frozenset)
    True
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def avx2_only(flags: Iterable[str] | None = None) -> bool:
    """True for an x86 CPU with AVX2 and FMA but no AVX-512 (AMD Zen 2 and 3, Intel
    client cores before Ice Lake). ``flags``: this machine's (:func:`cpu_flags`) when ``None``.

    >>> avx2_only({"avx2", "fma"}), avx2_only({"avx2", "fma", "avx512f"}), avx2_only(set())
    (True, False, False)
    """
    given = set(cpu_flags() if flags is None else flags)
    return {"avx2", "fma"} <= given and "avx512f" not in given


def native_bfloat16(flags: Iterable[str] | None = None) -> bool:
    """True when a CPU with these flags runs bfloat16 matmuls natively (AVX512-BF16 or AMX).

    Without them torch emulates bfloat16, many times slower than float32: the
    bfloat16 cases of the benchmarks are skipped there. ``flags``: this
    machine's (:func:`cpu_flags`) when ``None``.

    >>> native_bfloat16({"avx512f", "avx512_bf16"}), native_bfloat16({"amx_bf16", "amx_tile"})
    (True, True)
    >>> native_bfloat16({"avx2", "avx512f", "avx512_vnni"}), native_bfloat16(set())
    (False, False)
    """
    return bool(BFLOAT16_FLAGS & set(cpu_flags() if flags is None else flags))


def tokenizer_threads() -> int:
    """Threads the Rust tokenizers give one batch: the CPUs this process was given.

    The tokenizers split a batch over rayon's pool, sized once, at its first
    use, by ``RAYON_NUM_THREADS`` (default: every CPU the process may run on).
    Where ``OMP_NUM_THREADS`` says how many CPUs this process was given (Ray
    sets it to an actor's ``num_cpus``) and ``RAYON_NUM_THREADS`` is unset, it
    is set to the same number, so that actors sharing a node do not each start
    a thread per core. Call it before the first batch. ``TOKENIZERS_PARALLELISM``
    is left as it is: ``false`` (set by the user, or by ``model2vec`` when it
    runs its own batches on threads) makes a batch run on one thread.

    >>> tokenizer_threads() >= 1
    True
    """
    given = os.environ.get("OMP_NUM_THREADS", "")
    if "RAYON_NUM_THREADS" not in os.environ and given.isdigit() and int(given) > 0:
        os.environ["RAYON_NUM_THREADS"] = given
    threads = os.environ.get("RAYON_NUM_THREADS", "")
    return int(threads) if threads.isdigit() and int(threads) > 0 else available_cpus()


_BLAS_LOCK = threading.Lock()
#: Shared by every :func:`blas_per_thread` block: how many are open, and what they replaced.
_BLAS_STATE: dict[str, Any] = {"open": 0, "threads": 1, "controllers": None}


def _numpy_blas() -> list[Any]:
    """threadpoolctl's controllers of the BLAS numpy runs on (made once per process)."""
    if _BLAS_STATE["controllers"] is None:
        import numpy  # noqa: F401  (loads its BLAS, so the scan below finds it)
        from threadpoolctl import ThreadpoolController

        blas = ThreadpoolController().select(user_api="blas").lib_controllers
        numpy_own = [lib for lib in blas if "numpy" in str(lib.filepath)]
        _BLAS_STATE["controllers"] = numpy_own or blas
    return _BLAS_STATE["controllers"]


def _set_threads(lib: Any, threads: int) -> None:
    """Set a BLAS library's thread count, then give up threadpoolctl's control of it.

    threadpoolctl (3.5+) lets only the thread that last set an OpenBLAS limit set
    another until it clears its control; a :func:`blas_per_thread` block may be
    left from another thread than the one that opened it.
    """
    lib.set_num_threads(threads)
    clear = getattr(type(lib), "clear_controlling_thread", None)
    if clear is not None:
        clear()


def blas_threads() -> int:
    """How many threads numpy's BLAS runs a product on now (cheap: no library scan).

    >>> with one_thread():
    ...     blas_threads()
    1
    """
    with _BLAS_LOCK:
        if _BLAS_STATE["open"]:
            return int(_BLAS_STATE["threads"])
        return max([1, *(lib.num_threads for lib in _numpy_blas())])


@contextlib.contextmanager
def blas_per_thread() -> Iterator[int]:
    """Inside the block, each numpy product runs on the calling thread alone; yields
    how many threads numpy's BLAS had (the workers a caller may run products on).

    A product's last bits can follow the BLAS thread count (OpenBLAS 0.3.31 on an
    AVX2-only EPYC), so a caller that cuts its rows into fixed blocks, multiplies
    each on one thread and spreads the blocks over the yielded number of Python
    threads (:func:`spread`) gets the same bits on one thread and on many, and
    runs its arg-max and sums in parallel too. Blocks may nest and may be open
    in several threads at once: the first sets the count to 1, the last restores it.

    >>> with blas_per_thread() as workers:
    ...     workers >= 1
    True
    """
    with _BLAS_LOCK:
        if _BLAS_STATE["open"] == 0:
            libraries = _numpy_blas()
            _BLAS_STATE["threads"] = max([1, *(lib.num_threads for lib in libraries)])
            _BLAS_STATE["before"] = [lib.num_threads for lib in libraries]
            for lib in libraries:
                _set_threads(lib, 1)
        _BLAS_STATE["open"] += 1
        workers = int(_BLAS_STATE["threads"])
    try:
        yield workers
    finally:
        with _BLAS_LOCK:
            _BLAS_STATE["open"] -= 1
            if _BLAS_STATE["open"] == 0:
                for lib, threads in zip(_numpy_blas(), _BLAS_STATE["before"], strict=True):
                    _set_threads(lib, threads)


def spread(function: Callable[[Item], Any], items: Sequence[Item], workers: int) -> None:
    """Call ``function`` on every item, on up to ``workers`` threads (inline for one).

    For work whose results do not depend on which thread ran it (each call
    writes its own slice). The first error is raised once all calls are done.

    >>> out = [0, 0, 0]
    >>> spread(lambda i: out.__setitem__(i, i * i), range(3), workers=2)
    >>> out
    [0, 1, 4]
    """
    if workers <= 1 or len(items) <= 1:
        for item in items:
            function(item)
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        for future in [pool.submit(function, item) for item in items]:
            future.result()


_HELPER: ThreadPoolExecutor | None = None
_HELPER_LOCK = threading.Lock()


def _forget_helper() -> None:  # in a forked child: the parent's thread is not there
    global _HELPER, _HELPER_LOCK, _BLAS_LOCK
    _HELPER, _HELPER_LOCK, _BLAS_LOCK = None, threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helper)


def helper() -> ThreadPoolExecutor | None:
    """The process's one background worker thread, or None with a single CPU.

    Made on first use and shared (its tasks run one at a time, in order).
    A child forked after it was made (a DataLoader worker, say) gets a new
    one on its first call: an executor copied by ``fork`` has no thread and
    would never run a task.

    Examples
    --------
    >>> worker = helper()
    >>> worker is None or worker.submit(sum, [1, 2]).result() == 3
    True
    """
    global _HELPER
    if available_cpus() < 2:
        return None
    with _HELPER_LOCK:
        if _HELPER is None:
            _HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clusterclip-helper")
        return _HELPER


def prefetched(
    function: Callable[[Item], Result], items: Iterable[Item]
) -> Iterator[tuple[Item, Result]]:
    """``(item, function(item))`` in order, the next item's call already running on
    the :func:`helper` thread (one ahead, so at most two results are held).

    For a loop whose step has two halves that overlap: ``function`` (e.g. a
    tokenizer call, which releases the GIL) for the next item runs while the
    caller works on this one. In order and with the same results as a plain
    loop; inline where there is no helper (one CPU). An error of ``function``
    is raised where its item is reached.

    >>> [(n, square) for n, square in prefetched(lambda n: n * n, [1, 2, 3])]
    [(1, 1), (2, 4), (3, 9)]
    """
    worker = helper()
    if worker is None:
        for item in items:
            yield item, function(item)
        return
    pending = None
    for item in items:
        running = (item, worker.submit(function, item))
        if pending is not None:
            yield pending[0], pending[1].result()
        pending = running
    if pending is not None:
        yield pending[0], pending[1].result()


class FasterWay:
    """Picks, call after call, the faster of two equivalent ways of doing the same work.

    Each way is tried once, then the one with the lower recent time per call
    is used, and the other is tried again every ``every``-th call (a machine's
    load changes). Recent time: the median of the way's last three
    measurements (the lower of two), so that one slow call (a choice that
    also rebuilds its tables) does not turn the choice for the next ``every``
    calls, while two in a row do. The first ``warmup`` calls are not measured (they
    pay one-time costs, such as the first touch of fresh memory). For work
    whose result does not depend on the way (the schedule's window lookups on
    the helper thread or not): a speed knob measured where it runs, not
    guessed from the CPU count.

    Examples
    --------
    >>> ways = FasterWay(every=4, warmup=0)
    >>> picks = []
    >>> for _ in range(8):
    ...     way = ways.choose()
    ...     picks.append(way)
    ...     ways.record(way, 1.0 if way == 0 else 3.0)  # way 0 takes 1 s, way 1 3 s
    >>> picks  # each tried once, then way 0, and way 1 again every 4th call
    [0, 1, 0, 1, 0, 0, 0, 1]
    """

    def __init__(self, every: int = 16, warmup: int = 1) -> None:
        self.every = every
        self.warmup = warmup
        self.seconds = [math.inf, math.inf]
        self.calls = 0
        self._recent: tuple[list[float], list[float]] = ([], [])

    def choose(self) -> int:
        """The way (0 or 1) for the next call."""
        self.calls += 1
        for way in (0, 1):
            if self.seconds[way] == math.inf:
                return way
        best = 0 if self.seconds[0] <= self.seconds[1] else 1
        return 1 - best if self.calls % self.every == 0 else best

    def record(self, way: int, seconds: float) -> None:
        """The time the call done ``way`` took."""
        if self.calls <= self.warmup:
            return
        recent = self._recent[way]
        recent.append(seconds)
        del recent[:-3]
        self.seconds[way] = sorted(recent)[(len(recent) - 1) // 2]


def overlapped(
    worker: ThreadPoolExecutor | None,
    ways: FasterWay,
    there: Callable[[], Result],
    here: Callable[[], Item],
) -> tuple[Result, Item]:
    """``there()`` on ``worker`` while ``here()`` runs on this thread, when that measures faster.

    For two pieces of work that do not read what the other writes (the
    schedule's lookups and its next choice), so the results are the same either
    way; ``ways`` keeps the times of both ways. With no ``worker`` (one CPU),
    one after the other.

    Examples
    --------
    >>> overlapped(helper(), FasterWay(), lambda: 2 + 2, lambda: "chosen")
    (4, 'chosen')
    """
    threaded = worker is not None and ways.choose() == 1
    began = time.perf_counter()
    if threaded:
        future = worker.submit(there)
        try:
            mine = here()
        finally:
            theirs = future.result()
    else:
        theirs = there()
        mine = here()
    if worker is not None:
        ways.record(int(threaded), time.perf_counter() - began)
    return theirs, mine


def driver_threads() -> dict[str, int]:
    """The BLAS and torch thread counts a fit in this process would run on, without importing torch.

    torch's default is OpenMP's: ``OMP_NUM_THREADS`` when set, else the CPUs
    this process may run on; once torch is loaded, its actual count.

    >>> sorted(driver_threads())
    ['blas', 'torch']
    """
    torch = sys.modules.get("torch")
    default = os.environ.get("OMP_NUM_THREADS", "")
    fallback = int(default) if default.isdigit() and int(default) > 0 else available_cpus()
    blas = fallback
    try:
        from threadpoolctl import threadpool_info

        counts = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
        blas = counts[0] if counts else fallback
    except ImportError:
        pass
    return {"blas": int(blas), "torch": int(torch.get_num_threads() if torch else fallback)}


@contextlib.contextmanager
def pinned_threads(threads: Mapping[str, int] | None) -> Iterator[None]:
    """Run the block on these BLAS / torch thread counts (``None``: leave them as they are).

    >>> with pinned_threads({"blas": 1, "torch": 1}):
    ...     pass
    """
    if threads is None:
        yield
        return
    try:
        import torch  # the fit's backends load it anyway; its threads must be set before
    except ImportError:  # numpy and faiss alone: only the BLAS and OpenMP counts
        torch = None
    before = torch.get_num_threads() if torch is not None else 0
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with the cluster extra
        limits: Any = contextlib.nullcontext()
    else:
        # OpenMP (torch's, faiss's) on torch's count: both follow OMP_NUM_THREADS by default
        counts = {"blas": int(threads["blas"]), "openmp": int(threads["torch"])}
        limits = threadpool_limits(limits=counts)
    with limits:
        if torch is not None:
            torch.set_num_threads(int(threads["torch"]))
        try:
            yield
        finally:
            if torch is not None:
                torch.set_num_threads(before)


class OnDriverThreads:
    """A worker built by ``factory`` whose every call runs on ``threads``
    (:func:`pinned_threads`): see :func:`on_driver_threads`."""

    def __init__(self, factory: Any, threads: Mapping[str, int]) -> None:
        self.worker = factory()
        self.threads = dict(threads)

    def __call__(self, payload: Any) -> Any:
        with pinned_threads(self.threads):
            return self.worker(payload)


def on_driver_threads(factory: Any, engine: str) -> Any:
    """``factory`` (a :func:`~clusterclip.engines.map_shards` worker) run on this process's
    thread counts wherever the engine runs it.

    An exact product's last bits can follow the thread count (MKL's; OpenBLAS's on
    an AVX2-only EPYC, for numpy's and faiss's builds alike), and a Ray actor
    reserving one CPU starts with one thread, so the assignment and dedup tasks
    would score rows differently from the local engine. On the local engine
    ``factory`` is returned as it is; elsewhere each call runs on
    :func:`driver_threads` (the price: a worker with fewer CPUs than the driver has
    threads shares them).

    >>> on_driver_threads(dict, "local") is dict
    True
    """
    if engine == "local":
        return factory
    import functools

    return functools.partial(OnDriverThreads, factory, driver_threads())
