"""Cluster shares match the weights (within sampling noise); golden structure."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


#: Versions 3 and 4 of the case below (every group under the small-group table, a
#: single window and slab: version 4 draws what version 3 does).
V3_ONLINE = [3, 4, 9, 8, 10, 9, 8, 10, 4, 1, 6, 5, 0, 5, 6, 2]
V3_PLANNED = [3, 6, 9, 4, 1, 8, 5, 0, 10, 5, 4, 2, 9, 6, 2, 8]


@pytest.mark.parametrize(
    ("version", "order", "expected"),
    [
        (1, "online", [3, 2, 9, 4, 8, 6, 1, 4, 5, 0, 10, 6, 5, 1, 2, 3]),
        (1, "planned", [3, 6, 9, 4, 2, 8, 5, 1, 10, 6, 4, 0, 10, 5, 1, 8]),
        (3, "online", V3_ONLINE),
        (3, "planned", V3_PLANNED),
        (4, "online", V3_ONLINE),
        (4, "planned", V3_PLANNED),
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


@st.composite
def engine_cases(draw):
    """Dense or sparse ids, every draw rule and order, sample or token budgets, fallback passes."""
    n_clusters = draw(st.integers(1, 7))
    sizes = np.array(draw(st.lists(st.integers(1, 25), min_size=n_clusters, max_size=n_clusters)))
    ids = np.arange(n_clusters)
    if draw(st.booleans()):  # sparse ids: statistics for the non-empty clusters only
        ids = np.sort(np.random.default_rng(n_clusters).choice(2**31, n_clusters, replace=False))
    labels = np.concatenate([np.repeat(ids, sizes), np.full(draw(st.integers(0, 4)), -1)])
    labels = labels[np.random.default_rng(draw(st.integers(0, 99))).permutation(labels.size)]
    kwargs = {
        "policy": draw(st.sampled_from(["clusterclip", "temperature", "uniform", "random"])),
        "max_repeats": draw(st.integers(1, 3)),
        "order": draw(st.sampled_from(["online", "planned"])),
        "on_exhausted": draw(st.sampled_from(["stop", "random"])),
        "seed": draw(st.integers(0, 2**40)),
        "schedule_version": draw(st.sampled_from([None, 3, 1])),  # None: 4
    }
    if kwargs["schedule_version"] == 1 and kwargs["seed"] >= 2**32:
        kwargs["schedule_version"] = 2  # version 1's rule, as recorded for such seeds
    if kwargs["policy"] == "temperature":
        kwargs["alpha"] = draw(st.floats(-1.0, 2.0))
    if draw(st.booleans()):
        kwargs["num_samples"] = draw(st.integers(1, 500))
    else:
        kwargs["num_tokens"] = draw(st.integers(1, 3000))
        lengths = np.random.default_rng(labels.size).integers(0, 12, labels.size)
        lengths[np.flatnonzero(labels >= 0)[0]] += 1  # a budget needs a document with tokens
        kwargs["lengths"] = lengths
    return labels, kwargs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine_cases())
def test_statistics_from_the_engine_counts_equal_a_count_of_the_indices(case):
    """The draws per cluster (and the repeat summary) read from the engine's counts
    are what counting the schedule's indices by label gives: windows cut by the
    budget, token budgets ending inside a segment, fallback passes after exhaustion."""
    labels, kwargs = case
    schedule = quiet(build_schedule, labels, **kwargs)
    indices, stats = schedule.indices, schedule.stats
    ids = stats.cluster_ids
    drawn = labels[indices]
    expected = np.array([np.count_nonzero(drawn == k) for k in ids.tolist()], dtype=np.int64)
    assert stats.draws_per_cluster.tolist() == expected.tolist()
    repeats = np.bincount(indices, minlength=labels.size)
    assert stats.max_repeats_per_document == repeats.max(initial=0)
    assert stats.n_distinct_documents == np.count_nonzero(repeats)
    copied = pickle.loads(pickle.dumps(stats))  # before the repeats were counted
    assert stats.repeats_per_document.tolist() == repeats.tolist()  # counted on first access
    assert stats.repeats_per_document.dtype == np.int64
    assert copied.repeats_per_document.tolist() == repeats.tolist()
