"""What each cluster is about: size, c-TF-IDF keywords and the documents nearest its centroid."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from clusterclip.arrays import run_ranks
from clusterclip.describe.reading import read_clusters, read_texts
from clusterclip.engines import resolve_options, run_task
from clusterclip.errors import hint, invalid
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import ClustersArtifact, KeywordState

__all__ = ["KeywordPlanWorker", "document_texts", "inspect_clusters", "nearest_documents"]


def _check_count(name: str, value: Any, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise invalid(name, "an int in [0, inf)", value, fix)
    return int(value)


#: Up to this many documents per cluster, :func:`nearest_documents` takes the best one
#: of every cluster per round (O(N) each) instead of sorting every document.
NEAREST_ROUNDS = 8


def nearest_documents(labels: np.ndarray, scores: np.ndarray, n: int) -> dict[int, list[int]]:
    """For each cluster, the indices of its ``n`` highest-scoring documents (ties: lower index).

    Clusters in id order. For ``n`` up to :data:`NEAREST_ROUNDS`, ``n`` rounds
    that each take every cluster's best remaining document (a maximum per cluster,
    then the lowest index among the documents that reach it); beyond, one sort of
    every clustered document.

    >>> nearest_documents(np.array([0, 1, 0, 0, -1]), np.array([.5, .9, .7, .5, 0]), 2)
    {0: [2, 0], 1: [1]}
    """
    labels = np.asarray(labels)
    scores = np.asarray(scores)
    kept = labels >= 0
    if n > NEAREST_ROUNDS or np.isnan(scores[kept]).any():
        return _nearest_sorted(labels, scores, n)
    present = np.flatnonzero(np.bincount(labels[kept])) if kept.any() else np.zeros(0, np.int64)
    result: dict[int, list[int]] = {cluster: [] for cluster in present.tolist()}
    remaining = np.flatnonzero(kept)
    for _ in range(n):
        if not remaining.size:
            break
        owner, score = labels[remaining], scores[remaining]
        best = np.full(int(present[-1]) + 1, -np.inf, dtype=score.dtype)
        np.maximum.at(best, owner, score)
        reach = np.flatnonzero(score == best[owner])  # every cluster's best, ties included
        first = np.unique(owner[reach], return_index=True)[1]  # the lowest index of each
        taken = reach[first]
        for cluster, index in zip(owner[taken].tolist(), remaining[taken].tolist(), strict=True):
            result[cluster].append(index)
        remaining = np.delete(remaining, taken)
    return result


def _nearest_sorted(labels: np.ndarray, scores: np.ndarray, n: int) -> dict[int, list[int]]:
    """:func:`nearest_documents` by one sort of every clustered document."""
    kept = np.flatnonzero(labels >= 0)
    order = kept[np.lexsort((kept, -scores[kept], labels[kept]))]
    ordered = labels[order]
    # each document's rank within its cluster (its position after the cluster's first),
    # in numpy: a Python loop over every document cost ~0.8 s of driver time per 10^6
    rank = run_ranks(ordered)
    chosen = rank < n
    result: dict[int, list[int]] = {cluster: [] for cluster in ordered[rank == 0].tolist()}
    for cluster, index in zip(ordered[chosen].tolist(), order[chosen].tolist(), strict=True):
        result[cluster].append(index)
    return result


def inspect_clusters(
    workdir: str | os.PathLike[str],
    *,
    clusters: Iterable[int] | None = None,
    n_keywords: int = 10,
    n_examples: int = 3,
    max_documents: int | None = None,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Describe clusters of a clustered work directory, reading the corpus once.

    Parameters
    ----------
    workdir : path
        Work directory with completed ``embed`` and ``cluster`` stages. The
        corpus is re-read through :meth:`clusterclip.io.WorkDir.corpus`: a
        corpus file that moved or changed since it was embedded is refused.
    clusters : iterable of int, optional
        Cluster ids to describe (default: all, in id order).
    n_keywords : int
        Keywords per cluster (class-based TF-IDF over all of the cluster's texts).
    n_examples : int
        Documents nearest the centroid per cluster.
    max_documents : int, optional
        Count the keywords of at most this many documents per cluster: every
        ``ceil(size / max_documents)``-th member in index order (deterministic,
        spread over the whole corpus). None (default): every document. At
        millions of documents the word counting, not the reading, is most of
        the time.
    engine : {"local", "ray"}
        Where the corpus is read and the words counted: read tasks cut as the
        embed stage cuts the corpus (:mod:`clusterclip.describe.reading`); the
        result is the same on every engine.
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    list of dict
        One per cluster, in id order: ``cluster``, ``size``, ``keywords``
        (list of str), ``keyword_scores`` (list of float) and ``examples``
        (``[{"index", "id", "score", "text"}]``, highest cosine first).

    Deterministic: the same work directory gives the same report.

    Examples
    --------
    >>> report = inspect_clusters("work", clusters=[0], n_keywords=5)  # doctest: +SKIP
    >>> report[0]["keywords"]  # doctest: +SKIP
    ['election', 'labour', 'blair', 'party', 'tory']
    """
    n_keywords = _check_count("n_keywords", n_keywords, f"Pass e.g. {hint('n_keywords', 10)}.")
    n_examples = _check_count("n_examples", n_examples, f"Pass e.g. {hint('n_examples', 3)}.")
    work = WorkDir(workdir)
    ClustersArtifact(work).check_fresh()  # first: a missing or stale stage names its command
    n_clusters = work.n_clusters()
    if clusters is None:
        wanted = list(range(n_clusters))
    else:
        wanted = sorted({int(c) for c in clusters})
        bad = [c for c in wanted if not 0 <= c < n_clusters]
        if bad:
            raise invalid(
                "clusters",
                f"cluster ids in [0, {n_clusters - 1}]",
                bad,
                f"This work directory has {n_clusters} clusters (0..{n_clusters - 1}).",
            )
    options = resolve_options(engine, engine_options)
    state = KeywordState.of(work, local=engine == "local")
    try:
        planner = functools.partial(KeywordPlanWorker, str(work.path), state)
        plan = run_task(
            planner, (wanted, n_examples, max_documents), engine=engine, options=options
        )
        example_rank = {
            index: (cluster, rank)
            for cluster, members in plan["nearest"].items()
            for rank, index in enumerate(members)
        }
        examples: dict[int, list[dict[str, Any] | None]] = {
            c: [None] * len(plan["nearest"].get(c, [])) for c in wanted
        }
        keywords: dict[int, list[tuple[str, float]]] = {}
        if n_keywords or example_rank:
            keywords, texts = read_clusters(
                work, state, n_documents=plan["n_documents"], kept=frozenset(wanted),
                examples=set(example_rank), n_keywords=n_keywords, clusters=wanted,
                engine=engine, options=options,
            )  # fmt: skip
            for index, (doc_id, text) in sorted(texts.items()):
                cluster, rank = example_rank[index]
                examples[cluster][rank] = {
                    "index": index, "id": doc_id, "score": plan["scores"][index], "text": text,
                }  # fmt: skip
    finally:
        state.clear()
    sizes = plan["sizes"]
    report = []
    for cluster in wanted:
        words = keywords.get(cluster, [])
        report.append(
            {
                "cluster": cluster,
                "size": int(sizes[cluster]),
                "keywords": [word for word, _ in words],
                "keyword_scores": [score for _, score in words],
                "examples": [e for e in examples[cluster] if e is not None],
            }
        )
    return report


class KeywordPlanWorker:
    """Plan a description from the labels and scores, on the engine (one task's worker).

    Pass ``functools.partial(KeywordPlanWorker, workdir, state)`` to
    :func:`clusterclip.engines.run_task` with the payload ``(clusters, n_examples,
    max_documents)`` (see :func:`inspect_clusters`). The worker reads the labels
    and scores, writes each document's cluster for the word counts (-1 where its
    words do not count: :func:`_spread_sample`) to the
    :class:`~clusterclip.io.artifacts.KeywordState` ``state``, and returns what is as
    small as the cluster count: ``n_documents``, ``sizes`` (int64, every cluster),
    ``nearest`` (:func:`nearest_documents` of ``clusters``) and ``scores`` (the
    cosine of each of those documents).
    """

    def __init__(self, workdir: str, state: KeywordState) -> None:
        self.workdir, self.state = str(workdir), state

    def __call__(self, request: tuple[list[int], int, int | None]) -> dict[str, Any]:
        clusters, n_examples, max_documents = request
        work = WorkDir(self.workdir)
        labels, scores = work.labels(), work.scores()
        sizes = np.bincount(labels[labels >= 0], minlength=work.n_clusters())
        found = nearest_documents(np.where(labels >= 0, labels, -1), scores, n_examples)
        nearest = {c: found[c] for c in clusters if c in found}
        counted = (
            labels >= 0 if max_documents is None else _spread_sample(labels, sizes, max_documents)
        )
        self.state.write_labels(np.where(counted, labels, -1))
        example_scores = {i: float(scores[i]) for members in nearest.values() for i in members}
        return {"n_documents": int(labels.size), "sizes": sizes, "nearest": nearest,
                "scores": example_scores}  # fmt: skip


def _spread_sample(labels: np.ndarray, sizes: np.ndarray, cap: int) -> np.ndarray:
    """bool (N,): every ``ceil(size / cap)``-th member of each cluster, in index order.

    >>> _spread_sample(np.array([0, 1, 0, 0, -1, 0]), np.array([4, 1]), 2).tolist()
    [True, True, False, True, False, False]
    """
    order = _by_label(labels)  # each cluster's members in index order
    ordered = labels[order]
    ordinal = run_ranks(ordered)
    stride = -(-sizes[np.maximum(ordered, 0)] // max(int(cap), 1))
    keep = np.zeros(labels.size, dtype=bool)
    keep[order] = (ordered >= 0) & (ordinal % np.maximum(stride, 1) == 0)
    return keep


def _by_label(labels: np.ndarray) -> np.ndarray:
    """The stable order of ``labels`` (-1 allowed): one sort of ``label << b | index`` values
    when both fit in 63 bits (any corpus below 2**32 documents with fewer than 2**31 clusters),
    a stable argsort otherwise. The same order either way.

    >>> _by_label(np.array([2, -1, 0, 2, 0])).tolist()
    [1, 2, 4, 0, 3]
    """
    n = labels.size
    width = max(n - 1, 1).bit_length()
    if n == 0 or (int(labels.max()) + 1).bit_length() + width > 63 or int(labels.min()) < -1:
        return np.argsort(labels, kind="stable")
    key = labels.astype(np.int64) + 1
    key <<= width
    key |= np.arange(n, dtype=np.int64)
    key.sort()
    key &= (1 << width) - 1
    return key


def document_texts(
    workdir: str | os.PathLike[str],
    indices: Iterable[int],
    *,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[int, dict[str, Any]]:
    """Id and text of the documents ``indices``, read from the checked corpus.

    Read by tasks of ``engine`` that each read one small shard holding wanted
    documents (:func:`clusterclip.describe.reading.read_texts`): the driver reads
    no text, wherever the documents are. Used by the report to show the members
    of dissolved small clusters, and by ``clusterclip dedup`` for its examples.

    >>> document_texts("work", [12, 3])[3]["text"]  # doctest: +SKIP
    'And God called the light Day, ...'
    """
    found = read_texts(
        WorkDir(workdir), [int(i) for i in indices], engine=engine,
        options=resolve_options(engine, engine_options),
    )  # fmt: skip
    return {
        index: {"index": index, "id": id_, "text": "" if text is None else str(text)}
        for index, (id_, text) in sorted(found.items())
    }
