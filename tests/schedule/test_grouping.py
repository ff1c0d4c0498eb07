"""Documents grouped by cluster: the one-sort path against the count-and-index path."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule.grouping import (
    GroupIndex,
    grouped_by_label,
    is_dense,
    members_by_group,
    present_clusters,
)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def by_count_and_index(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Present clusters (a count or a sort of the labels), then a group index per document."""
    max_label = int(labels.max())
    ids, sizes = present_clusters(labels, max_label)
    group_of = GroupIndex(ids, max_label, is_dense(labels, max_label))
    return ids, sizes, members_by_group(labels, group_of)


@st.composite
def label_arrays(draw):
    n = draw(st.integers(1, 400))
    n_ids = draw(st.integers(1, 30))
    top = draw(st.sampled_from([n_ids, 1000, 2**31, 2**40]))
    ids = np.array(draw(st.lists(st.integers(0, top), min_size=n_ids, max_size=n_ids)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    labels = ids[rng.integers(0, ids.size, n)]
    excluded = rng.random(n) < draw(st.sampled_from([0.0, 0.2, 0.9]))
    excluded[0] = False  # some document has a cluster (validated before)
    labels[excluded] = -rng.integers(1, 2**40, int(excluded.sum()))
    return labels.astype(np.int64)


@SETTINGS
@given(labels=label_arrays())
def test_one_sort_groups_like_count_and_index(labels):
    got = grouped_by_label(labels, int(labels.max()))
    assert got is not None
    expected = by_count_and_index(labels)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.dtype == theirs.dtype
        assert mine.tolist() == theirs.tolist()


def test_one_sort_acrosslabel_chunks(monkeypatch):
    """Clusters that straddle the chunks the labels are read in."""
    import clusterclip.schedule.grouping as grouping

    monkeypatch.setattr(grouping, "LABEL_CHUNK", 7)
    rng = np.random.default_rng(4)
    for n_ids in (1, 3, 40):
        labels = np.sort(rng.integers(-1, n_ids, 200))  # long runs: every chunk edge inside one
        labels[rng.random(200) < 0.5] = rng.integers(-1, n_ids)
        got = grouped_by_label(labels, int(labels.max()))
        assert [a.tolist() for a in got] == [a.tolist() for a in by_count_and_index(labels)]


def test_ids_too_wide_for_one_sort_take_the_other_path():
    labels = np.array([2**62, 5, 2**62, -1, 5, 7], dtype=np.int64)
    assert grouped_by_label(labels, 2**62) is None  # 3 document bits: ids must be < 2**60
    assert grouped_by_label(labels, 2**59) is not None
