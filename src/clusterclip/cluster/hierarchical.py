"""Hierarchical spherical k-means, fitted top-down, with coarse-to-fine assignment.

With ``10**5`` leaves, exact assignment compares every document with every
centroid. A tree of centroids makes the cost per document grow with the
branching factors instead: the document goes to its nearest top centroid,
then to the nearest among that node's children, and so on down to a leaf.

Fit (top-down)
    Draw a seeded fit sample (at most ``max_points_per_centroid * n_clusters``
    rows, as :class:`~clusterclip.cluster.KMeans` does). Level 0 is a
    :class:`~clusterclip.cluster.KMeans` with ``levels[0]`` clusters on it. Each
    node of a level is then split by a k-means on its own members of the fit
    sample into a number of children proportional to its member count
    (:func:`children_counts`), down to the ``n_clusters`` leaves. Every level
    has exactly the number of nodes asked for.
Ids
    Global per level (``0..k_l - 1``); the children of a node are contiguous
    and the blocks come in parent order, so ``parents_[l]`` is non-decreasing.
Assignment (coarse-to-fine, :meth:`Tree.assign`)
    Documents are grouped by their current node and each group is scored
    against that node's children in one matrix product (fp32 numpy: children
    blocks are small). ``beam`` keeps the best ``b`` nodes per level; with
    ``beam`` at least the number of nodes of every level above the leaves, every
    leaf is scored and the result is the exact nearest leaf.

The ssl-data-curation pipeline (Vo et al. 2024) builds its hierarchy
bottom-up: a k-means over the documents, then k-means over the previous
level's centroids. Its fit cost grows with the number of leaves at every
level; this module fits top-down so that fitting and assigning cost grow with
the branching factors. The bottom-up variant is not offered.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np

from clusterclip.cluster.arrays import (
    PURPOSE_NODE,
    PURPOSE_SAMPLE,
    check_int,
    check_matrix,
    gather_rows,
    normalise_rows,
    random_stream,
)
from clusterclip.cluster.kmeans import KMeans
from clusterclip.errors import ClusterClipError, invalid, spell
from clusterclip.options import check_seed
from clusterclip.threads import one_thread
from clusterclip.tree import Tree as BaseTree

__all__ = [
    "HierarchicalKMeans",
    "Tree",
    "check_levels",
    "children_counts",
    "dissolve_small_leaves",
]


def check_levels(levels: Any, n_clusters: int) -> tuple[int, ...]:
    """Validate the node counts of the levels above the leaves; return them as a tuple.

    >>> check_levels([10, 100], 1000)
    (10, 100)
    >>> check_levels((10, 5), 100)
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `levels` must be increasing ints in [1, 100) (coarse to fine, above the 100 leaves); got (10, 5). Pass e.g. levels=(10,), or levels=() for flat k-means.
    """
    rule = f"increasing ints in [1, {n_clusters}) (coarse to fine, above the {n_clusters} leaves)"
    example = max(1, int(round(n_clusters**0.5)))
    if spell("levels") == "levels":
        fix = f"Pass e.g. levels=({example},), or levels=() for flat k-means."
    else:  # under the CLI
        fix = f"Pass e.g. {spell('levels')} {example}, or leave it out for flat k-means."
    if not isinstance(levels, (list, tuple)) or not all(
        isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in levels
    ):
        raise invalid("levels", rule, levels, fix)
    values = tuple(int(k) for k in levels)
    chain = [*values, int(n_clusters)]
    if any(k < 1 for k in values) or any(a >= b for a, b in itertools.pairwise(chain)):
        raise invalid("levels", rule, values, fix)
    return values


def children_counts(sizes: np.ndarray, total: int) -> np.ndarray:
    """Children per parent, proportional to ``sizes`` and summing to exactly ``total``.

    Each parent gets at least 1 and at most ``max(size, 1)`` children (a
    k-means cannot make more clusters than it has rows; a parent without
    members keeps one child, a copy of itself). The quota ``total * size /
    sum(sizes)`` is rounded down and clipped to those bounds; the children
    still missing go to the parents with the largest remainders (ties: the
    lower parent id); surplus ones (made by the floor of 1) are taken from the
    smallest remainders (ties: the largest parent, then the lower id).
    Deterministic.

    Raises when ``total`` is outside ``[len(sizes), sum(max(sizes, 1))]``.

    >>> children_counts(np.array([50, 30, 20]), 10).tolist()
    [5, 3, 2]
    >>> children_counts(np.array([98, 1, 1]), 10).tolist()
    [8, 1, 1]
    >>> children_counts(np.array([2, 0, 9]), 11).tolist()
    [2, 1, 8]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    cap = np.maximum(sizes, 1)
    if not len(sizes) <= total <= int(cap.sum()):
        raise ClusterClipError(
            f"cannot split {len(sizes)} nodes holding {int(sizes.sum())} fit rows into {total} "
            "children (each node needs 1 to max(members, 1)). Lower n_clusters or the levels, or "
            "fit on more rows (max_points_per_centroid)."
        )
    quota = total * sizes / max(int(sizes.sum()), 1)
    counts = np.clip(np.floor(quota).astype(np.int64), 1, cap)
    while (missing := total - int(counts.sum())) != 0:
        remainder = quota - counts
        if missing > 0:
            eligible = np.flatnonzero(counts < cap)
            ranked = eligible[np.argsort(-remainder[eligible], kind="stable")]
            counts[ranked[:missing]] += 1
        else:
            eligible = np.flatnonzero(counts > 1)
            ranked = eligible[np.lexsort((-quota[eligible], remainder[eligible]))]
            counts[ranked[:-missing]] -= 1
    return counts


class Tree(BaseTree):
    """:class:`clusterclip.tree.Tree` with :meth:`assign` for raw embedding blocks.

    Examples
    --------
    >>> C = np.eye(2, dtype=np.float32)
    >>> tree = Tree((C, C), (np.array([0, 1], dtype=np.int32),))
    >>> tree.assign(np.array([[3.0, 1.0], [1.0, 4.0], [0.0, 0.0]]))[0].tolist()  # zero row: -1
    [0, 1, -1]
    """

    def assign(
        self, block: np.ndarray, *, beam: int = 1, offset: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Leaf and cosine of every row of ``block`` (rows normalised here), coarse to fine.

        Like :func:`clusterclip.cluster.assign`: all-zero rows get label ``-1``
        and score 0; ``offset`` numbers the rows in error messages. Returns
        ``labels`` int32 and ``scores`` float32 (fp32 cosine to the leaf).
        Deterministic, and independent of how rows are cut into blocks up to
        the last bits of the fp32 products.
        """
        block = np.asarray(block)
        n, dim = check_matrix(block, "block")
        if dim != self.centroids[0].shape[1]:
            raise invalid(
                "block",
                f"rows of dimension {self.centroids[0].shape[1]} (the centroids')",
                f"shape {block.shape}",
                "Assign embeddings from the model the tree was fitted on.",
            )
        unit = normalise_rows(block, np.arange(offset, offset + n), allow_zero=True)
        zero = ~unit.any(axis=1)
        labels = np.full(n, -1, dtype=np.int32)
        scores = np.zeros(n, dtype=np.float32)
        if (~zero).any():
            found, cosines = self.descend(unit[~zero], beam=beam)
            labels[~zero], scores[~zero] = found, cosines
        return labels, scores


def _split_backend(backend: str) -> str:
    """The backend of the node splits: numpy where level 0 ran on torch.

    A split is a small k-means whose product has a new shape at every node, and
    torch's CPU kernels (oneDNN) keep a compiled primitive per shape: over
    thousands of nodes that cache held 1.5 GB at 10^5 leaves. numpy keeps none.
    """
    return "numpy" if backend.startswith("torch") else backend


def _mean_cosine(unit: np.ndarray, centroids: np.ndarray, labels: np.ndarray, batch: int) -> float:
    """Mean cosine of unit rows to their centroid, gathering the centroids a batch at a time.

    ``centroids[labels]`` in one piece would be a second copy of the fit sample.

    >>> _mean_cosine(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), np.array([0, 0]), 1)
    0.5
    """
    cosines = np.empty(len(unit), dtype=np.float32)
    for start in range(0, len(unit), batch):
        stop = start + batch
        cosines[start:stop] = np.einsum("ij,ij->i", unit[start:stop], centroids[labels[start:stop]])
    return float(np.mean(cosines, dtype=np.float64))


def _node_seed(seed: int, level: int, parent: int) -> int:
    key = np.random.SeedSequence(seed, spawn_key=(PURPOSE_NODE, level, parent))
    return int(key.generate_state(1, np.uint64)[0]) & ((1 << 63) - 1)


def _mean_direction(rows: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    total = rows.sum(axis=0, dtype=np.float64) if len(rows) else np.zeros(len(fallback))
    norm = float(np.linalg.norm(total))
    return fallback if norm == 0 else (total / norm).astype(np.float32)


class HierarchicalKMeans:
    """Spherical k-means with levels, fitted top-down, assigned coarse-to-fine.

    Parameters
    ----------
    n_clusters : int
        Leaves (the finest level).
    levels : tuple of int
        Node counts of the levels above the leaves, coarse to fine, increasing
        and below ``n_clusters``; ``()`` is flat k-means (one level).
    seed : int
        Seeds the fit sample, level 0's k-means (as ``KMeans(levels[0], seed=seed)``)
        and each node's split (``SeedSequence(seed, spawn_key=(3, level, node))``).
        Same seed + data + backend on the same machine -> the same tree.
    n_iter, max_points_per_centroid, init, backend, batch_size, min_cluster_size
        As :class:`~clusterclip.cluster.KMeans`. The fit sample holds at most
        ``max_points_per_centroid * n_clusters`` rows; each node's k-means
        subsamples its members the same way. ``backend`` runs level 0 (``auto``
        measured there) and every split, except that splits run on numpy where
        level 0 ran on torch (``split_backend_``); ``min_cluster_size`` only
        seeds level 0.
    beam : int
        Nodes kept per level by :meth:`predict` (1 = greedy descent). The
        tolerance knob: larger is closer to exact assignment and costs ``beam``
        times more.
    verbose : bool
        Progress bar over the node splits.

    Attributes
    ----------
    centroids_ : numpy.ndarray of float32, shape (n_clusters, d)
        Leaf centroids.
    level_centroids_ : list of numpy.ndarray
        Centroids per level, coarse to fine (the last is ``centroids_``).
    parents_ : list of numpy.ndarray of int32
        For each level below the top, the parent id of each of its nodes.
    labels_ : list of numpy.ndarray of int32
        Per level, the node of each fit-sample row (``sample_indices_``) that the
        splits were fitted on: a greedy descent with the fit's backend.
    tree_ : Tree
        The same arrays as a :class:`Tree` (``tree_.assign`` is :meth:`predict` on a block).
    sample_indices_, sample_size_, backend_, backend_choice_, fit_seconds_
        As :class:`~clusterclip.cluster.KMeans`.
    objective_ : float
        Mean cosine of the fit-sample rows to their leaf.
    level_stats_ : list of dict
        Per level: ``n_clusters``, ``branching`` (min/median/max children per
        parent), ``seconds``.

    Examples
    --------
    >>> from clusterclip.cluster.synthetic import vmf_mixture
    >>> X, _ = vmf_mixture(2000, 16, 20, seed=0)
    >>> model = HierarchicalKMeans(40, levels=(4,), seed=0, backend="numpy").fit(X)
    >>> [len(c) for c in model.level_centroids_]
    [4, 40]
    >>> labels = model.predict(X)
    >>> bool((model.tree_.ancestors(labels)[:, 0] == model.parents_[0][labels]).all())
    True
    """

    def __init__(
        self,
        n_clusters: int,
        *,
        levels: tuple[int, ...] = (),
        seed: int,
        n_iter: int = 20,
        max_points_per_centroid: int = 256,
        init: str = "k-means++",
        backend: str = "auto",
        batch_size: int = 65536,
        min_cluster_size: int = 1,
        beam: int = 1,
        verbose: bool = False,
    ) -> None:
        self.n_clusters = n_clusters
        self.levels = levels
        self.seed = seed
        self.n_iter = n_iter
        self.max_points_per_centroid = max_points_per_centroid
        self.init = init
        self.backend = backend
        self.batch_size = batch_size
        self.min_cluster_size = min_cluster_size
        self.beam = beam
        self.verbose = verbose

    def _validate(self) -> tuple[int, ...]:
        check_int("n_clusters", self.n_clusters, 1, "Pass n_clusters=2 or more.")
        check_seed(self.seed)
        check_int("beam", self.beam, 1, "Pass beam=1 (greedy) or more.")
        levels = check_levels(self.levels, int(self.n_clusters))
        self._kmeans(1, self.seed, self.backend)._validate()  # the shared parameters
        return levels

    def _kmeans(self, k: int, seed: int, backend: str, min_cluster_size: int = 1) -> KMeans:
        return KMeans(
            k, seed=seed, n_iter=self.n_iter, max_points_per_centroid=self.max_points_per_centroid,
            init=self.init, backend=backend, batch_size=self.batch_size,
            min_cluster_size=min_cluster_size,
        )  # fmt: skip

    def fit(self, X: Any, y: None = None) -> HierarchicalKMeans:
        """Fit the tree on a seeded sample of the rows of ``X`` (see the module docstring)."""
        from clusterclip.progress import progress_bar

        levels = self._validate()
        n, _ = check_matrix(X)
        sizes = [*levels, int(self.n_clusters)]
        if n < sizes[-1]:
            raise invalid(
                "n_clusters",
                f"an int in [1, {n}] (no more leaves than usable rows)",
                sizes[-1],
                f"Pass n_clusters={n} or fewer, or add documents.",
            )
        started = time.perf_counter()
        sample_size = min(n, int(self.max_points_per_centroid) * sizes[-1])
        if sample_size < n:
            rows = np.sort(
                random_stream(self.seed, PURPOSE_SAMPLE).choice(n, sample_size, replace=False)
            )
        else:
            rows = np.arange(n, dtype=np.int64)
        sample = gather_rows(X, rows, int(self.batch_size))
        top = self._kmeans(sizes[0], self.seed, self.backend, int(self.min_cluster_size))
        top.fit(sample)
        backend = top.backend_
        split_backend = _split_backend(backend)
        labels = [self._members(top, sample)]
        centroids, parents = [top.cluster_centers_], []
        stats = [self._level_stat(sizes[0], np.array([sizes[0]]), time.perf_counter() - started)]
        splits = sum(sizes[:-1])
        bar = progress_bar(total=splits, desc="split", unit="node") if self.verbose else None
        for level in range(1, len(sizes)):
            tick = time.perf_counter()
            members = np.bincount(labels[-1], minlength=sizes[level - 1])
            counts = children_counts(members, sizes[level])
            with one_thread():
                level_centroids, level_labels = self._split_level(
                    sample, labels[-1], centroids[-1], counts, level, split_backend, bar
                )
            centroids.append(level_centroids)
            parents.append(np.repeat(np.arange(len(counts), dtype=np.int32), counts))
            labels.append(level_labels)
            stats.append(self._level_stat(sizes[level], counts, time.perf_counter() - tick))
        if bar is not None:
            bar.close()
        leaf = centroids[-1]
        self.level_centroids_ = centroids
        self.centroids_ = leaf
        self.parents_ = parents
        self.labels_ = labels
        self.tree_ = Tree(tuple(centroids), tuple(parents))
        self.sample_indices_ = rows
        self.sample_size_ = int(sample_size)
        self.objective_ = _mean_cosine(sample, leaf, labels[-1], int(self.batch_size))
        self.backend_ = backend
        self.split_backend_ = split_backend
        self.backend_choice_ = top.backend_choice_
        self.level_stats_ = stats
        self.fit_seconds_ = round(time.perf_counter() - started, 4)
        return self

    @staticmethod
    def _members(model: KMeans, rows: np.ndarray) -> np.ndarray:
        """The fitted k-means' cluster of every row (its labels_ when it fitted on all of them)."""
        if model.sample_size_ == len(rows):
            return model.labels_.astype(np.int32)
        return model.predict(rows).astype(np.int32)

    def _split_level(
        self,
        sample: np.ndarray,
        parent_labels: np.ndarray,
        parent_centroids: np.ndarray,
        counts: np.ndarray,
        level: int,
        backend: str,
        bar: Any,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Split every parent into ``counts[p]`` children by a k-means on its members."""
        first_child = np.concatenate([[0], np.cumsum(counts)])
        centroids = np.empty((int(first_child[-1]), sample.shape[1]), dtype=np.float32)
        labels = np.empty(len(sample), dtype=np.int32)
        order = np.argsort(parent_labels, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(parent_labels, minlength=len(counts)))])
        for parent, k in enumerate(counts.tolist()):
            members = order[bounds[parent] : bounds[parent + 1]]
            low = int(first_child[parent])
            if k == 1:  # nothing to split: the child is the members' mean direction
                centroids[low] = _mean_direction(sample[members], parent_centroids[parent])
                labels[members] = low
            else:
                rows = sample[members]
                model = self._kmeans(k, _node_seed(int(self.seed), level, parent), backend)
                model.fit(rows)
                centroids[low : low + k] = model.cluster_centers_
                labels[members] = low + self._members(model, rows)
            if bar is not None:
                bar.update(1)
        return centroids, labels

    @staticmethod
    def _level_stat(k: int, counts: np.ndarray, seconds: float) -> dict[str, Any]:
        return {
            "n_clusters": int(k),
            "branching": {"min": int(counts.min()), "median": float(np.median(counts)),
                          "max": int(counts.max())},
            "seconds": round(seconds, 3),
        }  # fmt: skip

    def _check_fitted(self) -> None:
        if not hasattr(self, "tree_"):
            raise ClusterClipError("this HierarchicalKMeans is not fitted yet. Call fit(X) first.")

    def assign(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Leaf (int32) and cosine (float32) of every row of ``X``, coarse to fine, streamed.

        All-zero rows get ``-1`` and 0. The levels above follow from the leaf:
        ``tree_.ancestors(labels)``.
        """
        self._check_fitted()
        n, _ = check_matrix(X)
        step = check_int("batch_size", self.batch_size, 1, "Pass e.g. batch_size=65536.")
        labels = np.empty(n, dtype=np.int32)
        scores = np.empty(n, dtype=np.float32)
        for start in range(0, n, step):
            stop = min(start + step, n)
            labels[start:stop], scores[start:stop] = self.tree_.assign(
                X[start:stop], beam=int(self.beam), offset=start
            )
        return labels, scores

    def predict(self, X: Any) -> np.ndarray:
        """Leaf of every row of ``X`` (int32), coarse to fine with ``beam``; -1 for zero rows."""
        return self.assign(X)[0]

    def fit_predict(self, X: Any, y: None = None) -> np.ndarray:
        """``fit(X)`` then ``predict(X)``."""
        return self.fit(X).predict(X)


def dissolve_small_leaves(
    labels: np.ndarray,
    scores: np.ndarray,
    tree: Tree,
    rows: Any,
    *,
    min_size: int,
    beam: int = 1,
) -> tuple[np.ndarray, np.ndarray, Tree, dict[str, Any]]:
    """:func:`~clusterclip.cluster.small.dissolve_small_clusters` for a tree.

    Leaves with fewer than ``min_size`` documents are removed (the others are
    renumbered in order, so children stay contiguous) and their documents are
    assigned coarse to fine in the pruned tree: where the descent would send
    them had those leaves not existed. Nodes above keep their ids (a node
    whose leaves were all removed stays, empty). The record has the format of
    the flat function's.
    """
    labels = np.asarray(labels, dtype=np.int32)
    scores = np.asarray(scores, dtype=np.float32)
    n_leaves = len(tree.centroids[-1])
    sizes = np.bincount(labels[labels >= 0], minlength=n_leaves)
    small = sizes < int(min_size)
    record: dict[str, Any] = {
        "min_cluster_size": int(min_size),
        "sizes_before": [int(s) for s in sizes],
        "kept": list(range(n_leaves)),
        "dissolved": [],
    }
    if not small.any() or small.all():
        return labels, scores, tree, record
    record["kept"] = [int(k) for k in np.flatnonzero(~small)]
    new_id = np.full(n_leaves, -1, dtype=np.int32)
    new_id[~small] = np.arange(int((~small).sum()), dtype=np.int32)
    pruned = tree.without_leaves(small)
    new_labels = np.where(labels >= 0, new_id[np.maximum(labels, 0)], -1).astype(np.int32)
    new_scores = scores.copy()
    moved = np.flatnonzero((labels >= 0) & small[np.maximum(labels, 0)])
    target, cosines = pruned.assign(np.asarray(rows(moved), dtype=np.float32), beam=beam)
    new_labels[moved], new_scores[moved] = target, cosines
    for leaf in np.flatnonzero(small & (sizes > 0)):
        members = moved[labels[moved] == leaf]
        record["dissolved"].append(
            {
                "cluster": int(leaf),
                "size": int(sizes[leaf]),
                "members": [int(i) for i in members[:20]],
                "moved_to": [int(t) for t in new_labels[members[:20]]],
            }
        )
    record["empty_removed"] = int((small & (sizes == 0)).sum())
    return new_labels, new_scores, pruned, record
