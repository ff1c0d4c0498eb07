"""A missing client environment is skipped on a laptop and fails under CI."""

from __future__ import annotations

import pytest

from tests.product_support import client_python


def test_missing_client_env_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"install-client-env.sh no-such-client"):
        client_python("no-such-client")


def test_missing_client_env_is_skipped_elsewhere(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"\.venvs/no-such-client is not built"):
        client_python("no-such-client")
