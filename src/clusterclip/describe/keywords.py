"""Class-based TF-IDF (c-TF-IDF): the words that set one cluster apart from the others.

All documents of a cluster are treated as one class document. For term ``t``
and cluster ``c``::

    tf(t, c) = count(t, c) / words(c)
    idf(t)   = log(1 + A / count(t))       A = mean number of words per cluster
    score    = tf(t, c) * idf(t)

(Grootendorst, BERTopic, 2022). Counting streams: :class:`KeywordCounter` is fed
one document at a time and keeps the corpus-wide word counts plus one word
counter per cluster it is asked to describe, so its memory follows the
clusters described, not all of them (10^5 clusters would need 10^5 counters).

Read tasks count into their own :class:`KeywordCounter` and send it back as
:class:`WordTables` (arrays); :class:`TableMerger` adds the parts and scores
them in numpy, so the driver runs no Python loop over (cluster, word) pairs
and needs no stop-word list. The scores are those of the formula above, bit for bit.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from clusterclip.arrays import run_ranks

__all__ = ["KeywordCounter", "TableMerger", "WordTables", "tokenize"]

_TOKEN = re.compile(r"[^\W\d_][\w'-]*[^\W_]|[^\W\d_]{2,}")

# A short English stop list; scikit-learn's (318 words) is used when installed.
_FALLBACK_STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "said",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)


@functools.cache
def _stop_words() -> frozenset[str]:
    try:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    except ImportError:
        return _FALLBACK_STOP_WORDS
    return frozenset(ENGLISH_STOP_WORDS) | _FALLBACK_STOP_WORDS


def tokenize(text: str, stop_words: frozenset[str] = _FALLBACK_STOP_WORDS) -> list[str]:
    """Lower-cased words of 2+ letters, stop words removed.

    >>> tokenize("The Bank's rates rose 2% in 2004.")
    ["bank's", 'rates', 'rose']
    """
    return [w for w in _TOKEN.findall(text.lower()) if w not in stop_words]


class KeywordCounter:
    """Streaming c-TF-IDF over clusters.

    Parameters
    ----------
    clusters : iterable of int, optional
        The clusters whose keywords will be asked for (default: every cluster
        counted). Every document still counts towards ``totals`` and the number
        of clusters, so the keywords of these clusters are the same as when
        every cluster keeps its own counter.

    >>> counter = KeywordCounter()
    >>> counter.add(0, "stocks and shares fell")
    >>> counter.add(0, "shares rose")
    >>> counter.add(1, "the match was won")
    >>> [w for w, _ in counter.top(0, 2)]
    ['shares', 'fell']
    """

    def __init__(self, clusters: Iterable[int] | None = None) -> None:
        self.kept = None if clusters is None else frozenset(int(c) for c in clusters)
        self.counts: dict[int, Counter[str]] = {}
        self.totals: Counter[str] = Counter()
        self.seen: set[int] = set()
        self.stop_words = _stop_words()

    def add(self, cluster: int, text: str) -> None:
        """Count the words of one document of ``cluster``."""
        cluster = int(cluster)
        words = Counter(tokenize(text, self.stop_words))
        self.totals.update(words)
        self.seen.add(cluster)
        if self.kept is None or cluster in self.kept:
            self.counts.setdefault(cluster, Counter()).update(words)

    def top_all(
        self, n: int, clusters: Iterable[int] | None = None
    ) -> dict[int, list[tuple[str, float]]]:
        """The ``n`` best words (with scores) of every cluster kept (or of ``clusters``).

        A cluster that was not kept (see ``clusters`` of the constructor) or
        never counted has no words. Ties are broken by the word.
        """
        return self.tables().top_all(n, clusters)

    def tables(self) -> WordTables:
        """These counts as arrays (what a read task sends back to be merged).

        >>> counter = KeywordCounter()
        >>> counter.add(3, "shares fell"); counter.add(3, "shares rose")
        >>> tables = counter.tables()
        >>> tables.word_list(), tables.totals.tolist(), tables.counts.tolist()
        (['fell', 'rose', 'shares'], [1, 1, 2], [1, 1, 2])
        """
        words = sorted(self.totals)
        ids = {word: i for i, word in enumerate(words)}
        described = sorted(self.counts)
        pairs = [(c, ids[w], n) for c in described for w, n in sorted(self.counts[c].items())]
        columns = np.array(pairs, dtype=np.int64).reshape(-1, 3)
        return WordTables(
            words="\n".join(words),
            totals=np.array([self.totals[w] for w in words], dtype=np.int64),
            clusters=columns[:, 0].copy(),
            word_ids=columns[:, 1].copy(),
            counts=columns[:, 2].copy(),
            seen=np.array(sorted(self.seen), dtype=np.int64),
            described=np.array(described, dtype=np.int64),
        )

    def top(self, cluster: int, n: int) -> list[tuple[str, float]]:
        """The ``n`` best words of one cluster."""
        return self.top_all(n, [cluster])[int(cluster)]


@dataclass(frozen=True)
class WordTables:
    """Word counts as arrays, as a read task sends them and :class:`TableMerger` adds them.

    ``words`` holds the distinct words joined by newlines (a word never holds
    one: :func:`tokenize`), ``totals`` their counts over every counted
    document; the rows ``(clusters, word_ids, counts)`` are the counts of the
    kept clusters' words, ``word_ids`` indexing ``words``. ``seen``: every
    cluster counted; ``described``: the kept ones among them.
    """

    words: str
    totals: np.ndarray
    clusters: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray
    seen: np.ndarray
    described: np.ndarray

    def word_list(self) -> list[str]:
        """The words, in the order ``totals`` and ``word_ids`` refer to."""
        return self.words.split("\n") if self.words else []

    def arrays(self) -> dict[str, np.ndarray]:
        """These tables as named arrays (no pickle): what a read task writes as its part.

        >>> counter = KeywordCounter(); counter.add(0, "shares fell")
        >>> WordTables.from_arrays(counter.tables().arrays()).word_list()
        ['fell', 'shares']
        """
        return {"words": np.array(self.words), "totals": self.totals, "clusters": self.clusters,
                "word_ids": self.word_ids, "counts": self.counts, "seen": self.seen,
                "described": self.described}  # fmt: skip

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> WordTables:
        """The tables :meth:`arrays` gave."""
        return cls(
            words=str(arrays["words"]), totals=arrays["totals"], clusters=arrays["clusters"],
            word_ids=arrays["word_ids"], counts=arrays["counts"], seen=arrays["seen"],
            described=arrays["described"],
        )  # fmt: skip

    def top_all(
        self, n: int, clusters: Iterable[int] | None = None
    ) -> dict[int, list[tuple[str, float]]]:
        """The ``n`` best words (with scores, rounded to 6 places) of ``clusters``.

        Default: every cluster described. Highest score first, ties broken by the
        word; a cluster without counts has no words. The arithmetic is the
        formula's in the module docstring, in the same order, so the scores are
        the same bits as scoring one word at a time in Python.

        >>> counter = KeywordCounter()
        >>> counter.add(0, "stocks and shares fell"); counter.add(1, "the match was won")
        >>> counter.tables().top_all(2, [0, 1, 7])
        {0: [('fell', 0.417588), ('shares', 0.417588)], 1: [('match', 0.626381), ('won', 0.626381)], 7: []}
        """
        words = self.word_list()
        wanted = self.described.tolist() if clusters is None else [int(c) for c in clusters]
        result: dict[int, list[tuple[str, float]]] = {c: [] for c in wanted}
        keep = np.isin(self.clusters, np.array(wanted, dtype=np.int64))
        if not keep.any() or n <= 0:
            return result
        per_cluster = int(self.totals.sum()) / max(len(self.seen), 1)
        # one idf per word, by Python's math.log as the formula; then numpy per row
        idf = np.array([math.log(1.0 + per_cluster / t) for t in self.totals.tolist()])
        cluster, word, count = self.clusters[keep], self.word_ids[keep], self.counts[keep]
        order = np.argsort(cluster, kind="stable")
        cluster, word, count = cluster[order], word[order], count[order]
        starts = np.flatnonzero(np.r_[True, cluster[1:] != cluster[:-1]])
        sizes = np.add.reduceat(count, starts)
        size = np.repeat(sizes, np.diff(np.r_[starts, cluster.size]))
        score = count.astype(np.float64) / size.astype(np.float64) * idf[word]
        rank = np.empty(len(words), dtype=np.int64)  # each word's place in sorted order
        rank[sorted(range(len(words)), key=words.__getitem__)] = np.arange(len(words))
        order = np.lexsort((rank[word], -score, cluster))
        cluster, word, score = cluster[order], word[order], score[order]
        chosen = run_ranks(cluster) < n
        for c, w, value in zip(
            cluster[chosen].tolist(), word[chosen].tolist(), score[chosen].tolist(), strict=True
        ):
            result[c].append((words[w], round(value, 6)))
        return result


class TableMerger:
    """Adds :class:`WordTables` parts in any order; :meth:`result` is their sum.

    Word counts are integers, so any order and any cut into parts give the same
    tables. Pending rows are summed whenever they pass ``compact_rows``, so the
    memory follows the distinct (cluster, word) pairs, not the parts.

    >>> a, b = KeywordCounter(), KeywordCounter()
    >>> a.add(0, "shares fell"); b.add(0, "shares rose"); b.add(1, "the match")
    >>> merger = TableMerger()
    >>> merger.add(a.tables()); merger.add(b.tables())
    >>> merged = merger.result()
    >>> merged.top_all(1)
    {0: [('shares', 0.405465)], 1: [('match', 1.252763)]}
    """

    def __init__(self, compact_rows: int = 1 << 22) -> None:
        self.compact_rows = int(compact_rows)
        self.index: dict[str, int] = {}
        self.totals = np.zeros(0, dtype=np.int64)
        self.rows: list[tuple[np.ndarray, np.ndarray]] = []  # (key, count) of each part
        self.pending = 0
        self.seen: set[int] = set()
        self.described: set[int] = set()

    def add(self, part: WordTables) -> None:
        """Add one part's counts."""
        index = self.index
        words = part.word_list()
        ids = np.fromiter((index.setdefault(w, len(index)) for w in words), np.int64, len(words))
        if len(index) > self.totals.size:
            self.totals = np.concatenate(
                [self.totals, np.zeros(len(index) - self.totals.size, dtype=np.int64)]
            )
        self.totals[ids] += part.totals  # a part's words are distinct
        self.rows.append((part.clusters << 32 | ids[part.word_ids], part.counts))
        self.pending += part.counts.size
        self.seen.update(part.seen.tolist())
        self.described.update(part.described.tolist())
        if self.pending > self.compact_rows:
            self._compact()

    def _compact(self) -> None:
        empty = np.zeros(0, dtype=np.int64)
        keys = np.concatenate([empty, *(k for k, _ in self.rows)])
        counts = np.concatenate([empty, *(c for _, c in self.rows)])
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        if keys.size:
            starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
            keys, counts = keys[starts], np.add.reduceat(counts, starts)
        self.rows = [(keys, counts)]
        self.pending = 0

    def result(self) -> WordTables:
        """The summed tables (words in the order first met)."""
        self._compact()
        keys, counts = self.rows[0]
        return WordTables(
            words="\n".join(self.index),
            totals=self.totals.copy(),
            clusters=keys >> 32,
            word_ids=keys & 0xFFFFFFFF,
            counts=counts,
            seen=np.array(sorted(self.seen), dtype=np.int64),
            described=np.array(sorted(self.described), dtype=np.int64),
        )
