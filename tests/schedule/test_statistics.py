"""Cluster shares match the weights (within sampling noise); golden structure."""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.schedule import build_schedule

from .conftest import quiet


def _assert_shares(counts: np.ndarray, probabilities: np.ndarray) -> None:
    total = counts.sum()
    expected = total * probabilities
    sigma = np.sqrt(total * probabilities * (1 - probabilities))
    # 5 sigma per cluster: a false alarm has probability ~1e-6 per check
    assert np.all(np.abs(counts - expected) <= 5 * sigma + 1), (counts, expected)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < len(counts) + 8 * np.sqrt(2 * len(counts)), chi2


@pytest.mark.parametrize("order", ["online", "planned"])
def test_uniform_shares_before_any_clip(order):
    sizes = np.array([40, 100, 300, 1000, 3000, 9000])
    labels = np.repeat(np.arange(sizes.size), sizes)
    # 6 * 30 * 40 > 6000 draws: no cluster can reach 30 passes, nothing is clipped
    schedule = build_schedule(labels, max_repeats=30, num_samples=6000, order=order, seed=3)
    assert schedule.stats.n_clipped == 0
    counts = schedule.stats.draws_per_cluster
    if order == "planned":
        assert counts.tolist() == [1000] * 6  # the plan is exact
    else:
        _assert_shares(counts, np.full(6, 1 / 6))


def test_uniform_shares_in_every_window_before_clip():
    labels = np.repeat(np.arange(8), 500)
    indices = build_schedule(labels, max_repeats=10, num_samples=16000, seed=9).indices
    for window in np.split(indices, 4):
        _assert_shares(np.bincount(labels[window], minlength=8), np.full(8, 1 / 8))


@pytest.mark.parametrize("alpha", [0.5, 1.0, -0.5])
def test_temperature_shares_follow_size_power_alpha(alpha):
    sizes = np.array([25, 100, 400, 1600, 6400])
    labels = np.repeat(np.arange(sizes.size), sizes)
    schedule = build_schedule(
        labels, policy="temperature", alpha=alpha, max_repeats=None, num_samples=20000, seed=4
    )
    weights = sizes.astype(float) ** alpha
    _assert_shares(schedule.stats.draws_per_cluster, weights / weights.sum())


def test_custom_weights_shares_and_zero_weight_excludes():
    labels = np.repeat(np.arange(4), 1000)
    schedule = build_schedule(
        labels,
        cluster_weights=[1.0, 2.0, 0.0, 5.0],
        max_repeats=None,
        policy="uniform",
        num_samples=16000,
        seed=5,
    )
    counts = schedule.stats.draws_per_cluster
    assert counts[2] == 0
    _assert_shares(counts[[0, 1, 3]], np.array([1, 2, 5]) / 8)


def test_random_policy_is_exact_shuffled_passes(skewed_labels):
    usable = np.flatnonzero(skewed_labels >= 0)
    schedule = build_schedule(
        skewed_labels, policy="random", max_repeats=None, num_samples=3 * usable.size + 17, seed=1
    )
    passes = [schedule.indices[p * usable.size : (p + 1) * usable.size] for p in range(3)]
    for one in passes:
        assert np.array_equal(np.sort(one), usable)
    assert not np.array_equal(passes[0], passes[1])  # reshuffled every pass
    assert np.unique(schedule.indices[3 * usable.size :]).size == 17
    # natural cluster shares over whole passes
    sizes = np.bincount(skewed_labels[usable])
    assert np.array_equal(np.bincount(skewed_labels[np.concatenate(passes)]), 3 * sizes)


def test_random_policy_honours_max_repeats(skewed_labels):
    usable = int((skewed_labels >= 0).sum())
    schedule = quiet(
        build_schedule,
        skewed_labels,
        policy="random",
        max_repeats=2,
        num_samples=5 * usable,
        seed=1,
    )
    assert schedule.stats.n_draws == 2 * usable
    assert schedule.stats.max_repeats_per_document == 2
    assert not schedule.stats.budget_met


def test_clusterclip_front_loads_small_clusters_planned_spreads_them(skewed_labels):
    kwargs = dict(max_repeats=3, num_samples=3000, seed=2)
    online = build_schedule(skewed_labels, **kwargs)
    planned = build_schedule(skewed_labels, order="planned", **kwargs)
    tiny = np.isin(skewed_labels, [0, 1, 2, 3])  # clusters of 1..5 documents
    late_online = tiny[online.indices[1500:]].sum()
    late_planned = tiny[planned.indices[1500:]].sum()
    early_planned = tiny[planned.indices[:1500]].sum()
    assert late_online == 0  # clipped early, gone for the second half
    assert abs(late_planned - early_planned) <= 4  # evenly spread
    # the same per-cluster caps hold for both
    assert planned.stats.max_repeats_per_document <= 3


def test_golden_small_case():
    """Hand-checkable: 3 clusters (4, 1, 2 documents), R=2, 14 = all capped draws."""
    labels = np.array([0, 0, 0, 0, 1, 2, 2])
    schedule = build_schedule(labels, max_repeats=2, num_samples=14, seed=0)
    stats = schedule.stats
    assert stats.draws_per_cluster.tolist() == [8, 2, 4]
    assert np.all(stats.repeats_per_document == 2)
    assert stats.budget_met and stats.exhausted_at is None
    # cluster 1 (1 document) and 2 clip before cluster 0, which takes the last draw
    assert stats.clip_step[0] == 13 and stats.clip_step[1] < 13 and stats.clip_step[2] < 13


#: Version 3 (the default) of the case below.
V3_ONLINE = [3, 4, 9, 8, 10, 9, 8, 10, 4, 1, 6, 5, 0, 5, 6, 2]
V3_PLANNED = [3, 6, 9, 4, 1, 8, 5, 0, 10, 5, 4, 2, 9, 6, 2, 8]


@pytest.mark.parametrize(
    ("version", "order", "expected"),
    [
        (1, "online", [3, 2, 9, 4, 8, 6, 1, 4, 5, 0, 10, 6, 5, 1, 2, 3]),
        (1, "planned", [3, 6, 9, 4, 2, 8, 5, 1, 10, 6, 4, 0, 10, 5, 1, 8]),
        (3, "online", V3_ONLINE),
        (3, "planned", V3_PLANNED),
    ],
)
def test_pinned_sequence_of_each_schedule_version(version, order, expected):
    """Same inputs + seed + SCHEDULE_VERSION = the same bytes, forever: a change
    here changes every user's schedule and must bump SCHEDULE_VERSION."""
    labels = np.array([0, 0, 0, 0, 1, 2, 2, -1, 3, 3, 3])
    schedule = build_schedule(
        labels,
        max_repeats=2,
        num_samples=16,
        order=order,
        on_exhausted="random",
        seed=2024,
        schedule_version=version,
    )
    assert schedule.indices.tolist() == expected
    assert schedule.config.schedule_version == version


@pytest.mark.parametrize("chunk", [1, 5, 64, 2**20])
def test_draws_per_cluster_summed_over_members_match_the_labels(monkeypatch, chunk):
    """Sparse ids: summing repeats over each cluster's documents, chunk by chunk
    (clusters straddling and exceeding a chunk), counts what a label per draw counts."""
    import clusterclip.schedule.stats as stats

    rng = np.random.default_rng(9)
    ids = np.sort(rng.choice(2**31, size=40, replace=False))
    sizes = rng.integers(1, 30, ids.size)
    sizes[3] = 200  # larger than most chunks
    labels = np.repeat(ids, sizes)[rng.permutation(int(sizes.sum()))]
    indices = rng.integers(0, labels.size, 5000)
    documents = np.argsort(labels, kind="stable")
    offsets = np.cumsum(sizes) - sizes
    at = np.arange(ids.size)
    common = dict(budget_met=True, exhausted_at=None, clip_step=np.full(ids.size, -1))
    by_labels = stats.compute_stats(indices, labels, None, cluster_ids=ids, **common)
    monkeypatch.setattr(stats, "_CHUNK", chunk)
    by_members = stats.compute_stats(
        indices, labels, None, cluster_ids=ids, members=(documents, offsets, at), **common
    )
    assert by_members.draws_per_cluster.tolist() == by_labels.draws_per_cluster.tolist()
    assert by_labels.draws_per_cluster.sum() == indices.size
