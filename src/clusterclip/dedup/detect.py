"""Near-duplicate groups: exact copies by text hash, near copies by cosine, no chains.

SemDeDup-style (Abbas et al., 2023): two documents of the same cluster whose
embeddings have a cosine of at least ``threshold`` are near-duplicates, and so
are a document and a member of its second-nearest cluster (:func:`second_nearest`,
when the caller passes ``neighbours``: near copies that k-means put on either
side of a cluster border, measured in docs/clustering.md); exact copies (same
normalised text, :func:`normalise_text`) are copies wherever they are.

A *group* is a set of documents that are **all** copies of each other
(complete linkage), never a chain ``a ~ b ~ c`` of pairs: links of cosine >=
``threshold`` would otherwise join texts that are far apart through the ones
between them (eight different ``hashlib`` docstrings ended in one group at 0.9).
The groups are made in three deterministic steps:

1. every exact copy stands for its text's first occurrence (lowest index), so
   each text is compared once;
2. inside each cluster, the texts are visited in index order and each joins the
   group of the lowest representative to *every* member of which it has cosine
   >= ``threshold``, else starts its own group (greedy cliques; a block of rows
   at a time against the rows before them);
3. groups of two clusters linked by a near pair across their border (the
   second-nearest cluster) merge, pairs of groups taken in order of their
   representatives, when every member of one has cosine >= ``threshold`` to
   every member of the other.

So any two distinct texts of a group have cosine >= ``threshold``
(``min_similarity``, the lowest such cosine, is kept per group) and the copies
of a text follow it. A group's **representative** is its lowest document index,
the first occurrence in the corpus, a choice that does not depend on
floating-point ties of the embeddings; the group is drawn in its
representative's cluster.

Memory: step 2 holds ``block_size x (cluster size)`` float32 scores plus the
cluster's rows, never an ``N x N`` matrix; step 3 the members of the two groups
it checks.

>>> x = np.array([[1, 0], [1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
>>> groups = find_groups(lambda rows: x[rows], np.array([0, 0, 0, 0]), threshold=0.99)
>>> groups.representative.tolist()
[0, 0, 2, 3]
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from clusterclip.dedup.borders import BorderMerged, BorderWork, border_works, merge_linked
from clusterclip.dedup.compare import ClusterFound, ClusterWork, cluster_works, compare_cluster
from clusterclip.dedup.similarity import SimilarityWork, similarities, similarity_works

if TYPE_CHECKING:
    from clusterclip.tree import Tree

__all__ = [
    "DuplicateGroups",
    "connect",
    "find_groups",
    "hash_texts",
    "near_pairs",
    "neighbour_step",
    "normalise_text",
    "second_nearest",
]


def normalise_text(text: str) -> str:
    """The text exact copies are compared on: NFKC, case-folded, whitespace collapsed.

    >>> normalise_text("  The  LORD\\n is my shepherd ")
    'the lord is my shepherd'
    """
    # str.split() splits on exactly the characters the regex \s matches (str.isspace),
    # several times faster than a substitution
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def hash_texts(texts: Iterable[str | None], n_documents: int) -> np.ndarray:
    """128-bit BLAKE2b of every normalised text, as ``(N, 2)`` uint64 (zeros for ``None``).

    ``texts`` yields one entry per document in index order (``None`` for a
    document that has no usable text: it is never an exact copy).
    """
    hashes = np.zeros((n_documents, 2), dtype=np.uint64)
    for i, text in enumerate(texts):
        if text is None:
            continue
        digest = hashlib.blake2b(normalise_text(text).encode("utf-8"), digest_size=16).digest()
        hashes[i] = np.frombuffer(digest, dtype="<u8")
    return hashes


def _exact_links(hashes: np.ndarray, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(document, first copy)`` for every usable document with an earlier identical text."""
    rows = np.flatnonzero(usable)
    if not rows.size:
        return rows, rows
    high, low = hashes[rows, 0], hashes[rows, 1]
    order = np.lexsort((rows, low, high))  # by hash, then index: the first copy leads its run
    same = (high[order][1:] == high[order][:-1]) & (low[order][1:] == low[order][:-1])
    heads = np.concatenate(([True], ~same))
    leader = rows[order][np.maximum.accumulate(np.where(heads, np.arange(rows.size), 0))]
    copies = ~heads
    return rows[order][copies], leader[copies]


def near_pairs(
    matrix: np.ndarray, threshold: float, block_size: int
) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """Pairs ``(i, j)``, ``i < j``, of rows with ``matrix[i] @ matrix[j] >= threshold``.

    Rows are compared ``block_size`` at a time against the rows at or after the
    block (the upper triangle only), so the scores held at once are at most
    ``block_size x n`` float32.

    Parameters
    ----------
    matrix : ndarray of float32, shape (n, dim)
        Unit rows (one cluster).
    threshold : float
    block_size : int

    Yields
    ------
    (ndarray of int64, ndarray of int64)
        Row indices into ``matrix``, one block's pairs at a time.
    """
    n = matrix.shape[0]
    for start in range(0, n, block_size):
        stop = min(n, start + block_size)
        scores = matrix[start:stop] @ matrix[start:].T  # (rows, n - start)
        hit = scores >= threshold
        # Keep j > i only: row r of the block is document start + r, column c is start + c.
        hit[:, : stop - start] &= np.triu(np.ones((stop - start, stop - start), bool), k=1)
        rows, cols = np.nonzero(hit)
        if rows.size:
            yield rows + start, cols + start


def _compress(parent: np.ndarray) -> None:
    """Pointer jumping until every node points at its root (in place)."""
    while True:
        up = parent[parent]
        if np.array_equal(up, parent):
            return
        parent[:] = up


def connect(parent: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Union-find: join the components of ``a[i]`` and ``b[i]`` for every ``i`` (in place).

    Every root points to a smaller index, so a component's root is its lowest
    member. Vectorised: each round hooks, for every link whose ends have
    different roots, the higher root onto the lower (``np.minimum.at``: when
    several links hook one root, the lowest wins and none is lost), then
    compresses every path; a round at least halves the roots a link chain
    spans, so a few rounds suffice even for one node linked to thousands.

    >>> parent = np.arange(5)
    >>> connect(parent, np.array([4, 1, 3]), np.array([1, 2, 2]))
    >>> parent.tolist()
    [0, 1, 1, 1, 1]
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    _compress(parent)
    while a.size:
        ra, rb = parent[a], parent[b]
        differ = ra != rb
        a, b, ra, rb = a[differ], b[differ], ra[differ], rb[differ]
        if not a.size:
            break
        np.minimum.at(parent, np.maximum(ra, rb), np.minimum(ra, rb))
        _compress(parent)


@dataclass(frozen=True)
class DuplicateGroups:
    """Near-duplicate groups of a corpus, one row per document.

    Attributes
    ----------
    representative : ndarray of int64, shape (N,)
        Lowest index of the document's group (its own index when it has no
        copy; also for excluded documents).
    similarity : ndarray of float32, shape (N,)
        Cosine of the document's embedding to its representative's (1 for the
        representative itself).
    exact : ndarray of bool, shape (N,)
        Whether the document's normalised text equals its representative's
        (False for representatives and when exact matching was off).
    min_similarity : ndarray of float32, shape (N,)
        The lowest cosine between two distinct texts of the document's group
        (the first occurrences of its texts): at least the threshold, and 1
        when the group holds one text (a document without copies included).
    """

    representative: np.ndarray
    similarity: np.ndarray
    exact: np.ndarray
    min_similarity: np.ndarray

    def summary(self, *, top: int = 10) -> dict[str, object]:
        """Groups of two or more, their documents, and the largest ``top`` group sizes.

        ``min_similarity`` is the lowest cosine between two distinct texts of
        any group (None when every group holds one text).

        >>> DuplicateGroups(np.array([0, 0, 2]), np.ones(3, np.float32),
        ...                 np.array([False, True, False]), np.ones(3, np.float32)).summary()["groups"]
        1
        """
        rep = self.representative
        sizes = np.bincount(rep, minlength=rep.size)
        multi = np.flatnonzero(sizes > 1)
        in_groups = sizes[multi].sum()
        # A group is exact when every member is an exact copy of its representative.
        members = rep != np.arange(rep.size)
        not_exact = np.bincount(rep[members & ~self.exact], minlength=rep.size)
        exact_groups = int(np.count_nonzero(not_exact[multi] == 0))
        largest = multi[np.argsort(-sizes[multi], kind="stable")[:top]]
        near = multi[not_exact[multi] > 0]
        return {
            "groups": int(multi.size),
            "documents_in_groups": int(in_groups),
            "duplicates": int(in_groups - multi.size),
            "exact_groups": exact_groups,
            "near_groups": int(multi.size - exact_groups),
            "exact_copies": int(np.count_nonzero(self.exact)),
            "min_similarity": shown_cosine(self.min_similarity[near].min()) if near.size else None,
            "largest": [
                {
                    "representative": int(r),
                    "size": int(sizes[r]),
                    "min_similarity": shown_cosine(self.min_similarity[r]),
                }
                for r in largest
            ],
        }


def shown_cosine(value: float) -> float:
    """A cosine as summaries show it: 4 decimals, rounded down, so never above what it is.

    >>> shown_cosine(np.float32(0.89996))
    0.8999
    """
    return float(np.floor(float(value) * 1e4) / 1e4)


def find_groups(
    rows_of: Callable[[np.ndarray], np.ndarray],
    labels: np.ndarray,
    *,
    threshold: float,
    block_size: int = 1024,
    hashes: np.ndarray | None = None,
    neighbours: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
    compare: Callable[[Iterator[ClusterWork]], Iterable[ClusterFound]] | None = None,
    merge: Callable[[Iterator[BorderWork]], Iterable[BorderMerged]] | None = None,
    describe: Callable[[Iterator[SimilarityWork]], Iterable[np.ndarray]] | None = None,
) -> DuplicateGroups:
    """Near-duplicate groups of the documents with a non-negative label: no chains.

    Parameters
    ----------
    rows_of : callable
        ``rows_of(indices) -> (len(indices), dim)`` embeddings (any float
        dtype, unit rows), e.g. a memory-mapped matrix's ``__getitem__``.
    labels : ndarray of int, shape (N,)
        Cluster of every document; negative = excluded (never grouped).
    threshold : float
        Cosine at or above which two documents are near copies.
    block_size : int
        Rows compared at once (memory: ``block_size x cluster size`` float32).
    hashes : ndarray of uint64, shape (N, 2), optional
        :func:`hash_texts` of the corpus: documents with equal hashes are
        copies whatever their clusters (and compared once, as their first occurrence).
    neighbours : ndarray of int, shape (N,), optional
        Each document's second-nearest cluster (:func:`second_nearest`; -1:
        none). Groups of two clusters with a near pair across that border then
        merge when all their members are near copies of each other.
    progress : callable, optional
        Called with the documents of each cluster once it is done.
    compare : callable, optional
        Answers the clusters' :class:`~clusterclip.dedup.compare.ClusterWork`
        (an iterator) with their :class:`~clusterclip.dedup.compare.ClusterFound`,
        in order, e.g. on an engine (:class:`~clusterclip.dedup.compare.CompareWorker`);
        by default :func:`~clusterclip.dedup.compare.compare_cluster` in this process.
    merge : callable, optional
        Answers the sets of groups linked across borders
        (:class:`~clusterclip.dedup.borders.BorderWork`, an iterator) with their
        :class:`~clusterclip.dedup.borders.BorderMerged` (one per set, or one per
        run of sets, :func:`~clusterclip.dedup.borders.joined`), e.g. on an engine
        (:class:`~clusterclip.dedup.borders.BorderWorker`); by default
        :func:`~clusterclip.dedup.borders.merge_linked` in this process.
    describe : callable, optional
        Answers the runs of grouped documents
        (:class:`~clusterclip.dedup.similarity.SimilarityWork`, an iterator) with
        each document's cosine to its representative (float32 arrays, in order),
        e.g. on an engine (:class:`~clusterclip.dedup.similarity.SimilarityWorker`);
        by default :func:`~clusterclip.dedup.similarity.similarities` in this process.

    Returns
    -------
    DuplicateGroups
        Any two distinct texts of a group have cosine >= ``threshold``
        (complete linkage; the module docstring gives the three steps).

    Notes
    -----
    Deterministic: texts are visited in index order and groups merged in order
    of their representatives, so the groups follow from the embeddings alone,
    not from the cluster order. Pairs whose cosine lies within float32 rounding
    of the threshold may differ between BLAS builds or block sizes.

    Examples
    --------
    Three texts, each at cosine 0.94 to the next but 0.77 apart at the ends,
    are not one chained group: the third starts its own.

    >>> angles = np.radians([0, 20, 40])
    >>> x = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    >>> groups = find_groups(lambda rows: x[rows], np.zeros(3, int), threshold=0.9)
    >>> groups.representative.tolist(), round(float(groups.min_similarity[0]), 3)
    ([0, 0, 2], 0.94)
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    usable = labels >= 0
    first = np.arange(n, dtype=np.int64)  # each document's text's first occurrence
    if hashes is not None:
        copies, firsts = _exact_links(hashes, usable)
        first[copies] = firsts
    texts = usable & (first == np.arange(n))
    representative = np.arange(n, dtype=np.int64)
    lowest = np.ones(n, dtype=np.float32)  # a group's min_similarity, at its representative
    order = np.argsort(np.where(texts, labels, -1), kind="stable")
    order = order[np.count_nonzero(~texts) :]
    clusters = np.split(order, np.flatnonzero(np.diff(labels[order])) + 1) if order.size else []
    works = cluster_works(clusters, labels, texts, neighbours)
    if compare is None:
        found_all = (
            compare_cluster(rows_of, work, threshold=threshold, block_size=block_size)
            for work in works
        )
    else:
        found_all = compare(works)
    pairs = []
    for members, found in zip(clusters, found_all, strict=True):
        if found.group is not None:
            representative[members] = members[found.group]
            lowest[members] = found.low
        if found.pair_a.size:
            pairs.append((found.pair_a, found.pair_b))
        if progress is not None:
            progress(int(members.size))
    if progress is not None and np.count_nonzero(usable & ~texts):
        progress(int(np.count_nonzero(usable & ~texts)))  # copies: they follow their text
    if neighbours is not None:
        _merge_across_borders(rows_of, pairs, representative, lowest, texts, threshold, merge)
    representative = representative[first]
    return _describe(representative, lowest[representative], rows_of, hashes, describe)


def _merge_across_borders(
    rows_of: Callable[[np.ndarray], np.ndarray],
    found: Iterable[tuple[np.ndarray, np.ndarray]],
    representative: np.ndarray,
    lowest: np.ndarray,
    texts: np.ndarray,
    threshold: float,
    merge: Callable[[Iterator[BorderWork]], Iterable[BorderMerged]] | None = None,
) -> None:
    """Merge groups linked across a cluster border when all their members are near (in place).

    Pairs of groups are taken in order of (lower, higher) representative, one
    connected set of linked groups at a time (:mod:`clusterclip.dedup.borders`:
    a set's merges touch no other set); a merge keeps the lower one, so every
    representative stays its group's lowest index.
    """
    works = border_works(found, representative, texts, lowest)
    if merge is None:
        answers: Iterable[BorderMerged] = (
            merge_linked(rows_of, work, threshold=threshold) for work in works
        )
    else:
        answers = merge(iter(works))
    merged = list(answers)
    if not merged:
        return
    heads = np.concatenate([m.heads for m in merged])
    into = np.concatenate([m.into for m in merged])
    lowest[np.concatenate([m.roots for m in merged])] = np.concatenate([m.lowest for m in merged])
    if heads.size:
        order = np.argsort(heads)
        heads, into = heads[order], into[order]
        moved = np.flatnonzero(texts & np.isin(representative, heads))
        representative[moved] = into[np.searchsorted(heads, representative[moved])]


#: The scores held at once by :func:`second_nearest` (rows x centroids float32).
SCORE_BYTES = 2**27


def neighbour_step(n_centroids: int, *, hierarchical: bool, block_size: int = 65536) -> int:
    """Rows :func:`second_nearest` scores at once: fewer with many flat centroids.

    A range of rows that starts at a multiple of it is scored in the same
    blocks whoever scores it, so tasks cut there give the same answers.

    >>> neighbour_step(1024, hierarchical=False), neighbour_step(1024, hierarchical=True)
    (32768, 65536)
    """
    if hierarchical:  # the descent scores a few nodes per row, the flat product every centroid
        return int(block_size)
    return max(1, min(int(block_size), SCORE_BYTES // (4 * max(n_centroids, 1))))


def second_nearest(
    rows_of: Callable[[np.ndarray], np.ndarray],
    labels: np.ndarray,
    centroids: np.ndarray,
    *,
    block_size: int = 65536,
    tree: Tree | None = None,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Each document's second-nearest centroid (its own cluster's excluded); -1 if excluded.

    One pass over the embeddings, at most ``block_size`` rows at a time and
    fewer when there are many centroids (the scores of a block stay within
    :data:`SCORE_BYTES`): the cost of one k-means assignment. With ``tree``
    (hierarchical k-means, leaves = ``centroids``) the two best leaves of a
    beam-2 descent are used instead, so the cost grows with the branching
    factors, not with the number of leaves: the best of them that is not the
    document's own cluster.

    >>> c = np.array([[1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> x = np.array([[1, 0], [0, 1]], dtype=np.float32)
    >>> second_nearest(lambda rows: x[rows], np.array([0, 1]), c).tolist()
    [2, 2]
    """
    labels = np.asarray(labels)
    out = np.full(labels.shape[0], -1, dtype=np.int64)
    centroids = np.asarray(centroids, dtype=np.float32)
    if centroids.shape[0] < 2:
        return out
    step = neighbour_step(centroids.shape[0], hierarchical=tree is not None, block_size=block_size)
    for start in range(0, labels.shape[0], step):
        rows = np.arange(start, min(labels.shape[0], start + step))
        own = labels[rows]
        keep = own >= 0
        if keep.any():
            unit = np.asarray(rows_of(rows[keep]), dtype=np.float32)
            out[rows[keep]] = (
                _flat_second(unit, own[keep], centroids)
                if tree is None
                else _tree_second(unit, own[keep], tree)
            )
        if progress is not None:
            progress(int(rows.size))
    return out


def _flat_second(unit: np.ndarray, own: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    scores = unit @ centroids.T
    scores[np.arange(scores.shape[0]), own] = -np.inf
    return scores.argmax(axis=1)


def _tree_second(unit: np.ndarray, own: np.ndarray, tree: Tree) -> np.ndarray:
    """The better of the descent's two best leaves that is not ``own`` (-1: none reached)."""
    leaves, _ = tree.nearest(unit, beam=2)
    leaves = np.pad(leaves, ((0, 0), (0, 2 - leaves.shape[1])), constant_values=-1)
    return np.where(leaves[:, 0] != own, leaves[:, 0], leaves[:, 1])


def _describe(
    representative: np.ndarray,
    min_similarity: np.ndarray,
    rows_of: Callable[[np.ndarray], np.ndarray],
    hashes: np.ndarray | None,
    describe: Callable[[Iterator[SimilarityWork]], Iterable[np.ndarray]] | None = None,
) -> DuplicateGroups:
    """The groups' table: each grouped document's cosine to its representative (runs of
    :mod:`~clusterclip.dedup.similarity`, answered by ``describe`` or in this process) and
    whether it is an exact copy of it (the hashes, vectorised)."""
    n = representative.size
    similarity = np.ones(n, dtype=np.float32)
    exact = np.zeros(n, dtype=bool)
    grouped = np.flatnonzero(representative != np.arange(n))
    works = similarity_works(representative, grouped=grouped)
    if describe is None:
        for work in works:
            similarity[work.docs] = similarities(rows_of, work)
    else:
        runs = list(works)  # the answers come back in order, one per run
        for work, values in zip(runs, describe(iter(runs)), strict=True):
            similarity[work.docs] = values
    if hashes is not None and grouped.size:
        own, theirs = hashes[grouped], hashes[representative[grouped]]
        exact[grouped] = (own == theirs).all(axis=1) & own.any(axis=1)
    return DuplicateGroups(representative, similarity, exact, min_similarity.astype(np.float32))
