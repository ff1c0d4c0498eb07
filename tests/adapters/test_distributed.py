"""ClusterClipSampler + DataLoader under a real 2-process torch.distributed (gloo) run.

Checks that (1) the two ranks together read exactly the global schedule, each
its round-robin slice, (2) a run stopped after a few steps and resumed from the
checkpointed ``consumed_samples`` continues exactly where an uninterrupted run
would be, and (3) the ranks really talk to each other (all_gather over gloo).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.product_support import kjv_records

torch = pytest.importorskip("torch")
pytest.importorskip("clusterclip.adapters.torch", reason="ClusterClipSampler not available")

WORLD_SIZE = 2
BATCH_SIZE = 4
STOP_AFTER_STEPS = 5
POLICY = {"max_repeats": 2, "num_samples": 300, "seed": 3}


class VerseDataset(torch.utils.data.Dataset):
    """Map-style dataset of real verses; an item is (document index, text length)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int) -> tuple[int, int]:
        return index, len(self.texts[index])


def _train(
    rank: int, labels: np.ndarray, texts: list[str], steps: int | None, consumed: int
) -> tuple[list[int], dict]:
    import torch.distributed as dist

    from clusterclip.adapters.torch import ClusterClipSampler

    sampler = ClusterClipSampler(labels, rank=rank, world_size=WORLD_SIZE, **POLICY)
    if consumed:
        sampler.set_consumed_samples(consumed)
    loader = torch.utils.data.DataLoader(
        VerseDataset(texts), batch_size=BATCH_SIZE, sampler=sampler, num_workers=0
    )
    seen: list[int] = []
    for step, (indices, lengths) in enumerate(loader):
        # A stand-in for the gradient all-reduce: every rank must take part each step.
        total = lengths.sum().clone()
        dist.all_reduce(total)
        seen.extend(indices.tolist())
        if steps is not None and step + 1 == steps:
            break
    # The loop's own count: a DataLoader draws indices ahead of training.
    return seen, sampler.state_dict(consumed_samples=consumed + len(seen) * WORLD_SIZE)


def _worker(rank: int, init_file: str, out_dir: str, labels: np.ndarray, texts: list[str]) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD_SIZE
    )
    try:
        first, state = _train(rank, labels, texts, STOP_AFTER_STEPS, 0)
        # Resume from the checkpointed count, as a trainer restarting from disk would.
        rest, final_state = _train(rank, labels, texts, None, state["consumed_samples"])
        gathered: list = [None] * WORLD_SIZE
        dist.all_gather_object(gathered, {"rank": rank, "first": first, "rest": rest})
        if rank == 0:
            Path(out_dir, "result.json").write_text(
                json.dumps(
                    {
                        "ranks": gathered,
                        "state": state["consumed_samples"],
                        "final": final_state["consumed_samples"],
                    }
                )
            )
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(300)
def test_two_gloo_ranks_read_the_global_schedule_and_resume(tmp_path):
    import torch.multiprocessing as mp

    from clusterclip.schedule import build_schedule

    records = kjv_records(step=97)
    books: dict[str, int] = {}
    labels = np.asarray([books.setdefault(r["book"], len(books)) for r in records])
    texts = [r["text"] for r in records]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(
        _worker,
        args=(str(tmp_path / "init"), str(tmp_path), labels, texts),
        nprocs=WORLD_SIZE,
        join=True,
    )
    result = json.loads((tmp_path / "result.json").read_text())

    schedule = build_schedule(labels, **POLICY).indices
    global_batch = BATCH_SIZE * WORLD_SIZE
    assert result["state"] == STOP_AFTER_STEPS * global_batch
    usable = len(schedule) - len(schedule) % WORLD_SIZE  # drop_last keeps ranks in lockstep
    assert result["final"] == usable
    ranks = sorted(result["ranks"], key=lambda r: r["rank"])
    for rank, got in enumerate(ranks):
        stop = result["state"]
        assert got["first"] == schedule[rank:stop:WORLD_SIZE].tolist()
        assert got["rest"] == schedule[stop + rank : usable : WORLD_SIZE].tolist()
    # Union over ranks, in step order, is exactly the global schedule.
    merged = np.empty(usable, dtype=np.int64)
    for rank, got in enumerate(ranks):
        merged[rank::WORLD_SIZE] = got["first"] + got["rest"]
    np.testing.assert_array_equal(merged, schedule[:usable])
