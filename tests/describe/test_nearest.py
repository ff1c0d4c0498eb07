"""The documents nearest each centroid, as the report shows them (issue 28: no Python loop
over every document on the driver): the same as the definition, read one document at a time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterclip.describe import nearest_documents


def one_at_a_time(labels: np.ndarray, scores: np.ndarray, n: int) -> dict[int, list[int]]:
    """Every clustered document in (cluster, score descending, index) order; the first n of each."""
    ranked = sorted(
        (int(label), -float(score), index)
        for index, (label, score) in enumerate(zip(labels, scores, strict=True))
        if label >= 0
    )
    found: dict[int, list[int]] = {}
    for label, _, index in ranked:
        members = found.setdefault(label, [])
        if len(members) < n:
            members.append(index)
    return found


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(-1, 6), st.sampled_from([0.0, 0.25, 0.5, 1.0])),
                  max_size=80),
    n=st.integers(0, 11),  # both ways: rounds up to NEAREST_ROUNDS (8), a sort beyond
)  # fmt: skip
def test_nearest_documents_is_the_definition_with_ties_and_excluded_documents(rows, n):
    labels = np.array([label for label, _ in rows], dtype=np.int64)
    scores = np.array([score for _, score in rows], dtype=np.float32)
    found = nearest_documents(labels, scores, n)
    assert found == one_at_a_time(labels, scores, n)
    assert list(found) == sorted(found)  # clusters in id order, as the report lists them


def test_rounds_and_the_sort_agree_on_many_clusters_with_ties():
    """20,000 documents in 300 clusters of uneven sizes (and excluded ones), scores on a coarse
    grid so that ties are common: the rounds give the sort's documents, in its order."""
    from clusterclip.describe.inspect import NEAREST_ROUNDS, _nearest_sorted

    rng = np.random.default_rng(0)
    labels = rng.zipf(1.5, 20_000).astype(np.int64) % 300 - 1
    scores = (np.round(rng.random(20_000) * 50) / 50).astype(np.float32)
    for n in (1, 3, NEAREST_ROUNDS):
        found = nearest_documents(labels, scores, n)
        assert found == _nearest_sorted(labels, scores, n)
        assert sum(map(len, found.values())) > len(found) or n == 1  # clusters with several


@settings(max_examples=200, deadline=None)
@given(labels=st.lists(st.integers(-1, 40), max_size=300))
def test_the_packed_label_order_is_the_stable_argsort(labels):
    from clusterclip.describe.inspect import _by_label

    array = np.array(labels, dtype=np.int64)
    assert _by_label(array).tolist() == np.argsort(array, kind="stable").tolist()
