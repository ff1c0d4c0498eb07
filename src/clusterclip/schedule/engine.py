"""The streaming schedule engine (online draw rule, planned order, fallback).

Global position ``t`` of the schedule is computed from ``(seed, t)`` and a
handful of per-cluster counts, never from a stored history:

* **online** (DESIGN.md section 2, the paper's rule): the uniform ``u_t`` is
  element ``t % B`` of ``default_rng(seed_sequence(seed, PURPOSE_CHOICE, t // B)).random(B)``
  (``B = CHOICE_BLOCK``). It picks an active cluster: with equal active weights
  the ``min(floor(u * m), m - 1)``-th of the ``m`` active clusters (by id), else
  the first whose normalised cumulative weight exceeds ``u``. The cluster's
  draw count ``j`` gives the document (:class:`~clusterclip.schedule.groups.Groups`).
  A cluster whose count reaches ``max_repeats * size`` leaves the active set.
  The vectorised engine maps a whole block at once and, when some cluster hits
  its cap inside the block, keeps the prefix up to that position and re-maps
  only the rest with the new active set -- identical to the one-step rule.
* **planned**: :mod:`clusterclip.schedule.planned`.
* **exhaustion**: once every cluster is clipped (position ``E = sum of caps``
  for online, ``sum(plan)`` for planned) the schedule stops, raises, or goes on
  with shuffled passes over every usable document (``on_exhausted``).

Resuming at position ``p`` replays the cluster *choices* (not the documents)
of the blocks before ``p``'s block; a token budget is resumed from the counts
(:meth:`Groups.tokens_of_first`).
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterclip.errors import ClusterClipError, ClusterClipWarning, hint, invalid, spell
from clusterclip.schedule.config import ScheduleConfig
from clusterclip.schedule.feistel import FeistelGroups
from clusterclip.schedule.groups import (
    CHOICE_BLOCK,
    PURPOSE_CHOICE,
    PURPOSE_CLUSTER_PASS,
    PURPOSE_FALLBACK_PASS,
    PURPOSE_RANDOM_PASS,
    Groups,
    seed_sequence,
    window_passes,
)
from clusterclip.schedule.hierarchy import ActiveTree, Hierarchy
from clusterclip.schedule.io import Schedule
from clusterclip.schedule.planned import PlannedOrder, plan_draws, planned_phases
from clusterclip.schedule.stats import GroupDraws, compute_stats, dense_ids
from clusterclip.schedule.units import RotatingGroups, Units
from clusterclip.schedule.windows import Window, WindowChooser
from clusterclip.threads import FasterWay, helper

if TYPE_CHECKING:  # the policy module builds on this one
    from clusterclip.schedule.policy import Policy

__all__ = [
    "DRAW_RULES",
    "DrawRule",
    "HierarchicalChooser",
    "OnlineChooser",
    "Prepared",
    "ScheduleStream",
    "block_uniforms",
    "materialise",
    "rechunk",
]

NO_CAP = np.iinfo(np.int64).max // 4

#: Shortest run of positions mapped at once after a clip (a speed knob only:
#: the result does not depend on it).
MIN_SEGMENT = 512


def block_uniforms(seed: int, block: int) -> np.ndarray:
    """The ``CHOICE_BLOCK`` uniforms in [0, 1) of one position block."""
    rng = np.random.Generator(np.random.PCG64(seed_sequence(seed, PURPOSE_CHOICE, block)))
    return rng.random(CHOICE_BLOCK)


def _member_dtype(n_documents: int) -> type:
    """int32 document ids when they fit: halves the member table and the cache."""
    return np.int32 if n_documents < 2**31 else np.int64


#: Labels are read this many at a time, so that no temporary is as large as them.
_LABEL_CHUNK = 2**20


def _label_chunks(labels: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, labels.shape[0], _LABEL_CHUNK):
        yield start, labels[start : start + _LABEL_CHUNK]


def _is_dense(labels: np.ndarray, max_label: int) -> bool:
    """Whether per-id tables (``max_label + 1`` entries) cost no more than the labels."""
    return max_label < max(labels.shape[0], 1024)


def _present_clusters(labels: np.ndarray, max_label: int) -> tuple[np.ndarray, np.ndarray]:
    """Ascending ids of the non-empty clusters and their sizes (int64, shape (K,)).

    Dense ids: a count per id. Sparse ids: one sort of a copy of the labels
    (transient, as large as the labels), so nothing is indexed by id.
    """
    if _is_dense(labels, max_label):
        counts = np.zeros(max_label + 1, dtype=np.int64)
        for _, part in _label_chunks(labels):
            counts += np.bincount(part[part >= 0], minlength=max_label + 1)
        ids = np.flatnonzero(counts)
        return ids.astype(np.int64), counts[ids]
    ids, sizes = np.unique(labels, return_counts=True)
    usable = ids >= 0
    return ids[usable], sizes[usable].astype(np.int64)


class _GroupOf:
    """Group index of labels (-1: negative label or cluster not drawn), dense or sparse ids."""

    def __init__(self, group_ids: np.ndarray, max_label: int, dense: bool) -> None:
        self.group_ids = group_ids
        self.table = None
        if dense:  # label + 1 -> group
            self.table = np.full(max_label + 2, -1, dtype=np.int64)
            self.table[group_ids + 1] = np.arange(group_ids.size)

    def __call__(self, part: np.ndarray) -> np.ndarray:
        if self.table is not None:
            return self.table[np.maximum(part, -1) + 1]
        # Sorted queries: each search starts where the previous one ended (2-3x faster).
        order = np.argsort(part)
        where = np.empty(part.size, dtype=np.int64)
        where[order] = np.searchsorted(self.group_ids, part[order])
        np.minimum(where, self.group_ids.size - 1, out=where)
        return np.where(self.group_ids[where] == part, where, -1)


#: Documents per group are sorted as ``group << _DOC_BITS | document`` (one int64 sort).
_DOC_BITS = 34


def _members_by_group(labels: np.ndarray, group_of: _GroupOf) -> np.ndarray:
    """Document ids grouped by group index, ascending inside groups (others left out).

    Fewer than 2**15 - 1 groups: a stable radix sort of int16 group indices;
    more: one sort of ``group << 34 | document`` (several times faster than a
    stable sort of int32 keys). Memory: N int64 plus the result, beyond the labels.
    """
    n = labels.shape[0]
    n_groups = group_of.group_ids.size
    member_type = _member_dtype(n)
    if n_groups < 2**15 - 1 or n >= 2**_DOC_BITS or n_groups >= 2 ** (62 - _DOC_BITS):
        keys = np.empty(n, dtype=np.int16 if n_groups < 2**15 - 1 else np.int64)
        for start, part in _label_chunks(labels):
            keys[start : start + part.size] = group_of(part)
        order = np.argsort(keys, kind="stable")  # a radix sort for int16 keys
        skipped = int(np.count_nonzero(keys < 0))
        return order[skipped:].astype(member_type)
    packed = np.empty(n, dtype=np.int64)
    for start, part in _label_chunks(labels):
        packed[start : start + part.size] = group_of(part) << _DOC_BITS
        packed[start : start + part.size] |= np.arange(start, start + part.size)
    packed.sort()
    skipped = int(np.searchsorted(packed, 0))  # negative: no group
    members = np.empty(n - skipped, dtype=member_type)
    low = (1 << _DOC_BITS) - 1
    for start in range(0, members.size, _LABEL_CHUNK):
        chunk = packed[skipped + start : skipped + start + _LABEL_CHUNK]
        members[start : start + chunk.size] = chunk & low
    return members


def _grouped_by_label(
    labels: np.ndarray, max_label: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Non-empty clusters and their documents from one sort of ``label << b | document``.

    Returns the ascending ids of the non-empty clusters, their sizes (int64)
    and the documents of each, concatenated in id order, ascending inside a
    cluster (negative labels left out); None when the labels do not fit beside
    ``b = bit_length(N - 1)`` document bits in an int64 (then
    :func:`_present_clusters` and :func:`_members_by_group` do it). One sort
    replaces a count or a sort of the labels, a group index per document and a
    sort of those, whatever the ids (dense or sparse). Memory: N int64 plus the
    result, beyond the labels.
    """
    n = labels.shape[0]
    bits = max(n - 1, 1).bit_length()
    if max_label >= 2 ** (63 - bits):
        return None
    packed = np.empty(n, dtype=np.int64)
    for start, part in _label_chunks(labels):
        block = packed[start : start + part.size]
        np.maximum(part, -1, out=block)  # every negative label first, as -1
        block <<= bits
        block |= np.arange(start, start + part.size)
    packed.sort()
    skipped = int(np.searchsorted(packed, 0))
    members = np.empty(n - skipped, dtype=_member_dtype(n))
    heads = []  # where each cluster's documents start in members
    low = (1 << bits) - 1
    previous = -1
    for start in range(0, members.size, _LABEL_CHUNK):
        chunk = packed[skipped + start : skipped + start + _LABEL_CHUNK]
        members[start : start + chunk.size] = chunk & low
        label = chunk >> bits
        change = np.empty(label.size, dtype=bool)
        change[0] = int(label[0]) != previous  # labels here are >= 0: a head at 0
        np.not_equal(label[1:], label[:-1], out=change[1:])
        heads.append(np.flatnonzero(change) + start)
        previous = int(label[-1])
    starts = np.concatenate(heads) if heads else np.zeros(0, dtype=np.int64)
    ids = packed[skipped + starts] >> bits
    sizes = np.diff(starts, append=members.size)
    return ids, sizes, members


def _caps(sizes: np.ndarray, max_repeats: int | None) -> tuple[np.ndarray, int | None]:
    """Per group cap ``max_repeats * size`` (``NO_CAP`` where that is out of reach).

    Returns the caps and the draws before every group is clipped, or None when
    no cap can end the schedule (no clip, or one of at least ``NO_CAP`` draws: no
    schedule is that long). Exact for any ``max_repeats``: nothing overflows.
    """
    if max_repeats is None:
        return np.full(len(sizes), NO_CAP, dtype=np.int64), None
    repeats = min(int(max_repeats), NO_CAP)
    reach = NO_CAP // sizes  # the largest R whose cap stays below NO_CAP
    caps = np.where(repeats <= reach, np.minimum(repeats, reach) * sizes, NO_CAP)
    total = repeats * int(sizes.sum())  # == sum(caps) unless some cap is NO_CAP
    return caps, (total if total < NO_CAP else None)


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
    groups : Groups
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
        labels = labels if units is None else units.labels
        max_label = int(labels.max())
        grouped = None if policy.single_group else _grouped_by_label(labels, max_label)
        if grouped is None:
            present, counts = _present_clusters(labels, max_label)
        else:
            present, counts, by_label = grouped
        self.stats_ids = (
            np.arange(max_label + 1, dtype=np.int64) if _is_dense(labels, max_label) else present
        )
        seed = config.seed
        if policy.single_group:
            members = np.flatnonzero(labels >= 0).astype(_member_dtype(labels.shape[0]))
            sizes = np.array([members.size], dtype=np.int64)
            self.cluster_ids = np.array([-1], dtype=np.int64)
            self.weights = np.ones(1)
            keys = np.zeros(1, np.int64)
            purpose = PURPOSE_RANDOM_PASS
        else:
            weights = policy.cluster_weights(
                counts, config.alpha, config.cluster_weights, cluster_ids=present
            )
            drawn = weights > 0
            every = bool(drawn.all())  # then no copies of the per-cluster arrays made here
            self.cluster_ids = present if every else present[drawn]
            sizes = counts if every else counts[drawn]
            self.weights = weights[drawn]  # a copy: the policy's array stays its own
            if grouped is None:
                group_of = _GroupOf(self.cluster_ids, max_label, _is_dense(labels, max_label))
                members = _members_by_group(labels, group_of)
            else:  # the drawn clusters' documents
                members = by_label if every else by_label[np.repeat(drawn, counts)]
            keys = self.cluster_ids
            purpose = PURPOSE_CLUSTER_PASS
        # policy="hierarchical": the ancestor path of every group's leaf (None: flat).
        self.tree_paths = None
        if hierarchy is not None and not policy.single_group:
            self.tree_paths = hierarchy.paths_of(self.cluster_ids)
        self.caps, self.capped_total = _caps(sizes, config.max_repeats)
        self.capped = bool((self.caps < NO_CAP).any())
        self.rule = DRAW_RULES[config.schedule_version]
        scale = self.weights / self.weights.max()
        self.groups = self.rule.groups(
            members, sizes, keys, seed=seed, purpose=purpose,
            shares=scale / scale.sum(), max_repeats=config.max_repeats,
        )  # fmt: skip
        if units is not None:
            self.groups = RotatingGroups(self.groups, units)
        self._fallback: Groups | None = None
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

    @property
    def fallback(self) -> Groups:
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


class OnlineChooser:
    """Cluster choices of the online rule, block after block, from counts only.

    A block's uniforms are mapped a *segment* at a time with the current
    active set. If some cluster takes its last allowed draw inside the
    segment, the prefix up to that position is kept, the cluster leaves the
    active set, and the rest is mapped again: exactly the one-step rule. The
    segment length adapts (speed only, never the result): long while clips are
    rare, about twice the distance between recent clips when they are dense
    (many tiny clusters), so each clip costs work proportional to that distance.

    With equal weights a clip does not rebuild the active list (O(K)): the
    clipped positions are kept aside (``removed``) and the i-th active
    cluster is found through them, until there are enough of them to compact
    the list at once. Unequal weights rebuild their cumulative table per clip.
    """

    def __init__(self, prep: Prepared) -> None:
        self.seed = prep.config.seed
        self.weights = prep.weights
        self.caps = prep.caps
        self.n_groups = len(prep.weights)
        self.counts = np.zeros(self.n_groups, dtype=np.int64)
        self.active_ids = np.flatnonzero(self.caps > 0)
        self.removed = np.zeros(0, dtype=np.int64)  # positions in active_ids clipped since
        self.skips = self.removed  # removed[j] - j: active clusters before removed[j]
        self.all_equal = bool(self.weights.min() == self.weights.max())
        self.segment = CHOICE_BLOCK
        self.events: list[tuple[int, int]] = []
        self._refresh()

    @property
    def n_active(self) -> int:
        """Clusters still drawn."""
        return self.active_ids.size - self.removed.size

    def _compact(self) -> None:
        if self.removed.size:
            self.active_ids = np.delete(self.active_ids, self.removed)
            self.removed = self.skips = np.zeros(0, dtype=np.int64)

    def _refresh(self) -> None:
        """Mapping tables of the current active set (O(m); once per clip)."""
        if self.all_equal:  # any subset of equal weights is equal
            self.equal = True
            return
        w = self.weights[self.active_ids]
        self.equal = bool(w.size == 0 or w.min() == w.max())
        if not self.equal:
            cumulative = np.cumsum(w)  # sequential sum, as the oracle's loop
            self.cdf = cumulative / cumulative[-1]

    def _deactivate(self, group: int) -> None:
        where = int(np.searchsorted(self.active_ids, group))
        if not self.all_equal:
            self.active_ids = np.delete(self.active_ids, where)
            self._refresh()
            return
        at = int(np.searchsorted(self.removed, where))
        self.removed = np.concatenate((self.removed[:at], [where], self.removed[at:]))
        if self.removed.size * self.removed.size > self.active_ids.size:  # O(sqrt(m)) kept aside
            self._compact()
        else:
            self.skips = self.removed - np.arange(self.removed.size)

    def _map(self, u: np.ndarray) -> np.ndarray:
        m = self.n_active
        if m == 1:
            self._compact()
            return np.full(u.shape[0], self.active_ids[0], dtype=np.int64)
        # Equal weights: floor(u * m) (no table); otherwise the inverse CDF.
        idx = (u * m).astype(np.int64) if self.equal else np.searchsorted(self.cdf, u, side="right")
        np.minimum(idx, m - 1, out=idx)
        if self.removed.size:  # the idx-th active one: skip the clipped positions before it
            idx += np.searchsorted(self.skips, idx, side="right")
        # Nothing clipped yet: the i-th active cluster is cluster i.
        return idx if m == self.n_groups else self.active_ids[idx]

    def choose(self, block: int, n: int) -> np.ndarray:
        """Clusters (group index) of the first ``n`` positions of ``block``.

        Advances ``counts`` and records ``(group, offset in block)`` of every
        clip in ``events``; the caller guarantees that those ``n`` draws do not
        exceed the capped total (an active cluster exists at each).
        """
        out = np.empty(n, dtype=np.int64)
        self.events = []
        u = None
        pos = 0
        while pos < n:
            length = self.segment
            m = self.n_active
            if self.n_groups <= 4 * length and m > 1:
                # Few clusters: no clip is likely before the closest one has had
                # about its room left times m draws; stop the segment near there.
                self._compact()
                room = self.caps[self.active_ids] - self.counts[self.active_ids]
                length = min(length, max(MIN_SEGMENT * 8, int(room.min()) * m // 2))
            seg_end = min(n, pos + length)
            if m == 1:
                self._compact()
                chosen = np.full(seg_end - pos, self.active_ids[0], dtype=np.int64)
            else:
                if u is None:
                    u = block_uniforms(self.seed, block)
                chosen = self._map(u[pos:seg_end])
            stop = self._first_clip(chosen)
            if stop is None:
                out[pos:seg_end] = chosen
                pos = seg_end
                self.segment = min(CHOICE_BLOCK, self.segment * 8)
                continue
            out[pos : pos + stop + 1] = chosen[: stop + 1]
            clipped = int(chosen[stop])  # reached max_repeats * size draws
            self.events.append((clipped, pos + stop))
            self._deactivate(clipped)
            pos += stop + 1
            self.segment = max(MIN_SEGMENT, 2 * (stop + 1))
        return out

    def _first_clip(self, chosen: np.ndarray) -> int | None:
        """Offset where some cluster takes its last allowed draw, else None.

        Advances ``counts`` by the segment up to and including that offset
        (the whole segment when no cluster is clipped in it).
        """
        if self.n_groups <= 2 * chosen.size:  # dense: per-cluster tallies
            hits = np.bincount(chosen, minlength=self.n_groups)
            room = self.caps - self.counts
            over = np.flatnonzero((hits >= room) & (hits > 0))
            if over.size == 0:
                self.counts += hits
                return None
            if over.size <= 4:  # a few candidates: scan for each one's last draw
                stop = min(int(np.flatnonzero(chosen == k)[room[k] - 1]) for k in over)
                np.add.at(self.counts, chosen[: stop + 1], 1)
                return stop
        # Count the whole segment, then look only at the clusters it took to
        # their cap: the clip of cluster k is its occurrence number
        # caps[k] - (counts before the segment), found by sorting those few.
        np.add.at(self.counts, chosen, 1)
        reached = np.flatnonzero(self.counts[chosen] >= self.caps[chosen])
        if reached.size == 0:
            return None
        flagged = chosen[reached]
        if reached.size <= 8 and len(set(flagged.tolist())) == reached.size:
            stop = int(reached[0])  # each flagged cluster drawn once here: that draw clips it
        else:
            stop = self._clip_among(reached, flagged)
        np.subtract.at(self.counts, chosen[stop + 1 :], 1)
        return stop

    def _clip_among(self, reached: np.ndarray, flagged: np.ndarray) -> int:
        """First clip among the positions ``reached`` of the clusters ``flagged`` at their cap."""
        order = np.argsort(flagged, kind="stable")  # positions ascend inside a cluster
        ordered = flagged[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        clusters = ordered[starts]
        tallies = np.diff(np.append(starts, ordered.size))
        room = self.caps[clusters] - (self.counts[clusters] - tallies)
        return int(reached[order[starts + room - 1]].min())


class HierarchicalChooser(OnlineChooser):
    """The online rule of ``policy="hierarchical"``: uniform per level, down a cluster tree.

    Same segments, clip detection and counts as :class:`OnlineChooser` (the
    leaves are its groups, all of weight 1); only the mapping of uniforms to
    groups walks the tree (:class:`~clusterclip.schedule.hierarchy.ActiveTree`),
    and a clip also prunes the tree (O(depth x fan-out)). With one active
    leaf both rules pick it, so the flat shortcut of the base class stays.
    """

    def __init__(self, prep: Prepared) -> None:
        super().__init__(prep)
        self.tree = ActiveTree(prep.tree_paths, prep.cluster_ids)  # every cap > 0: all active

    def _map(self, u: np.ndarray) -> np.ndarray:
        if self.n_active == 1:
            return super()._map(u)
        return self.tree.walk(u)

    def _deactivate(self, group: int) -> None:
        super()._deactivate(group)
        self.tree.deactivate(group)


def _earliest(*bounds: int | None) -> int | None:
    """The smallest bound that is not None (None when all are)."""
    given = [b for b in bounds if b is not None]
    return min(given) if given else None


# --------------------------------------------------------------------------- sources
# A source produces the cluster part of the schedule from a start position:
# ``seek(start, end)`` replays what comes before the segment holding ``start``
# (counts only) and returns that segment's first position; ``counts_before()``
# the draws per group before it; ``segment(g0, limit)`` the documents, groups
# and clip offsets of the next positions from ``g0`` (never past ``limit``).


class _BlockOnline:
    """Versions 1 and 2: ``CHOICE_BLOCK`` positions per block, mapped by :class:`OnlineChooser`."""

    def __init__(self, prep: Prepared) -> None:
        self.groups = prep.groups
        flat = prep.tree_paths is None
        self.chooser = OnlineChooser(prep) if flat else HierarchicalChooser(prep)
        self.last: tuple[int, np.ndarray] | None = None  # the latest segment: (g0, chosen)

    def seek(self, start: int, end: int | None) -> int:
        block = start // CHOICE_BLOCK
        for b in range(block):  # replay choices only: counts at the block start
            n = CHOICE_BLOCK if end is None else min(CHOICE_BLOCK, end - b * CHOICE_BLOCK)
            if n <= 0:
                break
            self.chooser.choose(b, n)
        return block * CHOICE_BLOCK

    def counts_before(self) -> np.ndarray:
        return self.chooser.counts.copy()

    def segment(self, g0: int, limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        block = g0 // CHOICE_BLOCK
        g1 = _earliest(limit, (block + 1) * CHOICE_BLOCK)
        chooser = self.chooser
        first = chooser.counts.copy()
        chosen = chooser.choose(block, g1 - g0)
        self.last = (g0, chosen)
        keys = chosen.astype(np.int16) if len(first) < 2**15 else chosen.astype(np.int32)
        order = np.argsort(keys, kind="stable")  # a radix sort for int16 keys
        docs = self.groups.lookup_grouped(order, chooser.counts - first, first)
        clips = np.array([offset for _, offset in chooser.events], dtype=np.int64)
        return docs, chosen, clips

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions (inside the latest segment)."""
        return _without_tail(self.chooser.counts.copy(), self.last, position)


class _Planned:
    """The planned order (every version), ``CHOICE_BLOCK`` positions at a time."""

    def __init__(self, prep: Prepared, planned: PlannedOrder) -> None:
        self.prep = prep
        self.planned = planned
        self.start = 0

    def seek(self, start: int, end: int | None) -> int:
        self.start = start // CHOICE_BLOCK * CHOICE_BLOCK
        return self.start

    def counts_before(self) -> np.ndarray:
        return self.planned.counts_before(min(self.start, self.planned.total))

    def segment(self, g0: int, limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g1 = _earliest(limit, (g0 // CHOICE_BLOCK + 1) * CHOICE_BLOCK)
        chosen, draws, first, end = self.planned.window_with_spans(g0, g1)
        clips = np.flatnonzero(draws == self.prep.caps[chosen] - 1)
        return self.prep.groups.lookup(chosen, draws, first=first, end=end), chosen, clips

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions."""
        return self.planned.counts_before(position)


class _Windows:
    """Version 3: rejection windows (:mod:`clusterclip.schedule.windows`)."""

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        self.chooser = WindowChooser(prep.config.seed, prep.weights, prep.caps)
        self.pending = None
        self.last: Window | None = None  # the latest window handed out (whole)
        self.ways = FasterWay()  # 1: look up on the helper thread (a speed knob only)

    def seek(self, start: int, end: int | None) -> int:
        self.pending = self.chooser.skip_to(start, end)
        return self.chooser.position if self.pending is None else self.pending.start

    def counts_before(self) -> np.ndarray:
        counts = self.chooser.counts.copy()
        if self.pending is not None:  # its counts are applied already
            np.subtract.at(counts, self.pending.groups, 1)
        return counts

    def segment(self, g0: int, limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        window, self.pending = self.pending, None
        if window is None:
            window = self.chooser.next()
        if window is None or window.start != g0:  # the caller asks for positions in order
            raise RuntimeError("clusterclip: the window source was asked for a gap")
        self.last = window
        groups, draws, clips, order = window.groups, window.draws, window.clips, window.order
        if limit is not None and limit - g0 < window.size:  # the budget ends inside: a prefix
            n = limit - g0
            groups, draws, clips = groups[:n], draws[:n], clips[clips < n]
            order = None if order is None else order[order < n]
        lookup = self.prep.groups.lookup
        if order is None:
            task = (lookup, groups, draws)
        else:
            task = (_lookup_in_order, lookup, groups, draws, order)
        if limit is not None and window.start + window.size >= limit:  # the last window
            return task[0](*task[1:]), groups, clips
        # This window's documents, then the next window's choice (counts only; it is
        # pending, as after a seek). With a helper thread the two can overlap (numpy
        # releases the GIL in both): the helper looks up while this thread chooses.
        # Whether that is faster depends on the machine's load: measured, window by
        # window (self.ways). The same schedule either way: lookups do not read counts.
        worker = helper()
        threaded = worker is not None and self.ways.choose() == 1
        began = time.perf_counter()
        if threaded:
            future = worker.submit(*task)
            try:
                self.pending = self.chooser.next()
            finally:
                docs = future.result()
        else:
            docs = task[0](*task[1:])
            self.pending = self.chooser.next()
        if worker is not None:
            self.ways.record(int(threaded), time.perf_counter() - began)
        return docs, groups, clips

    def drawn_before(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions (inside the latest window)."""
        last = None if self.last is None else (self.last.start, self.last.groups)
        return _without_tail(self.counts_before(), last, position)


def _lookup_in_order(
    lookup: Callable[..., np.ndarray], groups: np.ndarray, draws: np.ndarray, order: np.ndarray
) -> np.ndarray:
    docs = np.empty(groups.size, dtype=np.int64)  # looked up group by group, put in place
    docs[order] = lookup(groups[order], draws[order])
    return docs


def _without_tail(
    counts: np.ndarray, last: tuple[int, np.ndarray] | None, position: int
) -> np.ndarray:
    """``counts`` (all applied, a copy) less the latest segment's groups from ``position`` on.

    ``last``: the latest segment's first position and the group of each of its
    positions (None: no segment yet, nothing to take off).
    """
    if last is None:
        return counts
    start, groups = last
    if not start <= position <= start + groups.size:  # an engine bug, never a user error
        raise RuntimeError(
            f"clusterclip: draws counted at {position}, outside the latest segment "
            f"[{start}, {start + groups.size}]"
        )
    np.subtract.at(counts, groups[position - start :], 1)
    return counts


def _legacy_groups(
    members: np.ndarray,
    sizes: np.ndarray,
    keys: np.ndarray,
    *,
    seed: int,
    purpose: int,
    shares: np.ndarray | None = None,
    max_repeats: int | None = None,
) -> Groups:
    """Versions 1 and 2: pass permutations from generators, cached (:class:`Groups`)."""
    window = None if shares is None else window_passes(sizes, shares, max_repeats)
    return Groups(members, sizes, keys, seed=seed, purpose=purpose, window=window)


def _feistel_groups(
    members: np.ndarray,
    sizes: np.ndarray,
    keys: np.ndarray,
    *,
    seed: int,
    purpose: int,
    shares: np.ndarray | None = None,
    max_repeats: int | None = None,
) -> FeistelGroups:
    """Version 3: pass permutations computed per draw (:class:`FeistelGroups`)."""
    return FeistelGroups(members, sizes, keys, seed=seed, purpose=purpose)


@dataclass(frozen=True)
class DrawRule:
    """The version-specific parts of the engine: the online source and the pass permutations."""

    online: Callable[[Prepared], Any]
    groups: Callable[..., Any]


#: The draw rule of every supported ``schedule_version`` (the one place they are chosen).
DRAW_RULES: dict[int, DrawRule] = {
    1: DrawRule(online=_BlockOnline, groups=_legacy_groups),
    2: DrawRule(online=_BlockOnline, groups=_legacy_groups),
    3: DrawRule(online=_Windows, groups=_feistel_groups),
}


class ScheduleStream:
    """Produces the global schedule block by block from any start position.

    After iteration, ``clip_step`` (per group, -1 = never) holds the positions
    at which groups took their last allowed draw (for emitted positions only),
    ``end`` the schedule length once known, ``budget_met`` and ``exhausted_at``.
    """

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        config = prep.config
        self.config = config
        self.planned: PlannedOrder | None = None
        if config.order == "planned":
            self.planned = PlannedOrder(
                self._plan(), planned_phases(config.seed, len(prep.weights))
            )
            self.cluster_end: int | None = self.planned.total
        else:
            self.cluster_end = prep.capped_total
        # Does the capped part fall short of the budget?
        self.exhausted = False
        if self.cluster_end is not None:
            if config.num_samples is not None:
                self.exhausted = config.num_samples > self.cluster_end
            else:
                self.exhausted = self._capped_tokens() < config.num_tokens
        self.exhausted_at = self.cluster_end if self.exhausted else None
        self.end: int | None = config.num_samples
        if self.exhausted and config.on_exhausted == "stop":
            self.end = self.cluster_end
        self.budget_met = not self.exhausted or config.on_exhausted == "random"
        self.clip_step = np.full(len(prep.weights), -1, dtype=np.int64)
        self._latest: _BlockOnline | _Planned | _Windows | None = None
        # Known before any draw: fail or warn now, never silently.
        if self.exhausted and config.on_exhausted == "error":
            raise self._exhausted_error()
        if self.exhausted and config.on_exhausted == "stop":
            self._warn_exhausted()

    # -- planning ---------------------------------------------------------
    def _capped_tokens(self) -> int:
        prep = self.prep
        if self.planned is not None:
            return prep.groups.tokens_of_first(self.planned.plan, prep.lengths)
        if prep.units is not None:  # R passes of a unit emit members in turn
            return prep.groups.tokens_of_first(prep.caps, prep.lengths)
        # Finite capped_total: every cap is max_repeats * size. Python ints: exact.
        return int(self.config.max_repeats) * int(prep.group_tokens.sum())

    def _plan(self) -> np.ndarray:
        prep, config = self.prep, self.prep.config
        caps = prep.caps if prep.capped else None
        if config.num_samples is not None:
            return plan_draws(prep.weights, caps, config.num_samples)
        # Token budget: smallest T whose plan's *expected* tokens (mean length
        # per cluster) reach the budget, then grow T until the plan's exact
        # tokens do. The stream then stops at the first position where the
        # cumulative tokens reach the budget, as for the online order.
        budget = config.num_tokens
        means = prep.group_tokens / prep.groups.sizes
        high = prep.capped_total
        if high is not None and float(plan_draws(prep.weights, caps, high) @ means) < budget:
            return plan_draws(prep.weights, caps, high)
        limit = NO_CAP if high is None else high  # no schedule is longer than NO_CAP
        low, upper = 1, 1
        while float(plan_draws(prep.weights, caps, upper) @ means) < budget:
            low, upper = upper, upper * 2
            if upper >= limit:
                upper = limit
                break
        while low < upper:
            middle = (low + upper) // 2
            if float(plan_draws(prep.weights, caps, middle) @ means) >= budget:
                upper = middle
            else:
                low = middle + 1
        total = upper
        mean_all = max(float(prep.group_tokens.sum()) / prep.groups.sizes.sum(), 1e-9)
        while True:
            plan = plan_draws(prep.weights, caps, total)
            exact = prep.groups.tokens_of_first(plan, prep.lengths)
            if exact >= budget or total >= limit:
                return plan
            total = min(limit, total + int(math.ceil((budget - exact) / mean_all)) + 1)

    # -- streaming --------------------------------------------------------
    def _source(self) -> _BlockOnline | _Planned | _Windows:
        if self.planned is not None:
            return _Planned(self.prep, self.planned)
        return self.prep.rule.online(self.prep)

    def _final_counts(self) -> np.ndarray:
        """Draws of every group once the cluster part is over (every group clipped)."""
        return self.prep.caps.copy() if self.planned is None else self.planned.plan.copy()

    def blocks(self, start: int = 0) -> Iterator[np.ndarray]:
        """Documents of positions ``start, start+1, ...`` in consecutive arrays."""
        prep, config = self.prep, self.config
        cluster_end = self.cluster_end
        source = self._source()
        self._latest = source
        in_clusters = cluster_end is None or start < cluster_end
        # In the fallback passes every cluster is clipped: nothing to replay.
        position = source.seek(start, cluster_end) if in_clusters else start
        tokens = 0
        budget = config.num_tokens
        if budget is not None:
            counts = source.counts_before() if in_clusters else self._final_counts()
            tokens = self._tokens_before(position, counts)
            if tokens >= budget:
                return
        while self.end is None or position < self.end:
            chosen = None
            if cluster_end is None or position < cluster_end:
                limit = _earliest(self.end, cluster_end)
                docs, chosen, clips = source.segment(position, limit)
            else:
                g1 = _earliest(self.end, (position // CHOICE_BLOCK + 1) * CHOICE_BLOCK)
                docs = self._fallback_part(position - cluster_end, g1 - position)
            last = False
            if budget is not None:
                running = tokens + np.cumsum(prep.lengths[docs])
                reach = int(np.searchsorted(running, budget, side="left"))
                if reach < docs.size:
                    docs = docs[: reach + 1]
                    self.end = position + reach + 1
                    self.budget_met = True
                    last = True
                tokens = int(running[docs.size - 1])
            if chosen is not None:
                hit = clips[(clips < docs.size) & (position + clips >= start)]
                self.clip_step[chosen[hit]] = position + hit
            if position + docs.size > start:
                yield docs[max(0, start - position) :]
            position += docs.size
            if last:
                return
            if (
                cluster_end is not None
                and position >= cluster_end
                and (self.exhausted and config.on_exhausted == "stop")
            ):
                self.end = cluster_end
                return

    def drawn(self, position: int) -> np.ndarray:
        """Draws of every group among the first ``position`` positions of the cluster part.

        From the counts of the source :meth:`blocks` last iterated, which must
        have produced ``position`` (at most the cluster part's end) and no more
        than one segment beyond it: what :func:`materialise` reads at the end.
        """
        if self._latest is None:
            return np.zeros(len(self.prep.weights), dtype=np.int64)
        return self._latest.drawn_before(position)

    def _fallback_part(self, first: int, n: int) -> np.ndarray:
        """Documents of draws ``first .. first + n - 1`` of the fallback passes."""
        draws = np.arange(first, first + n, dtype=np.int64)
        return self.prep.fallback.lookup(
            np.zeros_like(draws), draws, first=draws[:1].copy(), end=draws[-1:] + 1
        )

    def _tokens_before(self, position: int, counts: np.ndarray) -> int:
        prep = self.prep
        tokens = prep.groups.tokens_of_first(counts, prep.lengths)
        if self.cluster_end is not None and position > self.cluster_end:
            extra = np.array([position - self.cluster_end])
            tokens += prep.fallback.tokens_of_first(extra, prep.lengths)
        return tokens

    def _budget_text(self) -> str:
        config = self.config
        if config.num_samples is not None:
            return hint("num_samples", config.num_samples)
        return hint("num_tokens", config.num_tokens)

    def _exhausted_error(self) -> ClusterClipError:
        return ClusterClipError(
            f"the budget {self._budget_text()} cannot be met: every cluster is clipped at "
            f"{hint('max_repeats', self.config.max_repeats)} after {self.cluster_end} draws. "
            f"Raise {spell('max_repeats')} above {self.config.max_repeats}, lower the budget, "
            "or pass "
            f"{hint('on_exhausted', 'stop')} or {hint('on_exhausted', 'random')}."
        )

    def _warn_exhausted(self) -> None:
        warnings.warn(
            f"clusterclip: the budget {self._budget_text()} cannot be met: every cluster "
            f"is clipped at {hint('max_repeats', self.config.max_repeats)} after "
            f"{self.cluster_end} draws; the schedule stops there "
            f"({hint('on_exhausted', 'stop')}). Pass {hint('on_exhausted', 'random')} to "
            f"continue with random passes, or raise {spell('max_repeats')} above "
            f"{self.config.max_repeats}.",
            ClusterClipWarning,
            stacklevel=_outside_package(),
        )


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _outside_package() -> int:
    """``stacklevel`` of the first caller outside ``clusterclip`` (whatever the route)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR + os.sep
    ):
        frame = frame.f_back
        level += 1
    return level


def materialise(stream: ScheduleStream, indices: np.ndarray) -> Schedule:
    """The :class:`Schedule` of ``indices`` produced by ``stream.blocks(0)``: stats and config.

    Parameters
    ----------
    stream : ScheduleStream
        The stream, iterated to its end (its clip steps and budget state are read).
    indices : ndarray of int64, shape (T,)
        The concatenated blocks.
    """
    prep = stream.prep
    ids = prep.stats_ids
    clip_step = np.full(ids.size, -1, dtype=np.int64)
    planned = None
    if stream.planned is not None and not prep.policy.single_group:
        planned = np.zeros(ids.size, dtype=np.int64)
    drawn = None
    if not prep.policy.single_group:
        where = prep.cluster_ids if dense_ids(ids) else np.searchsorted(ids, prep.cluster_ids)
        clip_step[where] = stream.clip_step
        if planned is not None:
            planned[where] = stream.planned.plan
        if prep.units is None:  # with units the members are representatives only
            # Every draw of the cluster part is a draw of its group's cluster: count
            # them from the engine's counts, not a label per draw.
            end = stream.cluster_end
            emitted = indices.size if end is None else min(indices.size, end)
            drawn = GroupDraws(stream.drawn(emitted), prep.groups.sizes, where, emitted)
    stats = compute_stats(
        indices,
        prep.labels,
        prep.lengths,
        budget_met=stream.budget_met,
        exhausted_at=stream.exhausted_at,
        clip_step=clip_step,
        planned_draws=planned,
        cluster_ids=ids,
        drawn=drawn,
    )
    return Schedule(indices=indices, stats=stats, config=prep.config)


def rechunk(parts: Iterator[np.ndarray], block_size: int) -> Iterator[np.ndarray]:
    """Regroup consecutive arrays into arrays of ``block_size`` (the last shorter).

    >>> [b.tolist() for b in rechunk(iter([np.arange(3), np.arange(2)]), 2)]
    [[0, 1], [2, 0], [1]]
    """
    pending: list[np.ndarray] = []
    held = 0
    for part in parts:
        while part.size:
            take = min(block_size - held, part.size)
            pending.append(part[:take])
            held += take
            part = part[take:]
            if held == block_size:
                yield pending[0] if len(pending) == 1 else np.concatenate(pending)
                pending, held = [], 0
    if held:
        yield pending[0] if len(pending) == 1 else np.concatenate(pending)
