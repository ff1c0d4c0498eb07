"""Hierarchical balanced sampling: the cluster tree and its active sets.

``policy="hierarchical"`` draws down a tree of clusters instead of over a flat
list. The tree comes from ``levels``, an int array of shape ``(N, L - 1)``:
row ``i`` lists the ancestors of document ``i``'s leaf cluster (``labels[i]``)
from the coarsest level to the finest (e.g. the coarse clusters of a
hierarchical k-means, or a source -> topic taxonomy above the topic labels).

At every position each level is a uniform choice among the *active* children
of the node chosen above. Versions 1 and 2 draw it with the position's uniform
``u`` (the same uniforms as their online rule,
:func:`clusterclip.schedule.choosers.block_uniforms`); version 4 with a stream
per inner node (:mod:`clusterclip.schedule.treewindows`). One draw of version 1::

    node = root
    for each level, coarsest first:
        m = active children of node            (ascending id)
        i = min(floor(u * m), m - 1)
        u = u * m - i
        node = the i-th active child
    the leaf's draw count gives the document  (shuffled passes, as for clusterclip)

A leaf is active until its clip (``max_repeats`` passes); an inner node is
active while any leaf under it is. So the top level is drawn uniformly, then
the children of the chosen node, down to a leaf: with no levels (``L = 1``)
this is exactly the ``clusterclip`` rule.

This module holds the pure parts: :func:`validate_levels` (the input checks,
returning a :class:`Hierarchy` of one ancestor path per leaf) and
:class:`ActiveTree` (the active sets, a vectorised walk and the O(depth)
update of a clip). Version 1's chooser uses them.

>>> labels = np.array([0, 1, 2, 2, -1])
>>> levels = np.array([[0], [0], [1], [1], [-1]])   # leaves 0, 1 under 0; leaf 2 under 1
>>> hierarchy = validate_levels(levels, labels)
>>> hierarchy.leaf_ids.tolist(), hierarchy.paths.tolist()
([0, 1, 2], [[0], [0], [1]])
>>> tree = ActiveTree(hierarchy.paths, hierarchy.leaf_ids)
>>> tree.walk(np.array([0.1, 0.3, 0.7])).tolist()   # top: 0 or 1; then a child of 0
[0, 1, 2]
>>> tree.deactivate(2)                               # top node 1 empties: only 0 is left
>>> tree.walk(np.array([0.1, 0.7])).tolist()
[0, 1]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterclip.errors import invalid
from clusterclip.io import fingerprint_array
from clusterclip.schedule import kernels
from clusterclip.schedule.groups import sorted_with_order

__all__ = ["ActiveTree", "Hierarchy", "validate_levels"]


@dataclass(frozen=True)
class Hierarchy:
    """One ancestor path per leaf cluster, validated.

    Attributes
    ----------
    leaf_ids : ndarray of int64, shape (K,)
        The non-empty leaf clusters (ascending id).
    paths : ndarray of int64, shape (K, L - 1)
        Their ancestors, coarsest level first.
    """

    leaf_ids: np.ndarray
    paths: np.ndarray

    @property
    def n_levels(self) -> int:
        """Levels of the tree, the leaves included (``L``)."""
        return int(self.paths.shape[1]) + 1

    def fingerprint(self) -> str:
        """Fingerprint of the tree (leaf id and path per leaf): what a schedule records."""
        return fingerprint_array(np.column_stack((self.leaf_ids, self.paths)))

    def paths_of(self, cluster_ids: np.ndarray) -> np.ndarray:
        """Ancestor paths (K', L - 1) of the given leaves (each must be in ``leaf_ids``)."""
        ids = self.leaf_ids
        if ids.size and ids[-1] == ids.size - 1:  # every id from 0: a leaf's row is its id
            return self.paths[cluster_ids]
        return self.paths[np.searchsorted(ids, cluster_ids)]


_FIX = (
    "Pass levels[i] = the ancestors of labels[i]'s cluster, coarsest first, the same for "
    "every document of a cluster (clusterclip.io.WorkDir(W).levels() after "
    "`clusterclip cluster --levels ...`)."
)


def validate_levels(levels: Any, labels: np.ndarray) -> Hierarchy | None:
    """Check ``levels`` against the (validated) ``labels`` and return the tree.

    Parameters
    ----------
    levels : array_like of int, shape (N, L - 1), or None
        Ancestors of every document's leaf, coarsest first. Rows of excluded
        documents (negative label) are ignored. Node ids are per level: a node
        has one parent, a leaf one ancestor path.
    labels : ndarray of int64, shape (N,)

    Returns
    -------
    Hierarchy or None
        None when ``levels`` is None or has no column (a flat run).

    Raises
    ------
    ClusterClipError
        Wrong shape or dtype, a negative ancestor of a drawn document, a leaf
        whose documents disagree on an ancestor (naming the leaf, the level and
        two rows), or a node with two parents.
    """
    if levels is None:
        return None
    n = labels.shape[0]
    array = np.asarray(levels)
    if array.ndim != 2 or array.shape[0] != n or (array.size and array.dtype.kind not in "iu"):
        raise invalid(
            "levels",
            f"a 2-D integer array of shape ({n}, L - 1): the ancestors of each document's "
            "cluster, coarsest first",
            f"array of shape {array.shape} and dtype {array.dtype}",
            "One level of parents is levels[:, None] of a 1-D array.",
        )
    if array.shape[1] == 0:
        return None
    array = array.astype(np.int64, copy=False)
    quick = _dense_tree(array, labels)
    if quick is not None:
        return quick
    return _checked_tree(array, labels)


def _dense_tree(array: np.ndarray, labels: np.ndarray) -> Hierarchy | None:
    """The tree of valid ``levels`` over dense labels, without a sort; None otherwise.

    One path per leaf is taken from any of its rows, then every row is checked
    against it. Anything wrong (or sparse ids) is left to :func:`_checked_tree`,
    which finds the first offending rows for the message.
    """
    top = int(labels.max())
    if top < 0 or top >= max(labels.shape[0], 1024):
        return None
    if kernels.compiled():  # one pass over the rows per level, in C
        return _dense_tree_in_c(np.ascontiguousarray(array), labels, top)
    valid = labels >= 0
    every = bool(valid.all())  # then no copies of the rows
    leaves = labels if every else labels[valid]
    leaf_ids = np.flatnonzero(np.bincount(leaves, minlength=top + 1))
    paths = np.empty((leaf_ids.size, array.shape[1]), dtype=np.int64)
    for level in range(array.shape[1]):  # one column at a time: 1-D scatters and gathers
        used = np.ascontiguousarray(array[:, level])
        used = used if every else used[valid]
        table = np.zeros(top + 1, dtype=np.int64)
        table[leaves] = used  # some row of each leaf
        if (used < 0).any() or not np.array_equal(np.take(table, leaves), used):
            return None
        paths[:, level] = table[leaf_ids]
    hierarchy = Hierarchy(leaf_ids=leaf_ids, paths=paths)
    return hierarchy if _one_parent_each(hierarchy.paths) else None


def _dense_tree_in_c(array: np.ndarray, labels: np.ndarray, top: int) -> Hierarchy | None:
    """:func:`_dense_tree` by :func:`~clusterclip.schedule.kernels.tree_column` (the same tree)."""
    labels = np.ascontiguousarray(labels, dtype=np.int64)  # once: the C loop's layout
    tables = []
    for level in range(array.shape[1]):
        table = kernels.tree_column(labels, array, level, top + 1)
        if table is None:  # a row breaks the tree: the sorted check names it
            return None
        tables.append(table)
    leaf_ids = np.flatnonzero(tables[0] >= 0)  # the leaves with a row
    paths = np.stack([np.take(table, leaf_ids) for table in tables], axis=1)
    hierarchy = Hierarchy(leaf_ids=leaf_ids, paths=paths)
    return hierarchy if _one_parent_each(hierarchy.paths) else None


def _one_parent_each(paths: np.ndarray) -> bool:
    """Whether every inner node at level >= 1 has one parent."""
    for level in range(1, paths.shape[1]):
        order = np.lexsort((paths[:, level - 1], paths[:, level]))
        nodes, parents = paths[order, level], paths[order, level - 1]
        if ((nodes[1:] == nodes[:-1]) & (parents[1:] != parents[:-1])).any():
            return False
    return True


def _checked_tree(array: np.ndarray, labels: np.ndarray) -> Hierarchy:
    """The tree of ``levels``, or the error naming the first offending rows."""
    rows = np.flatnonzero(labels >= 0)
    leaves, order = sorted_with_order(labels[rows])  # by leaf, then by row (one packed sort)
    rows = rows[order]
    used = array[rows]
    negative = np.flatnonzero((used < 0).any(axis=1))
    if negative.size:
        row = int(rows[negative].min())
        raise invalid(
            "levels",
            "non-negative for every document with a non-negative label",
            f"{array[row].tolist()} in row {row} (label {int(labels[row])})",
            _FIX,
        )
    first = np.flatnonzero(np.concatenate(([True], leaves[1:] != leaves[:-1])))
    run_of = np.cumsum(np.concatenate(([False], leaves[1:] != leaves[:-1])))
    paths = used[first]
    differ = used != paths[run_of]
    if differ.any():
        at, level = np.argwhere(differ)[0]
        row, other = int(rows[first[run_of[at]]]), int(rows[at])
        raise invalid(
            "levels",
            "one ancestor path per leaf cluster",
            f"leaf {int(leaves[at])} under {int(array[row, level])} at level {int(level)} "
            f"in row {row} and under {int(array[other, level])} in row {other}",
            _FIX,
        )
    hierarchy = Hierarchy(leaf_ids=leaves[first].copy(), paths=np.ascontiguousarray(paths))
    _check_one_parent(hierarchy, rows[first])
    return hierarchy


def _check_one_parent(hierarchy: Hierarchy, first_rows: np.ndarray) -> None:
    """Every inner node at level >= 1 has one parent (node ids are per level)."""
    paths = hierarchy.paths
    for level in range(1, paths.shape[1]):
        order = np.lexsort((paths[:, level - 1], paths[:, level]))
        nodes, parents = paths[order, level], paths[order, level - 1]
        clash = np.flatnonzero((nodes[1:] == nodes[:-1]) & (parents[1:] != parents[:-1]))
        if clash.size:
            a, b = order[clash[0]], order[clash[0] + 1]
            raise invalid(
                "levels",
                "one parent per node (node ids are per level)",
                f"node {int(nodes[clash[0]])} at level {level} under "
                f"{int(paths[a, level - 1])} in row {int(first_rows[a])} and under "
                f"{int(paths[b, level - 1])} in row {int(first_rows[b])}",
                "Number the nodes of each level uniquely, e.g. parent * n_children + child.",
            )


class ActiveTree:
    """The active sets of a cluster tree, walked by uniforms and pruned by clips.

    Level ``l`` (0 = top, ``D - 1`` = leaves, ``D = L``) numbers its nodes in
    tree order (by parent, then id), so the children of a node are one
    contiguous range of the level below. Each range keeps its *active*
    children packed at its front, in id order, with their number in
    ``count``: the i-th active child of ``p`` is ``packed[start[p] + i]``.

    A walk costs a few gathers per level for a whole array of uniforms; a
    clip removes the leaf from its parent's range (a shift of at most the
    fan-out) and walks up only while a node empties: O(depth x fan-out),
    independent of the number of leaves.

    Parameters
    ----------
    paths : ndarray of int64, shape (K, L - 1)
        Ancestors of every group's leaf, coarsest first (one row per group).
    leaf_ids : ndarray of int64, shape (K,)
        Leaf id of every group (distinct; their order is the group order).
    """

    def __init__(self, paths: np.ndarray, leaf_ids: np.ndarray) -> None:
        full = np.column_stack((paths, leaf_ids)).astype(np.int64)
        n_groups, depth = full.shape
        order = np.lexsort(full.T[::-1])  # tree order: by top id, then down to the leaf id
        ordered = full[order]
        self.depth = depth
        self.leaf_group = order  # tree position of a leaf -> group
        self.tree_position = np.empty(n_groups, dtype=np.int64)
        self.tree_position[order] = np.arange(n_groups)
        self.packed: list[np.ndarray] = []
        self.start: list[np.ndarray] = []
        self.count: list[np.ndarray] = []
        self.parent: list[np.ndarray] = []
        above = np.zeros(n_groups, dtype=np.int64)  # node of each leaf one level up (root: 0)
        for level in range(depth):
            column = ordered[:, level]
            new = np.ones(n_groups, dtype=bool)
            new[1:] = (column[1:] != column[:-1]) | (above[1:] != above[:-1])
            node_of_leaf = np.cumsum(new) - 1
            parent = above[new]  # nondecreasing: nodes are in tree order
            n_parents = 1 if level == 0 else int(above.max()) + 1
            self.parent.append(parent)
            self.start.append(np.searchsorted(parent, np.arange(n_parents)).astype(np.int64))
            self.count.append(np.bincount(parent, minlength=n_parents).astype(np.int64))
            self.packed.append(np.arange(parent.size, dtype=np.int64))
            above = node_of_leaf

    def walk(self, u: np.ndarray) -> np.ndarray:
        """Group chosen by each uniform in [0, 1) (int64, same shape); see the module rule."""
        x = u
        node = None
        for level in range(self.depth):
            if node is None:  # the root: one parent for every position
                m = self.count[0][0]
                y = x * m
                index = y.astype(np.int64)
                np.minimum(index, m - 1, out=index)
                node = self.packed[0][index]
            else:
                m = self.count[level][node]
                y = x * m
                index = y.astype(np.int64)
                np.minimum(index, m - 1, out=index)
                node = self.packed[level][self.start[level][node] + index]
            if level + 1 < self.depth:
                x = y - index
        return self.leaf_group[node]

    def deactivate(self, group: int) -> None:
        """Remove a clipped group's leaf, and every ancestor it leaves empty."""
        node = int(self.tree_position[group])
        for level in range(self.depth - 1, -1, -1):
            parent = int(self.parent[level][node])
            first = int(self.start[level][parent])
            count = int(self.count[level][parent])
            packed = self.packed[level]
            at = first + int(np.searchsorted(packed[first : first + count], node))
            packed[at : first + count - 1] = packed[at + 1 : first + count].copy()
            self.count[level][parent] = count - 1
            if count > 1 or level == 0:
                return
            node = parent
