"""backend="fastest" by measurement (issue 14; `auto` until issue 29 made it a CPU rule): the
probe, its cache and what the stage records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.cluster import KMeans, cluster, probe
from clusterclip.cluster.probe import BackendChoice, cache_file, choose_backend, pick
from clusterclip.io import read_stage
from tests.cluster.helpers import make_workdir

CANDIDATES = ["numpy", "torch-fp32"]


@pytest.fixture()
def rows(mixture) -> np.ndarray:
    return np.ascontiguousarray(mixture[0][:1500], dtype=np.float32)


def _no_probe(*args, **kwargs):
    raise AssertionError("the probe ran")


def test_cache_miss_probes_then_hit_reads(rows, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    first = choose_backend("fastest", rows, 12, cache_dir=tmp_path, candidates=CANDIDATES)
    assert first.reason == "probe" and first.backend in CANDIDATES
    assert set(first.seconds) == set(CANDIDATES) and first.skipped == {}
    assert first.probe_rows == 1500 and first.probe_seconds is not None
    assert first.cache == str(tmp_path / "kmeans-backend.json") and first.cache_error is None
    stored = json.loads((tmp_path / "kmeans-backend.json").read_text())
    assert stored["version"] == 1 and len(stored["entries"]) == 1
    key = json.loads(next(iter(stored["entries"])))
    assert {"cpu", "cpus", "versions", "dim", "clusters_bucket", "rows_bucket"} <= set(key)
    assert key["dim"] == 32 and key["clusters_bucket"] == 16
    monkeypatch.setattr(probe, "time_backends", _no_probe)
    second = choose_backend("fastest", rows, 13, cache_dir=tmp_path, candidates=CANDIDATES)
    assert second.reason == "cached" and second.backend == first.backend  # K 13: same bucket
    assert second.seconds == first.seconds and second.probe_seconds is None
    assert "cached probe" in second.describe()


def test_another_shape_bucket_probes_again(rows, tmp_path):
    choose_backend("fastest", rows, 12, cache_dir=tmp_path, candidates=["numpy"])
    again = choose_backend("fastest", rows, 40, cache_dir=tmp_path, candidates=["numpy"])
    assert again.reason == "probe"
    other_dim = choose_backend(
        "fastest", rows[:, :16].copy(), 12, cache_dir=tmp_path, candidates=["numpy"]
    )
    assert other_dim.reason == "probe"
    assert len(json.loads(cache_file(tmp_path).read_text())["entries"]) == 3


def test_cached_backend_no_longer_available_probes_again(rows, tmp_path):
    pytest.importorskip("torch")
    choose_backend("fastest", rows, 12, cache_dir=tmp_path, candidates=["torch-fp32"])
    again = choose_backend("fastest", rows, 12, cache_dir=tmp_path, candidates=["numpy"])
    assert again.reason == "probe" and again.backend == "numpy"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"version": 99, "entries": {}}', ""])
def test_corrupt_cache_file_falls_back_to_probing_and_is_rewritten(rows, tmp_path, content):
    path = cache_file(tmp_path)
    path.write_text(content)
    choice = choose_backend("fastest", rows, 12, cache_dir=tmp_path, candidates=["numpy"])
    assert choice.reason == "probe" and choice.backend == "numpy"
    assert choice.cache_error is not None and str(path) in choice.cache_error
    assert json.loads(path.read_text())["version"] == 1  # repaired
    assert (
        choose_backend("fastest", rows, 12, cache_dir=tmp_path, candidates=["numpy"]).reason
        == "cached"
    )


def test_unwritable_cache_dir_probes_without_crashing(rows, tmp_path):
    # A file where the directory should be: fails for root too (unlike chmod).
    blocked = tmp_path / "file"
    blocked.write_text("x")
    for _ in range(2):
        choice = choose_backend(
            "fastest", rows, 12, cache_dir=blocked / "cache", candidates=["numpy"]
        )
        assert choice.reason == "probe" and choice.backend == "numpy"
        assert choice.cache_error.startswith("not written to ")


def test_failing_candidate_is_skipped(rows, tmp_path, monkeypatch):
    real = probe.get_backend

    class Broken:
        name = "faiss"

        def prepare(self, X):
            return X

        def assign_and_sum(self, prepared, X, centroids):
            raise RuntimeError("illegal instruction, say")

    def fake(name):
        if name == "torch-bf16":
            raise ImportError("no bf16 build")
        return Broken() if name == "faiss" else real(name)

    monkeypatch.setattr(probe, "get_backend", fake)
    choice = choose_backend(
        "fastest", rows, 12, cache_dir=tmp_path, candidates=["faiss", "torch-bf16", "numpy"]
    )
    assert choice.backend == "numpy" and set(choice.seconds) == {"numpy"}
    assert choice.skipped == {
        "faiss": "RuntimeError: illegal instruction, say",
        "torch-bf16": "ImportError: no bf16 build",
    }
    assert "faiss failed" in choice.describe()


def test_every_candidate_failing_falls_back_to_the_flag_rule(rows, tmp_path, monkeypatch):
    def broken(name):
        raise RuntimeError("nope")

    monkeypatch.setattr(probe, "get_backend", broken)
    choice = choose_backend("fastest", rows, 12, cache_dir=tmp_path, candidates=["numpy"])
    assert choice.reason == "probe failed: the CPU-flag rule" and choice.skipped
    assert not cache_file(tmp_path).exists()


def test_forced_backend_bypasses_the_probe(rows, tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "time_backends", _no_probe)
    monkeypatch.setenv("CLUSTERCLIP_CACHE", str(tmp_path))
    choice = choose_backend("numpy", rows, 12)
    assert choice == BackendChoice("numpy", "numpy", "forced by user")
    km = KMeans(12, seed=0, backend="numpy").fit(rows)
    assert km.backend_choice_["reason"] == "forced by user" and km.backend_ == "numpy"
    assert not cache_file(tmp_path).exists()
    assert choose_backend("torch", rows, 12).describe().startswith("torch-")  # "torch" resolved


def test_pick_prefers_exact_backends_unless_bf16_is_clearly_faster():
    assert pick({"numpy": 0.5, "torch-fp32": 0.2}) == "torch-fp32"
    assert pick({"faiss": 0.2, "torch-bf16": 0.185}) == "faiss"
    assert pick({"faiss": 0.2, "torch-bf16": 0.17}) == "torch-bf16"
    assert pick({"torch-bf16": 0.3}) == "torch-bf16"


def test_kmeans_fastest_uses_the_env_cache_dir(rows, tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERCLIP_CACHE", str(tmp_path / "cc"))
    first = KMeans(12, seed=0, backend="fastest").fit(rows)
    assert first.backend_choice_["reason"] == "probe"
    assert first.backend_ == first.backend_choice_["backend"]
    assert (tmp_path / "cc" / "kmeans-backend.json").is_file()
    second = KMeans(12, seed=0, backend="fastest").fit(rows)
    assert second.backend_choice_["reason"] == "cached" and second.backend_ == first.backend_


def test_the_suite_never_writes_to_the_home_cache(private_cache):
    assert cache_file().parent == private_cache


def test_stage_summary_manifest_and_cli_record_the_choice(tmp_path, mixture, capsys, monkeypatch):
    monkeypatch.setenv("CLUSTERCLIP_CACHE", str(tmp_path / "cc"))
    work = make_workdir(tmp_path / "w", mixture[0])
    result = cluster(work, n_clusters=12, seed=0, backend="fastest", stability_sample=0)
    choice = result.summary["backend_choice"]
    assert choice["reason"] == "probe" and choice["requested"] == "fastest"
    assert result.summary["backend"] == choice["backend"] and choice["seconds"]
    assert read_stage(work, "cluster")["summary"]["backend_choice"] == choice
    # A rerun with other settings reads the cache; a forced backend says so.
    again = cluster(
        work, n_clusters=12, seed=1, backend="fastest", stability_sample=0, overwrite=True
    )
    assert again.summary["backend_choice"]["reason"] == "cached"
    assert main(["cluster", "--workdir", str(work), "--n-clusters", "12", "--backend", "numpy",
                 "--stability-sample", "0", "--overwrite"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "backend        numpy (forced by user)" in out
    assert read_stage(work, "cluster")["summary"]["backend_choice"]["reason"] == "forced by user"


def test_machine_line_says_why():
    from clusterclip.cli.run import machine_line

    line = machine_line({"cpu": "X", "kmeans_backend": "faiss", "kmeans_backend_reason": "cached"})
    assert "k-means backend faiss (cached)" in line


def test_cache_root_follows_the_one_cache_variable(tmp_path, monkeypatch):
    from pathlib import Path

    from clusterclip.cache import cache_root

    monkeypatch.setenv("CLUSTERCLIP_CACHE", str(tmp_path))
    assert cache_root() == tmp_path and cache_file() == tmp_path / "kmeans-backend.json"
    monkeypatch.setenv("CLUSTERCLIP_CACHE", "")
    assert cache_root() == Path.home() / ".cache" / "clusterclip"
