"""No overflow for any max_repeats, and seeds that never alias one another.

A cap the budget cannot reach is no cap at all (same schedule); Python ints
past int64 are accepted. Seeds are ints in [0, 2**63-1]; two different seeds
(or purposes, clusters, chunks) never feed numpy the same entropy.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.errors import ClusterClipError, spelled_as_flags
from clusterclip.schedule import SCHEDULE_VERSION, build_schedule, iter_schedule
from clusterclip.schedule.choosers import block_uniforms
from clusterclip.schedule.config import schedule_version_for
from clusterclip.schedule.groups import (
    PURPOSE_CHOICE,
    PURPOSE_CLUSTER_PASS,
    PURPOSE_FALLBACK_PASS,
    PURPOSE_PHASE,
    PURPOSE_RANDOM_PASS,
    chunk_permutations,
    entropy_words,
    pcg64_seeds,
    seed_sequence,
)
from clusterclip.schedule.planned import exact_sum, planned_phases
from clusterclip.schedule.policy import SchedulePolicy
from clusterclip.schedule.prepare import NO_CAP, group_caps
from clusterclip.schedule.seeds import generators

SEED_MAX = 2**63 - 1
LABELS = np.repeat(np.arange(6), [1, 2, 3, 5, 8, 13])[np.random.default_rng(0).permutation(32)]
LENGTHS = np.random.default_rng(1).integers(0, 40, LABELS.size)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _build(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unreachable cap must not warn about exhaustion
        return build_schedule(LABELS, **kwargs)


# --------------------------------------------------------------------------- max_repeats


def test_max_repeats_10_17_is_no_cap():
    """It overflowed R x size and gave an empty schedule of '-6893488147419103232 draws'."""
    capped = _build(max_repeats=10**17, num_samples=500, seed=0)
    uncapped = _build(max_repeats=None, num_samples=500, seed=0)
    assert np.array_equal(capped.indices, uncapped.indices)
    assert capped.stats.budget_met and capped.stats.exhausted_at is None
    assert capped.config.max_repeats == 10**17  # recorded as given


@SETTINGS
@given(
    max_repeats=st.one_of(
        st.integers(501, 2**70), st.sampled_from([2**61, 2**62 - 1, 2**63 - 1, 2**63, 10**40])
    ),
    order=st.sampled_from(["online", "planned"]),
    policy=st.sampled_from(["clusterclip", "temperature", "random"]),
    tokens=st.booleans(),
    seed=st.integers(0, SEED_MAX),
)
def test_a_cap_the_budget_cannot_reach_is_no_cap(max_repeats, order, policy, tokens, seed):
    """500 draws (or 500 x the mean tokens) never reach a cap above 500: same schedule."""
    budget = {"num_tokens": 500 * 20, "lengths": LENGTHS} if tokens else {"num_samples": 500}
    extra = {"alpha": 0.5} if policy == "temperature" else {}
    common = dict(policy=policy, order=order, seed=seed, **budget, **extra)
    capped = _build(max_repeats=max_repeats, **common)
    uncapped = _build(max_repeats=None, **common)
    assert np.array_equal(capped.indices, uncapped.indices)
    assert (capped.stats.clip_step == -1).all()
    if order == "planned" and policy != "random":
        assert np.array_equal(capped.stats.planned_draws, uncapped.stats.planned_draws)


@SETTINGS
@given(
    sizes=st.lists(st.integers(1, 2**40), min_size=1, max_size=8),
    max_repeats=st.integers(1, 2**80),
)
def test_caps_never_overflow(sizes, max_repeats):
    sizes = np.array(sizes, dtype=np.int64)
    caps, total = group_caps(sizes, max_repeats)
    exact = [max_repeats * int(s) for s in sizes]
    for cap, want in zip(caps.tolist(), exact, strict=True):
        assert cap == (want if want <= NO_CAP else NO_CAP)  # NO_CAP: never reached
    assert total == (sum(exact) if sum(exact) < NO_CAP else None)


def test_caps_below_and_past_no_cap_together():
    """One cluster's cap finite, the other's past NO_CAP: no overflow, no exhaustion."""
    labels = np.concatenate([np.zeros(1, np.int64), np.ones(2**20, np.int64)])
    repeats = NO_CAP // 2**19  # 1 document: a finite cap; 2**20 documents: past NO_CAP
    schedule = build_schedule(labels, max_repeats=repeats, num_samples=1000, seed=0)
    uncapped = build_schedule(labels, max_repeats=None, num_samples=1000, seed=0)
    assert np.array_equal(schedule.indices, uncapped.indices)
    assert schedule.stats.budget_met and schedule.stats.exhausted_at is None


@pytest.mark.parametrize("value", [np.int64(10**17), np.uint64(2**64 - 1), 2**64, 10**30])
def test_large_integer_types_are_accepted(value):
    schedule = build_schedule(LABELS, max_repeats=value, num_samples=50, seed=0)
    assert len(schedule) == 50


def test_a_real_cap_is_unchanged():
    with pytest.warns(UserWarning, match="after 64 draws"):
        schedule = build_schedule(LABELS, max_repeats=2, num_samples=500, seed=0)
    assert len(schedule) == 64 and np.bincount(schedule.indices).max() == 2


# --------------------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", [-1, 2**63, 2**64, 10**30, True, 1.0, "0", None])
def test_seeds_outside_the_range_are_refused(seed):
    message = rf"`seed` must be an int in \[0, 2\*\*63-1\]; got {re.escape(repr(seed))}"
    with pytest.raises(ClusterClipError, match=message):
        build_schedule(LABELS, num_samples=5, seed=seed)
    with pytest.raises(ClusterClipError, match=message):
        SchedulePolicy(num_samples=5, seed=seed)


def test_seed_message_names_the_flag_under_the_cli():
    with (
        spelled_as_flags({"seed": "--seed"}),
        pytest.raises(
            ClusterClipError,
            match=r"`--seed` must be an int in \[0, 2\*\*63-1\]; got -3\. Pass e\.g\. --seed 0\.",
        ),
    ):
        build_schedule(LABELS, num_samples=5, seed=-3)


@pytest.mark.parametrize("seed", [0, 2**32 - 1, 2**32, SEED_MAX, np.int64(SEED_MAX), np.uint64(5)])
def test_seeds_in_the_range_are_accepted(seed):
    schedule = build_schedule(LABELS, num_samples=40, seed=seed)
    assert schedule.config.seed == int(seed) and type(schedule.config.seed) is int


def _padded(words: list[int]) -> tuple[int, ...]:
    """numpy's SeedSequence reads entropy shorter than 4 words as if zero-padded to 4."""
    return tuple(words + [0] * (4 - len(words)))


PARTS = {
    PURPOSE_CHOICE: 1,
    PURPOSE_CLUSTER_PASS: 2,
    PURPOSE_RANDOM_PASS: 2,
    PURPOSE_FALLBACK_PASS: 2,
    PURPOSE_PHASE: 0,
}


@st.composite
def stream_keys(draw):
    """(seed, purpose, parts) of any schedule stream, with 32-bit edges likely."""
    edge = st.sampled_from([0, 1, 2, 5, 2**32 - 1, 2**32, 2**32 + 1, 2 * 2**32 + 7, SEED_MAX])
    seed = draw(st.one_of(edge, st.integers(0, SEED_MAX)))
    purpose = draw(st.sampled_from(sorted(PARTS)))
    part = st.one_of(st.sampled_from([0, 1, 2, 2**32 - 1, 2**32, 2**33]), st.integers(0, 2**40))
    return seed, purpose, tuple(draw(part) for _ in range(PARTS[purpose]))


@settings(max_examples=300, deadline=None)
@given(stream_keys(), stream_keys())
def test_no_two_streams_share_entropy(a, b):
    words_a, words_b = entropy_words(a[0], a[1], *a[2]), entropy_words(b[0], b[1], *b[2])
    assert all(0 <= w < 2**32 for w in words_a)
    if a != b:
        assert _padded(words_a) != _padded(words_b)


def test_seeds_past_32_bits_no_longer_alias_smaller_ones():
    """numpy splits a seed >= 2**32 into two words: [7 + 2 * 2**32, 1, 0] used to read
    as [7, 2, 1, 0], i.e. seed 7's permutation stream of cluster 1, chunk 0."""
    old = np.random.SeedSequence([7 + 2 * 2**32, PURPOSE_CHOICE, 0]).generate_state(4)
    aliased = np.random.SeedSequence([7, PURPOSE_CLUSTER_PASS, 1, 0]).generate_state(4)
    assert np.array_equal(old, aliased)  # the version 1 entropy of those two streams
    now = seed_sequence(7 + 2 * 2**32, PURPOSE_CHOICE, 0).generate_state(4)
    assert not np.array_equal(now, aliased)
    # and seed 2**32 + s no longer starts where seed s's next block starts
    assert not np.array_equal(block_uniforms(2**32 + 5, 0), block_uniforms(5, 1))


@SETTINGS
@given(st.integers(0, SEED_MAX), st.integers(0, SEED_MAX))
def test_distinct_seeds_give_distinct_schedules(a, b):
    kwargs = dict(max_repeats=2, num_samples=64, on_exhausted="random")
    if a != b:
        assert not np.array_equal(
            build_schedule(LABELS, seed=a, **kwargs).indices,
            build_schedule(LABELS, seed=b, **kwargs).indices,
        )
        assert not np.array_equal(block_uniforms(a, 0)[:8], block_uniforms(b, 0)[:8])
        assert not np.array_equal(planned_phases(a, 4), planned_phases(b, 4))


def test_seeds_below_2_32_keep_their_streams():
    """The entropy of every stream of a 32-bit seed is the version 1 one: [seed, purpose, ...]."""
    assert entropy_words(2**32 - 1, PURPOSE_CLUSTER_PASS, 9, 3) == [2**32 - 1, 2, 9, 3]
    expected = np.random.default_rng(np.random.SeedSequence([12345, PURPOSE_CHOICE, 2]))
    assert np.array_equal(block_uniforms(12345, 2), expected.random(65536))
    assert schedule_version_for(2**32 - 1) == 1 and schedule_version_for(2**32) == 2
    old = SchedulePolicy(num_samples=3, seed=2**40, schedule_version=2).config_for(LABELS)
    assert old.schedule_version == 2  # a checkpoint of the version-1 stream is refused
    assert SchedulePolicy(num_samples=3, seed=5, schedule_version=1).config_for(LABELS)
    for seed in (5, 2**40):  # new schedules: the default rule, whatever the seed
        config = SchedulePolicy(num_samples=3, seed=seed).config_for(LABELS)
        assert config.schedule_version == SCHEDULE_VERSION == 4
    opt_in = SchedulePolicy(num_samples=3, seed=2**40, schedule_version=3).config_for(LABELS)
    assert opt_in.schedule_version == 3


def test_pinned_stream_of_a_seed_past_32_bits():
    """The wide layout is part of the draw rule: a change here must bump SCHEDULE_VERSION."""
    assert entropy_words(2**40 + 3, PURPOSE_CHOICE, 1) == [3, 2**32 - 1, 256, 1, 1, 0]
    schedule = build_schedule(
        LABELS, max_repeats=2, num_samples=12, seed=2**40 + 3, schedule_version=2
    )
    assert schedule.indices.tolist() == PINNED_WIDE


PINNED_WIDE = [11, 28, 12, 15, 21, 4, 20, 9, 8, 14, 15, 22]


@SETTINGS
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=10), st.integers(1, 5))
def test_bulk_seed_states_equal_numpy_seed_sequence(words, rows):
    block = np.array([words] * rows, dtype=np.uint32)
    block[:, 0] = (block[:, 0] + np.arange(rows, dtype=np.uint32)) % np.uint32(2**32 - 1)
    got = pcg64_seeds(block)
    for row, state in zip(block, got, strict=True):
        want = np.random.SeedSequence([int(w) for w in row]).generate_state(4, np.uint64)
        assert np.array_equal(state, want)


@SETTINGS
@given(
    seed=st.integers(0, SEED_MAX),
    keys=st.lists(st.integers(0, 2**41), min_size=1, max_size=4),
    chunk=st.integers(0, 3),
    size=st.integers(2, 40),
)
def test_bulk_generators_equal_the_reference_permutations(seed, keys, chunk, size):
    made = generators(seed, PURPOSE_CLUSTER_PASS, np.array(keys), np.full(len(keys), chunk))
    for key, rng in zip(keys, made, strict=True):
        reference = chunk_permutations(seed, PURPOSE_CLUSTER_PASS, key, chunk, size, rows=2)
        got = np.stack([rng.permutation(size), rng.permutation(size)])
        assert np.array_equal(got, reference)


def test_iterate_accepts_the_largest_seed():
    blocks = list(iter_schedule(LABELS, num_samples=100, seed=SEED_MAX, block_size=30))
    assert sum(b.size for b in blocks) == 100


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=5e-324, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.integers(1, 5000),
)
def test_exact_sum_of_equal_weights_is_fsum(weight, copies):
    # The planned order's water-filling sums the free clusters' weights with
    # math.fsum (exact); equal weights take one multiplication: the same float.
    values = np.full(copies, weight)
    assert exact_sum(values) == math.fsum(values.tolist())
    mixed = values.copy()
    mixed[0] = weight * 3.0 if weight < 1e299 else weight / 3.0
    assert exact_sum(mixed) == math.fsum(mixed.tolist())


def test_exact_sum_keeps_fsums_overflow_error():
    with pytest.raises(OverflowError):
        exact_sum(np.full(10, 1e308))
