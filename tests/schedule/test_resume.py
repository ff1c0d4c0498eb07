"""Resume equivalence: any stop point, any world size, both orders, token budgets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError
from clusterclip.schedule import build_schedule, iter_schedule
from clusterclip.schedule.groups import CHOICE_BLOCK


@pytest.fixture(scope="module")
def long_case():
    """3 choice blocks, clips inside blocks, fallback after exhaustion."""
    sizes = [1, 3, 7, 60, 900, 4000, 30000]
    labels = np.repeat(np.arange(len(sizes)), sizes)
    labels = labels[np.random.default_rng(0).permutation(labels.size)]
    lengths = np.random.default_rng(1).integers(1, 300, size=labels.size)
    return labels, lengths


@pytest.mark.parametrize("version", [1, 4])
@pytest.mark.parametrize("order", ["online", "planned"])
def test_iter_from_many_starts_equals_the_tail(long_case, order, version):
    labels, _ = long_case
    kwargs = dict(max_repeats=4, num_samples=200_000, order=order, on_exhausted="random", seed=8)
    kwargs["schedule_version"] = version
    full = build_schedule(labels, **kwargs).indices
    capped = 4 * labels.size
    starts = [
        0,
        1,
        CHOICE_BLOCK - 1,
        CHOICE_BLOCK,
        CHOICE_BLOCK + 1,
        2 * CHOICE_BLOCK + 5,
        capped - 1,
        capped,
        capped + 3,
        199_999,
        200_000,
    ]
    for start in starts:
        tail = np.concatenate(
            list(iter_schedule(labels, start=start, block_size=40_000, **kwargs))
            or [np.zeros(0, np.int64)]
        )
        assert np.array_equal(tail, full[start:]), start


@pytest.mark.parametrize("order", ["online", "planned"])
@pytest.mark.parametrize("policy", ["clusterclip", "random"])
def test_token_budget_resume(long_case, order, policy):
    labels, lengths = long_case
    kwargs = dict(
        policy=policy,
        max_repeats=3,
        num_tokens=15_000_000,
        lengths=lengths,
        order=order,
        on_exhausted="random",
        seed=2,
    )
    schedule = build_schedule(labels, **kwargs)
    full = schedule.indices
    cumulative = np.cumsum(lengths[full])
    assert cumulative[-1] >= 15_000_000 > cumulative[-2]  # ends at the first position reaching it
    assert schedule.stats.n_tokens == cumulative[-1]
    for start in [0, 777, CHOICE_BLOCK + 3, full.size - 1, full.size, full.size + 10]:
        tail = np.concatenate(
            list(iter_schedule(labels, start=start, **kwargs)) or [np.zeros(0, np.int64)]
        )
        assert np.array_equal(tail, full[start:]), start


@pytest.mark.parametrize("world_size", range(1, 9))
def test_ranks_read_strided_slices_of_the_global_schedule(skewed_labels, world_size):
    kwargs = dict(max_repeats=3, num_samples=4001, seed=11)
    full = build_schedule(skewed_labels, **kwargs).indices
    usable = full.size - full.size % world_size
    for rank in range(world_size):
        sampler = ClusterClipSampler(skewed_labels, rank=rank, world_size=world_size, **kwargs)
        announced = len(sampler)
        got = list(sampler)
        assert announced == len(got) == usable // world_size
        assert len(sampler) == 0  # everything handed out
        assert got == full[rank:usable:world_size].tolist()
        assert sampler.state_dict()["consumed_samples"] == len(got) * world_size
    loose = [
        list(
            ClusterClipSampler(
                skewed_labels, rank=r, world_size=world_size, drop_last=False, **kwargs
            )
        )
        for r in range(world_size)
    ]
    assert len({len(got) for got in loose}) == 1  # padded: every rank yields the same count
    merged = [None] * (world_size * len(loose[0]))
    for r, got in enumerate(loose):
        merged[r::world_size] = got
    padding = len(merged) - full.size
    assert merged == full.tolist() + full[:padding].tolist()  # wrapped to the start


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    world_before=st.integers(1, 8),
    world_after=st.integers(1, 8),
    steps=st.integers(0, 700),
    order=st.sampled_from(["online", "planned"]),
    seed=st.integers(0, 1000),
)
def test_stop_and_resume_with_another_world_size(
    skewed_labels, world_before, world_after, steps, order, seed
):
    kwargs = dict(max_repeats=2, num_samples=2600, order=order, on_exhausted="random", seed=seed)
    full = build_schedule(skewed_labels, **kwargs).indices
    # run `steps` lockstep steps on world_before ranks, checkpoint rank 0
    samplers = [
        ClusterClipSampler(skewed_labels, rank=r, world_size=world_before, **kwargs)
        for r in range(world_before)
    ]
    iterators = [iter(s) for s in samplers]
    seen = []
    for _ in range(min(steps, len(samplers[0]))):
        seen.extend(next(it) for it in iterators)
    state = samplers[0].state_dict()
    consumed = state["consumed_samples"]
    assert consumed == len(seen)
    assert seen == full[:consumed].tolist()
    # resume on world_after ranks: together they continue exactly where it stopped
    resumed = []
    for r in range(world_after):
        sampler = ClusterClipSampler(skewed_labels, rank=r, world_size=world_after, **kwargs)
        sampler.load_state_dict(state)
        resumed.append(list(sampler))
        assert len(sampler) == 0  # consumed everything it was given
    rest = full[consumed:]
    usable = rest.size - rest.size % world_after
    for r in range(world_after):
        assert resumed[r] == rest[r:usable:world_after].tolist()


def test_len_counts_what_this_rank_yields_and_set_consumed(skewed_labels):
    kwargs = dict(max_repeats=3, num_samples=1003, seed=1)
    full = build_schedule(skewed_labels, **kwargs).indices
    sampler = ClusterClipSampler(skewed_labels, rank=2, world_size=4, **kwargs)
    assert len(sampler) == 1003 // 4
    sampler.set_consumed_samples(400)
    assert len(sampler) == (1003 - 400) // 4
    assert list(sampler) == full[402:1000:4].tolist()


def test_sampler_with_token_budget(long_case):
    labels, lengths = long_case
    kwargs = dict(max_repeats=3, num_tokens=2_000_000, lengths=lengths, seed=4)
    full = build_schedule(labels, **kwargs).indices
    sampler = ClusterClipSampler(labels, rank=1, world_size=3, **kwargs)
    assert sampler.total_samples == full.size
    assert len(sampler) == full.size // 3
    assert list(sampler) == full[1 : full.size - full.size % 3 : 3].tolist()


def test_state_from_another_config_is_refused(skewed_labels):
    sampler = ClusterClipSampler(skewed_labels, max_repeats=3, num_samples=100, seed=1)
    state = sampler.state_dict()
    other = ClusterClipSampler(skewed_labels, max_repeats=2, num_samples=100, seed=2)
    with pytest.raises(
        ClusterClipError,
        match=r"different schedule: max_repeats \(saved 3, now 2\); seed \(saved 1, now 2\)",
    ):
        other.load_state_dict(state)
    relabelled = skewed_labels.copy()
    relabelled[relabelled == 5] = 6
    changed = ClusterClipSampler(relabelled, max_repeats=3, num_samples=100, seed=1)
    with pytest.raises(ClusterClipError, match="labels_fingerprint"):
        changed.load_state_dict(state)


def test_sampler_feeds_a_dataloader(skewed_labels):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, Sampler

    dataset = torch.arange(skewed_labels.size)
    sampler = ClusterClipSampler(skewed_labels, max_repeats=3, num_samples=64, seed=0)
    assert isinstance(sampler, Sampler)
    loader = DataLoader(dataset, sampler=sampler, batch_size=16)
    assert len(loader) == 4
    batches = torch.cat(list(loader)).tolist()
    assert (
        batches
        == build_schedule(skewed_labels, max_repeats=3, num_samples=64, seed=0).indices.tolist()
    )


def test_sampler_warns_when_the_budget_cannot_be_met(skewed_labels):
    with pytest.warns(UserWarning, match="cannot be met"):
        sampler = ClusterClipSampler(skewed_labels, max_repeats=1, num_samples=10**6, seed=0)
    got = list(sampler)
    assert len(got) == int((skewed_labels >= 0).sum())
    assert len(sampler) == 0


@pytest.mark.parametrize("order", ["online", "planned"])
def test_token_budget_resume_far_past_exhaustion(order):
    # Every cluster is clipped after 63 draws; the random passes that follow run for
    # three choice blocks. A resume in block 1 or 2 must count the tokens of the
    # clipped part *and* of the random passes before it, or it overshoots the budget.
    labels = np.repeat(np.arange(3), [3, 10, 50])
    labels = labels[np.random.default_rng(6).permutation(labels.size)]
    lengths = np.random.default_rng(7).integers(1, 10, size=labels.size)
    kwargs = dict(
        max_repeats=1,
        num_tokens=800_000,
        lengths=lengths,
        order=order,
        on_exhausted="random",
        seed=9,
    )
    schedule = build_schedule(labels, **kwargs)
    full = schedule.indices
    assert schedule.stats.exhausted_at == 63 and full.size > 2 * CHOICE_BLOCK
    cumulative = np.cumsum(lengths[full])
    assert cumulative[-1] >= 800_000 > cumulative[-2]
    starts = [64, CHOICE_BLOCK, CHOICE_BLOCK + 5, 2 * CHOICE_BLOCK, 2 * CHOICE_BLOCK + 77]
    for start in [*starts, full.size - 1, full.size, full.size + 1]:
        tail = np.concatenate(
            list(iter_schedule(labels, start=start, **kwargs)) or [np.zeros(0, np.int64)]
        )
        assert np.array_equal(tail, full[start:]), start
    # the sampler resumed there reads the same tail (it counts the same tokens)
    for start in (CHOICE_BLOCK + 5, 2 * CHOICE_BLOCK + 77):
        sampler = ClusterClipSampler(labels, **kwargs)
        sampler.set_consumed_samples(start)
        assert sampler.total_samples == full.size
        assert list(sampler) == full[start:].tolist()


@pytest.mark.parametrize("version", [1, 3])
def test_an_older_checkpoint_names_the_argument_that_resumes_it(version):
    """Made with an older rule (version 1, the default before version 4, or the opt-in
    version 3): refused by a default sampler (version 4) with the exact fix, and resumed
    exactly by one built with that ``schedule_version``."""
    labels = np.repeat(np.arange(6), [1, 2, 3, 5, 8, 13])
    kwargs = dict(max_repeats=3, num_samples=80, seed=4)
    old = ClusterClipSampler(labels, schedule_version=version, **kwargs)
    whole = list(ClusterClipSampler(labels, schedule_version=version, **kwargs))
    old.set_consumed_samples(30)
    state = old.state_dict()
    assert state["schedule_version"] == version
    fix = rf"pass schedule_version={version} to resume it exactly"
    with pytest.raises(ClusterClipError, match=fix):
        ClusterClipSampler(labels, **kwargs).load_state_dict(state)
    again = ClusterClipSampler(labels, schedule_version=version, **kwargs)
    again.load_state_dict(state)
    assert list(again) == whole[30:]
