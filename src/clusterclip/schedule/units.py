"""Near-duplicate groups as the units the schedule draws, and their rotation.

With grouping on, the schedule core draws *units*: each near-duplicate group
is one unit, stood for by its representative (its lowest document index) in
the representative's cluster; the other members are never drawn on their own.
A unit is drawn exactly like a document was (whole shuffled passes of its
cluster's units, clipped at ``max_repeats`` passes), and the document emitted
for it rotates through the members::

    occurrence p of unit u (its cluster's pass p = j // size)  ->  members(u)[p % g]

with ``members(u)`` in ascending index (the representative first) and ``g``
their number. So all copies of a text together appear at most R times, each
about R / g times, and the state is unchanged: K draw counts give every pass
number, resume is exact and world-size independent.

Everything here is a mapping layer over :class:`~clusterclip.schedule.groups.Groups`
(:class:`RotatingGroups`); the draw rule does not know about it.

>>> units = Units(np.array([0, 0, 2, 0]), np.array([5, 5, 6, 7]))
>>> units.labels.tolist()                       # only representatives are drawn
[5, -1, 6, -1]
>>> units.rotate(np.array([0, 0, 0, 0, 2]), np.array([0, 1, 2, 3, 1])).tolist()
[0, 1, 3, 0, 2]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterclip.errors import invalid
from clusterclip.schedule.protocols import GroupedTable, GroupTable, written

__all__ = ["RotatingGroups", "Units", "validate_duplicate_of"]


def validate_duplicate_of(duplicate_of: Any, labels: np.ndarray) -> np.ndarray:
    """Return ``duplicate_of`` as int64 ``(N,)`` or raise the standard error.

    Rules: one entry per document, each an index in ``[0, N)`` that is its own
    representative (``duplicate_of[duplicate_of] == duplicate_of``); a group
    with a drawable member (label >= 0) has a drawable representative.
    """
    n = labels.shape[0]
    array = np.asarray(duplicate_of)
    if array.ndim != 1 or array.shape[0] != n or (array.size and array.dtype.kind not in "iu"):
        raise invalid(
            "duplicate_of",
            f"a 1-D integer array with one representative index per document (shape ({n},))",
            f"array of shape {array.shape} and dtype {array.dtype}",
            "Pass clusterclip.io.WorkDir(W).duplicate_of() or np.arange(N) for no groups.",
        )
    array = array.astype(np.int64, copy=False)
    if n and (array.min() < 0 or array.max() >= n):
        raise invalid(
            "duplicate_of", f"indices in [0, {n})", f"values in [{array.min()}, {array.max()}]"
        )
    if not np.array_equal(array[array], array):
        bad = int(np.flatnonzero(array[array] != array)[0])
        raise invalid(
            "duplicate_of",
            "representatives that are their own representative",
            f"document {bad} -> {int(array[bad])} -> {int(array[array[bad]])}",
            "Point every member of a group at the same representative.",
        )
    orphan = (labels >= 0) & (labels[array] < 0)
    if orphan.any():
        doc = int(np.flatnonzero(orphan)[0])
        raise invalid(
            "duplicate_of",
            "groups whose representative has a non-negative label when a member has one",
            f"document {doc} (label {int(labels[doc])}) -> representative {int(array[doc])} "
            f"(label {int(labels[array[doc]])})",
            "Make the representative a drawable document of the group.",
        )
    return array


class Units:
    """The units of a schedule and the rotation of their members.

    Parameters
    ----------
    duplicate_of : ndarray of int64, shape (N,)
        Validated (:func:`validate_duplicate_of`).
    labels : ndarray of int64, shape (N,)
        Cluster of every document (negative = excluded).

    Attributes
    ----------
    labels : ndarray of int64, shape (N,)
        What the core draws: a representative's label, -1 for every other document.
    document_labels : ndarray of int64, shape (N,)
        The cluster each drawable document is drawn in (its group's), -1 when
        excluded: what the statistics count documents by.
    heads, starts, sizes : ndarray of int64, shape (M,)
        The ``M`` groups with two or more drawable members: representative
        (ascending), offset of their members in ``members``, member count.
    members : ndarray of int64
        The drawable members of those groups, ascending inside each group.

    Memory: three arrays of N int64 plus the grouped documents (not N x g).
    """

    def __init__(self, duplicate_of: np.ndarray, labels: np.ndarray) -> None:
        n = labels.shape[0]
        drawable = labels >= 0
        own = duplicate_of == np.arange(n)
        self.labels = np.where(own, labels, -1)
        self.document_labels = np.where(drawable, labels[duplicate_of], -1)
        counts = np.bincount(duplicate_of[drawable], minlength=n)
        self.heads = np.flatnonzero(counts > 1).astype(np.int64)
        grouped = np.flatnonzero(drawable & (counts[duplicate_of] > 1))
        order = np.lexsort((grouped, duplicate_of[grouped]))  # by group, then index
        self.members = grouped[order].astype(np.int64)
        self.sizes = counts[self.heads].astype(np.int64)
        self.starts = np.cumsum(self.sizes) - self.sizes

    def __len__(self) -> int:
        return int(self.heads.size)

    def _find(self, units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(positions in units, group numbers)`` of the units that stand for a group."""
        if not self.heads.size:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        where = np.minimum(np.searchsorted(self.heads, units), self.heads.size - 1)
        hit = np.flatnonzero(self.heads[where] == units)
        return hit, where[hit]

    def rotate(self, units: np.ndarray, passes: np.ndarray) -> np.ndarray:
        """The document emitted for each unit drawn in its pass ``passes`` (``members[p % g]``).

        Parameters
        ----------
        units : ndarray of int, shape (n,)
            Representatives as drawn by the core.
        passes : ndarray of int, shape (n,)
            Each draw's pass number (the unit's occurrence number, from 0).

        Returns
        -------
        ndarray of int64, shape (n,)
        """
        out = np.asarray(units, dtype=np.int64).copy()
        hit, group = self._find(out)
        if hit.size:
            turn = np.asarray(passes, dtype=np.int64)[hit] % self.sizes[group]
            out[hit] = self.members[self.starts[group] + turn]
        return out

    def mean_lengths(self, lengths: np.ndarray) -> np.ndarray:
        """float64 ``(N,)``: a unit's mean tokens per draw (its group's mean), else the length."""
        out = lengths.astype(np.float64)
        if self.heads.size:
            totals = np.add.reduceat(lengths[self.members], self.starts)
            out[self.heads] = totals / self.sizes
        return out

    def tokens_over(self, units: np.ndarray, occurrences: np.ndarray, lengths: np.ndarray) -> int:
        """Total tokens emitted by the first ``occurrences[i]`` draws of each unit ``units[i]``.

        Unit with members ``m_0 .. m_{g-1}`` drawn ``P`` times:
        ``(P // g) * sum(len m) + sum(len m_0 .. m_{P % g - 1})``. Exact
        (Python ints past int64).
        """
        units = np.asarray(units, dtype=np.int64)
        occurrences = np.asarray(occurrences, dtype=np.int64)
        own = lengths[units]
        if float(occurrences.astype(np.float64) @ own.astype(np.float64)) >= 2.0**62:
            occurrences, own = occurrences.astype(object), own.astype(object)
        tokens = occurrences * own
        hit, group = self._find(units)
        if hit.size:
            cumulative = np.concatenate(([0], np.cumsum(lengths[self.members])))
            start, size = self.starts[group], self.sizes[group]
            total = cumulative[start + size] - cumulative[start]
            times = occurrences[hit]
            rest = (times % size).astype(np.int64)
            tokens[hit] = (times // size) * total + (cumulative[start + rest] - cumulative[start])
        return int(tokens.sum())


class RotatingGroups:
    """A group table of units that emits their members in turn (a :class:`GroupTable`).

    Has the wrapped table's ``members``, ``sizes`` and ``offsets`` (units);
    the methods that produce documents or their tokens apply
    :meth:`Units.rotate` with each draw's pass number (``first_pass + draw //
    size`` of its group). Any draw rule's table can be wrapped: the rotation
    reads only the draw numbers.

    Parameters
    ----------
    groups : GroupTable
    units : Units
    first_pass : int
        Occurrences every unit had before these groups' first draw: 0 for the
        clusters; ``max_repeats`` for the random passes after exhaustion (every
        unit has then had exactly its R passes), so the turns go on.
    """

    def __init__(self, groups: GroupTable, units: Units, *, first_pass: int = 0) -> None:
        self.inner = groups
        self.units = units
        self.first_pass = int(first_pass)
        self.members = groups.members
        self.sizes = groups.sizes
        self.offsets = groups.offsets

    def __len__(self) -> int:
        return len(self.inner)

    def lookup(
        self,
        group: np.ndarray,
        draw: np.ndarray,
        *,
        first: np.ndarray | None = None,
        end: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """:meth:`Groups.lookup`, rotated (into ``out`` when given)."""
        docs = self.inner.lookup(group, draw, first=first, end=end)
        group = np.asarray(group, dtype=np.int64)
        passes = np.asarray(draw, dtype=np.int64) // self.inner.sizes[group]
        return written(self.units.rotate(docs, passes + self.first_pass), out)

    def lookup_grouped(
        self, order: np.ndarray, per_group: np.ndarray, first: np.ndarray
    ) -> np.ndarray:
        """:meth:`Groups.lookup_grouped`, rotated (position ``order[start_g + i]`` is draw ``first[g] + i``).

        Only for a wrapped table that has it (:class:`GroupedTable`).
        """
        inner = self.inner
        if not isinstance(inner, GroupedTable):  # an engine bug, never a user error
            raise TypeError(f"clusterclip: {type(inner).__name__} has no lookup_grouped")
        docs = inner.lookup_grouped(order, per_group, first)
        start = np.cumsum(per_group) - per_group
        draws = np.arange(order.shape[0], dtype=np.int64) + np.repeat(first - start, per_group)
        passes = np.empty(order.shape[0], dtype=np.int64)
        passes[order] = draws // np.repeat(self.inner.sizes, per_group)
        return self.units.rotate(docs, passes + self.first_pass)

    def tokens_of_first(self, counts: np.ndarray, lengths: np.ndarray) -> int:
        """Tokens of the first ``counts[g]`` draws of every group, rotation included (exact).

        Each unit of group ``g`` has been drawn ``counts[g] // size`` times, plus
        once more when it is in the current pass's prefix; the tokens of a
        unit's first ``P`` draws are :meth:`Units.tokens_over`.
        """
        inner = self.inner
        counts = np.asarray(counts, dtype=np.int64)
        full = counts // inner.sizes
        units, before = inner.members, np.repeat(full, inner.sizes)
        total = self.units.tokens_over(units, before + self.first_pass, lengths)
        if self.first_pass:  # only the draws of these groups: not the passes before them
            total -= self.units.tokens_over(units, np.full(units.size, self.first_pass), lengths)
        partial = counts - full * inner.sizes
        which = np.flatnonzero(partial)
        if which.size:  # the partial passes' prefixes, through the inner lookup (any rule)
            group = np.repeat(which, partial[which])
            starts = np.cumsum(partial[which]) - partial[which]
            cursor = np.arange(group.size, dtype=np.int64) - np.repeat(starts, partial[which])
            draws = full[group] * inner.sizes[group] + cursor
            drawn = inner.lookup(group, draws)
            docs = self.units.rotate(drawn, full[group] + self.first_pass)
            total += int(lengths[docs].sum())
        return total
