"""Tiny clusters (issue 13): planted outliers never get a balanced share of the draws."""

from __future__ import annotations

import numpy as np
import pytest

import clusterclip
from clusterclip.cluster import cluster
from clusterclip.cluster.kmeans import assign
from clusterclip.cluster.seeding import kmeans_plusplus
from clusterclip.cluster.small import dissolve_small_clusters, effective_min_size
from clusterclip.cluster.synthetic import vmf_mixture
from clusterclip.io import read_stage
from tests.cluster.helpers import make_workdir

N_PLANTED = 3


def _with_outliers(n: int = 3000, dim: int = 32, k: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """A Zipf-sized mixture plus N_PLANTED isolated rows (the 'garbage' documents) at the end."""
    X, _ = vmf_mixture(n, dim, k, seed=1, spread=0.6)
    rng = np.random.default_rng(7)
    planted = rng.standard_normal((N_PLANTED, dim)).astype(np.float32)
    planted /= np.linalg.norm(planted, axis=1, keepdims=True)
    rows = np.concatenate([X, planted])
    return rows, np.arange(n, n + N_PLANTED)


def test_effective_min_size_caps_at_a_quarter_of_the_mean_cluster():
    assert effective_min_size(5, 10_000, 100) == 5
    assert effective_min_size(50, 10_000, 100) == 25  # ceil(0.25 * 100)
    assert effective_min_size(5, 300, 100) == 1  # 3 per cluster on average: off
    assert effective_min_size(1, 10_000, 100) == 1
    # The largest cluster holds >= N/K > the threshold, so something always stays.
    for n, k in [(10, 10), (11, 3), (1000, 999), (400, 8)]:
        assert effective_min_size(5, n, k) <= max(1, -(-n // (4 * k)))


def test_dissolve_moves_members_to_the_nearest_kept_centroid_and_renumbers():
    rng = np.random.default_rng(0)
    C = rng.standard_normal((4, 8)).astype(np.float32)
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    X = np.repeat(C, [30, 1, 20, 2], axis=0) + 0.01 * rng.standard_normal((53, 8))
    labels, scores = assign(X, C, backend="numpy")
    assert np.bincount(labels).tolist() == [30, 1, 20, 2]
    new, new_scores, kept, record = dissolve_small_clusters(
        labels, scores, C, lambda rows: X[rows], min_size=5
    )
    assert kept.shape == (2, 8) and record["kept"] == [0, 2]
    assert [d["cluster"] for d in record["dissolved"]] == [1, 3]
    assert [d["size"] for d in record["dissolved"]] == [1, 2]
    assert record["sizes_before"] == [30, 1, 20, 2]
    # The written centroids reproduce the written labels (a re-assignment agrees).
    again, again_scores = assign(X, kept, backend="numpy")
    np.testing.assert_array_equal(again, new)
    np.testing.assert_allclose(again_scores, new_scores, atol=1e-5)
    assert np.bincount(new).sum() == 53 and new.max() == 1


def test_dissolve_leaves_excluded_documents_and_big_clusters_alone():
    labels = np.array([0, 0, 0, -1, 1], dtype=np.int32)
    C = np.eye(2, dtype=np.float32)
    X = np.array([[1, 0], [1, 0], [1, 0], [0, 0], [0, 1]], dtype=np.float32)
    new, _, kept, record = dissolve_small_clusters(
        labels, np.ones(5, np.float32), C, lambda rows: X[rows], min_size=2
    )
    assert new.tolist() == [0, 0, 0, -1, 0] and len(kept) == 1
    same, _, all_kept, none = dissolve_small_clusters(
        labels, np.ones(5, np.float32), C, lambda rows: X[rows], min_size=1
    )
    assert same.tolist() == labels.tolist() and len(all_kept) == 2 and none["dissolved"] == []


def test_kmeans_plusplus_skips_isolated_candidates():
    # Four elongated clusters (points along a segment, so each has near neighbours) and
    # three isolated rows; K = 8 leaves D^2 sampling free to spend centres on the latter.
    rng = np.random.default_rng(0)
    eye = np.eye(16)
    segments = [eye[i] + np.outer(rng.uniform(-0.3, 0.3, 100), eye[4 + i]) for i in range(4)]
    X = np.concatenate([*segments, eye[8:11]]).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    planted = [400, 401, 402]
    plain = [kmeans_plusplus(X, 8, np.random.default_rng(s)) for s in range(20)]
    kept_off = [kmeans_plusplus(X, 8, np.random.default_rng(s), min_cell=2) for s in range(20)]
    assert sum(np.isin(rows, planted).sum() for rows in plain) >= 10  # D^2 loves outliers
    assert not any(np.isin(rows, planted).any() for rows in kept_off)


@pytest.mark.parametrize("min_cluster_size", [5, 20])
def test_planted_outliers_never_get_a_balanced_share(tmp_path, min_cluster_size):
    X, planted = _with_outliers()
    workdir = make_workdir(tmp_path / "w", X)
    k = 12
    result = cluster(workdir, n_clusters=k, seed=0, backend="numpy",
                     min_cluster_size=min_cluster_size)  # fmt: skip
    labels = result.labels
    sizes = np.bincount(labels)
    assert sizes.min() >= effective_min_size(min_cluster_size, len(X), k)
    assert (sizes[labels[planted]] >= min_cluster_size).all()
    schedule = clusterclip.build_schedule(labels, max_repeats=4, num_samples=len(X), seed=0)
    share = np.isin(schedule.indices, planted).mean()
    natural = N_PLANTED / len(X)
    balanced = N_PLANTED / k  # what N_PLANTED clusters of their own would take
    # Drawn at their host cluster's rate: within a small factor of the natural rate.
    assert share < 10 * natural < balanced / 10
    entry = read_stage(workdir, "cluster")
    assert entry["summary"]["min_cluster_size"] == min_cluster_size
    record = entry["small_clusters"]
    assert len(record["sizes_before"]) == k
    assert len(record["kept"]) == entry["summary"]["n_clusters"] == len(result.centroids)
    assert sum(d["size"] for d in record["dissolved"]) == entry["summary"]["dissolved_documents"]


def test_min_cluster_size_one_keeps_every_cluster(tmp_path):
    X, _ = _with_outliers()
    workdir = make_workdir(tmp_path / "w", X)
    result = cluster(workdir, n_clusters=12, seed=0, backend="numpy", min_cluster_size=1)
    assert len(result.centroids) == 12
    assert read_stage(workdir, "cluster")["small_clusters"]["dissolved"] == []
