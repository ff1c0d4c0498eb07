"""Keywords merged and scored as arrays (issue 28: no Python loop over (cluster, word) pairs on
the driver) equal the c-TF-IDF definition scored one word at a time, on real KJV verses."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from clusterclip.describe.keywords import KeywordCounter, TableMerger, tokenize
from tests.product_support import kjv_records


@pytest.fixture(scope="module")
def books() -> tuple[list[str], np.ndarray]:
    """Every 7th verse of the KJV (4,444 verses); the cluster is the verse's book (66)."""
    records = kjv_records(step=7)
    names = sorted({r["book"] for r in records})
    labels = np.array([names.index(r["book"]) for r in records])
    return [r["text"] for r in records], labels


def one_word_at_a_time(texts, labels, n, kept, wanted):
    """The definition: corpus-wide and per-cluster counts, each word scored in Python."""
    stop = KeywordCounter().stop_words
    totals, counts, seen = Counter(), {}, set()
    for text, label in zip(texts, labels.tolist(), strict=True):
        words = Counter(tokenize(text, stop))
        totals.update(words)
        seen.add(label)
        if label in kept:
            counts.setdefault(label, Counter()).update(words)
    per_cluster = sum(totals.values()) / len(seen)
    found = {}
    for cluster in wanted:
        counter = counts.get(cluster, Counter())
        size = sum(counter.values())
        scored = [
            (w, c / size * math.log(1.0 + per_cluster / totals[w])) for w, c in counter.items()
        ]
        scored.sort(key=lambda item: (-item[1], item[0]))
        found[cluster] = [(w, round(s, 6)) for w, s in scored[:n]]
    return found


@pytest.mark.parametrize("parts", [1, 3, 17])
def test_merged_tables_score_as_the_definition(books, parts):
    texts, labels = books
    kept = set(range(0, 66, 2))
    wanted = [0, 2, 10, 64, 1, 65]  # kept ones, and two counted but not kept (no words)
    merger = TableMerger(compact_rows=500)  # small: the running sums are compacted often
    for chunk in np.array_split(np.random.default_rng(parts).permutation(len(texts)), parts):
        counter = KeywordCounter(kept)
        for i in chunk.tolist():
            counter.add(int(labels[i]), texts[i])
        merger.add(counter.tables())
    merged = merger.result()
    for n in (1, 8, 40):
        expected = one_word_at_a_time(texts, labels, n, kept, wanted)
        assert merged.top_all(n, wanted) == expected
    assert sorted(merged.top_all(3)) == sorted(kept)  # default: every cluster described
    # one counter over every document gives the same tables' scores
    whole = KeywordCounter(kept)
    for text, label in zip(texts, labels.tolist(), strict=True):
        whole.add(label, text)
    assert whole.top_all(8, wanted) == merged.top_all(8, wanted)


def test_ties_are_broken_by_the_word_and_empty_documents_keep_their_cluster():
    counter = KeywordCounter()
    counter.add(0, "zebra apple mango")  # three words of equal score
    counter.add(1, "")  # a cluster whose documents have no words
    counter.add(2, "the and of")  # stop words only
    top = counter.top_all(2)
    assert top == {0: [("apple", top[0][0][1]), ("mango", top[0][0][1])], 1: [], 2: []}
    assert counter.tables().top_all(0) == {0: [], 1: [], 2: []}
