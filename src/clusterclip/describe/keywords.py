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
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["KeywordCounter", "tokenize"]

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

    def merge(self, other: KeywordCounter) -> None:
        """Add the counts of ``other`` (another part of the corpus, same ``clusters``).

        Counts are integers, so merging parts in any order gives the counts of
        one pass over all of them.

        >>> a, b = KeywordCounter(), KeywordCounter()
        >>> a.add(0, "shares fell"); b.add(0, "shares rose"); b.add(1, "the match")
        >>> a.merge(b)
        >>> a.counts[0]["shares"], sorted(a.seen)
        (2, [0, 1])
        """
        self.totals.update(other.totals)
        self.seen.update(other.seen)
        for cluster, counts in other.counts.items():
            self.counts.setdefault(cluster, Counter()).update(counts)

    def top_all(
        self, n: int, clusters: Iterable[int] | None = None
    ) -> dict[int, list[tuple[str, float]]]:
        """The ``n`` best words (with scores) of every cluster kept (or of ``clusters``).

        A cluster that was not kept (see ``clusters`` of the constructor) or
        never counted has no words.
        """
        totals = self.totals
        words_per_cluster = sum(totals.values()) / max(len(self.seen), 1)
        wanted = sorted(self.counts) if clusters is None else [int(c) for c in clusters]
        result = {}
        for cluster in wanted:
            counter = self.counts.get(cluster, Counter())
            size = sum(counter.values())
            scored = [
                (word, count / size * math.log(1.0 + words_per_cluster / totals[word]))
                for word, count in counter.items()
            ]
            # Highest score first; ties broken by the word, so the output is deterministic.
            scored.sort(key=lambda item: (-item[1], item[0]))
            result[cluster] = [(word, round(score, 6)) for word, score in scored[:n]]
        return result

    def top(self, cluster: int, n: int) -> list[tuple[str, float]]:
        """The ``n`` best words of one cluster."""
        return self.top_all(n, [cluster])[int(cluster)]
