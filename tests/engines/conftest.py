"""One local Ray instance (2 CPUs) for every Ray test of this package."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Every Ray instance a test starts binds to 127.0.0.1 (read when Ray is imported; the
# raylets and drivers the tests start inherit it).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

ROOT = str(Path(__file__).resolve().parents[2])


@contextlib.contextmanager
def repository_on_pythonpath() -> Iterator[None]:
    """The repository root on ``PYTHONPATH`` while it lasts: Ray workers inherit this
    process's environment and must import ``tests.engines.workers``."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, before) if p)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


@contextlib.contextmanager
def local_cluster(*, head_cpus: int, worker_nodes: int) -> Iterator[Any]:
    """A ``ray.cluster_utils.Cluster`` on 127.0.0.1: a head of ``head_cpus`` CPUs and
    ``worker_nodes`` nodes of 1 CPU each (separate raylets and object stores).
    Drivers connect from their own processes."""
    from ray.cluster_utils import Cluster

    with repository_on_pythonpath():
        cluster = Cluster(
            initialize_head=True,
            connect=False,
            head_node_args={"num_cpus": head_cpus, "include_dashboard": False},
        )
        try:
            for _ in range(worker_nodes):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            yield cluster
        finally:
            cluster.shutdown()


@pytest.fixture(scope="session")
def ray_address():
    """A fresh local Ray instance with 2 CPUs; its GCS address.

    Its workers inherit this process's environment, so the repository root is
    put on ``PYTHONPATH`` first: they must import ``tests.engines.workers``.
    """
    ray = pytest.importorskip("ray")
    with repository_on_pythonpath():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()
