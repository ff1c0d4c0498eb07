"""Every bad input fails early with the standard message (pinned with match=)."""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError
from clusterclip.schedule import build_schedule, iter_schedule

LABELS = np.array([0, 0, 1, 2, 2, 2])


def build(labels=LABELS, **kwargs):
    kwargs.setdefault("num_samples", 5)
    kwargs.setdefault("seed", 0)
    return build_schedule(labels, **kwargs)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (np.zeros((2, 3), dtype=int), r"`labels` must be a 1-D integer array .*shape \(2, 3\)"),
        (np.array([0.0, 1.0]), r"`labels` must be a 1-D integer array .*dtype float64"),
        (np.array([True, False]), r"`labels` must be a 1-D integer array .*dtype bool"),
        (np.array(["a", "b"]), r"`labels` must be a 1-D integer array"),
        (np.array([], dtype=np.int64), r"`labels` must be non-empty; got 'an empty array'"),
        (
            np.array([-1, -2, -1]),
            r"`labels` must be an array with at least one non-negative label .*all 3 labels negative",
        ),
    ],
)
def test_bad_labels(labels, message):
    with pytest.raises(ClusterClipError, match=message):
        build(labels)


@pytest.mark.parametrize("value", [0, -3, 1.5, True, "4"])
def test_max_repeats_below_one(value):
    with pytest.raises(
        ClusterClipError,
        match=r"`max_repeats` must be an int in \[1, inf\) or None \(no limit\); got",
    ):
        build(max_repeats=value)


def test_both_or_neither_budget():
    with pytest.raises(
        ClusterClipError, match=r"`num_samples/num_tokens` must be exactly one budget"
    ):
        build(num_samples=None)
    with pytest.raises(
        ClusterClipError, match=r"`num_samples/num_tokens` must be exactly one budget"
    ):
        build(num_samples=5, num_tokens=10, lengths=np.ones(6, int))


@pytest.mark.parametrize("value", [0, -1, 2.5])
def test_bad_budget_values(value):
    with pytest.raises(ClusterClipError, match=r"`num_samples` must be an int in \[1, inf\)"):
        build(num_samples=value)
    with pytest.raises(ClusterClipError, match=r"`num_tokens` must be an int in \[1, inf\)"):
        build(num_samples=None, num_tokens=value, lengths=np.ones(6, int))


def test_num_tokens_needs_lengths():
    with pytest.raises(ClusterClipError, match=r"`lengths` must be given when num_tokens is used"):
        build(num_samples=None, num_tokens=10)


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        (
            np.ones(5, int),
            r"`lengths` must be a 1-D array with one token count per document \(shape \(6,\)\); got 'array of shape \(5,\)'",
        ),
        (np.ones((6, 1), int), r"`lengths` must be a 1-D array .*shape \(6, 1\)"),
        (
            np.array([1, 2, -3, 4, 5, 6]),
            r"`lengths` must be non-negative token counts; got 'minimum -3 at document 2'",
        ),
        (np.array([1, 2, 3.5, 4, 5, 6]), r"`lengths` must be whole, finite token counts"),
        (np.array([1, 2, np.nan, 4, 5, 6]), r"`lengths` must be whole, finite token counts"),
    ],
)
def test_bad_lengths(lengths, message):
    with pytest.raises(ClusterClipError, match=message):
        build(num_samples=None, num_tokens=10, lengths=lengths)


def test_all_zero_lengths_with_token_budget():
    with pytest.raises(ClusterClipError, match=r"`lengths` must be positive for some document"):
        build(num_samples=None, num_tokens=10, lengths=np.zeros(6, int), policy="uniform")


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), -float("inf")])
def test_alpha_not_finite(alpha):
    with pytest.raises(ClusterClipError, match=r"`alpha` must be a finite number; got"):
        build(policy="temperature", alpha=alpha)


def test_alpha_missing_or_misplaced():
    with pytest.raises(
        ClusterClipError, match=r"`alpha` must be a finite float for policy='temperature'; got None"
    ):
        build(policy="temperature")
    with pytest.raises(ClusterClipError, match=r"`alpha` must be None unless policy='temperature'"):
        build(alpha=0.5)
    with pytest.raises(ClusterClipError, match=r"`alpha` must be small enough"):
        build(policy="temperature", alpha=5000.0)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "policy",
            "balanced",
            r"`policy` must be one of random, uniform, clusterclip, temperature, hierarchical; got 'balanced'",
        ),
        ("order", "spread", r"`order` must be one of online, planned; got 'spread'"),
        (
            "on_exhausted",
            "ignore",
            r"`on_exhausted` must be one of stop, random, error; got 'ignore'",
        ),
        ("seed", -1, r"`seed` must be an int in \[0, 2\*\*63-1\]; got -1\. Pass e\.g\. seed=0\."),
        ("seed", None, r"`seed` must be an int in \[0, 2\*\*63-1\]; got None"),
    ],
)
def test_unknown_choices(name, value, message):
    with pytest.raises(ClusterClipError, match=message):
        build(**{name: value})


def test_seed_is_required():
    with pytest.raises(TypeError, match="seed"):
        build_schedule(LABELS, num_samples=3)


def test_cluster_weights_validation():
    with pytest.raises(
        ClusterClipError,
        match=r"`cluster_weights` must be a 1-D array with one weight per cluster id \(length >= 3\)",
    ):
        build(cluster_weights=[1.0, 1.0])
    with pytest.raises(
        ClusterClipError, match=r"`cluster_weights` must be finite and non-negative"
    ):
        build(cluster_weights=[1.0, -1.0, 1.0])
    with pytest.raises(
        ClusterClipError,
        match=r"`cluster_weights` must be positive for at least one non-empty cluster",
    ):
        build(cluster_weights=[0.0, 0.0, 0.0])
    with pytest.raises(
        ClusterClipError,
        match=r"`cluster_weights` must be None unless policy is 'uniform' or 'clusterclip'",
    ):
        build(cluster_weights=[1.0, 1.0, 1.0], policy="random")


def test_exhaustion_rules():
    with pytest.raises(
        ClusterClipError,
        match=r"the budget num_samples=100 cannot be met: every cluster is clipped at max_repeats=2 after 12 draws",
    ):
        build(num_samples=100, max_repeats=2, on_exhausted="error")
    with pytest.raises(ClusterClipError, match=r"the budget num_tokens=1000 cannot be met"):
        build(
            num_samples=None,
            num_tokens=1000,
            lengths=np.full(6, 10),
            max_repeats=2,
            on_exhausted="error",
            order="planned",
        )
    with pytest.warns(UserWarning, match=r"num_samples=100 cannot be met.*stops there"):
        schedule = build(num_samples=100, max_repeats=2)
    assert schedule.stats.n_draws == 12 and not schedule.stats.budget_met
    assert schedule.stats.exhausted_at == 12


def test_iter_and_sampler_arguments():
    with pytest.raises(ClusterClipError, match=r"`start` must be an int in \[0, inf\); got -1"):
        iter_schedule(LABELS, num_samples=3, seed=0, start=-1)
    with pytest.raises(ClusterClipError, match=r"`block_size` must be an int in \[1, inf\); got 0"):
        iter_schedule(LABELS, num_samples=3, seed=0, block_size=0)
    with pytest.raises(
        ClusterClipError, match=r"`rank` must be an int in \[0, world_size=2\); got 2"
    ):
        ClusterClipSampler(LABELS, num_samples=3, seed=0, rank=2, world_size=2)
    with pytest.raises(ClusterClipError, match=r"`world_size` must be an int in \[1, inf\); got 0"):
        ClusterClipSampler(LABELS, num_samples=3, seed=0, world_size=0)
    sampler = ClusterClipSampler(LABELS, num_samples=3, seed=0)
    with pytest.raises(
        ClusterClipError, match=r"`consumed_samples` must be an int in \[0, inf\); got -5"
    ):
        sampler.set_consumed_samples(-5)
    with pytest.raises(
        ClusterClipError, match=r"`state` must be a dict from ClusterClipSampler.state_dict\(\)"
    ):
        sampler.load_state_dict({"step": 3})
