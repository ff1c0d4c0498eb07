"""The cluster stage's fit as an engine task: on a Ray actor it gives the local bytes.

The fit (flat and hierarchical, with the seed-stability fit) runs as one task
of the stage's engine; its worker opens the work directory and reads its sample
rows itself (:mod:`clusterclip.cluster.fitting`). A real work directory (the
TF-IDF embeddings of 2,000 KJV verses) is clustered on both engines.
"""

from __future__ import annotations

import functools
import gzip
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

import clusterclip
from clusterclip.cluster import KMeans
from clusterclip.cluster.fitting import (
    FitWorker,
    RowView,
    driver_threads,
    fit_on_engine,
    pinned_threads,
)
from clusterclip.io import WorkDir

pytest.importorskip("ray")

N_VERSES = 2000
RAY_OPTIONS = {"num_workers": 2}


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Path:
    """A work directory with 2,000 verses embedded by TF-IDF, and 40 empty texts (not ok)."""
    source = Path(clusterclip.__file__).parent / "data" / "kjv-verses.jsonl.gz"
    folder = tmp_path_factory.mktemp("fit")
    corpus = folder / "kjv.jsonl"
    with gzip.open(source, "rt", encoding="utf-8") as lines, open(corpus, "w") as out:
        for number, line in enumerate(lines):
            if number == N_VERSES:
                break
            if number % 50 == 7:
                out.write(json.dumps({"text": ""}) + "\n")
            out.write(line)
    workdir = folder / "embedded"
    clusterclip.embed(corpus, workdir=workdir, encoder="tfidf", shard_size=700)
    return workdir


def _comparable(workdir: Path) -> dict:
    """The cluster manifest entry without what may differ between engines or runs."""
    entry = json.loads((workdir / "manifest.json").read_text())["stages"]["cluster"]
    entry.pop("engine")
    entry.pop("seconds", None)
    summary = entry["summary"]
    summary.pop("seconds")
    if summary.get("stability"):
        summary["stability"].pop("seconds")
    if summary.get("init"):  # one thread or all, picked by a timing: speed only
        summary["init"]["lloyd_threads"].pop("threads")
        summary["init"]["lloyd_threads"].pop("seconds")
        summary["init"].pop("seconds")
    # torch's threads are listed only where torch is already loaded: a reused Ray worker may
    # have loaded it for another test, a fresh test process not (speed only, not the bytes)
    summary.get("threads", {}).pop("torch", None)
    if "blas" in entry:  # whether this process set OPENBLAS_CORETYPE: a Ray worker inherits
        entry["blas"].pop("set_by_clusterclip")  # it from the test process once faiss loaded
    for stat in entry["fit_stats"]:
        stat.pop("seconds")
    if "levels" in summary:
        for stat in summary["levels"]["fit"]:
            stat.pop("seconds")
    return entry


@pytest.mark.parametrize(
    "settings",
    [
        {"n_clusters": 12},  # backend auto, seed stability measured
        {"n_clusters": 30, "levels": (3, 10), "backend": "numpy", "beam": 2},
    ],
    ids=["flat-auto", "hierarchical"],
)
def test_fit_on_ray_writes_the_local_engines_bytes(ray_address, embedded, tmp_path, settings):
    runs = {}
    for engine in ("local", "ray"):
        workdir = tmp_path / engine
        shutil.copytree(embedded, workdir)
        options = {"engine_options": dict(RAY_OPTIONS)} if engine == "ray" else {}
        runs[engine] = clusterclip.cluster(
            workdir, seed=3, assign_batch_size=500, engine=engine, **options, **settings
        )
    local, ray = runs["local"], runs["ray"]
    np.testing.assert_array_equal(ray.centroids, local.centroids)
    np.testing.assert_array_equal(ray.labels, local.labels)
    for name in ("centroids.npy", "clusters.parquet", "level_centroids.npz"):
        if (tmp_path / "local" / name).exists() or name != "level_centroids.npz":
            assert (tmp_path / "ray" / name).read_bytes() == (
                tmp_path / "local" / name
            ).read_bytes(), name
    assert _comparable(tmp_path / "ray") == _comparable(tmp_path / "local")
    if "levels" not in settings:
        # auto resolved on the driver: the record says so, not "forced by user"
        assert ray.summary["backend_choice"]["reason"] == "CPU rule"
        assert ray.summary["stability"]["sample_size"] == int((ray.labels >= 0).sum())


def test_the_task_carries_no_embedding_row_and_the_worker_reads_its_own(ray_address, embedded):
    """The payload is the unfitted estimator (parameters and seed); the sample comes from disk."""
    work = WorkDir(embedded)
    ok = work.ok_mask()
    embeddings = work.embeddings()
    model = KMeans(10, seed=5, backend="numpy", max_points_per_centroid=64)
    payload = pickle.dumps(model)
    factory = pickle.dumps(functools.partial(FitWorker, str(embedded), driver_threads(), None))
    sample_bytes = 64 * 10 * embeddings.shape[1] * 4  # the float32 sample the worker gathers
    assert len(payload) + len(factory) < 2048 < sample_bytes // 100
    # the fit on a Ray actor equals the fit on the rows read here, in this process
    usable = np.flatnonzero(ok)
    assert len(usable) < len(ok)  # the empty texts are left out by the worker too
    here = KMeans(10, seed=5, backend="numpy", max_points_per_centroid=64)
    here.fit(RowView(embeddings, usable))
    there = fit_on_engine(
        model, embedded, engine="ray", options=clusterclip.engines.resolve_options("ray", {})
    )
    np.testing.assert_array_equal(there["model"].cluster_centers_, here.cluster_centers_)
    assert there["model"].objective_ == here.objective_
    # what comes back is small: no sample-sized arrays
    assert not hasattr(there["model"], "labels_") and not hasattr(there["model"], "sample_indices_")
    assert len(pickle.dumps(there)) < here.cluster_centers_.nbytes + 16384


def test_the_ray_fit_runs_on_the_drivers_thread_counts(ray_address, embedded):
    """A Ray actor of one CPU starts on one thread; the fit runs on the driver's counts."""
    pytest.importorskip("torch")
    model = KMeans(6, seed=0, backend="numpy", max_points_per_centroid=32)
    there = fit_on_engine(
        model, embedded, engine="ray", options=clusterclip.engines.resolve_options("ray", {})
    )
    assert there["threads"]["torch"] == driver_threads()["torch"]


def test_pinned_threads_set_and_restore_the_counts():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with pinned_threads({"blas": 1, "torch": 1}):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pinned_threads(None):
        assert torch.get_num_threads() == before
