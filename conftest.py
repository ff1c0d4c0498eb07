"""Fixtures for the whole suite (tests/ and the doctests in src/): a private cache
directory, so no test writes to ~/.cache."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory):
    """``CLUSTERCLIP_CACHE`` (the backend probe's results, distilled static encoders)
    points into the session's temporary directory, also for child processes."""
    from clusterclip.cache import CACHE_ENV

    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("clusterclip-cache")
        patch.setenv(CACHE_ENV, str(path))
        yield path
