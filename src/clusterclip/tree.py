"""A fitted hierarchy of unit centroids and its coarse-to-fine descent.

Plain arrays and numpy only, so that every stage can use a tree without
importing another stage: the cluster stage fits it
(:class:`clusterclip.cluster.HierarchicalKMeans`, whose ``tree_`` adds
``assign`` for raw embeddings) and the dedup stage descends it for each
document's second-nearest leaf (:meth:`clusterclip.io.WorkDir.cluster_tree`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterclip.threads import one_thread

__all__ = ["Tree"]


def _best(scores: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns of the ``width`` highest scores per row, best first, and those scores."""
    if width == 1:
        column = scores.argmax(axis=1)[:, None]
    else:
        column = np.argsort(-scores, axis=1, kind="stable")[:, :width]
    return column, np.take_along_axis(scores, column, axis=1)


@dataclass(frozen=True)
class Tree:
    """A fitted hierarchy of unit centroids (plain arrays: picklable, shipped to workers).

    Attributes
    ----------
    centroids : tuple of numpy.ndarray of float32
        Level ``l``'s centroids ``(k_l, d)``, coarse to fine; the last level are the leaves.
    parents : tuple of numpy.ndarray of int32
        ``parents[l][i]`` is the level-``l`` parent of node ``i`` of level ``l + 1``
        (non-decreasing: children are contiguous). One array fewer than ``centroids``.

    Examples
    --------
    >>> C0 = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    >>> C1 = np.array([[1.0, 0.1], [1.0, -0.1], [0.1, 1.0]], dtype=np.float32)
    >>> C1 /= np.linalg.norm(C1, axis=1, keepdims=True)
    >>> tree = Tree((C0, C1), (np.array([0, 0, 1], dtype=np.int32),))
    >>> unit = np.array([[0.894, -0.447], [0.196, 0.981]], dtype=np.float32)
    >>> labels, scores = tree.descend(unit)
    >>> labels.tolist(), tree.ancestors(labels).tolist()
    ([1, 2], [[0], [1]])
    """

    centroids: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]

    @property
    def n_levels(self) -> int:
        """Levels, the leaves included."""
        return len(self.centroids)

    def offsets(self, level: int) -> np.ndarray:
        """Children of level-``level`` node ``p`` are ``offsets[p]:offsets[p + 1]`` one level down."""
        n_parents = len(self.centroids[level])
        return np.concatenate(
            [[0], np.cumsum(np.bincount(self.parents[level], minlength=n_parents))]
        ).astype(np.int64)

    def _alive(self) -> list[np.ndarray]:
        """Per level, nodes with at least one leaf below (all of them unless leaves were removed)."""
        alive = [np.ones(len(self.centroids[-1]), dtype=bool)]
        for level in range(self.n_levels - 2, -1, -1):
            below = self.parents[level][alive[0]]
            alive.insert(0, np.bincount(below, minlength=len(self.centroids[level])) > 0)
        return alive

    def ancestors(self, leaves: np.ndarray) -> np.ndarray:
        """int32 ``(n, n_levels - 1)``: each leaf's node on every level above it, coarse to fine.

        ``-1`` leaves (excluded documents) get ``-1`` on every level.
        """
        leaves = np.asarray(leaves)
        out = np.full((len(leaves), self.n_levels - 1), -1, dtype=np.int32)
        kept = leaves >= 0
        node = leaves[kept].astype(np.int64)
        for level in range(self.n_levels - 2, -1, -1):
            node = self.parents[level][node].astype(np.int64)
            out[kept, level] = node
        return out

    def descend(self, unit: np.ndarray, *, beam: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Coarse-to-fine nearest leaf of unit rows: ``(labels int64, fp32 cosines)``.

        Keeps the ``beam`` best nodes per level; the cost per row is about
        ``beam * sum(branching factors)`` products of length ``d``. Rows are
        grouped by node: one matrix product per (node, beam slot). With
        ``beam`` at least the largest level above the leaves, every leaf is
        scored and the result is the exact nearest leaf. Nodes left without
        leaves (:meth:`without_leaves`) are skipped.
        """
        leaves, scores = self.nearest(unit, beam=beam)
        return leaves[:, 0], scores[:, 0]

    def nearest(self, unit: np.ndarray, *, beam: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The ``beam`` best leaves of each unit row found by the descent, best first.

        ``(leaves int64 (n, width), fp32 cosines (n, width))`` with ``width``
        at most ``beam``; ``-1`` and ``-inf`` where fewer leaves were reached.
        Column 0 is :meth:`descend`'s leaf. With ``beam=2`` column 1 is a cheap
        second-nearest leaf (exact when the beam covers every level).

        >>> C0 = np.eye(2, dtype=np.float32)
        >>> C1 = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
        >>> tree = Tree((C0, C1), (np.array([0, 0, 1], dtype=np.int32),))
        >>> tree.nearest(np.array([[0.6, 0.8]], dtype=np.float32), beam=2)[0].tolist()
        [[1, 2]]
        """
        with one_thread():
            return self._descend(np.ascontiguousarray(unit, dtype=np.float32), beam)

    def _descend(self, unit: np.ndarray, beam: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(unit)
        alive = self._alive()
        top = unit @ self.centroids[0].T
        top[:, ~alive[0]] = -np.inf
        nodes, scores = _best(top, min(beam, int(alive[0].sum())))
        for level in range(1, self.n_levels):
            offsets = self.offsets(level - 1)
            centroids, live = self.centroids[level], alive[level]
            width = min(beam, int(np.diff(offsets).max()))
            next_nodes = np.full((n, nodes.shape[1], width), -1, dtype=np.int64)
            next_scores = np.full((n, nodes.shape[1], width), -np.inf, dtype=np.float32)
            for slot in range(nodes.shape[1]):
                column = np.where(np.isfinite(scores[:, slot]), nodes[:, slot], -1)
                order = np.argsort(column, kind="stable")
                groups, starts = np.unique(column[order], return_index=True)
                ends = np.append(starts[1:], n)
                for parent, start, end in zip(groups, starts, ends, strict=True):
                    if parent < 0:  # no candidate in this slot
                        continue
                    low, high = offsets[parent], offsets[parent + 1]
                    if high == low:
                        continue
                    rows = order[start:end]
                    block = unit[rows] @ centroids[low:high].T
                    block[:, ~live[low:high]] = -np.inf
                    best, best_scores = _best(block, min(width, high - low))
                    next_nodes[rows, slot, : best.shape[1]] = best + low
                    next_scores[rows, slot, : best.shape[1]] = best_scores
            flat_nodes = next_nodes.reshape(n, -1)
            flat_scores = next_scores.reshape(n, -1)
            keep = min(beam, flat_nodes.shape[1])
            picked, scores = _best(flat_scores, keep)
            nodes = np.take_along_axis(flat_nodes, picked, axis=1)
        leaves = np.where(np.isfinite(scores), nodes, -1)
        return leaves, scores.astype(np.float32)

    def without_leaves(self, drop: np.ndarray) -> Tree:
        """The tree with the leaves ``drop`` (bool mask) removed and the rest renumbered in order.

        Nodes above keep their ids, even those left without leaves (the
        descent skips them).
        """
        keep = ~np.asarray(drop, dtype=bool)
        return type(self)(
            (*self.centroids[:-1], np.ascontiguousarray(self.centroids[-1][keep])),
            (*self.parents[:-1], self.parents[-1][keep]),
        )
