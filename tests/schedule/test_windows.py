"""Version 3's windows: the vectorised ranking and counting against plain loops."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule.groups import PURPOSE_CHOICE_V3, seed_sequence
from clusterclip.schedule.windows import WINDOW, WindowChooser, ranks_among_equal

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


def test_windows_match_a_loop_through_clips_and_compaction():
    """Small caps: groups clip inside windows, the list of groups is compacted three times."""
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
        position += window.size
    assert len(set(listed)) == 4  # compacted three times
    assert chooser.counts.tolist() == counts
    assert chooser.n_active == int(np.count_nonzero(np.array(counts) < caps))
