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

__all__ = ["DRAW_RULES", "BlockRule", "ChunkRule", "WindowRule", "draw_rule"]


class BlockRule:
    """Versions 1 and 2: a uniform per position, pass permutations from cached generators.

    :class:`~clusterclip.schedule.choosers.OnlineChooser` (or the tree walk of
    ``policy="hierarchical"``) over blocks of ``CHOICE_BLOCK`` positions;
    :class:`~clusterclip.schedule.groups.Groups` for the passes.
    """

    draws_trees = True

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
        window = None if shares is None else window_passes(sizes, shares, max_repeats)
        return Groups(members, sizes, keys, seed=seed, purpose=purpose, window=window)

    def online(self, prep: Prepared) -> OnlineSource:
        return BlockOnline(prep)

    def planned(self, prep: Prepared, plan: np.ndarray) -> OnlineSource:
        return PlannedSource(prep, plan)


class WindowRule:
    """Version 3: rejection windows, pass permutations computed per draw.

    :class:`~clusterclip.schedule.windows.WindowChooser` for the cluster
    choices, :class:`~clusterclip.schedule.feistel.FeistelGroups` for the
    passes; the planned order of versions 1 and 2. Flat policies only.
    """

    draws_trees = False

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
        return FeistelGroups(members, sizes, keys, seed=seed, purpose=purpose)

    def online(self, prep: Prepared) -> OnlineSource:
        return WindowSource(prep)

    def planned(self, prep: Prepared, plan: np.ndarray) -> OnlineSource:
        return PlannedSource(prep, plan)


class ChunkRule:
    """Version 4 (the default): fast at every number of clusters, for every policy.

    :class:`~clusterclip.schedule.treewindows.TreeSource` for the online rule
    (version 3's windows in chunks, down the tree of ``policy="hierarchical"``),
    :class:`~clusterclip.schedule.slabs.SlabSource` for the planned order and
    :class:`~clusterclip.schedule.passes.PassTable` for the passes.
    """

    draws_trees = True

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
        return PassTable(members, sizes, keys, seed=seed, purpose=purpose)

    def online(self, prep: Prepared) -> OnlineSource:
        return TreeSource(prep)

    def planned(self, prep: Prepared, plan: np.ndarray) -> OnlineSource:
        return SlabSource(prep, plan)


#: The draw rule of every supported ``schedule_version``.
DRAW_RULES: dict[int, DrawRule] = {
    1: BlockRule(),
    2: BlockRule(),  # version 1's rule; only the seed words of seeds >= 2**32 differ
    3: WindowRule(),
    4: ChunkRule(),
}


def draw_rule(version: int) -> DrawRule:
    """The rule of a validated ``schedule_version``.

    >>> draw_rule(1).draws_trees, draw_rule(3).draws_trees, draw_rule(4).draws_trees
    (True, False, True)
    """
    return DRAW_RULES[version]
