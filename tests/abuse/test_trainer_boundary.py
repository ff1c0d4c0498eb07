"""The trainer boundary (issue 29): a checkpoint that a DataLoader cannot make wrong.

A tester checkpointed ``sampler.state_dict()`` after 3 steps of 8 with ``num_workers=2``:
it held 56 consumed samples where 24 were true (the loader had drawn 4 batches ahead),
and the run resumed from it skipped 32 documents. And a ``ScheduledIterableDataset``
given another ``batch_size`` than its DataLoader's scrambled the order, silently.

The corpus is real: verses of the bundled King James Bible, clustered by book (a
naturally imbalanced partition); the loaders are real torch DataLoaders with workers.
"""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.errors import ClusterClipError
from tests.product_support import kjv_records, require_module

torch_data = require_module("torch.utils.data", "torch")
DataLoader = torch_data.DataLoader

POLICY = {"max_repeats": 2, "num_samples": 160, "seed": 0}
BATCH = 8
STEPS = 3  # the tester's stop: 3 steps of 8


@pytest.fixture(scope="module")
def books() -> np.ndarray:
    """Cluster of each verse: its book (every 25th verse of the KJV, 66 books)."""
    names = [record["book"] for record in kjv_records(step=25)]
    return np.unique(names, return_inverse=True)[1].astype(np.int64)


def sampler(books, **kwargs):
    from clusterclip.adapters.torch import ClusterClipSampler

    return ClusterClipSampler(books, **POLICY, **kwargs)


def train(sampler_, books, *, steps=None, num_workers=2) -> list[int]:
    """The documents a training loop sees, stopping after ``steps`` steps."""
    loader = DataLoader(
        range(len(books)), sampler=sampler_, batch_size=BATCH, num_workers=num_workers
    )
    seen: list[int] = []
    for step, batch in enumerate(loader, start=1):
        seen.extend(batch.tolist())
        if step == steps:
            break
    return seen


def in_global_order(per_rank: list[list[int]]) -> list[int]:
    """Rank r's j-th document is global position r + j * world_size."""
    return [doc for row in zip(*per_rank, strict=True) for doc in row]


@pytest.mark.parametrize("world_size", [1, 2])
def test_stop_checkpoint_and_resume_with_two_workers_is_the_uninterrupted_order(books, world_size):
    uninterrupted = list(sampler(books))
    trained = STEPS * BATCH * world_size  # what the loop consumed, on all ranks
    first, states = [], []
    for rank in range(world_size):
        running = sampler(books, rank=rank, world_size=world_size)
        first.append(train(running, books, steps=STEPS))
        assert running.consumed_samples > trained  # the workers really drew ahead
        states.append(running.state_dict(consumed_samples=trained))
    assert {state["consumed_samples"] for state in states} == {trained}
    rest = []
    for rank in range(world_size):
        resumed = sampler(books, rank=rank, world_size=world_size)  # a fresh process, say
        resumed.load_state_dict(states[0])
        rest.append(train(resumed, books))
    done = in_global_order(first) + in_global_order(rest)
    assert done == uninterrupted[: len(done)]  # nothing skipped, nothing repeated
    assert len(done) == len(uninterrupted) - (len(uninterrupted) - trained) % world_size


@pytest.mark.parametrize("num_workers", [0, 2])
def test_state_dict_under_a_dataloader_needs_the_loops_count(books, num_workers):
    running = sampler(books)
    train(running, books, steps=STEPS, num_workers=num_workers)
    with pytest.raises(
        ClusterClipError,
        match=r"ClusterClipSampler\.state_dict\(\) needs the training loop's count: this sampler "
        r"has handed out positions up to \d+, but a DataLoader asks for indices ahead of "
        r"training .* Pass sampler\.state_dict\(consumed_samples=steps \* micro_batch_size \* "
        r"world_size\), counted from the start of training\.",
    ):
        running.state_dict()
    assert running.state_dict(consumed_samples=STEPS * BATCH)["consumed_samples"] == 24


def test_a_count_the_sampler_never_handed_out_is_refused(books):
    running = sampler(books)
    running.load_state_dict({**running.state_dict(), "consumed_samples": 24})  # a resumed run
    train(running, books, steps=2)
    handed_out = running.consumed_samples
    for since_restart_or_too_many in (16, handed_out + 8):  # 2 steps counted from 0; too far
        with pytest.raises(
            ClusterClipError,
            match=rf"`consumed_samples` must be an int in \[24, {handed_out}\] \(from this run's "
            r"resume point to the positions this sampler handed out\); got \d+\. Count global "
            r"positions from the start of training: the checkpoint's consumed_samples plus",
        ):
            running.state_dict(consumed_samples=since_restart_or_too_many)
    assert running.state_dict(consumed_samples=24 + 2 * BATCH)["consumed_samples"] == 40


@pytest.mark.parametrize(
    ("loader_batch", "num_workers"), [(8, 2), (8, 0), (None, 2)], ids=["8x2", "8x0", "Nonex2"]
)
def test_the_stream_refuses_another_batch_size_than_its_dataloaders(
    books, loader_batch, num_workers
):
    from clusterclip.adapters.hf import ScheduledIterableDataset

    schedule = np.asarray(list(sampler(books)), dtype=np.int64)
    verses = [record["text"] for record in kjv_records(step=25)]
    stream = ScheduledIterableDataset(verses, schedule, batch_size=4)
    expected = 1 if loader_batch is None else loader_batch
    loader = DataLoader(stream, batch_size=loader_batch, num_workers=num_workers)
    with pytest.raises(
        ClusterClipError,
        match=rf"`batch_size` must be the DataLoader's batch_size, {expected}, since the workers "
        rf"split the schedule into whole batches of it; got 4\. Pass batch_size={expected} to "
        r"ScheduledIterableDataset, or DataLoader\(\.\.\., batch_size=4\)\.",
    ):
        next(iter(loader))
    # With the DataLoader's own batch size, two workers read the schedule in order.
    matching = ScheduledIterableDataset(verses, schedule, batch_size=expected)
    read = [
        text
        for batch in DataLoader(matching, batch_size=loader_batch, num_workers=2)
        for text in ([batch] if loader_batch is None else batch)
    ]
    assert read == [verses[i] for i in schedule]
