"""The cluster stage's seed-stability figure: definition, determinism, summary, report, off switch."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.cluster import cluster
from clusterclip.cluster.stability import agreement
from clusterclip.io import read_stage
from tests.cluster.helpers import make_workdir
from tests.product_support import kjv_records, require_module


def _pair_counts(a, b):
    """Pairs together in a, in b, in both: the obviously-correct O(n^2) loop."""
    both = in_a = in_b = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        same_a, same_b = a[i] == a[j], b[i] == b[j]
        in_a += same_a
        in_b += same_b
        both += same_a and same_b
    return both, in_a, in_b


def test_agreement_matches_pair_counting_and_sklearn():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.integers(0, 4, 40), rng.integers(0, 5, 40)
        b[:20] = a[:20]  # partly agreeing
        both, in_a, in_b = _pair_counts(a, b)
        result = agreement(a, b)
        assert result["pairs_kept"] == pytest.approx(both / in_a)
        assert result["fowlkes_mallows"] == pytest.approx(both / np.sqrt(in_a * in_b))
        metrics = require_module("sklearn.metrics", "cluster")
        assert result["ari"] == pytest.approx(metrics.adjusted_rand_score(a, b))
    same = agreement(np.array([3, 3, 1, 1, 2]), np.array([0, 0, 9, 9, 4]))
    assert same == {"ari": 1.0, "fowlkes_mallows": 1.0, "pairs_kept": 1.0}


def test_stage_records_stability_deterministically(tmp_path, mixture):
    X, _ = mixture
    work = make_workdir(tmp_path / "w", X, ["ok"] * len(X), shard_rows=700)
    result = cluster(work, n_clusters=12, seed=0, backend="numpy", stability_sample=1000)
    stability = result.summary["stability"]
    assert stability["sample_size"] == 1000
    assert -1 <= stability["ari"] <= 1 and 0 <= stability["pairs_kept"] <= 1
    assert stability["ari"] > 0.5  # a clean mixture: most of the structure is not chance
    entry = read_stage(work, "cluster")
    assert entry["summary"]["stability"] == stability
    again = cluster(work, n_clusters=12, seed=0, backend="numpy", stability_sample=1000,
                    overwrite=True)  # fmt: skip
    assert {k: v for k, v in again.summary["stability"].items() if k != "seconds"} == {
        k: v for k, v in stability.items() if k != "seconds"
    }
    off = cluster(work, n_clusters=12, seed=0, backend="numpy", stability_sample=0, overwrite=True)
    assert off.summary["stability"] is None
    assert off.labels.tobytes() == result.labels.tobytes()  # the figure never changes labels


def test_run_prints_machine_and_stability_and_report_shows_it(tmp_path, capsys):
    require_module("sklearn", "cluster")
    corpus = tmp_path / "kjv.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in kjv_records(step=100)))
    work = tmp_path / "w"
    args = ["run", str(corpus), "--workdir", str(work), "--encoder", "tfidf"]
    assert main([*args, "--n-clusters", "8", "--portable"]) == 0
    out = capsys.readouterr().out
    machine = next(line for line in out.splitlines() if line.startswith("machine:"))
    assert "family" in machine and "k-means backend torch-fp32" in machine
    assert "threads" in machine
    stability = next(line for line in out.splitlines() if line.startswith("stability:"))
    assert "ARI" in stability and "chance" in stability
    html = (work / "report.html").read_text("utf-8")
    assert "<h2>Stability</h2>" in html and "is chance" in html
    report = json.loads((work / "report.json").read_text())
    assert report["stability"]["ari"] == read_stage(work, "cluster")["summary"]["stability"]["ari"]


def test_portable_fixes_precision_and_backend_and_refuses_conflicts():
    from clusterclip.config import ClusterOptions, EmbedOptions, RunConfig, config_from_mapping
    from clusterclip.errors import ClusterClipError

    config = config_from_mapping({"portable": True, "cluster": {"n_clusters": 4}})
    assert config.stage_options("embed").precision == "float32"
    assert config.stage_options("cluster").backend in ("torch-fp32", "numpy")
    assert RunConfig().stage_options("embed").precision == "auto"
    with pytest.raises(ClusterClipError, match=r"`embed.precision` must be one of auto, float32"):
        RunConfig(portable=True, embed=EmbedOptions(precision="bfloat16"))
    with pytest.raises(ClusterClipError, match=r"`cluster.backend` must be one of"):
        RunConfig(portable=True, cluster=ClusterOptions(n_clusters=3, backend="torch-bf16"))
