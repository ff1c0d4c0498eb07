"""The executor layer on its own: local and Ray, with a trivial picklable worker."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap

import pytest

import clusterclip.engines
from clusterclip.engines import RayOptions, map_shards, resolve_options
from clusterclip.errors import ClusterClipError
from tests.engines.workers import KillOnce, Slow, Tagged

N_TASKS = 12
TASKS = [(10 * i, i) for i in range(N_TASKS)]  # ids differ from positions


def test_local_results_in_task_order_and_one_build():
    results = list(map_shards(iter(TASKS), functools.partial(Tagged, 3)))
    assert [task_id for task_id, _ in results] == [task_id for task_id, _ in TASKS]
    assert [value for _, (value, _, _) in results] == [3 * i for i in range(N_TASKS)]
    assert len({build for _, (_, _, build) in results}) == 1


def test_local_builds_no_worker_without_tasks():
    def factory():
        raise AssertionError("built for nothing")

    assert list(map_shards([], factory)) == []


def test_local_reads_one_task_ahead_not_the_stream():
    """The next task is read while the current one runs; memory holds two, not all."""
    taken = []

    def tasks():
        for task in TASKS:
            taken.append(task[0])
            yield task

    results = map_shards(tasks(), functools.partial(Tagged, 1))
    next(results)
    assert taken == [0, 10]
    next(results)
    assert taken == [0, 10, 20]


def test_engine_names_and_options_are_checked():
    with pytest.raises(ClusterClipError, match=r"`engine` must be one of \['local', 'ray'\]"):
        resolve_options("spark", None)
    with pytest.raises(ClusterClipError, match="`engine_options` must be empty for engine='local'"):
        resolve_options("local", {"num_workers": 2})
    with pytest.raises(ClusterClipError, match=r"Drop \['workers'\]"):
        resolve_options("ray", {"workers": 2})
    assert resolve_options("ray", None) == RayOptions()
    with pytest.raises(ClusterClipError, match="`options` must be None for engine='local'"):
        map_shards(TASKS, functools.partial(Tagged, 1), options=RayOptions())


def test_ray_options_are_validated():
    with pytest.raises(ClusterClipError, match=r"`num_workers` must be an int in \[1, inf\)"):
        RayOptions(num_workers=0)
    with pytest.raises(ClusterClipError, match="`num_gpus_per_worker` must be a number >= 0"):
        RayOptions(num_gpus_per_worker=-1)
    with pytest.raises(ClusterClipError, match="`ray_address` must be a Ray address"):
        RayOptions(address="")


def test_importing_the_engines_imports_no_ray():
    script = "import sys, clusterclip.engines; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert set(clusterclip.engines.ENGINES) == {"local", "ray"}


def _ray(num_workers: int = 2, max_in_flight: int | None = None) -> RayOptions:
    return RayOptions(num_workers=num_workers, max_in_flight=max_in_flight)


def test_ray_results_in_task_order_and_one_build_per_actor(ray_address):
    # Uneven task times make the actors finish out of order.
    worker = Slow(functools.partial(Tagged, 3), 0.02)
    results = list(map_shards(iter(TASKS), worker, engine="ray", options=_ray()))
    assert results[0][1][0] == 0
    assert [task_id for task_id, _ in results] == [task_id for task_id, _ in TASKS]
    assert [value for _, (value, _, _) in results] == [3 * i for i in range(N_TASKS)]
    builds = {(pid, build) for _, (_, pid, build) in results}
    assert len(builds) == 2  # two actors, each built its worker once
    assert len({pid for pid, _ in builds}) == 2


def test_ray_takes_tasks_lazily(ray_address):
    taken = []

    def tasks():
        for task in TASKS:
            taken.append(task[0])
            yield task

    results = map_shards(tasks(), functools.partial(Tagged, 1), engine="ray", options=_ray(2, 3))
    next(results)
    assert len(taken) == 4  # 3 in flight, then one more submitted when the first came back
    assert len(list(results)) == N_TASKS - 1


def test_ray_retries_the_tasks_of_a_dead_worker(ray_address, tmp_path):
    marker = tmp_path / "killed"
    worker = KillOnce(functools.partial(Tagged, 3), str(marker))
    results = list(map_shards(TASKS, worker, engine="ray", options=_ray()))
    assert marker.read_text().startswith("killed worker pid")  # a worker did die mid-run
    assert [(task_id, value) for task_id, (value, _, _) in results] == [
        (task_id, 3 * payload) for task_id, payload in TASKS
    ]
    dead = int(marker.read_text().split()[-1])
    pids = [pid for _, (_, pid, _) in results]
    # It died on its second task; its first result may have died with it (then retried).
    assert pids.count(dead) <= 1
    assert len(set(pids) - {dead}) == 2  # the other actor, and the dead one restarted


def test_ray_without_tasks_does_not_connect():
    assert list(map_shards([], functools.partial(Tagged, 1), engine="ray")) == []


def test_a_pool_larger_than_the_cluster_is_refused(ray_address):
    with pytest.raises(ClusterClipError, match="`num_workers` must be at most 2 on this Ray"):
        next(map_shards(TASKS, functools.partial(Tagged, 1), engine="ray", options=_ray(3)))


def test_missing_ray_names_the_install_line():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed
        from clusterclip.engines import map_shards, resolve_options
        from clusterclip.errors import MissingDependencyError
        for attempt in (
            lambda: resolve_options("ray", {"num_workers": 2}),
            lambda: next(map_shards([(0, "text")], lambda: str.upper, engine="ray")),
        ):
            try:
                attempt()
            except MissingDependencyError as error:
                print(error)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.count("pip install 'clusterclip[ray]'") == 2
