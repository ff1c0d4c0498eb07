"""The fast engine produces exactly the oracle's sequence (online and planned)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule import build_schedule

from .oracle import oracle_schedule

#: The draw rules compared: version 1 (2 is the same rule for seeds >= 2**32), 3 and 4.
VERSIONS = [1, 3, 4]


def _compare(labels, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fast = build_schedule(labels, **kwargs)
    expected, clips, exhausted_at = oracle_schedule(labels, **kwargs)
    assert fast.indices.tolist() == expected
    got_clips = {int(k): int(s) for k, s in enumerate(fast.stats.clip_step) if s >= 0}
    if kwargs.get("policy", "clusterclip") != "random":
        assert got_clips == clips
    assert fast.stats.exhausted_at == exhausted_at
    return fast


@st.composite
def cases(draw):
    n_clusters = draw(st.integers(1, 6))
    # 1..9, and some above the small-group table (version 4's sorted passes)
    sizes = draw(
        st.lists(
            st.one_of(st.integers(1, 9), st.integers(30, 45)),
            min_size=n_clusters,
            max_size=n_clusters,
        )
    )
    labels = np.repeat(np.arange(n_clusters), sizes)
    excluded = draw(st.integers(0, 3))
    labels = np.concatenate([labels, np.full(excluded, -1)])
    labels = labels[np.random.default_rng(draw(st.integers(0, 99))).permutation(labels.size)]
    policy = draw(st.sampled_from(["clusterclip", "uniform", "temperature", "random"]))
    kwargs = {
        "schedule_version": draw(st.sampled_from(VERSIONS)),
        "policy": policy,
        "max_repeats": draw(st.sampled_from([1, 2, 3, None])),
        "num_samples": draw(st.integers(1, 120)),
        "order": draw(st.sampled_from(["online", "planned"])),
        "on_exhausted": draw(st.sampled_from(["stop", "random"])),
        "seed": draw(st.integers(0, 2**32)),
    }
    if policy == "temperature":
        kwargs["alpha"] = draw(st.sampled_from([-0.5, 0.0, 0.5, 1.0, 2.0]))
    if policy == "clusterclip" and draw(st.booleans()):
        kwargs["cluster_weights"] = draw(
            st.lists(
                st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=n_clusters, max_size=n_clusters
            )
        )
        if not any(kwargs["cluster_weights"][k] > 0 for k in range(n_clusters)):
            kwargs["cluster_weights"][0] = 1.0
    if kwargs["schedule_version"] == 1 and kwargs["seed"] >= 2**32:
        kwargs["schedule_version"] = 2  # the same rule, as recorded for such seeds
    return labels, kwargs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_engine_equals_oracle(case):
    labels, kwargs = case
    _compare(labels, **kwargs)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("order", ["online", "planned"])
def test_engine_equals_oracle_across_choice_blocks(order, version):
    # 3 choice blocks of 65536 positions, with clusters clipped inside blocks,
    # tiny clusters with many passes per permutation chunk, and the fallback.
    sizes = [1, 2, 3, 40, 700, 5000, 20000]
    labels = np.repeat(np.arange(len(sizes)), sizes)
    labels = labels[np.random.default_rng(5).permutation(labels.size)]
    schedule = _compare(
        labels,
        max_repeats=4,
        num_samples=150_000,
        order=order,
        on_exhausted="random",
        seed=11,
        schedule_version=version,
    )
    assert schedule.stats.exhausted_at == 4 * labels.size
    assert schedule.stats.clip_step[0] >= 0


@pytest.mark.parametrize("version", VERSIONS)
def test_engine_equals_oracle_with_weights_across_blocks(version):
    sizes = [3, 50, 400, 3000, 9000]
    labels = np.repeat(np.arange(len(sizes)), sizes)
    _compare(
        labels,
        policy="temperature",
        alpha=0.5,
        max_repeats=3,
        num_samples=80_000,
        seed=3,
        schedule_version=version,
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("order", ["online", "planned"])
@pytest.mark.parametrize("policy", ["clusterclip", "random", "uniform"])
def test_engine_equals_oracle_token_budget(order, policy, version):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 5, size=60)
    lengths = rng.integers(0, 50, size=60)
    kwargs = dict(policy=policy, max_repeats=3, num_tokens=3000, lengths=lengths, seed=2)
    kwargs["schedule_version"] = version
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fast = build_schedule(labels, order=order, **kwargs)
    total = None
    if order == "planned":
        total = int(fast.stats.planned_draws.sum()) if policy != "random" else 3 * 60
    expected, _, _ = oracle_schedule(labels, order=order, planned_total=total, **kwargs)
    assert fast.indices.tolist() == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(policy="clusterclip", max_repeats=2),
        dict(policy="temperature", alpha=0.7, max_repeats=3),
    ],
)
@pytest.mark.parametrize("version", VERSIONS)
def test_engine_equals_oracle_with_many_tiny_clusters(kwargs, version):
    # 1,500 clusters of 1-3 documents: clips every few draws, so the engine's
    # sparse path (sort-based clip search, short adaptive segments) does the work.
    rng = np.random.default_rng(17)
    sizes = rng.integers(1, 4, size=1500)
    labels = np.repeat(np.arange(sizes.size), sizes)
    labels = labels[rng.permutation(labels.size)]
    capped = kwargs["max_repeats"] * labels.size
    schedule = _compare(
        labels,
        num_samples=capped + 50,
        on_exhausted="random",
        seed=6,
        schedule_version=version,
        **kwargs,
    )
    assert schedule.stats.n_clipped == 1500
