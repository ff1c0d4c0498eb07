"""The interfaces inside the schedule core, declared: group tables, sources, draw rules.

The engine is three kinds of parts, one per responsibility, each chosen per
``schedule_version`` by a :class:`DrawRule`:

* a :class:`GroupTable` turns *draw number* ``j`` of group ``g`` into a
  document: ``pass p = j // size``, cursor ``j % size`` of the pass-``p``
  permutation of the group's members (a cluster, or the whole corpus for
  ``policy="random"`` and the passes after exhaustion). Its state is a cache at
  most: the same ``(g, j)`` always gives the same document;
* an :class:`OnlineSource` produces the *cluster part* of the schedule (until
  every cluster is clipped) from any start position: which group each
  position draws, and that group's draw number, looked up in the table. The
  online rule's sources and the planned order's source both satisfy it;
* a :class:`DrawRule` makes both for one version.

``tests/schedule/test_structure.py`` checks that every implementation
satisfies its protocol, signatures included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # the prepared inputs build on the rules
    from clusterclip.schedule.prepare import Prepared

__all__ = ["DrawRule", "GroupTable", "GroupedTable", "OnlineSource", "Segment", "written"]

#: What :meth:`OnlineSource.segment` returns: the documents of the positions,
#: the group each drew (int64) and the offsets (ascending) of the positions
#: that took their group's last allowed draw (the group is clipped there).
Segment = tuple[np.ndarray, np.ndarray, np.ndarray]


@runtime_checkable
class GroupTable(Protocol):
    """Members of ``G`` groups, drawn as whole shuffled passes.

    Attributes
    ----------
    members : ndarray of int32 or int64
        Document ids of all groups, concatenated group after group.
    sizes, offsets : ndarray of int64, shape (G,)
        Members per group, and where each group's members start in ``members``.
    """

    members: np.ndarray
    sizes: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        """The number of groups ``G``."""
        ...

    def lookup(
        self,
        group: np.ndarray,
        draw: np.ndarray,
        *,
        first: np.ndarray | None = None,
        end: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Documents (int64) of draw numbers ``draw`` of groups ``group`` (same shape).

        ``first`` and ``end`` (shape (G,)), when given, bound each group's draw
        numbers asked for (``[first, end)``): a hint some tables use for speed.
        ``out`` (int64, C-ordered, the shape of ``group``), when given, receives
        the documents and is returned (:func:`written`); else a new array.
        """
        ...

    def tokens_of_first(self, counts: np.ndarray, lengths: np.ndarray) -> int:
        """Total tokens of the first ``counts[g]`` draws of every group (exact)."""
        ...


@runtime_checkable
class GroupedTable(GroupTable, Protocol):
    """A :class:`GroupTable` that also looks a block up in the order of its groups."""

    def lookup_grouped(
        self, order: np.ndarray, per_group: np.ndarray, first: np.ndarray
    ) -> np.ndarray:
        """Documents of a block whose positions, sorted by group, are ``order``.

        Position ``order[start_g + i]`` (``start_g`` = draws of the groups
        before ``g``) receives draw ``first[g] + i`` of group ``g``.
        """
        ...


@runtime_checkable
class OnlineSource(Protocol):
    """The cluster part of one schedule, produced from a start position.

    One source serves one iteration: :meth:`seek` once, then :meth:`segment`
    for consecutive positions.
    """

    def seek(self, start: int, end: int | None) -> int:
        """Replay what comes before ``start`` (counts only) and return where output resumes.

        Returns the first position of the segment holding ``start`` (at most
        ``start``); ``end`` is where the cluster part ends (None: never).
        """
        ...

    def counts_before(self) -> np.ndarray:
        """Draws of every group before the position :meth:`seek` returned."""
        ...

    def segment(self, g0: int, limit: int | None, out: np.ndarray | None = None) -> Segment:
        """The next positions from ``g0`` (never ``limit`` or beyond): documents, groups, clips.

        ``out``, when given, is where the schedule's positions from ``g0`` on go
        (int64, C-ordered): a source may put the documents there, and then
        returns them as a view of ``out``'s start (so no one copies them again).
        """
        ...

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions.

        ``position`` lies inside the latest segment handed out (or at its end).
        """
        ...


@runtime_checkable
class DrawRule(Protocol):
    """The version-specific parts of the engine: pass permutations and cluster choices.

    Attributes
    ----------
    draws_trees : bool
        Whether the online source draws ``policy="hierarchical"`` (a cluster tree).
    """

    draws_trees: bool

    def groups(
        self,
        members: np.ndarray,
        sizes: np.ndarray,
        keys: np.ndarray,
        *,
        seed: int,
        purpose: int,
        shares: np.ndarray | None = None,
        max_repeats: int | None = None,
    ) -> GroupTable:
        """The group table of these members (``keys``: the cluster ids; ``purpose``: the passes').

        ``shares`` (each group's expected fraction of the draws) and
        ``max_repeats`` may size a cache; they never change a document.
        """
        ...

    def online(self, prep: Prepared) -> OnlineSource:
        """The source of the online rule (DESIGN.md section 2) over ``prep``."""
        ...

    def planned(self, prep: Prepared, plan: np.ndarray) -> OnlineSource:
        """The source of the planned order of ``plan`` draws per group."""
        ...


def written(docs: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``docs``, or ``out`` holding them: what :meth:`GroupTable.lookup` returns.

    For a table that computes its documents in a new array and is asked for
    them in ``out``.

    >>> out = np.zeros(3, dtype=np.int64)
    >>> written(np.array([4, 5, 6]), out) is out, out.tolist()
    (True, [4, 5, 6])
    >>> written(np.array([7]), None).tolist()
    [7]
    """
    if out is None or docs is out:
        return docs
    out[...] = docs
    return out
