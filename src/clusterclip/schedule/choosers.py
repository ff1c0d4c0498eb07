"""Cluster choices of versions 1 and 2: one uniform per position, one segment per clip.

Position ``t`` of the online rule draws the uniform ``u_t``, element ``t % B``
of ``default_rng(seed_sequence(seed, PURPOSE_CHOICE, t // B)).random(B)``
(``B = CHOICE_BLOCK``, :func:`block_uniforms`). It picks an active cluster:
with equal active weights the ``min(floor(u * m), m - 1)``-th of the ``m``
active clusters (by id), else the first whose normalised cumulative weight
exceeds ``u``. A cluster whose count reaches ``max_repeats * size`` leaves the
active set. :class:`OnlineChooser` maps a whole block at once and, when some
cluster hits its cap inside the block, keeps the prefix up to that position and
re-maps only the rest with the new active set -- identical to the one-step
rule. :class:`HierarchicalChooser` walks a cluster tree instead
(:mod:`clusterclip.schedule.hierarchy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from clusterclip.schedule.groups import CHOICE_BLOCK
from clusterclip.schedule.hierarchy import ActiveTree
from clusterclip.schedule.seeds import PURPOSE_CHOICE, seed_sequence

if TYPE_CHECKING:  # the prepared inputs build on the rules, which build on this
    from clusterclip.schedule.prepare import Prepared

__all__ = ["MIN_SEGMENT", "HierarchicalChooser", "OnlineChooser", "block_uniforms"]

#: Shortest run of positions mapped at once after a clip (a speed knob only:
#: the result does not depend on it).
MIN_SEGMENT = 512


def block_uniforms(seed: int, block: int) -> np.ndarray:
    """The ``CHOICE_BLOCK`` uniforms in [0, 1) of one position block."""
    rng = np.random.Generator(np.random.PCG64(seed_sequence(seed, PURPOSE_CHOICE, block)))
    return rng.random(CHOICE_BLOCK)


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
