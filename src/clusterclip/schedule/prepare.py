"""The inputs of a schedule, prepared once: groups, weights, caps, the draw rule's tables.

:class:`Prepared` turns validated ``(labels, lengths, config)`` and the policy
into what every part of the engine reads: one group per drawn cluster (or the
corpus group of ``policy="random"``), its members, weight and cap
(``max_repeats * size``), and the :class:`~clusterclip.schedule.protocols.GroupTable`
of the version's draw rule (:mod:`clusterclip.schedule.rules`).

Memory is O(N + K) in the documents and the clusters *present*, whatever their
ids: groups are numbered densely (ascending cluster id) and keep their cluster
id only where randomness is keyed by it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from clusterclip.errors import invalid
from clusterclip.schedule.config import ScheduleConfig
from clusterclip.schedule.grouping import (
    NO_CAP,
    GroupIndex,
    group_caps,
    grouped_by_label,
    is_dense,
    member_dtype,
    members_by_group,
    present_clusters,
)
from clusterclip.schedule.hierarchy import Hierarchy
from clusterclip.schedule.protocols import DrawRule, GroupTable
from clusterclip.schedule.rules import draw_rule
from clusterclip.schedule.seeds import (
    PURPOSE_CLUSTER_PASS,
    PURPOSE_FALLBACK_PASS,
    PURPOSE_RANDOM_PASS,
)
from clusterclip.schedule.units import RotatingGroups, Units

if TYPE_CHECKING:  # the policy module builds on this one
    from clusterclip.schedule.policy import Policy

__all__ = ["NO_CAP", "Prepared", "group_caps"]


class Prepared:
    """Arrays derived once from validated (labels, lengths, config) and the policy.

    ``policy`` is the registered :class:`~clusterclip.schedule.policy.Policy`
    named by ``config.policy``: it gives the cluster weights and whether the
    documents form one corpus group.

    Memory is O(N + K) in the documents and the clusters *present*, whatever
    their ids: groups are numbered densely (ascending cluster id) and keep
    their cluster id only where randomness is keyed by it.

    Attributes
    ----------
    groups : GroupTable
        One group per drawn cluster (ascending cluster id), or the single
        corpus group of ``policy="random"``.
    cluster_ids : ndarray of int64
        Cluster id of every group (-1 for the corpus group).
    stats_ids : ndarray of int64
        The cluster ids the statistics are reported for: every id
        ``0..max_label`` for dense labels, the non-empty clusters otherwise.
    weights, caps : ndarray
        Draw weight and cap (``max_repeats * size``, or ``NO_CAP``) per group.
    capped : bool
        Whether any cap can be reached (else the schedule is the uncapped one).
    capped_total : int or None
        Draws available before every group is clipped (None if no cap ends the schedule).
    tree_paths : ndarray of int64, shape (K, L - 1), or None
        ``policy="hierarchical"``: the ancestors of every group's cluster,
        coarsest first (:mod:`clusterclip.schedule.hierarchy`); None: flat.
    corpus_clusters : tuple of ndarray, or None
        ``policy="random"``: the non-empty clusters of the corpus group and
        their sizes (what a whole pass draws of each); None for other policies.
    """

    def __init__(
        self,
        labels: np.ndarray,
        lengths: np.ndarray | None,
        config: ScheduleConfig,
        policy: Policy,
        units: Units | None = None,
        hierarchy: Hierarchy | None = None,
    ) -> None:
        self.config = config
        self.policy = policy
        # With near-duplicate units the core draws representatives only
        # (units.labels); statistics count documents in their group's cluster.
        self.units = units
        self.labels = labels if units is None else units.document_labels
        self.lengths = lengths
        drawn = labels if units is None else units.labels
        max_label = int(drawn.max())
        members, sizes, keys, purpose, present = self._groups_of(drawn, max_label)
        self.stats_ids = (
            np.arange(max_label + 1, dtype=np.int64) if is_dense(drawn, max_label) else present
        )
        # policy="hierarchical": the ancestor path of every group's leaf (None: flat).
        self.tree_paths = None
        if hierarchy is not None and not policy.single_group:
            self.tree_paths = hierarchy.paths_of(self.cluster_ids)
        self.caps, self.capped_total = group_caps(sizes, config.max_repeats)
        self.capped = bool((self.caps < NO_CAP).any())
        self.rule: DrawRule = draw_rule(config.schedule_version)
        scale = self.weights / self.weights.max()
        self.groups: GroupTable = self.rule.groups(
            members, sizes, keys, seed=config.seed, purpose=purpose,
            shares=scale / scale.sum(), max_repeats=config.max_repeats,
        )  # fmt: skip
        if units is not None:
            self.groups = RotatingGroups(self.groups, units)
        self._fallback: GroupTable | None = None
        self.group_tokens = None
        if lengths is not None:
            per_draw = lengths if units is None else units.mean_lengths(lengths)
            self.group_tokens = np.add.reduceat(per_draw[self.groups.members], self.groups.offsets)
            if int(self.group_tokens.sum()) == 0 and config.num_tokens is not None:
                raise invalid(
                    "lengths",
                    "positive for some document the policy can draw",
                    "all zero",
                    "A token budget needs documents with tokens.",
                )

    def _groups_of(
        self, labels: np.ndarray, max_label: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
        """Members, sizes, keys and pass purpose of the drawn groups, and the present cluster ids.

        Sets ``cluster_ids`` and ``weights`` (per group).
        """
        config, policy = self.config, self.policy
        grouped = None if policy.single_group else grouped_by_label(labels, max_label)
        if grouped is None:
            present, counts = present_clusters(labels, max_label)
        else:
            present, counts, by_label = grouped
        self.corpus_clusters = None
        if policy.single_group:
            self.corpus_clusters = (present, counts)
            members = np.flatnonzero(labels >= 0).astype(member_dtype(labels.shape[0]))
            self.cluster_ids = np.array([-1], dtype=np.int64)
            self.weights = np.ones(1)
            sizes = np.array([members.size], dtype=np.int64)
            return members, sizes, np.zeros(1, np.int64), PURPOSE_RANDOM_PASS, present
        weights = policy.cluster_weights(
            counts, config.alpha, config.cluster_weights, cluster_ids=present
        )
        drawn = weights > 0
        every = bool(drawn.all())  # then no copies of the per-cluster arrays made here
        self.cluster_ids = present if every else present[drawn]
        sizes = counts if every else counts[drawn]
        self.weights = weights[drawn]  # a copy: the policy's array stays its own
        if grouped is None:
            group_of = GroupIndex(self.cluster_ids, max_label, is_dense(labels, max_label))
            members = members_by_group(labels, group_of)
        else:  # the drawn clusters' documents
            members = by_label if every else by_label[np.repeat(drawn, counts)]
        return members, sizes, self.cluster_ids, PURPOSE_CLUSTER_PASS, present

    @property
    def fallback(self) -> GroupTable:
        """The corpus group of the ``on_exhausted="random"`` passes."""
        if self._fallback is None:
            members = np.sort(self.groups.members)
            sizes = np.array([members.size], np.int64)
            self._fallback = self.rule.groups(
                members, sizes, np.zeros(1, np.int64), seed=self.config.seed,
                purpose=PURPOSE_FALLBACK_PASS,
            )  # fmt: skip
            if self.units is not None:  # every unit had its R passes: the turns go on
                first = self.config.max_repeats or 0
                self._fallback = RotatingGroups(self._fallback, self.units, first_pass=first)
        return self._fallback
