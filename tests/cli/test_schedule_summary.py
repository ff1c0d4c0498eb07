"""The numbers of ``clusterclip schedule``'s summary come from ``schedule.stats.summarise``."""

from __future__ import annotations

import numpy as np

from clusterclip.cli import main
from clusterclip.schedule import build_schedule
from clusterclip.schedule.stats import summarise

# 4 clusters of 1, 2, 3 and 6 documents, and 2 excluded ones
LABELS = np.array([3, 3, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3, -1, -1])


def test_summarise_counts_by_hand():
    schedule = build_schedule(LABELS, max_repeats=1, num_samples=12, seed=0)
    numbers = summarise(schedule.stats, LABELS)
    assert (numbers.n_documents, numbers.n_usable, numbers.n_clusters) == (14, 12, 4)
    assert (numbers.size_min, numbers.size_median, numbers.size_max) == (1, 2, 6)
    # R = 1: every cluster ends after one pass, all 12 usable documents are drawn once
    assert numbers.n_distinct == 12 and numbers.n_clipped == 4
    assert numbers.clip_last == 11  # the last draw completes the last cluster
    # the smallest tenth of 4 clusters is one cluster (the size-1 cluster 0), drawn once
    assert (numbers.n_smallest, numbers.smallest_documents) == (1, 1)
    assert numbers.smallest_share == numbers.smallest_natural == 1 / 12


def test_summarise_without_clipping():
    schedule = build_schedule(LABELS, "uniform", num_samples=40, seed=1)
    numbers = summarise(schedule.stats, LABELS)
    assert numbers.n_clipped == 0 and numbers.clip_first is None is numbers.clip_median
    draws_of_smallest = int(np.sum(LABELS[schedule.indices] == 0))
    assert numbers.smallest_share == draws_of_smallest / 40


def test_the_printed_summary_is_the_summarised_numbers(tmp_path, capsys):
    np.save(tmp_path / "labels.npy", LABELS)
    out = tmp_path / "s.npy"
    args = ["schedule", "--labels", str(tmp_path / "labels.npy"), "--out", str(out)]
    assert main([*args, "--max-repeats", "1", "--num-samples", "12", "--seed", "0"]) == 0
    text = capsys.readouterr().out
    numbers = summarise(build_schedule(LABELS, max_repeats=1, num_samples=12, seed=0).stats, LABELS)
    assert "  documents      14 (12 usable, 2 excluded)" in text
    assert "  clusters       4 (sizes 1..6, median 2)" in text
    assert f"clipped        4 of 4 clusters; first at draw {numbers.clip_first}, " in text
    assert "  smallest 10%   1 cluster (1 doc): 8.33% of draws vs 8.33% under random" in text
