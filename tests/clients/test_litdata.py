"""LitData: the export read back by the real library, in its own environment (.venvs/litdata).

The pure layout (which item holds which schedule position) is checked here
against a model of how LitData 0.2.76 hands a non-shuffled dataset to ranks and
workers; ``tests/clients/litdata_check.py`` checks the same thing with the real
library, two real ranks, worker processes and its own resume state.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterclip.adapters.litdata_export import litdata_layout
from clusterclip.errors import ClusterClipError
from tests.product_support import run_client_check


def read_like_litdata(layout) -> list[list[list[int]]]:
    """Per rank, its batches of positions, read as LitData does with shuffle=False.

    Global worker g = rank * workers + worker reads the g-th contiguous run of
    items (``items_per_worker``); each rank's DataLoader takes one batch of B
    items from each of its workers in turn, skipping exhausted ones.
    """
    items = np.concatenate(list(layout.positions())) if layout.n_samples else np.zeros(0, int)
    starts = np.concatenate([[0], np.cumsum(layout.items_per_worker)])
    batch, workers = layout.batch_size, layout.num_workers
    per_rank = []
    for rank in range(layout.world_size):
        queues = []
        for worker in range(workers):
            g = rank * workers + worker
            run = items[starts[g] : starts[g + 1]].tolist()
            queues.append([run[i : i + batch] for i in range(0, len(run), batch)])
        batches, step = [], 0
        while any(step < len(q) for q in queues):
            for queue in queues:
                if step < len(queue):
                    batches.append(queue[step])
            step += 1
        per_rank.append(batches)
    return per_rank


@settings(max_examples=200, deadline=None)
@given(
    n_samples=st.integers(0, 400),
    world_size=st.integers(1, 5),
    num_workers=st.integers(0, 4),
    batch_size=st.integers(1, 7),
    drop_last=st.sampled_from([None, True, False]),
)
def test_layout_makes_each_global_step_a_schedule_chunk(
    n_samples, world_size, num_workers, batch_size, drop_last
):
    layout = litdata_layout(
        n_samples,
        world_size=world_size,
        num_workers=num_workers,
        batch_size=batch_size,
        drop_last=drop_last,
    )
    items = np.concatenate(list(layout.positions())) if n_samples else np.zeros(0, int)
    assert sorted(items.tolist()) == list(range(n_samples))  # every draw written once
    per_rank = read_like_litdata(layout)
    steps = layout.regular // (world_size * batch_size)
    for rank, batches in enumerate(per_rank):
        for t in range(steps):
            assert batches[t] == [
                (t * batch_size + k) * world_size + rank for k in range(batch_size)
            ]
        tail = [p for b in batches[steps:] for p in b]
        if layout.drop_last or rank < world_size - 1:
            assert tail == []
        else:  # the last rank reads what is left, in order, after its whole batches
            assert tail == list(range(layout.regular, n_samples))
    assert int(layout.items_per_worker.sum()) == (layout.regular if layout.drop_last else n_samples)


def test_layout_on_one_process_is_the_schedule_order():
    for workers in (0, 1, 3):
        layout = litdata_layout(50, num_workers=workers, batch_size=4)
        flat = [p for b in read_like_litdata(layout)[0] for p in b]
        assert flat == list(range(50))


def test_layout_validates_the_topology():
    with pytest.raises(ClusterClipError, match=r"`world_size` must be an int in \[1, inf\); got 0"):
        litdata_layout(10, world_size=0)
    with pytest.raises(
        ClusterClipError, match=r"`batch_size` must be an int in \[1, inf\); got 2.5"
    ):
        litdata_layout(10, batch_size=2.5)


@pytest.mark.slow
def test_real_litdata_reads_the_schedule_across_ranks_workers_and_resume(tmp_path):
    output = run_client_check("litdata", "tests.clients.litdata_check", tmp_path)
    assert "litdata check: ok" in output


@pytest.mark.slow
def test_real_litdata_reads_chunks_of_many_writers_and_ray_writes_the_same(tmp_path):
    output = run_client_check("litdata", "tests.clients.litdata_ray_check", tmp_path)
    assert "litdata ray check: ok" in output
