"""Every number of the report, computed from the work directory (``report.json``).

The report describes what a schedule does to a corpus: how big the clusters
are, how the draws are spread over them compared with plain random sampling
and with uniform-over-clusters sampling, how that spread drifts during
training as clusters are clipped, how often documents repeat, and which
documents are never seen.

All quantities are computed from the labels, the schedule and its sidecar
(policy and repeat cap), read through :class:`clusterclip.io.WorkDir`,
streaming the schedule in blocks so memory stays ``O(N + K)``. What the recorded
settings mean (which cap clips clusters) is read through
:func:`clusterclip.schedule.config.cluster_cap_of`, from the one schedule module the
report may import: the stored settings, which load no engine (tests/test_seams.py):

- *random* and *uniform* shares are analytical expectations for the same
  budget ``T``: random draws a document uniformly from the usable corpus, so
  cluster ``k`` gets ``T * |C_k| / N`` draws; uniform draws a cluster
  uniformly, so each gets ``T / K`` draws;
- a cluster's *clip event* is the schedule position of its
  ``max_repeats * |C_k|``-th draw, i.e. the draw that completes its last
  allowed pass (after it, the online policy never draws it again);
- *repeats* of a document is the number of times it occurs in the schedule.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.report.duplicates import duplicate_groups
from clusterclip.report.keywords import describe_largest, example_cell, small_clusters
from clusterclip.report.notices import collect_notices, keywords_notice, warning_lines
from clusterclip.schedule.config import cluster_cap_of  # the stored settings; loads no engine

__all__ = ["compute_report_data", "report_numbers"]

#: Schedule rows read at once; bounds memory on billion-draw schedules.
BLOCK_SIZE = 1 << 20


def _documents_info(work: WorkDir, n: int) -> dict[str, Any]:
    if not work.exists("documents"):
        return {"n_documents": n, "status_counts": {}, "n_tokens": None}
    n_tokens = work.n_tokens()
    return {
        "n_documents": work.n_documents(),
        "status_counts": work.status_counts(),
        "n_tokens": n_tokens if n_tokens.any() else None,
    }


def _rarest(order_by_size_ascending: np.ndarray, fraction: float) -> np.ndarray:
    count = max(1, math.ceil(fraction * len(order_by_size_ascending)))
    return order_by_size_ascending[:count]


def _clip_targets(max_repeats: int, sizes: np.ndarray, total: int) -> np.ndarray:
    """``max_repeats * sizes``, or ``total + 1`` (never reached) where that exceeds ``total``.

    Exact for any ``max_repeats`` (a Python int past int64 included): nothing overflows.

    >>> _clip_targets(10**30, np.array([0, 2, 5]), 12).tolist()
    [0, 13, 13]
    >>> _clip_targets(2, np.array([0, 2, 5]), 12).tolist()
    [0, 4, 10]
    """
    reach = total // np.maximum(sizes, 1)  # the largest R whose R * size fits in the schedule
    repeats = min(int(max_repeats), total + 1)
    targets = np.where(repeats <= reach, np.minimum(repeats, reach) * sizes, total + 1)
    return np.where(sizes > 0, targets, 0)


def _clip_positions(
    indices: np.ndarray, labels: np.ndarray, targets: np.ndarray, n_clusters: int
) -> np.ndarray:
    """Schedule position of the ``targets[k]``-th draw of each cluster (-1 if never reached)."""
    positions = np.full(n_clusters, -1, dtype=np.int64)
    seen = np.zeros(n_clusters, dtype=np.int64)
    pending = targets > 0
    for start in range(0, len(indices), BLOCK_SIZE):
        if not pending.any():
            break
        block_labels = labels[np.asarray(indices[start : start + BLOCK_SIZE])]
        order = np.argsort(block_labels, kind="stable")
        sorted_labels = block_labels[order]
        clusters, first, counts = np.unique(sorted_labels, return_index=True, return_counts=True)
        keep = clusters >= 0
        clusters, first, counts = clusters[keep], first[keep], counts[keep]
        need = targets[clusters] - seen[clusters]  # occurrences still missing
        hit = pending[clusters] & (need >= 1) & (need <= counts)
        for k, f, m in zip(clusters[hit], first[hit], need[hit], strict=True):
            positions[k] = start + int(order[f + m - 1])
            pending[k] = False
        seen[clusters] += counts
    return positions


def compute_report_data(
    workdir: str | os.PathLike[str],
    *,
    n_slices: int = 50,
    n_keywords: int = 8,
    n_examples: int = 1,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Compute every number shown in the report.

    Parameters
    ----------
    workdir : path
        A work directory with completed cluster and schedule stages; the
        embed stage's documents add status counts and token totals; the
        embedded corpus, when unchanged, adds keywords and examples
        (:func:`clusterclip.describe.inspect_clusters`).
    n_slices : int
        Number of equal slices of the schedule for the sampling-dynamics curve.
    n_keywords, n_examples : int
        Passed to :func:`clusterclip.describe.inspect_clusters` for the table.
    engine, engine_options
        Where the corpus is read (local or Ray read tasks) and where
        :func:`report_numbers` runs (one task); the same numbers on every engine.

    Returns
    -------
    dict
        JSON-serialisable; see ``docs/report.md`` for every key. Deterministic:
        the same work directory gives the same dict.

    Examples
    --------
    >>> data = compute_report_data("work")  # doctest: +SKIP
    >>> data["summary"]["never_seen_fraction"]  # doctest: +SKIP
    0.0312
    """
    from clusterclip.report.task import numbers_on_engine

    work = WorkDir(workdir)
    numbers = numbers_on_engine(work, n_slices, engine=engine, engine_options=engine_options)
    sizes = np.asarray(numbers.pop("sizes"), dtype=np.int64)
    inspected, keywords_missing = describe_largest(
        work, sizes, n_keywords=n_keywords, n_examples=n_examples, engine=engine,
        engine_options=engine_options,
    )  # fmt: skip
    small = small_clusters(
        work, sizes, keywords_available=bool(inspected), engine=engine,
        engine_options=engine_options,
    )  # fmt: skip
    summary = numbers["summary"]
    summary["n_dissolved_clusters"] = len(small["dissolved"])
    summary["dissolved_documents"] = int(sum(d["size"] for d in small["dissolved"]))
    summary["min_cluster_size"] = small["min_cluster_size"]
    for row in numbers["clusters"]:
        info = inspected.get(row["cluster"], {})
        row["keywords"] = [str(w) for w in info.get("keywords", [])]
        row["example"] = example_cell(info)
    notices = numbers["notices"]
    notices["keywords_dropped"] = keywords_notice(keywords_missing)
    return {
        **{key: numbers[key] for key in ("stability", "machine", "schedule")},
        "summary": summary,
        "sizes_by_rank": numbers["sizes_by_rank"],
        "small_clusters": small,
        **{key: numbers[key] for key in ("shares_by_size_rank", "dynamics", "clip_events",
                                         "repetitions", "never_seen_by_size_rank", "clusters")},
        "keywords_available": bool(inspected),
        "duplicates": numbers["duplicates"],
        "notices": notices,
        "warnings": warning_lines(notices),
    }  # fmt: skip


def report_numbers(workdir: str | os.PathLike[str], n_slices: int) -> dict[str, Any]:
    """Every number of the report that reads a per-document array, without the words.

    Reads the labels, the schedule, the document index and the near-duplicate
    groups; what it returns is as small as the cluster count: the parts of
    :func:`compute_report_data`'s dict that need no corpus text (the cluster
    table without keywords and examples, the summary without the dissolved
    clusters, the notices without ``keywords_dropped``) plus ``sizes``, the
    cluster sizes. Run as one engine task by
    :func:`clusterclip.report.task.numbers_on_engine`.
    """
    work = WorkDir(workdir)
    inputs = _load_inputs(work)
    rarest = _rarest_clusters(inputs.sizes, inputs.n_clusters)
    draws = _count_draws(inputs, rarest, n_slices)
    clip_positions = _cluster_clip_positions(inputs)
    active = _active_per_slice(clip_positions, draws.slice_edges)
    repeats = _count_repeats(inputs, draws.seen_per_doc)
    docs = _documents_info(work, inputs.n)
    tokens_drawn = _tokens_drawn(docs["n_tokens"], draws.seen_per_doc)
    shares = _shares(inputs, rarest, draws.per_cluster)
    by_size = np.argsort(-inputs.sizes, kind="stable")
    clip_events = _clip_events(clip_positions)
    cluster_summary = (work.entry("cluster") or {}).get("summary", {})
    return {
        "stability": cluster_summary.get("stability"),
        "machine": {
            "kmeans_backend": cluster_summary.get("backend"),
            "threads": cluster_summary.get("threads"),
            "precision": ((work.entry("embed") or {}).get("encoder") or {}).get("precision"),
        },
        "schedule": {
            "config": inputs.config,
            "version": inputs.meta.get("version"),
            "stats": inputs.meta.get("stats", {}),
        },
        "summary": _summary(inputs, docs, draws, repeats, clip_events, tokens_drawn),
        "sizes_by_rank": [int(s) for s in inputs.sizes[by_size]],
        "shares_by_size_rank": {
            "random": [float(x) for x in shares.random[by_size]],
            "uniform": [float(x) for x in shares.uniform[by_size]],
            "policy": [float(x) for x in shares.policy[by_size]],
        },
        "dynamics": _dynamics(inputs, rarest, draws, active, shares),
        "clip_events": clip_events,
        "repetitions": {
            "times_seen": list(range(len(repeats.histogram))),
            "documents": [int(x) for x in repeats.histogram],
        },
        "never_seen_by_size_rank": [int(repeats.never[k]) for k in by_size],
        "clusters": _cluster_table(inputs, draws, shares, repeats, clip_positions, by_size),
        "duplicates": duplicate_groups(
            work, labels=inputs.labels, seen_per_doc=draws.seen_per_doc, config=inputs.config
        ),
        "notices": collect_notices(work, inputs.meta),
        "sizes": inputs.sizes.tolist(),
    }


@dataclass
class _Inputs:
    """The labels and schedule of a work directory, checked, with the cluster sizes."""

    labels: np.ndarray
    indices: np.ndarray
    meta: dict[str, Any]
    config: dict[str, Any]
    policy: str
    clip_cap: int | None
    usable: np.ndarray
    n_usable: int
    n_clusters: int
    sizes: np.ndarray

    @property
    def n(self) -> int:
        """Documents in the labels, excluded ones included."""
        return len(self.labels)

    @property
    def total(self) -> int:
        """Length of the schedule (the budget ``T``)."""
        return len(self.indices)


@dataclass
class _Rarest:
    """The rarest 10% and 50% of the non-empty clusters, as ids and as masks over clusters."""

    n_nonempty: int
    ids10: np.ndarray
    ids50: np.ndarray
    mask10: np.ndarray
    mask50: np.ndarray


@dataclass
class _Draws:
    """What the one pass over the schedule counts: draws per document, cluster and slice."""

    seen_per_doc: np.ndarray
    per_cluster: np.ndarray
    excluded: int
    slice_edges: np.ndarray
    slice_rare10: np.ndarray
    slice_rare50: np.ndarray


@dataclass
class _Repeats:
    """How often the usable documents were drawn, overall and per cluster."""

    seen_usable: np.ndarray
    histogram: np.ndarray
    never: np.ndarray
    max_per_cluster: np.ndarray


@dataclass
class _Shares:
    """Share of the draws per cluster: random and uniform (analytical) and the policy's."""

    random: np.ndarray
    uniform: np.ndarray
    policy: np.ndarray


def _load_inputs(work: WorkDir) -> _Inputs:
    """Read the labels and the schedule, refuse a stale schedule, and size the clusters."""
    labels = work.labels()
    schedule = work.schedule()
    _check_indices(work, schedule.indices, schedule.path, len(labels))
    usable = labels >= 0
    n_usable = int(usable.sum())
    n_clusters = int(labels.max()) + 1 if n_usable else 0
    if work.exists("centroids"):  # clusters left empty after assignment still count
        n_clusters = max(n_clusters, work.n_clusters())
    sizes = np.bincount(labels[usable], minlength=n_clusters).astype(np.int64)
    config = dict(schedule.meta.get("config", {}))
    policy = str(config.get("policy", "unknown"))
    return _Inputs(
        labels=labels,
        indices=schedule.indices,
        meta=schedule.meta,
        config=config,
        policy=policy,
        clip_cap=cluster_cap_of(config),
        usable=usable,
        n_usable=n_usable,
        n_clusters=n_clusters,
        sizes=sizes,
    )


def _check_indices(work: WorkDir, indices: np.ndarray, path: os.PathLike[str], n: int) -> None:
    """Refuse a schedule holding document indices outside the labels (it is stale)."""
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise ClusterClipError(
            f"{path} holds document indices outside [0, {n}) but "
            f"{work.path_of('clusters').name} has {n} documents. The schedule is stale: rebuild it "
            "(`clusterclip run` redoes it)."
        )


def _rarest_clusters(sizes: np.ndarray, n_clusters: int) -> _Rarest:
    """The rarest clusters among the non-empty ones (an empty cluster is never drawn)."""
    ascending = np.argsort(sizes, kind="stable")
    ascending = ascending[sizes[ascending] > 0]
    ids10 = _rarest(ascending, 0.10)
    ids50 = _rarest(ascending, 0.50)
    mask10 = np.zeros(n_clusters, dtype=bool)
    mask10[ids10] = True
    mask50 = np.zeros(n_clusters, dtype=bool)
    mask50[ids50] = True
    return _Rarest(len(ascending), ids10, ids50, mask10, mask50)


def _slice_edges(total: int, n_slices: int) -> np.ndarray:
    """Bounds of the equal schedule slices (between 1 and ``total`` of them; none if empty)."""
    if not total:
        return np.zeros(1)
    n_slices = max(1, min(n_slices, total))
    return np.linspace(0, total, n_slices + 1).astype(np.int64)


def _count_draws(inputs: _Inputs, rarest: _Rarest, n_slices: int) -> _Draws:
    """Stream the schedule once, counting draws per document, per cluster and per slice."""
    labels, usable = inputs.labels, inputs.usable
    edges = _slice_edges(inputs.total, n_slices)
    n_slices = len(edges) - 1
    seen_per_doc = np.zeros(inputs.n, dtype=np.int64)
    slice_rare10 = np.zeros(n_slices, dtype=np.int64)
    slice_rare50 = np.zeros(n_slices, dtype=np.int64)
    for start in range(0, inputs.total, BLOCK_SIZE):
        block = np.asarray(inputs.indices[start : start + BLOCK_SIZE], dtype=np.int64)
        np.add.at(seen_per_doc, block, 1)
        block_labels = labels[block]
        slice_of = np.searchsorted(edges, np.arange(start, start + len(block)), "right") - 1
        slice_rare10 += _draws_per_slice(rarest.mask10, block_labels, slice_of, n_slices)
        slice_rare50 += _draws_per_slice(rarest.mask50, block_labels, slice_of, n_slices)
    per_cluster = np.bincount(
        labels[usable], weights=seen_per_doc[usable], minlength=inputs.n_clusters
    ).astype(np.int64)
    excluded = int(seen_per_doc[~usable].sum())
    return _Draws(seen_per_doc, per_cluster, excluded, edges, slice_rare10, slice_rare50)


def _draws_per_slice(
    mask: np.ndarray, block_labels: np.ndarray, slice_of: np.ndarray, n_slices: int
) -> np.ndarray:
    """Draws of one block that fall in the clusters of ``mask``, counted per slice."""
    valid = block_labels >= 0
    hit = np.zeros(len(block_labels), dtype=bool)
    hit[valid] = mask[block_labels[valid]]
    return np.bincount(slice_of[hit], minlength=n_slices)


def _cluster_clip_positions(inputs: _Inputs) -> np.ndarray:
    """Schedule position of each cluster's clip event (-1: never clipped, or no cap).

    The schedule's own statistics when its sidecar records them (they count the
    clip in units when near-duplicate groups share a budget); otherwise
    recomputed from the cluster sizes and the cap.
    """
    if inputs.clip_cap is None or not inputs.n_clusters:
        return np.full(inputs.n_clusters, -1, dtype=np.int64)
    stats = inputs.meta.get("stats") or {}
    if "clip_step" in stats:
        steps = np.asarray(stats["clip_step"], dtype=np.int64)
        ids = np.asarray(stats.get("cluster_ids", np.arange(len(steps))), dtype=np.int64)
        positions = np.full(inputs.n_clusters, -1, dtype=np.int64)
        inside = (ids >= 0) & (ids < inputs.n_clusters)
        positions[ids[inside]] = steps[inside]
        return positions
    targets = _clip_targets(inputs.clip_cap, inputs.sizes, len(inputs.indices))
    return _clip_positions(inputs.indices, inputs.labels, targets, inputs.n_clusters)


def _active_per_slice(clip_positions: np.ndarray, slice_edges: np.ndarray) -> np.ndarray:
    """Clusters still drawable (not yet clipped) at the start of each slice."""
    active = np.zeros(len(slice_edges) - 1, dtype=np.int64)
    for s in range(len(active)):
        active[s] = int(((clip_positions < 0) | (clip_positions >= slice_edges[s])).sum())
    return active


def _slice_share(counts: np.ndarray, slice_edges: np.ndarray, total: int) -> np.ndarray:
    """``counts`` per slice as a fraction of the slice's length (0 for an empty slice)."""
    slice_len = np.diff(slice_edges).astype(np.float64) if total else np.zeros(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(slice_len > 0, counts / np.maximum(slice_len, 1), 0.0)


def _count_repeats(inputs: _Inputs, seen_per_doc: np.ndarray) -> _Repeats:
    """Repetitions per usable document: histogram, never-seen and most repeats per cluster."""
    labels = inputs.labels[inputs.usable]
    seen_usable = seen_per_doc[inputs.usable]
    histogram = np.bincount(seen_usable) if inputs.n_usable else np.zeros(1, dtype=np.int64)
    never = np.bincount(labels[seen_usable == 0], minlength=inputs.n_clusters).astype(np.int64)
    max_per_cluster = np.zeros(inputs.n_clusters, dtype=np.int64)
    if inputs.n_usable:
        np.maximum.at(max_per_cluster, labels, seen_usable)
    return _Repeats(seen_usable, histogram, never, max_per_cluster)


def _tokens_drawn(n_tokens: np.ndarray | None, seen_per_doc: np.ndarray) -> int | None:
    """Tokens over the whole schedule, or None without a token count per document."""
    if n_tokens is None or len(n_tokens) != len(seen_per_doc):
        return None
    return int((seen_per_doc * n_tokens).sum())


def _shares(inputs: _Inputs, rarest: _Rarest, per_cluster: np.ndarray) -> _Shares:
    """Expected shares under random and uniform sampling, and the schedule's own shares."""
    sizes, n_usable, total = inputs.sizes, inputs.n_usable, inputs.total
    return _Shares(
        random=sizes / n_usable if n_usable else np.zeros(inputs.n_clusters),
        uniform=np.where(sizes > 0, 1.0 / max(rarest.n_nonempty, 1), 0.0),
        policy=per_cluster / total if total else np.zeros(inputs.n_clusters),
    )


def _clip_events(clip_positions: np.ndarray) -> list[dict[str, int]]:
    """The clip events in schedule order (ties by cluster id)."""
    return sorted(
        ({"cluster": int(k), "position": int(p)} for k, p in enumerate(clip_positions) if p >= 0),
        key=lambda e: (e["position"], e["cluster"]),
    )


def _cluster_table(
    inputs: _Inputs,
    draws: _Draws,
    shares: _Shares,
    repeats: _Repeats,
    clip_positions: np.ndarray,
    by_size: np.ndarray,
) -> list[dict[str, Any]]:
    """One row per cluster in ``by_size`` order: size, draws, shares, repeats, clip (the words
    and example, filled in by :func:`compute_report_data`, are left empty)."""
    sizes, total, per_cluster, never = inputs.sizes, inputs.total, draws.per_cluster, repeats.never
    rows = []
    for rank, k in enumerate(by_size):
        rows.append(
            {
                "cluster": int(k),
                "size_rank": rank + 1,
                "size": int(sizes[k]),
                "draws": int(per_cluster[k]),
                "share_policy": float(shares.policy[k]),
                "share_random": float(shares.random[k]),
                "share_uniform": float(shares.uniform[k]),
                "expected_draws_random": float(total * shares.random[k]),
                "expected_draws_uniform": float(total * shares.uniform[k]),
                "mean_repeats": float(per_cluster[k] / sizes[k]) if sizes[k] else 0.0,
                "max_repeats": int(repeats.max_per_cluster[k]),
                "never_seen": int(never[k]),
                "never_seen_fraction": float(never[k] / sizes[k]) if sizes[k] else 0.0,
                "clipped_at": int(clip_positions[k]) if clip_positions[k] >= 0 else None,
                "keywords": [],
                "example": None,
            }
        )
    return rows


def _summary(
    inputs: _Inputs,
    docs: dict[str, Any],
    draws: _Draws,
    repeats: _Repeats,
    clip_events: list[dict[str, int]],
    tokens_drawn: int | None,
) -> dict[str, Any]:
    """The headline numbers: corpus, clusters, budget, coverage and clipping."""
    n, n_usable, n_clusters, sizes = inputs.n, inputs.n_usable, inputs.n_clusters, inputs.sizes
    total, seen_usable = inputs.total, repeats.seen_usable
    n_never = int(repeats.never.sum())
    return {
        "policy": inputs.policy,
        "max_repeats": inputs.clip_cap,
        "n_documents": n,
        "n_usable": n_usable,
        "n_excluded": n - n_usable,
        "status_counts": docs["status_counts"],
        "n_clusters": n_clusters,
        "n_empty_clusters": int((sizes == 0).sum()),
        "largest_cluster": int(sizes.max()) if n_clusters else 0,
        "smallest_cluster": int(sizes.min()) if n_clusters else 0,
        "imbalance": float(sizes.max() / max(sizes.min(), 1)) if n_clusters else 0.0,
        "imbalance_p90_p10": _percentile_ratio(sizes),
        "schedule_length": total,
        "epochs_equivalent": float(total / n_usable) if n_usable else 0.0,
        "tokens_drawn": tokens_drawn,
        "excluded_draws": draws.excluded,
        "distinct_documents_seen": int((seen_usable > 0).sum()),
        "never_seen": n_never,
        "never_seen_fraction": float(n_never / n_usable) if n_usable else 0.0,
        "max_repeats_observed": int(seen_usable.max()) if n_usable else 0,
        "n_clipped_clusters": len(clip_events),
        "first_clip_position": clip_events[0]["position"] if clip_events else None,
    }


def _percentile_ratio(sizes: np.ndarray) -> float:
    """90th / 10th percentile of the non-empty cluster sizes: one outlier cluster cannot move it."""
    nonempty = sizes[sizes > 0]
    if not len(nonempty):
        return 0.0
    low, high = np.percentile(nonempty, [10, 90])
    return float(high / max(low, 1.0))


def _dynamics(
    inputs: _Inputs, rarest: _Rarest, draws: _Draws, active: np.ndarray, shares: _Shares
) -> dict[str, Any]:
    """How the draws drift over the schedule: rare clusters' share and active clusters per slice."""
    total, edges, per_cluster = inputs.total, draws.slice_edges, draws.per_cluster
    r10, r50, n_nonempty = rarest.ids10, rarest.ids50, max(rarest.n_nonempty, 1)
    return {
        "slice_start": [int(x) for x in edges[:-1]] if total else [],
        "slice_stop": [int(x) for x in edges[1:]] if total else [],
        "rarest_10pct_clusters": [int(k) for k in r10],
        "rarest_50pct_clusters": [int(k) for k in r50],
        "share_rarest_10pct": [float(x) for x in _slice_share(draws.slice_rare10, edges, total)],
        "share_rarest_50pct": [float(x) for x in _slice_share(draws.slice_rare50, edges, total)],
        "active_clusters": [int(x) for x in active],
        "policy_share_rarest_10pct": float(per_cluster[r10].sum() / total) if total else 0.0,
        "policy_share_rarest_50pct": float(per_cluster[r50].sum() / total) if total else 0.0,
        "random_share_rarest_10pct": float(shares.random[r10].sum()) if inputs.n_clusters else 0.0,
        "random_share_rarest_50pct": float(shares.random[r50].sum()) if inputs.n_clusters else 0.0,
        "uniform_share_rarest_10pct": float(len(r10) / n_nonempty),
        "uniform_share_rarest_50pct": float(len(r50) / n_nonempty),
    }
