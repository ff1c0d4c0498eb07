"""MosaicML streaming: the MDS export read back by the real library (.venvs/streaming)."""

from __future__ import annotations

import pytest

from tests.product_support import run_client_check


@pytest.mark.slow
def test_real_streaming_reads_the_schedule_across_ranks_workers_and_resume(tmp_path):
    output = run_client_check("streaming", "tests.clients.mds_check", tmp_path)
    assert "mds check: ok" in output
