"""Near-duplicate groups: exact copies by text hash, near copies by cosine inside a cluster.

SemDeDup-style (Abbas et al., 2023): two documents of the same cluster whose
embeddings have a cosine of at least ``threshold`` are near-duplicates, and so
are a document and a member of its second-nearest cluster (:func:`second_nearest`,
when the caller passes ``neighbours``: near copies that k-means put on either
side of a cluster border, measured in docs/clustering.md); exact
copies (same normalised text, :func:`normalise_text`) are linked wherever they
are. A *group* is a connected component of those links (union-find), so
near-duplicate chains join one group. Its **representative** is its lowest
document index: the first occurrence in the corpus, a choice that does not
depend on floating-point ties of the embeddings (the nearest document to the
group's mean would); the group is drawn in its representative's cluster.

Memory: pairs are found in row blocks of one cluster at a time, ``block_size x
(cluster size)`` float32 similarities plus the cluster's rows, never an ``N x N``
matrix; the union-find is two int64 arrays of length N.

>>> x = np.array([[1, 0], [1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
>>> groups = find_groups(lambda rows: x[rows], np.array([0, 0, 0, 0]), threshold=0.99)
>>> groups.representative.tolist()
[0, 0, 2, 3]
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from clusterclip.tree import Tree

__all__ = [
    "DuplicateGroups",
    "connect",
    "find_groups",
    "hash_texts",
    "near_pairs",
    "normalise_text",
    "second_nearest",
    "star_links",
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


def star_links(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Links with the components of the pairs ``(a[i], b[i])``: each node to its lowest.

    At most one link per node, whatever the number of pairs, so collected
    links stay within the documents they touch.

    >>> [x.tolist() for x in star_links(np.array([7, 7, 9]), np.array([3, 9, 3]))]
    [[7, 9], [3, 3]]
    """
    nodes, inverse = np.unique(np.concatenate((a, b)), return_inverse=True)
    local = np.arange(nodes.size, dtype=np.int64)
    connect(local, inverse[: a.size], inverse[a.size :])
    linked = np.flatnonzero(local != np.arange(nodes.size))
    return nodes[linked], nodes[local[linked]]


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
    """

    representative: np.ndarray
    similarity: np.ndarray
    exact: np.ndarray

    def summary(self, *, top: int = 10) -> dict[str, object]:
        """Groups of two or more, their documents, and the largest ``top`` group sizes.

        >>> DuplicateGroups(np.array([0, 0, 2]), np.ones(3, np.float32),
        ...                 np.array([False, True, False])).summary()["groups"]
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
        return {
            "groups": int(multi.size),
            "documents_in_groups": int(in_groups),
            "duplicates": int(in_groups - multi.size),
            "exact_groups": exact_groups,
            "near_groups": int(multi.size - exact_groups),
            "exact_copies": int(np.count_nonzero(self.exact)),
            "largest": [{"representative": int(r), "size": int(sizes[r])} for r in largest],
        }


def find_groups(
    rows_of: Callable[[np.ndarray], np.ndarray],
    labels: np.ndarray,
    *,
    threshold: float,
    block_size: int = 1024,
    hashes: np.ndarray | None = None,
    neighbours: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
) -> DuplicateGroups:
    """Near-duplicate groups of the documents with a non-negative label.

    Parameters
    ----------
    rows_of : callable
        ``rows_of(indices) -> (len(indices), dim)`` embeddings (any float
        dtype, unit rows), e.g. a memory-mapped matrix's ``__getitem__``.
    labels : ndarray of int, shape (N,)
        Cluster of every document; negative = excluded (never grouped).
    threshold : float
        Cosine at or above which two documents of one cluster are linked.
    block_size : int
        Rows compared at once (memory: ``block_size x cluster size`` float32).
    hashes : ndarray of uint64, shape (N, 2), optional
        :func:`hash_texts` of the corpus: documents with equal hashes are
        linked whatever their clusters.
    neighbours : ndarray of int, shape (N,), optional
        Each document's second-nearest cluster (:func:`second_nearest`; -1:
        none). Each document is then also compared with the members of that
        cluster, so that near copies split by a cluster border still join one
        group (at most twice the comparisons).
    progress : callable, optional
        Called with the documents of each cluster once it is done.

    Returns
    -------
    DuplicateGroups

    Notes
    -----
    Deterministic: the links do not depend on the block size or the cluster
    order (a pair is a pair), and components and representatives follow from
    the links alone. Pairs whose cosine lies within float32 rounding of the
    threshold may differ between BLAS builds.
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    usable = labels >= 0
    links_a, links_b = [], []  # star links: document -> its group's lowest member
    if hashes is not None:
        copies, firsts = _exact_links(hashes, usable)
        links_a.append(copies)
        links_b.append(firsts)
    order = np.argsort(np.where(usable, labels, -1), kind="stable")
    order = order[np.count_nonzero(~usable) :]
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    for members in np.split(order, cuts) if order.size else []:
        if members.size > 1:  # a union-find over the cluster alone: compressions cost its size
            matrix = np.asarray(rows_of(members), dtype=np.float32)
            local = np.arange(members.size, dtype=np.int64)
            for i, j in near_pairs(matrix, threshold, block_size):
                connect(local, i, j)
            linked = np.flatnonzero(local != np.arange(members.size))
            links_a.append(members[linked])
            links_b.append(members[local[linked]])
        if progress is not None:
            progress(int(members.size))
    if neighbours is not None:
        for a, b in _border_pairs(rows_of, labels, order, cuts, neighbours, threshold, block_size):
            a, b = star_links(a, b)  # a heavily duplicated corpus finds many pairs per block
            links_a.append(a)
            links_b.append(b)
    parent = np.arange(n, dtype=np.int64)
    if links_a:
        connect(parent, np.concatenate(links_a), np.concatenate(links_b))
    return _describe(parent, rows_of, hashes)


#: The scores held at once by :func:`second_nearest` (rows x centroids float32).
SCORE_BYTES = 2**27


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
    step = int(block_size)
    if tree is None:  # the descent scores a few nodes per row, the flat product every centroid
        step = max(1, min(step, SCORE_BYTES // (4 * centroids.shape[0])))
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


def _border_pairs(
    rows_of: Callable[[np.ndarray], np.ndarray],
    labels: np.ndarray,
    order: np.ndarray,
    cuts: np.ndarray,
    neighbours: np.ndarray,
    threshold: float,
    block_size: int,
) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """Near pairs (document, member of its second-nearest cluster), cluster by cluster.

    Visitors of cluster ``k`` (documents whose second-nearest cluster is ``k``)
    are compared with ``k``'s members, ``block_size`` visitors at a time.
    """
    usable = labels >= 0
    visitors = np.flatnonzero(usable & (neighbours >= 0))
    visitors = visitors[np.argsort(neighbours[visitors], kind="stable")]
    bounds = np.searchsorted(neighbours[visitors], np.arange(int(labels.max(initial=-1)) + 2))
    for members in np.split(order, cuts) if order.size else []:
        k = int(labels[members[0]])
        guests = visitors[bounds[k] : bounds[k + 1]]
        if not guests.size:
            continue
        matrix = np.asarray(rows_of(members), dtype=np.float32)
        for start in range(0, guests.size, block_size):
            block = guests[start : start + block_size]
            scores = np.asarray(rows_of(block), dtype=np.float32) @ matrix.T
            rows, cols = np.nonzero(scores >= threshold)
            if rows.size:
                yield block[rows], members[cols]


def _describe(
    representative: np.ndarray,
    rows_of: Callable[[np.ndarray], np.ndarray],
    hashes: np.ndarray | None,
    chunk: int = 65536,
) -> DuplicateGroups:
    n = representative.size
    similarity = np.ones(n, dtype=np.float32)
    exact = np.zeros(n, dtype=bool)
    grouped = np.flatnonzero(representative != np.arange(n))
    for start in range(0, grouped.size, chunk):
        docs = grouped[start : start + chunk]
        reps = representative[docs]
        own = np.asarray(rows_of(docs), dtype=np.float32)
        theirs = np.asarray(rows_of(reps), dtype=np.float32)
        similarity[docs] = np.einsum("ij,ij->i", own, theirs)
        if hashes is not None:
            exact[docs] = (hashes[docs] == hashes[reps]).all(axis=1) & hashes[docs].any(axis=1)
    return DuplicateGroups(representative, similarity, exact)
