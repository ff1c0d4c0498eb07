"""Detection: blocked cosine pairs inside clusters, exact copies anywhere, groups without chains."""

from __future__ import annotations

import re
import tracemalloc
import unicodedata

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterclip.dedup.detect import (
    connect,
    find_groups,
    hash_texts,
    near_pairs,
    normalise_text,
    second_nearest,
)
from tests.product_support import kjv_records


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference_components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Lowest member of each component, by plain graph search."""
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for i, j in zip(a.tolist(), b.tolist(), strict=True):
        neighbours[i].append(j)
        neighbours[j].append(i)
    out = np.full(n, -1)
    for start in range(n):
        if out[start] >= 0:
            continue
        stack, seen = [start], {start}
        while stack:
            for nxt in neighbours[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        out[list(seen)] = min(seen)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_connect_finds_the_components(seed):
    rng = np.random.default_rng(seed)
    n = 300
    a, b = rng.integers(0, n, 250), rng.integers(0, n, 250)
    parent = np.arange(n)
    connect(parent, a[:100], b[:100])
    connect(parent, a[100:], b[100:])  # in two batches, as cluster after cluster
    np.testing.assert_array_equal(parent, reference_components(n, a, b))


def test_pairs_do_not_depend_on_the_block_size():
    rng = np.random.default_rng(0)
    x = unit_rows(rng, 200, 16)
    x[100:140] = x[:40] + 0.05 * unit_rows(rng, 40, 16)  # planted near copies
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    found = []
    for block in (1, 7, 64, 1000):
        pairs = [np.stack(p, axis=1) for p in near_pairs(x, 0.95, block)]
        found.append(np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64))
    brute = np.argwhere(np.triu(x @ x.T >= 0.95, k=1))
    for pairs in found:
        np.testing.assert_array_equal(pairs[np.lexsort(pairs.T[::-1])], brute)


def test_memory_is_a_block_times_the_cluster_never_n_by_n():
    rng = np.random.default_rng(1)
    n, dim, block = 6000, 32, 64
    x = unit_rows(rng, n, dim)
    labels = np.zeros(n, dtype=np.int64)  # one big cluster: the worst case
    tracemalloc.start()
    find_groups(lambda rows: x[rows], labels, threshold=0.9, block_size=block)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n_by_n = n * n * 4  # 144 MB of float32 scores
    bound = block * n * (4 + 1) + n * dim * 4 + 40 * n * 8  # scores, mask, rows, index arrays
    assert peak < bound < n_by_n / 20, (peak, bound)


def test_exact_copies_join_across_clusters_near_copies_only_within():
    verses = [r["text"] for r in kjv_records(step=500)][:6]
    texts = [verses[0], verses[1], "  " + verses[0].upper() + " ", verses[2], verses[1]]
    texts += verses[3:]
    labels = np.array([0, 1, 2, 0, 1, 2, 0, -1])  # doc 2 (a copy of doc 0) in another cluster
    x = np.eye(8, dtype=np.float32)
    x[3] = x[0]  # same embedding as doc 0, same cluster: a near copy
    x[6] = x[2]  # same embedding as doc 2 but in cluster 0 while doc 2 is in 2: not linked
    hashes = hash_texts(texts + [None], 8)
    groups = find_groups(lambda rows: x[rows], labels, threshold=0.99, hashes=hashes)
    assert groups.representative.tolist() == [0, 1, 0, 0, 1, 5, 6, 7]
    assert groups.exact.tolist() == [False, False, True, False, True, False, False, False]
    summary = groups.summary()
    assert (summary["groups"], summary["documents_in_groups"], summary["exact_groups"]) == (2, 5, 1)
    assert normalise_text(texts[2]) == normalise_text(texts[0])


def test_excluded_documents_are_never_grouped():
    x = np.ones((4, 3), dtype=np.float32) / np.sqrt(3)
    groups = find_groups(lambda rows: x[rows], np.array([0, -1, 0, -1]), threshold=0.9)
    assert groups.representative.tolist() == [0, 1, 0, 3]


def test_near_copies_split_by_a_cluster_border_join_through_the_second_nearest_cluster():
    """Two near copies on either side of the border between clusters 0 and 1 are
    linked once each document is also compared with its second-nearest cluster;
    a document whose second-nearest cluster is elsewhere is not compared there."""
    centroids = np.eye(3, dtype=np.float32)
    x = np.array(
        [
            [0.72, 0.69, 0.05],  # cluster 0, near the border with 1
            [0.69, 0.72, 0.05],  # cluster 1, its near copy across the border
            [1.0, 0.0, 0.0],  # cluster 0, far from it
            [0.05, 0.69, 0.72],  # cluster 2, second-nearest 1: a border with 1, not with 0
            [0.0, 1.0, 0.0],  # cluster 1
        ],
        dtype=np.float32,
    )
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = np.array([0, 1, 0, 2, 1])
    rows_of = lambda rows: x[rows]  # noqa: E731
    neighbours = second_nearest(rows_of, labels, centroids, block_size=2)
    assert neighbours.tolist() == [1, 0, 1, 1, 0]  # doc 4 ties 0 and 2 at 0: the lowest, 0
    within = find_groups(rows_of, labels, threshold=0.99)
    across = find_groups(rows_of, labels, threshold=0.99, neighbours=neighbours)
    assert within.representative.tolist() == [0, 1, 2, 3, 4]
    assert across.representative.tolist() == [0, 0, 2, 3, 4]


def _counting_rows(x: np.ndarray):
    """``rows_of`` over ``x`` that records how many rows each call asked for."""
    asked: list[int] = []

    def rows_of(rows):
        asked.append(len(rows))
        return x[rows]

    return rows_of, asked


def _vmf_like(n: int, centres: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centres, dim))
    x = means[rng.integers(0, centres, n)] + 0.35 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_second_nearest_through_a_tree_equals_the_flat_one_when_the_beam_covers_the_top(
    monkeypatch,
):
    """Two top nodes and a beam of 2: the descent sees every leaf a top-2 can come from,
    so the tree's second-nearest leaf is the exact one; each document's own cluster is
    its exact nearest leaf."""
    from clusterclip.cluster import HierarchicalKMeans
    from clusterclip.dedup import detect

    monkeypatch.setattr(detect, "SCORE_BYTES", 4 * 24 * 10)  # flat: 10 rows at a time
    x = _vmf_like(1500, 16, 12, seed=4)
    model = HierarchicalKMeans(24, levels=(2,), seed=0, backend="numpy").fit(x)
    leaves = model.centroids_
    labels = (x @ leaves.T).argmax(axis=1)
    rows_of, asked = _counting_rows(x)

    flat = second_nearest(rows_of, labels, leaves)
    asked.clear()
    through = second_nearest(rows_of, labels, leaves, tree=model.tree_, block_size=256)
    np.testing.assert_array_equal(through, flat)
    assert (flat != labels).all()
    # The descent scores a few nodes per row: its blocks do not shrink with the leaves.
    assert asked == [256] * 5 + [220]


def test_second_nearest_through_a_deeper_tree_is_a_neighbour_not_the_own_cluster():
    from clusterclip.cluster import HierarchicalKMeans

    x = _vmf_like(3000, 40, 16, seed=5)
    model = HierarchicalKMeans(60, levels=(4, 15), seed=0, backend="numpy").fit(x)
    labels = model.predict(x)
    leaves = model.centroids_
    through = second_nearest(lambda rows: x[rows], labels, leaves, tree=model.tree_)
    assert ((through >= 0) & (through != labels)).all()
    # Mostly the exact second-nearest leaf; where not, one nearly as close.
    scores = x @ leaves.T
    scores[np.arange(len(x)), labels] = -np.inf
    exact = scores.argmax(axis=1)
    assert (through == exact).mean() > 0.8
    gap = scores[np.arange(len(x)), exact] - scores[np.arange(len(x)), through]
    assert gap.mean() < 0.02


def test_second_nearest_holds_few_scores_at_once_with_many_centroids(monkeypatch):
    """The block shrinks with the centroids (65,536 rows x 87,540 leaves was 23 GB)."""
    from clusterclip.dedup import detect

    x = _vmf_like(700, 50, 8, seed=6)
    centroids = _vmf_like(300, 50, 8, seed=7)
    labels = (x @ centroids.T).argmax(axis=1)
    rows_of, asked = _counting_rows(x)

    whole = second_nearest(rows_of, labels, centroids)
    assert asked == [700]
    monkeypatch.setattr(detect, "SCORE_BYTES", 4 * 300 * 64)  # 64 rows of 300 scores
    asked.clear()
    np.testing.assert_array_equal(second_nearest(rows_of, labels, centroids), whole)
    assert max(asked) == 64 and sum(asked) == 700


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_normalise_text_collapses_exactly_the_regex_whitespace(text):
    """The split/join form equals the substitution it replaced, hashes unchanged."""
    spaces = re.compile(r"\s+")
    reference = spaces.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    assert normalise_text(text) == reference


def test_normalise_text_every_unicode_space():
    spaces = [c for c in map(chr, range(0x110000)) if re.fullmatch(r"\s", c)]
    assert len(spaces) > 20 and all(c.isspace() for c in spaces)
    for c in spaces:
        assert normalise_text(f" x{c}{c}y{c}") == normalise_text("x y")
