"""Statistics of a materialised schedule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["GroupDraws", "ScheduleStats", "ScheduleSummary", "compute_stats", "summarise"]

_CHUNK = 2**20


@dataclass
class ScheduleStats:
    """What a schedule did, per cluster and per document.

    Attributes
    ----------
    n_draws : int
        Length of the schedule.
    budget_met : bool
        False when the schedule stopped early (``on_exhausted="stop"``).
    exhausted_at : int or None
        Position at which every cluster had been clipped, if that happened
        before the budget was met (the fallback passes start there for
        ``on_exhausted="random"``); None otherwise.
    draws_per_cluster : ndarray of int64, shape (C,)
        Draws of documents of each cluster of ``cluster_ids``.
    clip_step : ndarray of int64, shape (C,)
        Position of the draw that completed the cluster's last allowed pass
        (``max_repeats * size`` draws), -1 if it never happened.
    max_repeats_per_document : int
        Largest number of times any document appears.
    n_distinct_documents : int
        Documents that appear at least once.
    n_tokens : int or None
        Total tokens of the schedule when ``lengths`` were given.
    planned_draws : ndarray of int64, shape (C,), or None
        ``order="planned"``: the planned draws per cluster.
    repeats_per_document : ndarray of int64, shape (N,)
        Appearances of each document (not stored in the JSON sidecar; recomputed on load).
        A schedule built by the engine counts it on first access (one pass over
        the indices and an array as long as the corpus that most callers never read).
    cluster_ids : ndarray of int64, shape (C,)
        The cluster ids the per-cluster arrays describe, ascending: every id
        ``0 .. max_label`` when the ids are dense (``max_label < max(N, 1024)``),
        so that ``draws_per_cluster[k]`` is cluster ``k``; only the non-empty
        clusters otherwise (sparse ids such as hashes stay O(clusters)).
    """

    n_draws: int
    budget_met: bool
    exhausted_at: int | None
    draws_per_cluster: np.ndarray
    clip_step: np.ndarray
    max_repeats_per_document: int
    n_distinct_documents: int
    n_tokens: int | None = None
    planned_draws: np.ndarray | None = None
    repeats_per_document: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cluster_ids: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.cluster_ids is None:
            self.cluster_ids = np.arange(len(self.draws_per_cluster), dtype=np.int64)

    @classmethod
    def counting_repeats(
        cls, indices: np.ndarray, n_documents: int, **fields: Any
    ) -> ScheduleStats:
        """The statistics ``fields``, ``repeats_per_document`` counted from ``indices`` on first access.

        >>> stats = ScheduleStats.counting_repeats(
        ...     np.array([2, 0, 2]), 4, n_draws=3, budget_met=True, exhausted_at=None,
        ...     draws_per_cluster=np.array([3]), clip_step=np.array([-1]),
        ...     max_repeats_per_document=2, n_distinct_documents=2)
        >>> stats.repeats_per_document.tolist()
        [1, 0, 2, 0]
        """
        stats = cls(**fields)
        stats.__dict__["_repeats_of"] = (indices, int(n_documents))  # plain data: pickles
        return stats

    def _dense(self) -> bool:
        return dense_ids(self.cluster_ids)

    @property
    def n_clipped(self) -> int:
        """Number of clusters that were clipped."""
        return int((self.clip_step >= 0).sum())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (without the per-document repeats; ``cluster_ids`` if sparse)."""
        out = {
            "n_draws": int(self.n_draws),
            "budget_met": bool(self.budget_met),
            "exhausted_at": None if self.exhausted_at is None else int(self.exhausted_at),
            "draws_per_cluster": self.draws_per_cluster.tolist(),
            "clip_step": self.clip_step.tolist(),
            "max_repeats_per_document": int(self.max_repeats_per_document),
            "n_distinct_documents": int(self.n_distinct_documents),
            "n_tokens": None if self.n_tokens is None else int(self.n_tokens),
            "planned_draws": None if self.planned_draws is None else self.planned_draws.tolist(),
        }
        if not self._dense():
            out["cluster_ids"] = self.cluster_ids.tolist()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], repeats: np.ndarray) -> ScheduleStats:
        """Inverse of :meth:`to_dict`, given the recomputed per-document repeats."""
        planned = data.get("planned_draws")
        ids = data.get("cluster_ids")
        return cls(
            n_draws=int(data["n_draws"]),
            budget_met=bool(data["budget_met"]),
            exhausted_at=data.get("exhausted_at"),
            draws_per_cluster=np.asarray(data["draws_per_cluster"], dtype=np.int64),
            clip_step=np.asarray(data["clip_step"], dtype=np.int64),
            max_repeats_per_document=int(data["max_repeats_per_document"]),
            n_distinct_documents=int(data["n_distinct_documents"]),
            n_tokens=data.get("n_tokens"),
            planned_draws=None if planned is None else np.asarray(planned, dtype=np.int64),
            repeats_per_document=repeats,
            cluster_ids=None if ids is None else np.asarray(ids, dtype=np.int64),
        )


@dataclass(frozen=True)
class GroupDraws:
    """Draws already counted by the engine, per group: the first ``emitted`` positions.

    Attributes
    ----------
    counts : ndarray of int64, shape (G,)
        Draws of every group among the schedule's first ``emitted`` positions,
        each a draw of a document of the group's cluster.
    sizes : ndarray of int64, shape (G,)
        Documents of every group (disjoint groups, drawn in passes that are
        permutations of them).
    at : ndarray of int64, shape (G,)
        Where each group's cluster is in ``cluster_ids`` (distinct).
    emitted : int
        Positions the counts cover; the later ones (fallback passes) are counted by label.
    """

    counts: np.ndarray
    sizes: np.ndarray
    at: np.ndarray
    emitted: int


def dense_ids(ids: np.ndarray) -> bool:
    """Whether ascending distinct cluster ids are exactly ``0 .. len(ids) - 1``.

    >>> dense_ids(np.array([0, 1, 2])), dense_ids(np.array([0, 5]))
    (True, False)
    """
    return ids.size == 0 or (int(ids[0]) == 0 and int(ids[-1]) == ids.size - 1)


def count_repeats(indices: np.ndarray, n_documents: int) -> np.ndarray:
    """Appearances of each of ``n_documents`` documents in ``indices`` (int64)."""
    # int64 already where intp is (no copy of N entries then)
    return np.bincount(indices, minlength=n_documents).astype(np.int64, copy=False)


def _get_repeats(self: ScheduleStats) -> np.ndarray:
    source = self.__dict__.pop("_repeats_of", None)
    if source is not None:
        self.__dict__["_repeats"] = count_repeats(*source)
    return self.__dict__["_repeats"]


def _set_repeats(self: ScheduleStats, value: np.ndarray) -> None:
    self.__dict__.pop("_repeats_of", None)
    self.__dict__["_repeats"] = value


# After the dataclass is made: its __init__ (and repr, eq) go through the property.
ScheduleStats.repeats_per_document = property(  # type: ignore[assignment]
    _get_repeats, _set_repeats, doc="Appearances of each document (int64, shape (N,))."
)


def compute_stats(
    indices: np.ndarray,
    labels: np.ndarray,
    lengths: np.ndarray | None,
    *,
    budget_met: bool,
    exhausted_at: int | None,
    clip_step: np.ndarray,
    planned_draws: np.ndarray | None = None,
    cluster_ids: np.ndarray | None = None,
    drawn: GroupDraws | None = None,
    passes: tuple[np.ndarray, np.ndarray] | None = None,
) -> ScheduleStats:
    """Statistics of ``indices`` (a schedule over documents with ``labels``).

    ``cluster_ids`` (ascending) are the clusters reported; default every id
    ``0 .. max_label``. ``clip_step`` and ``planned_draws`` are aligned with them.

    ``drawn``, optional: the engine's per-group draw counts of the first
    ``drawn.emitted`` positions. Draws per cluster then come from them (a label
    is looked up only for the later positions, ``_CHUNK`` at a time), and when
    they cover the whole schedule so do the repeat summary figures (each group's
    passes are permutations of its own documents: ``c`` draws of a group of
    ``s`` reach ``min(c, s)`` documents, each at most ``ceil(c / s)`` times);
    ``repeats_per_document`` is then counted on first access.

    ``passes``, optional: ``(counts, sizes)`` of the groups that drew the whole
    schedule (``policy="random"``: the corpus group), for the repeat summary
    when ``drawn`` cannot give the draws per cluster.
    """
    if cluster_ids is None:
        cluster_ids = np.arange(int(labels.max()) + 1, dtype=np.int64)
    sparse = not dense_ids(cluster_ids)
    draws = np.zeros(cluster_ids.size, dtype=np.int64)
    rest = indices
    if drawn is not None:
        draws[drawn.at] = drawn.counts
        rest = indices[drawn.emitted :]
    for start in range(0, rest.shape[0], _CHUNK):  # no temporary as long as T
        part = labels[rest[start : start + _CHUNK]]
        if sparse:
            part = np.searchsorted(cluster_ids, part)
        draws += np.bincount(part, minlength=cluster_ids.size)

    fields: dict[str, Any] = dict(
        n_draws=int(indices.size),
        budget_met=budget_met,
        exhausted_at=exhausted_at,
        draws_per_cluster=draws,
        clip_step=clip_step,
        n_tokens=None if lengths is None else int(lengths[indices].sum()),
        planned_draws=planned_draws,
        cluster_ids=cluster_ids,
    )
    if passes is None and drawn is not None and drawn.emitted == indices.size:
        passes = (drawn.counts, drawn.sizes)
    if passes is not None:
        counts, sizes = passes
        most = -(-counts // sizes)  # ceil(c / s): the passes begun
        return ScheduleStats.counting_repeats(
            indices,
            labels.shape[0],
            max_repeats_per_document=int(most.max()) if most.size else 0,
            n_distinct_documents=int(np.minimum(counts, sizes).sum()),
            **fields,
        )
    repeats = count_repeats(indices, labels.shape[0])
    return ScheduleStats(
        max_repeats_per_document=int(repeats.max()) if repeats.size else 0,
        n_distinct_documents=int(np.count_nonzero(repeats)),
        repeats_per_document=repeats,
        **fields,
    )


@dataclass(frozen=True)
class ScheduleSummary:
    """The numbers of a schedule's one-screen summary, from its statistics and the labels.

    Attributes
    ----------
    n_documents, n_usable : int
        Documents labelled, and those with a cluster (label >= 0).
    n_clusters : int
        Non-empty clusters.
    size_min, size_median, size_max : int
        Documents per non-empty cluster (0 when there is none).
    n_distinct : int
        Documents the schedule draws at least once.
    n_clipped : int
        Clusters clipped (their last allowed pass completed).
    clip_first, clip_median, clip_last : int or None
        Draw positions at which clusters were clipped (None when none was).
    n_smallest, smallest_documents : int
        The smallest tenth of the non-empty clusters (at least one) and their documents.
    smallest_share, smallest_natural : float
        Their share of the draws, and of the usable documents (their share under
        random sampling).
    """

    n_documents: int
    n_usable: int
    n_clusters: int
    size_min: int
    size_median: int
    size_max: int
    n_distinct: int
    n_clipped: int
    clip_first: int | None
    clip_median: int | None
    clip_last: int | None
    n_smallest: int
    smallest_documents: int
    smallest_share: float
    smallest_natural: float


def summarise(stats: ScheduleStats, labels: np.ndarray) -> ScheduleSummary:
    """The summary of a schedule whose statistics are ``stats``, built from ``labels``.

    Parameters
    ----------
    stats : ScheduleStats
        The schedule's statistics (``Schedule.stats``).
    labels : ndarray of int, shape (N,)
        The labels it was built from (negative = excluded).

    Examples
    --------
    >>> from clusterclip import build_schedule
    >>> labels = np.array([0, 0, 0, 0, 1, 2, 2, -1])
    >>> schedule = build_schedule(labels, max_repeats=1, num_samples=7, seed=0)
    >>> summary = summarise(schedule.stats, labels)
    >>> summary.n_usable, summary.n_clusters, summary.size_max, summary.n_clipped
    (7, 3, 4, 3)
    >>> summary.smallest_share, round(summary.smallest_natural, 3)
    (0.14285714285714285, 0.143)
    """
    labels = np.asarray(labels, dtype=np.int64)
    usable = labels >= 0
    n_usable = int(usable.sum())
    # sizes aligned with the statistics' clusters (every id, or only those present for sparse ids)
    sizes = np.bincount(
        np.searchsorted(stats.cluster_ids, labels[usable]), minlength=stats.cluster_ids.size
    )
    present = np.flatnonzero(sizes)
    steps = np.sort(stats.clip_step[stats.clip_step >= 0])
    n_small = max(1, int(round(present.size * 0.1)))
    smallest = present[np.argsort(sizes[present], kind="stable")[:n_small]]
    found = present.size > 0
    return ScheduleSummary(
        n_documents=int(labels.size),
        n_usable=n_usable,
        n_clusters=int(present.size),
        size_min=int(sizes[present].min()) if found else 0,
        size_median=int(np.median(sizes[present])) if found else 0,
        size_max=int(sizes[present].max()) if found else 0,
        n_distinct=int(stats.n_distinct_documents),
        n_clipped=int(steps.size),
        clip_first=int(steps[0]) if steps.size else None,
        clip_median=int(np.median(steps)) if steps.size else None,
        clip_last=int(steps[-1]) if steps.size else None,
        n_smallest=n_small,
        smallest_documents=int(sizes[smallest].sum()),
        smallest_share=float(stats.draws_per_cluster[smallest].sum() / max(stats.n_draws, 1)),
        smallest_natural=float(sizes[smallest].sum() / max(n_usable, 1)),
    )
