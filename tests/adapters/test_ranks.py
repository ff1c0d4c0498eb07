"""Equal ranks: every rank yields the same count, ``len()`` says it, nothing is lost.

Collective training hangs when one rank runs out a step before the others, so
``drop_last=True`` truncates to equal length and ``drop_last=False`` pads like
``torch.utils.data.DistributedSampler`` (wrapping around to the start of the
schedule). A world size that would leave every rank with nothing is refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError
from clusterclip.schedule import build_schedule
from clusterclip.schedule.groups import CHOICE_BLOCK

LABELS = np.repeat(np.arange(5), [1, 4, 9, 30, 56])[np.random.default_rng(3).permutation(100)]


def expected_global(schedule: np.ndarray, consumed: int, world: int, drop_last: bool):
    """The positions all ranks read from ``consumed`` on, in global order."""
    left = max(0, schedule.size - consumed)
    rows = left // world if drop_last else -(-left // world)
    padded = np.concatenate([schedule, np.resize(schedule, world)])  # wraps to the start
    return padded[consumed : consumed + rows * world]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    num_samples=st.integers(1, 60),
    world_size=st.integers(1, 9),
    drop_last=st.booleans(),
    data=st.data(),
)
def test_len_is_what_every_rank_yields(num_samples, world_size, drop_last, data):
    kwargs = dict(max_repeats=2, num_samples=num_samples, seed=num_samples)
    schedule = build_schedule(LABELS, **kwargs).indices
    if drop_last and schedule.size < world_size:
        with pytest.raises(ClusterClipError, match="`world_size` must be at most"):
            ClusterClipSampler(LABELS, world_size=world_size, drop_last=drop_last, **kwargs)
        return
    consumed = data.draw(st.integers(0, schedule.size + 2), label="consumed")
    per_rank = []
    for rank in range(world_size):
        sampler = ClusterClipSampler(
            LABELS, rank=rank, world_size=world_size, drop_last=drop_last, **kwargs
        )
        sampler.set_consumed_samples(consumed)
        announced = len(sampler)
        per_rank.append(list(sampler))
        assert announced == len(per_rank[-1])
        assert len(sampler) == 0  # after a full pass nothing is left
        assert sampler.consumed_samples <= max(consumed, schedule.size)
    assert len({len(items) for items in per_rank}) == 1
    merged = np.array(per_rank, dtype=np.int64).T.ravel()
    np.testing.assert_array_equal(
        merged, expected_global(schedule, consumed, world_size, drop_last)
    )


@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("world_size", [3, 7])
def test_ranks_keep_the_positions_that_straddle_block_boundaries(world_size, drop_last):
    # The stream comes in blocks of CHOICE_BLOCK positions, which 3 and 7 do not divide:
    # the leftovers of one block must open the next row of ranks, not be dropped.
    kwargs = dict(policy="uniform", num_samples=2 * CHOICE_BLOCK + 11, seed=5)
    schedule = build_schedule(LABELS, **kwargs).indices
    for consumed in (0, CHOICE_BLOCK - 1):
        per_rank = []
        for rank in range(world_size):
            sampler = ClusterClipSampler(
                LABELS, rank=rank, world_size=world_size, drop_last=drop_last, **kwargs
            )
            sampler.set_consumed_samples(consumed)
            announced = len(sampler)
            per_rank.append(list(sampler))
            assert announced == len(per_rank[-1])
        merged = np.array(per_rank, dtype=np.int64).T.ravel()
        np.testing.assert_array_equal(
            merged, expected_global(schedule, consumed, world_size, drop_last)
        )


def test_padding_wraps_around_to_the_start_of_the_schedule():
    kwargs = dict(max_repeats=2, num_samples=10, seed=1)
    schedule = build_schedule(LABELS, **kwargs).indices.tolist()
    got = [
        list(ClusterClipSampler(LABELS, rank=r, world_size=4, drop_last=False, **kwargs))
        for r in range(4)
    ]
    # positions 0..9, then 10 -> 0 and 11 -> 1 for ranks 2 and 3
    assert got == [schedule[r::4] + ([schedule[r - 2]] if r >= 2 else []) for r in range(4)]
    # a schedule shorter than the world size wraps more than once, never leaves a rank empty
    short = build_schedule(LABELS, max_repeats=2, num_samples=2, seed=1).indices.tolist()
    tiny = [
        list(
            ClusterClipSampler(
                LABELS, rank=r, world_size=5, drop_last=False, max_repeats=2, num_samples=2, seed=1
            )
        )
        for r in range(5)
    ]
    assert tiny == [[short[r % 2]] for r in range(5)]


def test_a_world_size_that_leaves_ranks_empty_is_refused():
    message = (
        r"`world_size` must be at most the schedule's length, 3 positions, when drop_last=True "
        r"\(every rank would get none\); got 4\. Train on at most 3 ranks, pass drop_last=False"
    )
    with pytest.raises(ClusterClipError, match=message):
        ClusterClipSampler(LABELS, num_samples=3, seed=0, rank=0, world_size=4)
    # a token budget knows its length only after a pass: refused when it is counted
    lengths = np.full(LABELS.size, 10)
    sampler = ClusterClipSampler(
        LABELS, num_tokens=25, lengths=lengths, seed=0, rank=1, world_size=4
    )
    with pytest.raises(ClusterClipError, match=message):
        list(sampler)
    with pytest.raises(ClusterClipError, match=message):
        len(sampler)
    # a finished run is not an error: the drop_last tail is simply not read
    done = ClusterClipSampler(LABELS, num_samples=10, seed=0, rank=0, world_size=4)
    done.set_consumed_samples(8)
    assert len(done) == 0 and list(done) == []


def test_the_streaming_dataset_splits_ranks_by_the_same_rules():
    pytest.importorskip("torch")
    from clusterclip.adapters.hf import ScheduledIterableDataset

    schedule = np.arange(10) * 3
    rows = list(range(30))
    for drop_last in (True, False):
        for consumed in (0, 1, 7, 10):
            streams = [
                ScheduledIterableDataset(
                    rows,
                    schedule,
                    rank=r,
                    world_size=4,
                    drop_last=drop_last,
                    consumed_samples=consumed,
                )
                for r in range(4)
            ]
            announced = [len(stream) for stream in streams]
            per_rank = [list(stream) for stream in streams]
            assert announced == [len(items) for items in per_rank]
            assert len({len(items) for items in per_rank}) == 1
            merged = np.array(per_rank, dtype=np.int64).T.ravel()
            np.testing.assert_array_equal(merged, expected_global(schedule, consumed, 4, drop_last))
    with pytest.raises(ClusterClipError, match=r"`world_size` must be at most the schedule's"):
        ScheduledIterableDataset(rows, schedule[:3], rank=0, world_size=4)
