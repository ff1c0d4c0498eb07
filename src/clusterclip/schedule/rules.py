"""The draw rule of every supported ``schedule_version``: the one place they are chosen.

A :class:`~clusterclip.schedule.protocols.DrawRule` makes the two
version-specific parts of the engine: the group table (pass permutations) and
the sources of the cluster part (online and planned). Everything else -- the
groups, weights, caps, the plan, the budget, the fallback, the statistics -- is
the same for every version.

A rule's bytes never change once released: an improved rule is a new version,
and the old ones stay here as long as a saved checkpoint may name them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from clusterclip.schedule.feistel import FeistelGroups
from clusterclip.schedule.groups import Groups, window_passes
from clusterclip.schedule.passes import PassTable
from clusterclip.schedule.protocols import DrawRule, GroupTable, OnlineSource
from clusterclip.schedule.slabs import SlabSource
from clusterclip.schedule.sources import BlockOnline, PlannedSource, WindowSource
from clusterclip.schedule.treewindows import TreeSource

if TYPE_CHECKING:  # the prepared inputs build on the rules
    from clusterclip.schedule.prepare import Prepared

__all__ = ["BLOCK_RULE", "CHUNK_RULE", "DRAW_RULES", "WINDOW_RULE", "Rule", "draw_rule"]

#: Makes a group table: ``(members, sizes, keys, seed, purpose, shares, max_repeats)``.
TableMaker = Callable[
    [np.ndarray, np.ndarray, np.ndarray, int, int, "np.ndarray | None", "int | None"], GroupTable
]


@dataclass(frozen=True)
class Rule:
    """A :class:`~clusterclip.schedule.protocols.DrawRule` made of its three parts.

    Parameters
    ----------
    name : str
        What the rule is called in messages.
    table : TableMaker
        Makes the group table (the pass permutations).
    online_source, planned_source : callable
        Make the cluster part's source: ``online_source(prep)`` and
        ``planned_source(prep, plan)``.
    draws_trees : bool
        Whether the online source draws ``policy="hierarchical"``.

    Examples
    --------
    >>> CHUNK_RULE.name, CHUNK_RULE.draws_trees
    ('chunk', True)
    """

    name: str
    table: TableMaker
    online_source: Callable[[Prepared], OnlineSource]
    planned_source: Callable[[Prepared, np.ndarray], OnlineSource]
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
        """See :meth:`~clusterclip.schedule.protocols.DrawRule.groups`."""
        return self.table(members, sizes, keys, seed, purpose, shares, max_repeats)

    def online(self, prep: Prepared) -> OnlineSource:
        """See :meth:`~clusterclip.schedule.protocols.DrawRule.online`."""
        return self.online_source(prep)

    def planned(self, prep: Prepared, plan: np.ndarray) -> OnlineSource:
        """See :meth:`~clusterclip.schedule.protocols.DrawRule.planned`."""
        return self.planned_source(prep, plan)


def _generated(members, sizes, keys, seed, purpose, shares, max_repeats) -> GroupTable:  # type: ignore[no-untyped-def]
    """Versions 1 and 2: pass permutations from cached generators, windows sized by the shares."""
    window = None if shares is None else window_passes(sizes, shares, max_repeats)
    return Groups(members, sizes, keys, seed=seed, purpose=purpose, window=window)


def _feistel(members, sizes, keys, seed, purpose, shares, max_repeats) -> GroupTable:  # type: ignore[no-untyped-def]
    """Version 3: pass permutations computed per draw."""
    return FeistelGroups(members, sizes, keys, seed=seed, purpose=purpose)


def _sorted_keys(members, sizes, keys, seed, purpose, shares, max_repeats) -> GroupTable:  # type: ignore[no-untyped-def]
    """Version 4: each larger group's pass one sort of keys, small groups from a table."""
    return PassTable(members, sizes, keys, seed=seed, purpose=purpose)


#: Versions 1 and 2: a uniform per position (:class:`~clusterclip.schedule.choosers.OnlineChooser`
#: or the tree walk of ``policy="hierarchical"``) over blocks of ``CHOICE_BLOCK`` positions.
BLOCK_RULE = Rule("block", _generated, BlockOnline, PlannedSource, draws_trees=True)
#: Version 3: rejection windows (:class:`~clusterclip.schedule.windows.WindowChooser`), the
#: planned order of versions 1 and 2. Flat policies only.
WINDOW_RULE = Rule("window", _feistel, WindowSource, PlannedSource, draws_trees=False)
#: Version 4 (the default): version 3's windows in chunks, down the tree of
#: ``policy="hierarchical"`` (:class:`~clusterclip.schedule.treewindows.TreeSource`), the
#: planned order in slabs (:class:`~clusterclip.schedule.slabs.SlabSource`).
CHUNK_RULE = Rule("chunk", _sorted_keys, TreeSource, SlabSource, draws_trees=True)


#: The draw rule of every supported ``schedule_version``.
DRAW_RULES: dict[int, DrawRule] = {
    1: BLOCK_RULE,
    2: BLOCK_RULE,  # version 1's rule; only the seed words of seeds >= 2**32 differ
    3: WINDOW_RULE,
    4: CHUNK_RULE,
}


def draw_rule(version: int) -> DrawRule:
    """The rule of a validated ``schedule_version``.

    >>> draw_rule(1).draws_trees, draw_rule(3).draws_trees, draw_rule(4).draws_trees
    (True, False, True)
    """
    return DRAW_RULES[version]
