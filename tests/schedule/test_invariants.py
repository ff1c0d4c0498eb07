"""DESIGN.md section 2 invariants, as hypothesis properties."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule import build_schedule, iter_schedule

from .conftest import quiet

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw, *, orders=("online", "planned")):
    n_clusters = draw(st.integers(1, 8))
    # sizes on both sides of version 4's small-group table (32)
    sizes = draw(st.lists(st.integers(1, 45), min_size=n_clusters, max_size=n_clusters))
    labels = np.repeat(np.arange(n_clusters), sizes)
    labels = np.concatenate([labels, np.full(draw(st.integers(0, 5)), -3)])
    labels = labels[np.random.default_rng(draw(st.integers(0, 50))).permutation(labels.size)]
    policy = draw(st.sampled_from(["clusterclip", "temperature", "random", "uniform"]))
    kwargs = {
        "policy": policy,
        "max_repeats": draw(st.integers(1, 4)),
        "num_samples": draw(st.integers(1, 600)),
        "order": draw(st.sampled_from(orders)),
        "on_exhausted": draw(st.sampled_from(["stop", "random"])),
        "seed": draw(st.integers(0, 2**40)),
        # the rule of new schedules (None: version 4) most often, the older ones too
        "schedule_version": draw(st.sampled_from([None, None, 1, 3])),
    }
    if kwargs["schedule_version"] == 1 and kwargs["seed"] >= 2**32:
        kwargs["schedule_version"] = 2  # version 1's rule, as recorded for such seeds
    if policy == "temperature":
        kwargs["alpha"] = draw(st.floats(-1.0, 2.0))
    return labels, kwargs


@SETTINGS
@given(problems())
def test_no_document_repeats_more_than_max_repeats(problem):
    labels, kwargs = problem
    schedule = quiet(build_schedule, labels, **kwargs)
    stats = schedule.stats
    limit = kwargs["max_repeats"] if kwargs["policy"] != "uniform" else None
    before = schedule.indices
    if stats.exhausted_at is not None:
        before = schedule.indices[: stats.exhausted_at]
    if limit is not None:
        assert np.bincount(before, minlength=labels.size).max(initial=0) <= limit
        if stats.exhausted_at is None:
            assert stats.max_repeats_per_document <= limit
    assert np.all(labels[schedule.indices] >= 0)  # negative labels never drawn


@SETTINGS
@given(problems())
def test_budget_and_stats_are_consistent(problem):
    labels, kwargs = problem
    schedule = quiet(build_schedule, labels, **kwargs)
    stats = schedule.stats
    assert schedule.indices.dtype == np.int64 and schedule.indices.ndim == 1
    assert stats.n_draws == schedule.indices.size
    assert stats.draws_per_cluster.sum() == stats.n_draws
    assert stats.budget_met == (stats.n_draws == kwargs["num_samples"])
    if not stats.budget_met:
        assert kwargs["on_exhausted"] == "stop"
        assert stats.n_draws == stats.exhausted_at
    assert np.array_equal(
        stats.repeats_per_document, np.bincount(schedule.indices, minlength=labels.size)
    )


@SETTINGS
@given(problems())
def test_same_seed_same_bytes_and_streaming_equals_materialised(problem):
    labels, kwargs = problem
    first = quiet(build_schedule, labels, **kwargs).indices
    again = quiet(build_schedule, labels.astype(np.int32), **kwargs).indices
    assert first.tobytes() == again.tobytes()
    start = kwargs["seed"] % (first.size + 1)
    block_size = 1 + kwargs["seed"] % 97
    blocks = quiet(
        lambda: list(iter_schedule(labels, start=start, block_size=block_size, **kwargs))
    )
    assert all(b.size == block_size for b in blocks[:-1])
    streamed = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)
    assert np.array_equal(streamed, first[start:])


@SETTINGS
@given(problems())
def test_repeats_follow_passes(problem):
    """A document's repeat count is its cluster's pass count +-1: within a cluster
    repeats differ by at most one, and each full pass is a permutation."""
    labels, kwargs = problem
    schedule = quiet(build_schedule, labels, **kwargs)
    indices = schedule.indices
    if schedule.stats.exhausted_at is not None:
        indices = indices[: schedule.stats.exhausted_at]
    repeats = np.bincount(indices, minlength=labels.size)
    groups = (
        [np.flatnonzero(labels >= 0)]
        if kwargs["policy"] == "random"
        else [np.flatnonzero(labels == k) for k in np.unique(labels[labels >= 0])]
    )
    for members in groups:
        drawn = indices[np.isin(indices, members)]
        if drawn.size == 0:
            continue
        assert repeats[members].max() - repeats[members].min() <= 1
        for p in range(drawn.size // members.size):
            chunk = drawn[p * members.size : (p + 1) * members.size]
            assert np.array_equal(np.sort(chunk), members)


@SETTINGS
@given(problems(orders=("planned",)))
def test_planned_order_meets_its_plan_and_spreads_draws(problem):
    labels, kwargs = problem
    if kwargs["policy"] == "random":
        return
    schedule = quiet(build_schedule, labels, **kwargs)
    stats = schedule.stats
    plan = stats.planned_draws
    sizes = np.bincount(labels[labels >= 0], minlength=plan.size)
    limit = None if kwargs["policy"] == "uniform" else kwargs["max_repeats"]
    caps = sizes * limit if limit is not None else None
    assert plan.sum() == (
        kwargs["num_samples"] if caps is None else min(kwargs["num_samples"], caps.sum())
    )
    if caps is not None:
        assert np.all(plan <= caps)
    # the cluster part of the schedule delivers exactly the plan
    part = schedule.indices[: int(plan.sum())]
    assert np.array_equal(np.bincount(labels[part], minlength=plan.size), plan)
    if kwargs["policy"] == "clusterclip" and caps is not None:
        # water-filling with equal weights: uncapped clusters differ by <= 1 and
        # get at least what any capped cluster was held to
        uncapped = (plan < caps) & (sizes > 0)
        if uncapped.any():
            assert plan[uncapped].max() - plan[uncapped].min() <= 1
            capped = (plan == caps) & (sizes > 0)
            if capped.any():
                assert caps[capped].max() <= plan[uncapped].max() + 1  # +1: rounding
    # spread: every prefix of length t holds t * n_k / T draws of cluster k, +-(2 + K n_k / T)
    total = int(plan.sum())
    n_clusters = int((plan > 0).sum())
    onehot = labels[part][:, None] == np.arange(plan.size)[None, :]
    prefix = np.cumsum(onehot, axis=0)
    t = np.arange(1, total + 1)[:, None]
    expected = t * plan[None, :] / total
    bound = 2 + n_clusters * plan[None, :] / total
    assert np.all(np.abs(prefix - expected) <= bound)


@SETTINGS
@given(problems(orders=("online",)))
def test_online_clip_removes_cluster_after_r_passes(problem):
    labels, kwargs = problem
    if kwargs["policy"] in ("random", "uniform"):
        return
    schedule = quiet(build_schedule, labels, **kwargs)
    stats = schedule.stats
    sizes = np.bincount(labels[labels >= 0], minlength=stats.clip_step.size)
    for k in np.flatnonzero(stats.clip_step >= 0):
        step = stats.clip_step[k]
        assert labels[schedule.indices[step]] == k
        draws_k = np.flatnonzero(labels[schedule.indices] == k)
        # exactly max_repeats * size draws up to the clip, none after (before any fallback)
        cut = stats.exhausted_at if stats.exhausted_at is not None else schedule.indices.size
        assert np.sum(draws_k <= step) == kwargs["max_repeats"] * sizes[k]
        assert not np.any((draws_k > step) & (draws_k < cut))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.integers(1, 400), st.data())
def test_token_budget_ends_at_first_crossing_and_resumes(problem, budget, data):
    labels, kwargs = problem
    kwargs = dict(kwargs)
    del kwargs["num_samples"]
    lengths = np.random.default_rng(kwargs["seed"] % 1000).integers(0, 9, size=labels.size)
    if lengths[labels >= 0].sum() == 0:
        lengths[np.flatnonzero(labels >= 0)[0]] = 1
    schedule = quiet(build_schedule, labels, num_tokens=budget, lengths=lengths, **kwargs)
    indices = schedule.indices
    cumulative = np.cumsum(lengths[indices])
    if schedule.stats.budget_met:
        assert cumulative[-1] >= budget
        assert indices.size == 1 or cumulative[-2] < budget
    else:
        assert kwargs["on_exhausted"] == "stop"
        assert cumulative[-1] < budget if indices.size else True
    assert schedule.stats.n_tokens == (int(cumulative[-1]) if indices.size else 0)
    start = data.draw(st.integers(0, indices.size + 2))
    tail = quiet(
        lambda: list(
            iter_schedule(labels, num_tokens=budget, lengths=lengths, start=start, **kwargs)
        )
    )
    streamed = np.concatenate(tail) if tail else np.zeros(0, np.int64)
    assert np.array_equal(streamed, indices[start:])
