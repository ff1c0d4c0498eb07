"""One local Ray instance (2 CPUs) for every Ray test of this package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Every Ray instance a test starts binds to 127.0.0.1 (read when Ray is imported; the
# raylets and drivers the tests start inherit it).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="session")
def ray_address():
    """A fresh local Ray instance with 2 CPUs; its GCS address.

    Its workers inherit this process's environment, so the repository root is
    put on ``PYTHONPATH`` first: they must import ``tests.engines.workers``.
    """
    ray = pytest.importorskip("ray")
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, before) if p)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
