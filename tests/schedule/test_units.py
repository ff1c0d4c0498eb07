"""Near-duplicate groups drawn as units: the clip counts groups, members take turns.

The exactness oracle: a grouped schedule is the ungrouped schedule of the unit
labels (every non-representative excluded), with occurrence ``p`` of each
unit replaced by its member ``p % g``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip import build_schedule, iter_schedule
from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError
from clusterclip.schedule.units import Units
from tests.schedule.conftest import quiet


def random_groups(rng: np.random.Generator, labels: np.ndarray, share: float) -> np.ndarray:
    """Groups inside clusters plus some across clusters; representative = lowest index."""
    n = labels.size
    duplicate_of = np.arange(n)
    for doc in range(n):
        if labels[doc] >= 0 and rng.random() < share:
            earlier = np.flatnonzero(labels[:doc] >= 0)
            if earlier.size:
                duplicate_of[doc] = duplicate_of[int(rng.choice(earlier))]
    return duplicate_of


def rotated_oracle(labels, duplicate_of, **kwargs) -> np.ndarray:
    """The grouped schedule, from the ungrouped one over the unit labels (see module doc)."""
    unit_labels = np.where(duplicate_of == np.arange(labels.size), labels, -1)
    drawn = quiet(build_schedule, unit_labels, **kwargs).indices
    members = {
        u: np.flatnonzero((duplicate_of == u) & (labels >= 0)) for u in np.unique(drawn).tolist()
    }
    seen: dict[int, int] = {}
    out = []
    for unit in drawn.tolist():
        p = seen.get(unit, 0)
        seen[unit] = p + 1
        out.append(int(members[unit][p % members[unit].size]))
    return np.array(out, dtype=np.int64)


def tail_of(labels, start, block_size, **kwargs) -> list[np.ndarray]:
    return list(iter_schedule(labels, start=start, block_size=block_size, **kwargs))


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(3)
    sizes = [1, 2, 4, 9, 20, 60, 150]
    labels = np.concatenate([np.repeat(np.arange(len(sizes)), sizes), np.full(5, -1)])
    labels = labels[rng.permutation(labels.size)]
    return labels, random_groups(rng, labels, 0.3)


@pytest.mark.parametrize("order", ["online", "planned"])
@pytest.mark.parametrize("policy", ["clusterclip", "random", "temperature"])
def test_grouped_schedule_is_the_unit_schedule_rotated(case, order, policy):
    labels, duplicate_of = case
    kwargs = dict(
        policy=policy, max_repeats=3, num_samples=600, seed=11, order=order,
        alpha=0.5 if policy == "temperature" else None, on_exhausted="random",
    )  # fmt: skip
    grouped = quiet(build_schedule, labels, duplicate_of=duplicate_of, **kwargs)
    assert grouped.stats.exhausted_at is not None  # the random passes after the clip rotate too
    np.testing.assert_array_equal(grouped.indices, rotated_oracle(labels, duplicate_of, **kwargs))


def test_every_group_together_appears_at_most_max_repeats_times(case):
    labels, duplicate_of = case
    schedule = quiet(
        build_schedule, labels, max_repeats=2, num_samples=10_000, seed=0, duplicate_of=duplicate_of
    )
    assert not schedule.stats.budget_met  # the clip ended it: every unit used its R passes
    per_group = np.bincount(duplicate_of[schedule.indices], minlength=labels.size)
    heads = np.flatnonzero((duplicate_of == np.arange(labels.size)) & (labels >= 0))
    np.testing.assert_array_equal(per_group[heads], 2)  # exactly R per group, no more
    assert (labels[schedule.indices] >= 0).all()
    # statistics count documents: a group of g members spreads its R draws over them
    assert schedule.stats.repeats_per_document.sum() == schedule.indices.size
    assert schedule.stats.draws_per_cluster.sum() == schedule.indices.size


def test_a_document_copied_50_times_is_drawn_at_most_r_times():
    labels = np.repeat(np.arange(4), [30, 80, 55, 40])
    duplicate_of = np.arange(labels.size)
    copies = np.flatnonzero(labels == 1)[:51]  # one text and its 50 copies
    duplicate_of[copies] = copies[0]
    for repeats in (1, 2, 4):
        grouped = quiet(build_schedule, labels, max_repeats=repeats, num_samples=10**5, seed=1,
                        duplicate_of=duplicate_of)  # fmt: skip
        plain = quiet(build_schedule, labels, max_repeats=repeats, num_samples=10**5, seed=1)
        assert np.isin(grouped.indices, copies).sum() == repeats
        assert np.isin(plain.indices, copies).sum() == 51 * repeats


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**63 - 1),
    data_seed=st.integers(0, 1000),
    share=st.floats(0.0, 0.9),
    order=st.sampled_from(["online", "planned"]),
    starts=st.lists(st.integers(0, 400), min_size=1, max_size=4),
)
def test_resume_anywhere_equals_the_uninterrupted_order(seed, data_seed, share, order, starts):
    rng = np.random.default_rng(data_seed)
    labels = rng.integers(-1, 6, size=int(rng.integers(2, 80)))
    labels[0] = 0
    duplicate_of = random_groups(rng, labels, share)
    kwargs = dict(max_repeats=3, num_samples=400, seed=seed, order=order, on_exhausted="random")
    full = quiet(build_schedule, labels, duplicate_of=duplicate_of, **kwargs).indices
    np.testing.assert_array_equal(full, rotated_oracle(labels, duplicate_of, **kwargs))
    for start in starts:
        tail = quiet(tail_of, labels, start, 37, duplicate_of=duplicate_of, **kwargs)
        got = np.concatenate(tail) if tail else np.zeros(0, np.int64)
        np.testing.assert_array_equal(got, full[start:])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data_seed=st.integers(0, 1000),
    order=st.sampled_from(["online", "planned"]),
    on_exhausted=st.sampled_from(["stop", "random"]),
    fraction=st.floats(0.05, 1.5),
)
def test_token_budget_resume_with_grouping(data_seed, order, on_exhausted, fraction):
    rng = np.random.default_rng(data_seed)
    labels = rng.integers(0, 5, size=int(rng.integers(3, 60)))
    duplicate_of = random_groups(rng, labels, 0.4)
    lengths = rng.integers(0, 50, size=labels.size)
    lengths[0] = 1
    budget = max(1, int(fraction * 3 * lengths.sum()))
    kwargs = dict(max_repeats=3, num_tokens=budget, lengths=lengths, seed=data_seed,
                  order=order, on_exhausted=on_exhausted, duplicate_of=duplicate_of)  # fmt: skip
    full = quiet(build_schedule, labels, **kwargs)
    tokens = np.cumsum(lengths[full.indices])
    if full.stats.budget_met and full.indices.size:
        assert tokens[-1] >= budget and (tokens.size == 1 or tokens[-2] < budget)
    for start in sorted(set(rng.integers(0, full.indices.size + 2, size=4).tolist())):
        tail = quiet(tail_of, labels, start, 7, **kwargs)
        got = np.concatenate(tail) if tail else np.zeros(0, np.int64)
        np.testing.assert_array_equal(got, full.indices[start:])


def test_tokens_of_first_counts_rotated_members_exactly(case):
    from clusterclip.schedule.policy import SchedulePolicy

    labels, duplicate_of = case
    lengths = np.random.default_rng(0).integers(1, 1000, size=labels.size)
    stream = SchedulePolicy(max_repeats=4, num_samples=700, seed=2).stream(
        labels, lengths, duplicate_of=duplicate_of
    )
    indices = np.concatenate(list(stream.blocks(0)))
    groups = stream.prep.groups
    counts = np.zeros(len(groups), dtype=np.int64)
    group_of = {int(c): g for g, c in enumerate(stream.prep.cluster_ids)}
    unit_cluster = np.where(duplicate_of == np.arange(labels.size), labels, -1)
    for t, doc in enumerate(indices.tolist()):
        counts[group_of[int(unit_cluster[duplicate_of[doc]])]] += 1
        if t % 97 == 0 or t == indices.size - 1:
            assert groups.tokens_of_first(counts, lengths) == int(lengths[indices[: t + 1]].sum())


def test_sampler_resumes_grouped_schedule_with_another_world_size(case):
    labels, duplicate_of = case
    kwargs = dict(num_samples=500, max_repeats=3, seed=4, duplicate_of=duplicate_of)
    full = quiet(build_schedule, labels, **kwargs).indices
    first = ClusterClipSampler(labels, rank=1, world_size=4, **kwargs)
    first.set_consumed_samples(120)
    state = first.state_dict()
    assert state["config"]["duplicates"] == "group"
    resumed = [ClusterClipSampler(labels, rank=r, world_size=2, **kwargs) for r in (0, 1)]
    for sampler in resumed:
        sampler.load_state_dict(state)
    got = np.empty(500 - 120, dtype=np.int64)
    got[0::2], got[1::2] = list(resumed[0]), list(resumed[1])
    np.testing.assert_array_equal(got, full[120:])
    ungrouped = ClusterClipSampler(labels, num_samples=500, max_repeats=3, seed=4)
    with pytest.raises(ClusterClipError, match="duplicates"):
        ungrouped.load_state_dict(state)


def test_grouping_off_is_byte_identical_to_before():
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3])
    schedule = build_schedule(labels, max_repeats=3, num_samples=25, seed=5, order="planned",
                              schedule_version=1)  # fmt: skip
    # Pinned from the commit before grouping existed (d3ef696): indices and config fingerprint.
    assert schedule.indices.tolist() == [5, 0, 3, 6, 1, 9, 4, 8, 2, 7, 0, 4, 7, 1, 9, 3, 5, 2,
                                         3, 6, 0, 9, 8, 1, 4]  # fmt: skip
    assert schedule.config.fingerprint() == "a8ac5b0cde4714904f499531e92b2b81"
    assert "duplicates" not in schedule.config.to_dict()
    for version in (1, 3):  # singleton groups change nothing under either rule
        plain = build_schedule(labels, max_repeats=3, num_samples=25, seed=5, order="planned",
                               schedule_version=version)  # fmt: skip
        singletons = build_schedule(labels, max_repeats=3, num_samples=25, seed=5,
                                    order="planned", schedule_version=version,
                                    duplicate_of=np.arange(labels.size))  # fmt: skip
        np.testing.assert_array_equal(singletons.indices, plain.indices)
        assert singletons.config.duplicates == "group"  # recorded: the groups are an input


def test_units_rotate_members_in_index_order():
    units = Units(np.array([0, 0, 2, 0, 2, 5]), np.array([1, 1, 0, 1, -1, 0]))
    assert units.labels.tolist() == [1, -1, 0, -1, -1, 0]
    assert units.members.tolist() == [0, 1, 3]  # document 4 is excluded: never emitted
    assert units.rotate(np.array([0, 0, 0, 0, 2, 5]), np.arange(6)).tolist() == [0, 1, 3, 0, 2, 5]
    lengths = np.array([10, 20, 1000, 30, 7, 5])
    assert units.tokens_over(np.array([0, 2]), np.array([4, 3]), lengths) == 70 + 3000


@pytest.mark.parametrize(
    ("duplicate_of", "message"),
    [
        (np.array([0, 0, 1]), r"`duplicate_of` must be representatives that are their own"),
        (np.array([0, 3, 2]), r"`duplicate_of` must be indices in \[0, 3\)"),
        (np.array([0, 1]), r"`duplicate_of` must be a 1-D integer array"),
        (np.array([2, 1, 2]), r"whose representative has a non-negative label"),
    ],
)
def test_bad_groups_are_refused_with_the_rule(duplicate_of, message):
    labels = np.array([0, 1, -1])
    with pytest.raises(ClusterClipError, match=message):
        build_schedule(labels, num_samples=3, seed=0, duplicate_of=duplicate_of)
