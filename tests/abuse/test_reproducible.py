"""Reproducible by default (issue 29): the same command on the same inputs and machine type
gives byte-identical labels and schedule, whatever the load and whatever is cached.

A tester's demo printed 317 never-seen documents with the probe's numpy pick, 314 with
faiss: ``--backend auto`` was the fastest backend *timed* on the machine, kept in
``$CLUSTERCLIP_CACHE/kmeans-backend.json``, so the labels followed the load of the day
and the life of that file. ``auto`` is now a rule of the CPU and the installed libraries
(:func:`clusterclip.cluster.backends.auto_rule`); the timing left in a fit chooses only
the Lloyd loop's thread count, and only for backends whose bits do not depend on it.

Every run is the real ``clusterclip run`` (tfidf encoder) on real KJV verses, in a fresh
work directory.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.cluster import KMeans, probe
from clusterclip.cluster.backends import get_backend
from clusterclip.io import WorkDir, read_stage
from clusterclip.threads import one_thread
from tests.product_support import kjv_records, require_module

N_CLUSTERS = 8
RUN = ["--encoder", "tfidf", "--n-clusters", str(N_CLUSTERS), "--no-report",
       "--stability-sample", "0"]  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    require_module("sklearn")  # the tfidf encoder
    path = tmp_path_factory.mktemp("kjv") / "kjv.jsonl"
    lines = "".join(json.dumps(record) + "\n" for record in kjv_records(step=40))
    path.write_text(lines, encoding="utf-8")
    return str(path)


def run(corpus, workdir, cache, monkeypatch, capsys) -> dict:
    """``clusterclip run`` with ``cache`` as the probe cache: labels, schedule, backend."""
    monkeypatch.setenv("CLUSTERCLIP_CACHE", str(cache))
    assert main(["run", corpus, "--workdir", str(workdir), *RUN]) == 0, capsys.readouterr().err
    capsys.readouterr()
    work = WorkDir(workdir)
    summary = read_stage(workdir, "cluster")["summary"]
    return {
        "labels": work.labels().tobytes(),
        "schedule": np.asarray(work.schedule().indices).tobytes(),
        "summary": summary,
        "dim": int(work.centroids().shape[1]),
    }


def forge_probe_cache(cache, summary, dim, backend) -> None:
    """The cache a probe on a busy machine would leave for this very shape, naming ``backend``."""
    key = json.dumps(probe.cache_key(summary["sample_size"], dim, N_CLUSTERS), sort_keys=True)
    entry = {"backend": backend, "seconds": {backend: 0.001}, "skipped": {},
             "probe_rows": summary["sample_size"], "probe_seconds": 0.1}  # fmt: skip
    cache.mkdir(parents=True, exist_ok=True)
    (cache / probe.CACHE_FILE).write_text(
        json.dumps({"version": probe.CACHE_VERSION, "entries": {key: entry}}), encoding="utf-8"
    )


def test_auto_gives_the_same_bytes_with_no_cache_a_cache_and_a_cache_that_disagrees(
    corpus, tmp_path, monkeypatch, capsys
):
    fresh = run(corpus, tmp_path / "w1", tmp_path / "empty", monkeypatch, capsys)
    # Whatever the first run left in its cache directory is there for the second.
    again = run(corpus, tmp_path / "w2", tmp_path / "empty", monkeypatch, capsys)
    # A cache whose entry for this shape names another backend than the one that ran.
    used = fresh["summary"]["backend"]
    candidates = probe.available_candidates()
    other = next(
        name for name in ["torch-bf16", *candidates] if name in candidates and name != used
    )
    forge_probe_cache(tmp_path / "forged", fresh["summary"], fresh["dim"], other)
    flipped = run(corpus, tmp_path / "w3", tmp_path / "forged", monkeypatch, capsys)
    for result in (again, flipped):
        assert result["labels"] == fresh["labels"]
        assert result["schedule"] == fresh["schedule"]
        assert result["summary"]["backend"] == used
    choice = flipped["summary"]["backend_choice"]
    assert choice["reason"] == "CPU rule" and choice["requested"] == "auto"
    assert choice["rule"] and choice["cache"] is None


@pytest.fixture(scope="module")
def verses_embedded(corpus, tmp_path_factory) -> np.ndarray:
    """The tfidf embeddings of the verses, as the cluster stage reads them (float32)."""
    workdir = tmp_path_factory.mktemp("embedded") / "w"
    assert main(["embed", corpus, "--workdir", str(workdir), "--encoder", "tfidf"]) == 0
    embeddings = WorkDir(workdir).embeddings()
    return np.asarray(embeddings[0 : embeddings.shape[0]], dtype=np.float32)


def _thread_invariant() -> tuple[str, ...]:
    from clusterclip.cluster.kmeans import THREAD_INVARIANT

    return THREAD_INVARIANT


@pytest.mark.parametrize("backend", ["torch-bf16", "numpy"])
def test_the_thread_count_a_timing_may_choose_changes_no_bit(verses_embedded, monkeypatch, backend):
    """The proof the timing of ``lloyd_threads`` relies on, for each backend it may time:
    one Lloyd pass gives the same bits on one thread and on all, for blocks of any height
    (a fit's last block can hold a single row), and so does a whole fit. numpy holds it
    too (each block's product on one BLAS thread, the blocks spread over threads) but is
    not timed: its blocks are shared out as threads come free, so a busy core costs it
    little, and a probe would cost a fit more than it could win."""
    import clusterclip.cluster.kmeans as kmeans_module

    assert (backend in _thread_invariant()) == (backend != "numpy")
    if backend not in probe.available_candidates():
        pytest.skip(f"{backend} cannot run on this machine")
    engine = get_backend(backend)
    X = verses_embedded / np.linalg.norm(verses_embedded, axis=1, keepdims=True)
    centroids = np.ascontiguousarray(X[:: len(X) // 40][:40])
    for rows in (1, 2, 3, 17, 255, len(X)):
        block = np.ascontiguousarray(X[:rows])
        on_all = engine.assign_and_sum(engine.prepare(block), block, centroids)
        with one_thread():
            on_one = engine.assign_and_sum(engine.prepare(block), block, centroids)
        for got, expected in zip(on_one, on_all, strict=True):
            assert got.tobytes() == expected.tobytes(), (backend, rows)
    fits = []
    for threads in (1, 2):  # 2: the default threads, whatever their number
        forced = {"threads": threads, "seconds": None}
        monkeypatch.setattr(kmeans_module, "lloyd_threads", lambda *args, forced=forced: forced)
        fits.append(KMeans(N_CLUSTERS, seed=0, backend=backend).fit(verses_embedded))
    assert fits[0].labels_.tobytes() == fits[1].labels_.tobytes()
    assert fits[0].cluster_centers_.tobytes() == fits[1].cluster_centers_.tobytes()


def test_numpy_spreads_its_blocks_over_threads_with_the_bits_of_one(verses_embedded, monkeypatch):
    """numpy's E-step cuts the rows into blocks, multiplies each on one BLAS thread and
    spreads them over as many threads as the BLAS has: on 1, 2 and 3 threads the labels,
    scores and sums are the same bytes, and each cluster's sum is its rows added in order."""
    from threadpoolctl import threadpool_limits

    import clusterclip.cluster.backends as backends
    from clusterclip.threads import blas_threads

    monkeypatch.setattr(backends, "_NUMPY_MAX_ROWS", 97)  # many blocks on a small corpus
    engine = get_backend("numpy")
    X = verses_embedded / np.linalg.norm(verses_embedded, axis=1, keepdims=True)
    centroids = np.ascontiguousarray(X[:: len(X) // 40][:40])
    passes = {}
    for threads in (1, 2, 3):
        with threadpool_limits(limits=threads, user_api="blas"):
            assert blas_threads() == threads
            passes[threads] = engine.assign_and_sum(X, X, centroids)
    for threads in (2, 3):
        for got, expected in zip(passes[threads], passes[1], strict=True):
            assert got.tobytes() == expected.tobytes(), threads
    labels, scores, sums = passes[1]
    in_order = np.zeros_like(sums)
    np.add.at(in_order, labels, X)  # unbuffered: row after row
    assert sums.tobytes() == in_order.tobytes()
    np.testing.assert_allclose(scores, np.einsum("ij,ij->i", X, centroids[labels]), atol=1e-5)
    assert (scores >= (X @ centroids.T).max(axis=1) - 1e-5).all()


@pytest.mark.parametrize("backend", ["torch-fp32", "numpy", "faiss"])
def test_no_timing_chooses_the_threads_of_backends_whose_bits_follow_them(verses_embedded, backend):
    """MKL's product of a one-row block can differ in the last bit between one thread and
    two, and so can faiss's OpenBLAS (on an AVX2-only EPYC): these backends' Lloyd loops
    keep the default threads, untimed; so does numpy's (see the test above)."""
    require_module("torch", "torch")
    import torch

    from clusterclip.cluster.kmeans import lloyd_threads

    X = verses_embedded / np.linalg.norm(verses_embedded, axis=1, keepdims=True)
    record = lloyd_threads(get_backend(backend), X, np.ascontiguousarray(X[:N_CLUSTERS]))
    default = torch.get_num_threads()
    expected = default if default > 1 and probe.available_cpus() > 1 else 1
    assert record == {"threads": expected, "seconds": None}
    assert backend not in _thread_invariant()
