"""The helper thread: shared, and remade in a forked child (a DataLoader worker)."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest

from clusterclip import threads
from clusterclip.schedule import build_schedule

LABELS = np.random.default_rng(2).integers(0, 3000, 100_000)
KWARGS = dict(max_repeats=2, num_samples=150_000, seed=9, schedule_version=3)


def _in_child(queue) -> None:
    forgotten = threads._HELPER is None  # the parent's executor has no thread here
    result = threads.helper().submit(sum, [1, 2]).result(timeout=30)
    indices = build_schedule(LABELS, **KWARGS).indices  # looks windows up on the helper
    queue.put((forgotten, result, indices.tobytes()))


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform"
)
def test_a_forked_child_gets_a_helper_thread_of_its_own(monkeypatch):
    monkeypatch.setattr(threads, "available_cpus", lambda: 2)
    parent = threads.helper()
    assert parent is threads.helper()  # one per process
    assert parent.submit(sum, [1, 2]).result(timeout=30) == 3  # its thread is running
    expected = build_schedule(LABELS, **KWARGS).indices.tobytes()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    try:  # read before joining: the child's queue writes 1.2 MB and waits for a reader
        got = queue.get(timeout=120)  # a copied executor would never run the child's task
    finally:
        child.join(30)
        if child.exitcode is None:
            child.kill()
    assert got == (True, 3, expected)
    assert child.exitcode == 0


def test_no_helper_on_one_cpu(monkeypatch):
    monkeypatch.setattr(threads, "available_cpus", lambda: 1)
    assert threads.helper() is None


def test_the_faster_way_follows_a_change_of_load():
    """Way 1 is faster, then (another job starts) three times slower: within one
    exploration period the choice moves to way 0, and most calls use the faster."""
    ways = threads.FasterWay(every=8, warmup=0)
    picks = []
    for call in range(200):
        way = ways.choose()
        picks.append(way)
        slow_one = call >= 100
        ways.record(way, (3.0 if slow_one else 0.5) if way == 1 else 1.0)
    assert picks[:2] == [0, 1]  # each way tried once
    assert picks[2:100].count(1) >= 80  # way 1 while it is faster
    switched = 100 + picks[100:].index(0)
    assert switched <= 100 + 8 + 2
    assert picks[switched:].count(0) >= 0.8 * len(picks[switched:])


def test_one_slow_call_does_not_turn_the_choice_but_two_do():
    """A choice that also rebuilds its tables makes one call slow: the faster way stays
    (a mean would have moved to the slower way for a whole exploration period)."""
    ways = threads.FasterWay(every=1000, warmup=0)
    for way, seconds in ((0, 2.0), (1, 1.0), (1, 1.0), (1, 1.0)):
        assert ways.choose() == way
        ways.record(way, seconds)
    ways.choose()
    ways.record(1, 20.0)  # one outlier
    assert ways.seconds == [2.0, 1.0]
    assert ways.choose() == 1
    ways.record(1, 20.0)  # the way became slower: two in a row turn the choice
    assert ways.seconds == [2.0, 20.0]
    assert ways.choose() == 0


def test_the_first_calls_are_not_measured():
    ways = threads.FasterWay(warmup=2)
    for _ in range(2):  # one-time costs: nothing recorded, way 0 again
        assert ways.choose() == 0
        ways.record(0, 100.0)
    assert ways.choose() == 0
    ways.record(0, 1.0)
    assert ways.choose() == 1
    ways.record(1, 2.0)
    assert ways.seconds == [1.0, 2.0]


def test_blas_per_thread_runs_numpy_on_one_thread_and_restores_the_count():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        before = threads.blas_threads()
        with threads.blas_per_thread() as workers:
            assert workers == before  # the workers a caller may spread blocks over
            assert [lib.num_threads for lib in threads._numpy_blas()] == [1] * len(
                threads._numpy_blas()
            )
            assert threads.blas_threads() == before  # still what the caller was given
            with threads.blas_per_thread() as nested:  # nested: the same workers, still one
                assert nested == before
            assert all(lib.num_threads == 1 for lib in threads._numpy_blas())
        assert threads.blas_threads() == before  # the last block out restores it


SEVERAL_HOLDERS = """
import threading
from threadpoolctl import threadpool_limits
from clusterclip import threads

with threadpool_limits(limits=2, user_api="blas"):
    before = threads.blas_threads()
    inside, release = threading.Barrier(3), threading.Event()

    def hold():
        with threads.blas_per_thread():
            inside.wait(timeout=30)
            release.wait(timeout=30)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for holder in holders:
        holder.start()
    inside.wait(timeout=30)
    during = [lib.num_threads for lib in threads._numpy_blas()]
    release.set()
    for holder in holders:
        holder.join(timeout=30)
    print(before, during, threads.blas_threads())
"""


def test_blas_per_thread_open_in_several_threads_restores_the_count_once_all_are_out():
    """Run in a fresh interpreter: the BLAS thread count is one per process, and
    another test's thread that sets it meanwhile would make this one meaningless."""
    import subprocess
    import sys

    # OpenBLAS never runs more threads than it started with: start it with two, whatever
    # the CPU count and whatever thread variables an earlier test left in the environment
    counts = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    env = {key: value for key, value in os.environ.items() if key not in counts}
    env.update(OPENBLAS_NUM_THREADS="2", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, "-c", SEVERAL_HOLDERS], env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.split("\n")[0] == "2 [1] 2", done.stdout + done.stderr


def test_spread_calls_every_item_once_and_raises_the_first_error():
    seen = np.zeros(50, dtype=np.int64)

    def mark(item: int) -> None:
        seen[item] += 1

    threads.spread(mark, range(50), workers=3)
    assert seen.tolist() == [1] * 50

    def fail(item: int) -> None:
        if item == 7:
            raise ValueError(f"item {item}")

    with pytest.raises(ValueError, match="item 7"):
        threads.spread(fail, range(20), workers=2)
    with pytest.raises(ValueError, match="item 7"):
        threads.spread(fail, range(20), workers=1)
