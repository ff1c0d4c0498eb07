"""benchmarks/gpu_check.sh, the GPU machine's one script, run whole on this CPU at a small size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_check_runs_every_step_and_writes_its_figures(tmp_path):
    """Embed, the CPU reference, k-means on auto and on torch-fp32, and the whole run:
    on a CPU machine both sides are the CPU, so the rows agree exactly."""
    env = {**os.environ, "DOCS": "400", "DEVICE": "cpu", "ENCODER": "static",
           "STAGE": str(tmp_path / "stage"), "HF_HUB_OFFLINE": "1", "PY": sys.executable}  # fmt: skip
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), str(tmp_path / "out")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert report["documents"] == 400 and report["reference_documents"] == 100
    assert report["cosine_min"] == 1.0 and report["cosine_ok"]
    assert report["embed_docs_per_second"] > 0 and report["run_seconds"] > 0
    assert report["kmeans_clusters"] == 8 and 0.3 < report["kmeans_ari_auto_vs_cpu"] <= 1.0
    assert "gpu_check: clusterclip run on 400 documents" in done.stdout
    assert (tmp_path / "out" / "gpu_check.log").stat().st_size > 0
