"""Memory follows the clusters present, not their ids; caches are sized to what a cluster uses.

Behaviour only (no timings): peaks measured with ``tracemalloc`` are
deterministic (numpy reports its buffers to it).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from clusterclip.schedule import build_schedule, iter_schedule
from clusterclip.schedule.groups import CACHE_SLOTS
from clusterclip.schedule.policy import SchedulePolicy
from clusterclip.schedule.prepare import Prepared

from .conftest import quiet

MIB = 2**20


def _traced_peak(func) -> int:
    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _prepared(labels, **kwargs) -> Prepared:
    return SchedulePolicy(**kwargs).stream(labels).prep


def _relabelled(labels: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``labels`` with cluster k renamed ids[k] (negative labels kept)."""
    return np.where(labels >= 0, ids[np.maximum(labels, 0)], labels)


@pytest.fixture(scope="module")
def tiny_clusters() -> np.ndarray:
    """300 clusters of 1..6 documents (many clips), shuffled, with excluded documents."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(300), rng.integers(1, 7, 300))
    labels = np.concatenate([labels, np.full(7, -1)])
    return labels[rng.permutation(labels.size)]


SPARSE_IDS = {
    "times 1000 plus 7": lambda k: np.arange(k) * 1000 + 7,
    "random below 2**31": lambda k: np.sort(
        np.random.default_rng(0).choice(2**31, size=k, replace=False)
    ),
    "beyond 32 bits": lambda k: np.arange(k) * 2**40 + 2**33,
}


@pytest.mark.parametrize("ids", SPARSE_IDS.values(), ids=SPARSE_IDS.keys())
@pytest.mark.parametrize("order", ["online", "planned"])
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(max_repeats=2, num_samples=3000, on_exhausted="random"),
        dict(policy="uniform", num_samples=2500),
        dict(policy="temperature", alpha=0.5, max_repeats=3, num_samples=1500),
    ],
)
def test_sparse_ids_draw_the_clusters_their_dense_renaming_draws(tiny_clusters, ids, order, kwargs):
    """Choices, clips and plans depend on the clusters' order, not on their ids.

    Only the pass permutations are keyed by the cluster id (so that a cluster's
    draws do not change when another cluster is added), so the *documents*
    inside a cluster may differ; the cluster of every position may not.
    """
    dense = tiny_clusters
    sparse = _relabelled(dense, ids(int(dense.max()) + 1))
    a = quiet(build_schedule, dense, order=order, seed=5, **kwargs)
    b = quiet(build_schedule, sparse, order=order, seed=5, **kwargs)
    assert np.array_equal(dense[a.indices], dense[b.indices])  # same cluster at every position
    sizes = np.bincount(dense[dense >= 0])
    singles = sizes[dense[a.indices]] == 1  # one member: the same document too
    assert np.array_equal(a.indices[singles], b.indices[singles])
    # Statistics: dense ids list every id, sparse ones the clusters present, aligned.
    present = np.unique(sparse[sparse >= 0])
    assert np.array_equal(b.stats.cluster_ids, present)
    assert np.array_equal(b.stats.draws_per_cluster, a.stats.draws_per_cluster)
    assert np.array_equal(b.stats.clip_step, a.stats.clip_step)
    assert b.stats.exhausted_at == a.stats.exhausted_at
    if order == "planned":
        assert np.array_equal(b.stats.planned_draws, a.stats.planned_draws)
    # The invariants hold as they do for dense ids.
    repeats = np.bincount(b.indices, minlength=sparse.size)
    if kwargs.get("max_repeats") and kwargs.get("on_exhausted") != "random":
        assert repeats.max() <= kwargs["max_repeats"]
    assert not repeats[sparse < 0].any()
    # Streaming from the middle gives the same continuation.
    tail = np.concatenate(
        list(quiet(iter_schedule, sparse, order=order, seed=5, start=777, **kwargs))
    )
    assert np.array_equal(tail, b.indices[777:])


def test_random_policy_ignores_the_ids(tiny_clusters):
    sparse = _relabelled(tiny_clusters, SPARSE_IDS["random below 2**31"](300))
    a = build_schedule(tiny_clusters, policy="random", max_repeats=2, num_samples=999, seed=1)
    b = build_schedule(sparse, policy="random", max_repeats=2, num_samples=999, seed=1)
    assert np.array_equal(a.indices, b.indices)


def test_custom_weights_follow_the_original_ids():
    for top in (1000, 5000):  # dense statistics (max id < 1024), then sparse ones
        labels = np.array([5, 5, 9, 9, 9, top, -1])
        weights = np.zeros(top + 1)
        weights[[5, top]] = 1.0  # cluster 9 is left out
        schedule = build_schedule(labels, cluster_weights=weights, num_samples=12, seed=0)
        assert set(labels[schedule.indices].tolist()) == {5, top}
        stats = schedule.stats
        assert stats.cluster_ids.size == (top + 1 if top < 1024 else 3)
        draws = dict(zip(stats.cluster_ids.tolist(), stats.draws_per_cluster.tolist(), strict=True))
        assert (draws[5], draws[9], draws[top]) == (8, 0, 4)


def test_ids_up_to_2_31_prepare_in_little_memory():
    """Three clusters with ids up to 2**31 - 1: no table indexed by id (it was 16 GiB).

    The few MiB allowed are version 3's window buffers (a handful of int64 arrays
    of ``WINDOW`` entries), whatever the ids.
    """
    labels = np.array([0, 2**31 - 1, 30_000_000, 2**31 - 1, 30_000_000, 30_000_000])

    def build() -> None:
        schedule = build_schedule(labels, max_repeats=4, num_samples=24, seed=0)
        assert schedule.stats.cluster_ids.tolist() == [0, 30_000_000, 2**31 - 1]
        assert schedule.stats.draws_per_cluster.tolist() == [4, 12, 8]

    assert _traced_peak(build) < 8 * MIB


def test_sparse_ids_cost_what_dense_ids_cost():
    rng = np.random.default_rng(1)
    dense = np.repeat(np.arange(5000), rng.integers(1, 21, 5000))
    dense = dense[rng.permutation(dense.size)]
    sparse = _relabelled(dense, np.sort(rng.choice(2**31, size=5000, replace=False)))
    peaks = [
        _traced_peak(lambda labels=labels: _prepared(labels, num_samples=10_000, seed=0))
        for labels in (dense, sparse)
    ]
    assert peaks[1] < 1.25 * peaks[0] + MIB, peaks


def test_cache_holds_no_more_passes_than_the_cap():
    """Version 1's cache window: at most max_repeats passes (it never uses more)."""
    rng = np.random.default_rng(2)
    labels = np.repeat(np.arange(20_000), rng.integers(1, 4, 20_000))
    groups = _prepared(labels, max_repeats=2, num_samples=10, seed=0, schedule_version=1).groups
    assert groups.cache.size <= 2 * labels.size
    # Uncapped: the windows share CACHE_SLOTS (plus one pass each), not 2,048 per cluster.
    groups = _prepared(labels, max_repeats=None, num_samples=10, seed=0, schedule_version=1).groups
    assert groups.cache.size <= CACHE_SLOTS + labels.size
    assert groups.cache.size < 20_000 * 2048 / 2


def test_many_small_clusters_prepare_in_bounded_memory():
    """100,000 clusters used to reserve 2,048 cache slots each (~800 MiB)."""
    rng = np.random.default_rng(4)
    labels = np.repeat(np.arange(100_000), rng.integers(1, 4, 100_000))
    peak = _traced_peak(lambda: _prepared(labels, max_repeats=4, num_samples=10_000, seed=0))
    assert peak < 40 * MIB
