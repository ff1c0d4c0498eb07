"""Version 3's windows: the vectorised ranking and counting against plain loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule import windows
from clusterclip.schedule.groups import PURPOSE_CHOICE_V3, seed_sequence
from clusterclip.schedule.windows import WINDOW, WindowChooser, ranks_among_equal, ranks_by_sort

from .helper_thread import CountingHelper, FixedWays

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ranks_by_loop(values: list[int]) -> list[int]:
    """Rank of every entry among the earlier entries of the same value, one at a time."""
    seen: dict[int, int] = {}
    ranks = []
    for value in values:
        ranks.append(seen.get(value, 0))
        seen[value] = ranks[-1] + 1
    return ranks


@SETTINGS
@given(
    values=st.lists(st.integers(0, 10**6), min_size=1, max_size=300),
    domain=st.sampled_from([1, 2, 7, 1000, None]),
    junk=st.integers(-(2**31), 2**31 - 1),
)
def test_ranks_match_a_loop(values, domain, junk):
    """Few distinct values (many repeats) to all distinct; whatever the scratch held."""
    array = np.array(values, dtype=np.int64)
    if domain is not None:
        array %= domain
    scratch = np.full(int(array.max()) + 1, junk, dtype=np.int32)
    got = ranks_among_equal(array, scratch)
    assert got.dtype == np.int64
    assert got.tolist() == ranks_by_loop(array.tolist())


@SETTINGS
@given(values=st.lists(st.integers(0, 40), min_size=1, max_size=300))
def test_ranks_by_sort_match_a_loop_and_a_stable_argsort(values):
    array = np.array(values, dtype=np.int64)
    ranks, order = ranks_by_sort(array)
    assert ranks.tolist() == ranks_by_loop(values)
    assert order.tolist() == np.argsort(array, kind="stable").tolist()


def last_entries(values: list[int], *, repeated_only: bool) -> list[int]:
    """Position of the last entry of every value (of those occurring twice or more)."""
    last = {value: i for i, value in enumerate(values)}
    counts = {value: values.count(value) for value in last}
    return sorted(i for value, i in last.items() if counts[value] > 1 or not repeated_only)


@SETTINGS
@given(values=st.lists(st.integers(0, 40), min_size=1, max_size=300))
def test_last_entries_that_set_the_window_counts(values):
    """The entries whose draw gives each group's count after a window, both ways of ranking."""
    array = np.array(values, dtype=np.int64)
    ranks, _, lasts = windows.ranked_by_sort_with_lasts(array)
    assert sorted(lasts.tolist()) == last_entries(values, repeated_only=False)
    ranks, lasts = windows.ranked_among_equal_with_lasts(array, np.empty(41, dtype=np.int32))
    assert sorted(lasts.tolist()) == last_entries(values, repeated_only=True)


def test_ranks_of_a_full_window():
    rng = np.random.default_rng(3)
    for groups in (1, 50, 70_000, 10**6):
        values = rng.integers(groups, size=WINDOW)
        got = ranks_among_equal(values, np.empty(groups, dtype=np.int32))
        assert got.tolist() == ranks_by_loop(values.tolist())


def windows_by_loop(seed, caps, n_windows):
    """The windows' rule one candidate at a time (equal weights).

    The groups listed are compacted (clipped ones left out) when more than a
    quarter of them are clipped at a window's start.
    """
    counts = [0] * len(caps)
    listed = list(range(len(caps)))
    out = []
    for w in range(n_windows):
        clipped = sum(1 for g in listed if counts[g] >= caps[g])
        if clipped == len(listed):
            break
        if 4 * clipped > len(listed):
            listed = [g for g in listed if counts[g] < caps[g]]
        rng = np.random.Generator(np.random.PCG64(seed_sequence(seed, PURPOSE_CHOICE_V3, w)))
        groups, draws = [], []
        for g in np.array(listed)[rng.integers(len(listed), size=WINDOW)].tolist():
            if counts[g] < caps[g]:
                groups.append(g)
                draws.append(counts[g])
                counts[g] += 1
        out.append((groups, draws))
    return out, counts


@pytest.mark.parametrize("few_groups", [0, 10**9])
def test_windows_match_a_loop_through_clips_and_compaction(monkeypatch, few_groups):
    """Small caps: groups clip inside windows, the list of groups is compacted three times.

    Both ways of ranking a window's candidates: a scatter and a gather
    (``few_groups=0``), or one sort, which also orders the window by group.
    """
    monkeypatch.setattr(windows, "_FEW_GROUPS", few_groups)
    rng = np.random.default_rng(5)
    caps = rng.integers(1, 400, 3000)
    caps[::7] = 3000  # some groups outlive the rest
    expected, counts = windows_by_loop(11, caps.tolist(), 12)
    chooser = WindowChooser(11, np.ones(caps.size), caps)
    position = 0
    listed = []
    for groups, draws in expected:
        window = chooser.next()
        listed.append(chooser.listed.size)
        assert window.start == position
        assert window.groups.tolist() == groups
        assert window.draws.tolist() == draws
        assert window.clips.tolist() == [
            i for i, (g, d) in enumerate(zip(groups, draws, strict=True)) if d == caps[g] - 1
        ]
        if few_groups:
            assert window.order.tolist() == sorted(range(len(groups)), key=lambda i: groups[i])
        else:
            assert window.order is None
        position += window.size
    assert len(set(listed)) == 4  # compacted three times
    assert chooser.counts.tolist() == counts
    assert chooser.n_active == int(np.count_nonzero(np.array(counts) < caps))


@pytest.mark.parametrize("max_repeats", [1, 3, None])
def test_schedules_do_not_depend_on_how_windows_are_ranked(monkeypatch, max_repeats):
    """Looked up in window order or group by group, on the helper thread (while the
    next window is chosen) or not, cut by the budget inside a window."""
    from clusterclip.schedule import build_schedule, iter_schedule, sources

    rng = np.random.default_rng(8)
    labels = rng.integers(0, 5000, 40_000)
    lengths = rng.integers(1, 50, labels.size)
    kwargs = dict(max_repeats=max_repeats, seed=4, schedule_version=3, on_exhausted="random")
    runs = []
    for few_groups, ways in itertools.product((0, 10**9), ("helper", "alternate", "none")):
        monkeypatch.setattr(windows, "_FEW_GROUPS", few_groups)
        worker = None if ways == "none" else CountingHelper()
        monkeypatch.setattr(sources, "helper", lambda worker=worker: worker)
        monkeypatch.setattr(sources, "FasterWay", lambda ways=ways: FixedWays(ways))
        by_count = build_schedule(labels, num_samples=150_001, **kwargs)
        by_tokens = build_schedule(labels, lengths=lengths, num_tokens=2_000_003, **kwargs)
        resumed = np.concatenate(
            list(iter_schedule(labels, num_samples=150_001, start=70_001, **kwargs))
        )
        runs.append((by_count, by_tokens, resumed))
        if worker is not None:
            assert worker.tasks > 0  # the helper looked windows up
            worker.shutdown()
    for other in runs[1:]:
        for first, second in zip(runs[0], other, strict=True):
            if isinstance(first, np.ndarray):
                assert np.array_equal(first, second)
            else:
                assert np.array_equal(first.indices, second.indices)
                assert first.stats.to_dict() == second.stats.to_dict()
    assert np.array_equal(runs[0][2], runs[0][0].indices[70_001:])
