"""Exact resume for every consumer of a schedule, at any stop point, on another topology.

For each consumer (the sampler, the streaming HF dataset, the HF dataset in
schedule order, the ordered exports) a run stops after a random number of
training steps and a new run resumes from ``consumed_samples = steps *
batch_size * world_size`` with another world size, batch size and worker count
where the consumer allows it. What the two runs consumed, put back in global
order, must be exactly the uninterrupted order: the schedule, then (only with
``drop_last=False``) the padding that wraps around to its start.

The data are real: every 97th verse of the bundled KJV, clustered by book.
"""

from __future__ import annotations

import itertools
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.schedule import build_schedule
from tests.product_support import kjv_records, make_workdir

torch = pytest.importorskip("torch")
DataLoader = torch.utils.data.DataLoader

POLICY = {"max_repeats": 2, "num_samples": 500, "seed": 3}
QUICK = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# DataLoader workers take most of a second to start: few examples.
WITH_WORKERS = settings(QUICK, max_examples=4)


@cache
def corpus() -> tuple[np.ndarray, list[str], np.ndarray]:
    """(labels = book of each verse, verse ids, the schedule of POLICY)."""
    records = kjv_records(step=97)
    books: dict[str, int] = {}
    labels = np.asarray([books.setdefault(r["book"], len(books)) for r in records])
    ids = [r["id"] for r in records]
    return labels, ids, build_schedule(labels, **POLICY).indices


def interleave(per_rank: list[list]) -> list:
    """Ranks' items back in global order (rank r's j-th item is position r + j * W)."""
    assert len({len(items) for items in per_rank}) == 1, "ranks yielded different counts"
    world = len(per_rank)
    merged: list = [None] * (world * len(per_rank[0]))
    for rank, items in enumerate(per_rank):
        merged[rank::world] = items
    return merged


def uninterrupted(schedule: list, consumed: int, world: int, drop_last: bool) -> list:
    """What ``world`` ranks read from ``consumed`` on, in global order."""
    left = len(schedule) - consumed
    rows = left // world if drop_last else -(-left // world)
    padded = schedule + [schedule[i % len(schedule)] for i in range(world)]
    return padded[consumed : consumed + rows * world]


def stop_points(batch: int, world: int) -> st.SearchStrategy[int]:
    """Steps after which a run may stop (full batches inside the schedule)."""
    return st.integers(0, POLICY["num_samples"] // world // batch)


# -- ClusterClipSampler ------------------------------------------------------------


def sampler_run(*, consumed, world, batch, steps, drop_last, num_workers=0):
    labels, _ids, _schedule = corpus()
    per_rank = []
    for rank in range(world):
        sampler = ClusterClipSampler(
            labels, rank=rank, world_size=world, drop_last=drop_last, **POLICY
        )
        sampler.set_consumed_samples(consumed)
        loader = DataLoader(
            list(range(labels.size)), sampler=sampler, batch_size=batch, num_workers=num_workers
        )
        per_rank.append([i for b in itertools.islice(loader, steps) for i in b.tolist()])
        if steps is not None:  # a DataLoader drew the indices: checkpoint the loop's count
            trained = consumed + steps * batch * world
            if num_workers == 0:  # nothing prefetched: the sampler handed out just that
                assert sampler.consumed_samples == trained
            assert sampler.state_dict(consumed_samples=trained)["consumed_samples"] == trained
    return interleave(per_rank)


def check_sampler(world_before, world_after, batch_before, batch_after, steps, drop_last, workers):
    _labels, _ids, schedule = corpus()
    schedule = schedule.tolist()
    first = sampler_run(
        consumed=0, world=world_before, batch=batch_before, steps=steps, drop_last=True
    )
    consumed = steps * batch_before * world_before
    assert first == schedule[:consumed]
    rest = sampler_run(
        consumed=consumed,
        world=world_after,
        batch=batch_after,
        steps=None,
        drop_last=drop_last,
        num_workers=workers,
    )
    assert first + rest == schedule[:consumed] + uninterrupted(
        schedule, consumed, world_after, drop_last
    )


@QUICK
@given(
    world_before=st.integers(1, 4),
    world_after=st.integers(1, 4),
    batch_before=st.integers(1, 9),
    batch_after=st.integers(1, 9),
    drop_last=st.booleans(),
    data=st.data(),
)
def test_sampler_resumes_from_the_global_count_on_any_world_size(
    world_before, world_after, batch_before, batch_after, drop_last, data
):
    steps = data.draw(stop_points(batch_before, world_before), label="steps")
    check_sampler(world_before, world_after, batch_before, batch_after, steps, drop_last, 0)


@WITH_WORKERS
@given(
    world_before=st.integers(1, 2),
    world_after=st.integers(1, 2),
    batch=st.integers(2, 8),
    drop_last=st.booleans(),
    data=st.data(),
)
def test_sampler_order_is_exact_with_dataloader_workers(
    world_before, world_after, batch, drop_last, data
):
    # The sampler is iterated in the main process; workers only load items.
    steps = data.draw(stop_points(batch, world_before), label="steps")
    check_sampler(world_before, world_after, batch, batch + 1, steps, drop_last, 2)


# -- ScheduledIterableDataset ------------------------------------------------------


@cache
def verse_dataset():
    datasets = pytest.importorskip("datasets")
    _labels, ids, _schedule = corpus()
    return datasets.Dataset.from_dict({"id": ids})


def stream_run(*, consumed, world, batch, steps, drop_last, num_workers):
    from clusterclip.adapters.hf import ScheduledIterableDataset

    _labels, _ids, schedule = corpus()
    per_rank = []
    for rank in range(world):
        stream = ScheduledIterableDataset(
            verse_dataset(),
            schedule,
            rank=rank,
            world_size=world,
            consumed_samples=consumed,
            batch_size=batch,
            drop_last=drop_last,
        )
        loader = DataLoader(stream, batch_size=batch, num_workers=num_workers)
        per_rank.append([i for b in itertools.islice(loader, steps) for i in b["id"]])
        if num_workers == 0 and steps is not None:  # counted in-process: the same count
            assert stream.state_dict() == {"consumed_samples": consumed + steps * batch * world}
    return interleave(per_rank)


def check_stream(world_before, world_after, batch_before, batch_after, steps, drop_last, workers):
    _labels, ids, schedule = corpus()
    order = [ids[i] for i in schedule]
    workers_before, workers_after = workers
    first = stream_run(
        consumed=0,
        world=world_before,
        batch=batch_before,
        steps=steps,
        drop_last=True,
        num_workers=workers_before,
    )
    consumed = steps * batch_before * world_before
    assert first == order[:consumed]
    rest = stream_run(
        consumed=consumed,
        world=world_after,
        batch=batch_after,
        steps=None,
        drop_last=drop_last,
        num_workers=workers_after,
    )
    assert first + rest == order[:consumed] + uninterrupted(order, consumed, world_after, drop_last)


@QUICK
@given(
    world_before=st.integers(1, 4),
    world_after=st.integers(1, 4),
    batch_before=st.integers(1, 9),
    batch_after=st.integers(1, 9),
    drop_last=st.booleans(),
    data=st.data(),
)
def test_stream_resumes_on_any_world_size_and_batch_size(
    world_before, world_after, batch_before, batch_after, drop_last, data
):
    steps = data.draw(stop_points(batch_before, world_before), label="steps")
    check_stream(
        world_before, world_after, batch_before, batch_after, steps, drop_last, workers=(0, 0)
    )


@WITH_WORKERS
@example(world_before=1, world_after=1, batch=8, workers=(2, 2), drop_last=True, steps=3)
@given(
    world_before=st.integers(1, 2),
    world_after=st.integers(1, 2),
    batch=st.integers(1, 8),
    workers=st.sampled_from([(2, 0), (0, 2), (2, 1), (1, 2)]),
    drop_last=st.booleans(),
    steps=st.integers(0, 25),
)
def test_stream_resumes_exactly_with_dataloader_workers(
    world_before, world_after, batch, workers, drop_last, steps
):
    # The case first: batch_size=8, num_workers=2, stopped after 3 steps, resumed
    # from 3 * 8; an odd number of steps once left half a batch of one worker unread.
    steps = min(steps, POLICY["num_samples"] // world_before // batch)
    check_stream(world_before, world_after, batch, batch, steps, drop_last, workers)


def test_stream_refuses_several_workers_without_the_batch_size():
    from clusterclip.adapters.hf import ScheduledIterableDataset

    _labels, ids, schedule = corpus()
    stream = ScheduledIterableDataset(ids, schedule)
    with pytest.raises(
        Exception, match=r"`batch_size` must be the DataLoader's batch_size when it has num_workers"
    ):
        list(DataLoader(stream, batch_size=8, num_workers=2))


# -- apply_schedule: a datasets.Dataset in schedule order --------------------------


@QUICK
@given(
    world_before=st.integers(1, 4),
    world_after=st.integers(1, 4),
    batch_before=st.integers(1, 9),
    batch_after=st.integers(1, 9),
    data=st.data(),
)
def test_applied_schedule_resumes_by_skipping_the_consumed_rows(
    world_before, world_after, batch_before, batch_after, data
):
    from torch.utils.data import DistributedSampler

    from clusterclip.adapters.hf import apply_schedule

    _labels, ids, schedule = corpus()
    order = [ids[i] for i in schedule]
    ordered = apply_schedule(verse_dataset(), schedule)
    steps = data.draw(stop_points(batch_before, world_before), label="steps")

    def run(rows, world, batch, steps):
        per_rank = []
        for rank in range(world):
            sampler = DistributedSampler(
                rows, num_replicas=world, rank=rank, shuffle=False, drop_last=True
            )
            loader = DataLoader(rows, sampler=sampler, batch_size=batch)
            per_rank.append([i for b in itertools.islice(loader, steps) for i in b["id"]])
        return interleave(per_rank)

    first = run(ordered, world_before, batch_before, steps)
    consumed = steps * batch_before * world_before
    resumed = apply_schedule(verse_dataset(), schedule, consumed_samples=consumed)
    assert resumed["id"] == ordered["id"][consumed:]  # what skip(consumed) keeps, at the end too
    rest = run(resumed, world_after, batch_after, None)
    assert first + rest == order[:consumed] + uninterrupted(order, consumed, world_after, True)


# -- ordered jsonl shards and the sample index -------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from clusterclip.adapters.export import export_ordered_jsonl, export_sample_index

    root = tmp_path_factory.mktemp("resume-export")
    made = make_workdir(root, step=60, max_repeats=2, epochs=1.3)
    shards = {}
    for shard_size in (1, 7, 100, 10_000):
        export_ordered_jsonl(made["workdir"], root / f"ordered-{shard_size}", shard_size=shard_size)
        shards[shard_size] = root / f"ordered-{shard_size}"
    return made, shards, export_sample_index(made["workdir"], root / "megatron")


def read_from(directory: Path, start: int) -> list[str]:
    """Lines of the ordered export from global line ``start`` on, located through index.json."""
    index = json.loads((directory / "index.json").read_text())
    lines: list[str] = []
    for shard in index["shards"]:
        first, count = shard["first_position"], shard["n_records"]
        if first + count <= start:
            continue  # wholly consumed: never opened
        text = (directory / shard["file"]).read_text("utf-8").splitlines()
        assert len(text) == count
        lines.extend(text[max(0, start - first) :])
    return lines


@settings(QUICK, max_examples=20)
@given(shard_size=st.sampled_from([1, 7, 100, 10_000]), data=st.data())
def test_exports_resume_by_skipping_the_first_rows(exported, shard_size, data):
    made, shards, sample_index = exported
    indices = made["indices"]
    stop = data.draw(st.integers(0, len(indices)), label="stop")
    everything = read_from(shards[shard_size], 0)
    assert len(everything) == len(indices)
    assert everything[:stop] + read_from(shards[shard_size], stop) == everything
    # every export writes the same lines whatever its shard size
    assert everything == read_from(shards[10_000], 0)
    ids = [json.loads(line)["id"] for line in everything]
    assert ids == [made["rows"][i][3]["id"] for i in indices]
    positions = np.load(sample_index, mmap_mode="r")
    assert np.concatenate([positions[:stop], positions[stop:]]).tolist() == indices.tolist()
