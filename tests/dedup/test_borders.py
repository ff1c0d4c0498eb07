"""Merging across cluster borders set by set gives the groups of one sequential walk."""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.dedup.borders import (
    BorderBatch,
    BorderWork,
    border_tasks,
    border_works,
    joined,
    merge_linked,
    unique_pairs,
)
from clusterclip.dedup.detect import _merge_across_borders, find_groups, second_nearest
from tests.product_support import kjv_records


def sequential_merge(rows_of, found, representative, lowest, texts, threshold) -> None:
    """The walk over every border pair in (lower, higher) order, one process, no sets."""
    linked = []
    for a, b in found:
        ga, gb = representative[a], representative[b]
        keep = ga != gb
        linked.append(np.stack([np.minimum(ga, gb)[keep], np.maximum(ga, gb)[keep]], axis=1))
    pairs = np.unique(np.concatenate(linked), axis=0)
    members = {int(h): np.flatnonzero(texts & (representative == h)) for h in np.unique(pairs)}
    merged_into: dict[int, int] = {}

    def root(head):
        while head in merged_into:
            head = merged_into[head]
        return head

    for low, high in pairs.tolist():
        a, b = sorted((root(low), root(high)))
        if a == b:
            continue
        cross = (
            np.asarray(rows_of(members[a]), np.float32)
            @ np.asarray(rows_of(members[b]), np.float32).T
        )
        if float(cross.min()) < threshold:
            continue
        members[a] = np.sort(np.concatenate((members[a], members.pop(b))))
        merged_into[b] = a
        lowest[a] = min(float(lowest[a]), float(lowest[b]), float(cross.min()))
    for head in {root(h) for h in merged_into}:
        representative[members[head]] = head


@pytest.fixture(scope="module")
def verses():
    """1,600 KJV verses as unit TF-IDF rows (float16, as the work directory stores them),
    in 12 spherical k-means clusters, with every verse's second-nearest cluster."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [r["text"] for r in kjv_records(step=19, limit=1600)]
    x = TruncatedSVD(48, random_state=0).fit_transform(TfidfVectorizer().fit_transform(texts))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16)
    unit = x.astype(np.float32)
    model = KMeans(12, n_init=1, random_state=0).fit(unit)
    centroids = model.cluster_centers_ / np.linalg.norm(model.cluster_centers_, axis=1)[:, None]
    labels = model.labels_.astype(np.int64)
    neighbours = second_nearest(lambda r: x[r], labels, centroids.astype(np.float32))
    return x, labels, neighbours


@pytest.mark.parametrize("threshold", [0.6, 0.75, 0.9])
def test_set_by_set_equals_the_sequential_walk_on_real_verses(verses, threshold, monkeypatch):
    x, labels, neighbours = verses
    rows_of = x.__getitem__
    seen: list = []

    def recording(rows_of, found, representative, lowest, texts, threshold, merge=None):
        found = list(found)
        seen.append((found, representative.copy(), lowest.copy(), texts.copy()))
        _merge_across_borders(rows_of, found, representative, lowest, texts, threshold, merge)

    monkeypatch.setattr("clusterclip.dedup.detect._merge_across_borders", recording)
    groups = find_groups(rows_of, labels, threshold=threshold, neighbours=neighbours)
    ((found, representative, lowest, texts),) = seen
    works = border_works(found, representative.copy(), texts, lowest.copy())
    sequential_merge(rows_of, found, representative, lowest, texts, threshold)
    assert np.array_equal(groups.representative, representative)
    assert np.array_equal(groups.min_similarity, lowest[representative])
    answers = [merge_linked(rows_of, work, threshold=threshold) for work in works]
    assert sum(a.heads.size for a in answers) > 0  # the border merges under test did happen
    assert len(works) > 1  # in several independent sets


def test_the_sets_answer_in_any_order_and_any_batching(verses):
    x, labels, neighbours = verses
    rows_of = x.__getitem__
    straight = find_groups(rows_of, labels, threshold=0.75, neighbours=neighbours)

    def reversed_batches(works):  # tasks of a few rows each, answered last to first
        batches = [batch for _, batch in border_tasks(works, budget=7)]
        return [merge_linked(rows_of, w, threshold=0.75) for b in batches[::-1] for w in b]

    def shuffled(works):
        works = list(works)
        order = np.random.default_rng(0).permutation(len(works))
        return [merge_linked(rows_of, works[i], threshold=0.75) for i in order]

    for merge in (reversed_batches, shuffled):
        other = find_groups(rows_of, labels, threshold=0.75, neighbours=neighbours, merge=merge)
        assert np.array_equal(other.representative, straight.representative)
        assert np.array_equal(other.min_similarity, straight.min_similarity)


def test_a_set_is_merged_in_its_pairs_order_keeping_the_lower_representative():
    """Groups 0, 3 and 5: 0-3 and 3-5 are near, 0-5 is not: 0 takes 3 (the first pair),
    then the merged group fails against 5 (complete linkage), so 5 stays alone."""
    x = np.array([[1, 0], [0.9, 0.436], [0.6, 0.8]], dtype=np.float32)
    work = BorderWork(np.array([[0, 3], [3, 5]]), np.array([0, 3, 5]),
                      (np.array([0]), np.array([1]), np.array([2])),
                      np.ones(3, np.float32))  # fmt: skip
    merged = merge_linked(lambda rows: x[rows], work, threshold=0.85)
    assert merged.heads.tolist() == [3] and merged.into.tolist() == [0]
    assert merged.roots.tolist() == [0] and merged.lowest[0] == pytest.approx(0.9)


def test_tasks_travel_packed_and_answer_joined_with_the_same_groups(verses):
    """A task's sets go out as one BorderBatch and come back as one joined BorderMerged:
    the same sets, and the groups of the answers set by set."""
    x, labels, neighbours = verses
    rows_of = x.__getitem__
    straight = find_groups(rows_of, labels, threshold=0.75, neighbours=neighbours)
    seen = []

    def packed(works):
        answers = []
        for _, batch in border_tasks(works, budget=7):
            unpacked = BorderBatch.pack(batch).unpack()
            for sent, got in zip(batch, unpacked, strict=True):
                assert np.array_equal(sent.pairs, got.pairs)
                assert np.array_equal(sent.heads, got.heads)
                assert same_float32(sent.lowest, got.lowest)
                pairs = zip(sent.members, got.members, strict=True)  # as many groups
                assert all(np.array_equal(a, b) for a, b in pairs)
            answers.append(joined([merge_linked(rows_of, w, threshold=0.75) for w in unpacked]))
            seen.append(len(batch))
        return answers

    other = find_groups(rows_of, labels, threshold=0.75, neighbours=neighbours, merge=packed)
    assert len(seen) > 1 and max(seen) > 1  # several tasks, of several sets
    assert np.array_equal(other.representative, straight.representative)
    assert same_float32(other.min_similarity, straight.min_similarity)
    assert same_float32(other.similarity, straight.similarity)


def same_float32(a, b):
    return a.dtype == b.dtype == np.float32 and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_unique_pairs_is_numpys_unique_rows(verses):
    """On the real border pairs of the verses and on random pairs with repeats."""
    x, labels, neighbours = verses
    linked = np.stack([np.arange(labels.size), np.maximum(neighbours, 0)], axis=1)
    rng = np.random.default_rng(1)
    drawn = np.sort(rng.integers(0, 500, (5000, 2)), axis=1)
    for pairs, n in ((linked, labels.size), (drawn, 500), (drawn[:0], 500)):
        got = unique_pairs(pairs, n)
        assert np.array_equal(got, np.unique(pairs, axis=0)) and got.dtype == np.int64
