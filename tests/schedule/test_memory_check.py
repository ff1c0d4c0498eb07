"""A schedule too large for the memory is refused before it is built; one that fits is not."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from clusterclip import build_schedule
from clusterclip.errors import ClusterClipError, spelled_as_flags
from clusterclip.schedule.memory_check import available_memory, check_fits, expected_draws

#: 16 PB of schedule: more than any machine has.
HUGE = 10**15


def test_available_memory_is_what_the_kernel_reports():
    if not Path("/proc/meminfo").exists():
        pytest.skip("not Linux: no /proc/meminfo to compare with")
    available = available_memory()
    assert available is not None and available > 0
    with open("/proc/meminfo", encoding="ascii") as handle:
        total = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemTotal:"))
    assert available <= total


def test_an_unbounded_budget_is_refused_with_its_fixes():
    labels = np.array([0, 0, 1, 2, 2, 2])
    with pytest.raises(ClusterClipError) as caught:
        build_schedule(labels, policy="uniform", num_samples=HUGE, seed=0)
    message = str(caught.value)
    assert message.startswith("a schedule of 1,000,000,000,000,000 draws needs 14.2 PiB")
    assert "max_repeats=4 with on_exhausted='stop'" in message
    assert "clusterclip.iter_schedule" in message
    flags = {"num_samples": "--num-samples", "epochs": "--epochs"}
    fixes = r"smaller budget \(--num-samples / --epochs\)"
    with spelled_as_flags(flags), pytest.raises(ClusterClipError, match=fixes):
        check_fits(HUGE)


def test_a_cap_that_ends_the_schedule_is_not_refused():
    """Huge budget, but every document is clipped after 2 passes: 12 draws, built."""
    labels = np.array([0, 0, 1, 2, 2, 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        schedule = build_schedule(labels, max_repeats=2, num_samples=HUGE, seed=0)
    assert schedule.indices.size == 2 * labels.size
    assert any("cannot be met" in str(w.message) for w in caught)


def test_the_run_checks_a_certain_length_before_any_stage_and_leaves_a_capped_one():
    from clusterclip.config import RunConfig, ScheduleOptions
    from clusterclip.pipeline import resolve_config

    def config(**schedule):
        return RunConfig(schedule=ScheduleOptions(**schedule))

    with pytest.raises(ClusterClipError, match="draws needs"):
        resolve_config(config(num_samples=HUGE, max_repeats=None), ["c.jsonl"], "w", 3)
    with pytest.raises(ClusterClipError, match="draws needs"):
        resolve_config(config(num_samples=HUGE, on_exhausted="random"), ["c.jsonl"], "w", 3)
    resolve_config(config(num_samples=HUGE), ["c.jsonl"], "w", 3)  # the cap may end it early


def test_token_budget_length_is_exact_integer_arithmetic():
    labels = np.array([0, 0, 1, -1])
    lengths = np.array([3, 4, 5, 1000])  # the excluded document does not count
    assert expected_draws(None, num_tokens=10**25, labels=labels, lengths=lengths) == (
        10**25 // 4  # mean usable length 4
    )
    assert expected_draws(None, num_tokens=13, labels=labels, lengths=lengths) == 4  # ceil
    assert expected_draws(7, num_tokens=13, labels=labels, lengths=lengths) == 7  # known end
    assert expected_draws(None, num_tokens=None, labels=labels, lengths=None) is None
