"""How the LitData export cuts its items into engine tasks (pure numpy; LitData not needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterclip.adapters.litdata_chunks as chunks


def runs_one_by_one(sizes: list[int], task_bytes: int) -> list[tuple[int, int]]:
    """The rule, item by item: a run closes with the item that takes it to ``task_bytes``."""
    runs, first, held = [], 0, 0
    for item, size in enumerate(sizes):
        held += size
        if held >= task_bytes:
            runs.append((first, item + 1))
            first, held = item + 1, 0
    if first < len(sizes):
        runs.append((first, len(sizes)))
    return runs


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), max_size=60),
    task_bytes=st.integers(1, 90),
    cuts=st.lists(st.integers(0, 60), max_size=5),
)
def test_tasks_follow_the_rule_whatever_the_blocks(sizes, task_bytes, cuts):
    blocks = np.split(np.array(sizes, dtype=np.int64), sorted(c for c in cuts if c <= len(sizes)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunks, "LITDATA_TASK_BYTES", task_bytes)
        got = list(chunks.item_tasks(blocks))
    want = runs_one_by_one(sizes, task_bytes)
    assert [run for _, (_, *run) in got] == [list(run) for run in want]
    assert (
        [task for task, _ in got] == [number for _, (number, _, _) in got] == list(range(len(want)))
    )


def test_an_export_under_one_task_is_one_run_of_rank_0():
    sizes = np.full(1000, 2000, dtype=np.int64)  # about 2 MB of text
    assert list(chunks.item_tasks([sizes[:300], sizes[300:]])) == [(0, (0, 0, 1000))]
    assert list(chunks.item_tasks([])) == []
