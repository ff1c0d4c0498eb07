"""Every number of the report, computed from the work directory (``report.json``).

The report describes what a schedule does to a corpus: how big the clusters
are, how the draws are spread over them compared with plain random sampling
and with uniform-over-clusters sampling, how that spread drifts during
training as clusters are clipped, how often documents repeat, and which
documents are never seen.

All quantities are computed from the labels, the schedule and its sidecar
(policy and repeat cap), read through :class:`clusterclip.io.WorkDir`,
streaming the schedule in blocks so memory stays ``O(N + K)``:

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
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir

__all__ = ["compute_report_data"]

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
    work = WorkDir(workdir)
    labels = work.labels()
    schedule = work.schedule()
    indices, meta = schedule.indices, schedule.meta
    n = len(labels)
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise ClusterClipError(
            f"{schedule.path} holds document indices outside [0, {n}) but "
            f"{work.path_of('clusters').name} has {n} documents. The schedule is stale: rebuild it "
            "(`clusterclip run` redoes it)."
        )
    usable = labels >= 0
    n_usable = int(usable.sum())
    n_clusters = int(labels.max()) + 1 if n_usable else 0
    if work.exists("centroids"):  # clusters left empty after assignment still count
        n_clusters = max(n_clusters, work.n_clusters())
    sizes = np.bincount(labels[usable], minlength=n_clusters).astype(np.int64)
    total = len(indices)
    config = dict(meta.get("config", {}))
    policy = str(config.get("policy", "unknown"))
    max_repeats = config.get("max_repeats")
    clip_cap = (
        int(max_repeats)
        if isinstance(max_repeats, (int, float))
        and math.isfinite(max_repeats)
        and policy not in ("random", "uniform")
        else None
    )

    # One streaming pass: draws per document, draws per cluster, dynamics per slice.
    n_slices = max(1, min(n_slices, total)) if total else 0
    slice_edges = np.linspace(0, total, n_slices + 1).astype(np.int64) if total else np.zeros(1)
    # Rarest clusters among the non-empty ones (an empty cluster is never drawn).
    ascending = np.argsort(sizes, kind="stable")
    ascending = ascending[sizes[ascending] > 0]
    n_nonempty = len(ascending)
    rare10 = np.zeros(n_clusters, dtype=bool)
    rare10[_rarest(ascending, 0.10)] = True
    rare50 = np.zeros(n_clusters, dtype=bool)
    rare50[_rarest(ascending, 0.50)] = True
    seen_per_doc = np.zeros(n, dtype=np.int64)
    slice_rare10 = np.zeros(n_slices, dtype=np.int64)
    slice_rare50 = np.zeros(n_slices, dtype=np.int64)
    slice_active = np.zeros(n_slices, dtype=np.int64)
    for start in range(0, total, BLOCK_SIZE):
        block = np.asarray(indices[start : start + BLOCK_SIZE], dtype=np.int64)
        np.add.at(seen_per_doc, block, 1)
        block_labels = labels[block]
        slice_of = np.searchsorted(slice_edges, np.arange(start, start + len(block)), "right") - 1
        valid = block_labels >= 0
        r10 = np.zeros(len(block), dtype=bool)
        r50 = np.zeros(len(block), dtype=bool)
        r10[valid] = rare10[block_labels[valid]]
        r50[valid] = rare50[block_labels[valid]]
        slice_rare10 += np.bincount(slice_of[r10], minlength=n_slices)
        slice_rare50 += np.bincount(slice_of[r50], minlength=n_slices)
    draws = np.bincount(labels[usable], weights=seen_per_doc[usable], minlength=n_clusters)
    draws = draws.astype(np.int64)
    excluded_draws = int(seen_per_doc[~usable].sum())

    clip_positions = np.full(n_clusters, -1, dtype=np.int64)
    if clip_cap is not None and n_clusters:
        clip_positions = _clip_positions(
            indices, labels, _clip_targets(clip_cap, sizes, total), n_clusters
        )
    for s in range(n_slices):
        # Clusters still drawable at the start of the slice (not yet clipped).
        slice_active[s] = int(((clip_positions < 0) | (clip_positions >= slice_edges[s])).sum())

    slice_len = np.diff(slice_edges).astype(np.float64) if total else np.zeros(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share10 = np.where(slice_len > 0, slice_rare10 / np.maximum(slice_len, 1), 0.0)
        share50 = np.where(slice_len > 0, slice_rare50 / np.maximum(slice_len, 1), 0.0)

    # Repetitions per usable document and documents never seen.
    seen_usable = seen_per_doc[usable]
    repetition_hist = np.bincount(seen_usable) if n_usable else np.zeros(1, dtype=np.int64)
    never = np.bincount(labels[usable][seen_usable == 0], minlength=n_clusters).astype(np.int64)
    max_per_cluster = np.zeros(n_clusters, dtype=np.int64)
    if n_usable:
        np.maximum.at(max_per_cluster, labels[usable], seen_usable)

    docs = _documents_info(work, n)
    tokens_drawn = None
    if docs["n_tokens"] is not None and len(docs["n_tokens"]) == n:
        tokens_drawn = int((seen_per_doc * docs["n_tokens"]).sum())

    inspected = _inspect(work, n_clusters, n_keywords=n_keywords, n_examples=n_examples)

    random_share = sizes / n_usable if n_usable else np.zeros(n_clusters)
    uniform_share = np.where(sizes > 0, 1.0 / max(n_nonempty, 1), 0.0)
    policy_share = draws / total if total else np.zeros(n_clusters)
    by_size = np.argsort(-sizes, kind="stable")
    clusters_table = []
    for rank, k in enumerate(by_size):
        info = inspected.get(int(k), {})
        example = (info.get("examples") or [{}])[0]
        clusters_table.append(
            {
                "cluster": int(k),
                "size_rank": rank + 1,
                "size": int(sizes[k]),
                "draws": int(draws[k]),
                "share_policy": float(policy_share[k]),
                "share_random": float(random_share[k]),
                "share_uniform": float(uniform_share[k]),
                "expected_draws_random": float(total * random_share[k]),
                "expected_draws_uniform": float(total * uniform_share[k]),
                "mean_repeats": float(draws[k] / sizes[k]) if sizes[k] else 0.0,
                "max_repeats": int(max_per_cluster[k]),
                "never_seen": int(never[k]),
                "never_seen_fraction": float(never[k] / sizes[k]) if sizes[k] else 0.0,
                "clipped_at": int(clip_positions[k]) if clip_positions[k] >= 0 else None,
                "keywords": [str(w) for w in info.get("keywords", [])],
                "example": (
                    {
                        "index": int(example["index"]),
                        "id": example.get("id"),
                        "text": str(example.get("text", "")),
                    }
                    if "index" in example
                    else None
                ),
            }
        )

    clip_events = sorted(
        ({"cluster": int(k), "position": int(p)} for k, p in enumerate(clip_positions) if p >= 0),
        key=lambda e: (e["position"], e["cluster"]),
    )
    n_never = int(never.sum())
    r10 = _rarest(ascending, 0.10) if n_clusters else ascending
    r50 = _rarest(ascending, 0.50) if n_clusters else ascending
    return {
        "workdir": str(work.path),
        "schedule": {
            "config": config,
            "version": meta.get("version"),
            "stats": meta.get("stats", {}),
        },
        "summary": {
            "policy": policy,
            "max_repeats": clip_cap,
            "n_documents": n,
            "n_usable": n_usable,
            "n_excluded": n - n_usable,
            "status_counts": docs["status_counts"],
            "n_clusters": n_clusters,
            "n_empty_clusters": int((sizes == 0).sum()),
            "largest_cluster": int(sizes.max()) if n_clusters else 0,
            "smallest_cluster": int(sizes.min()) if n_clusters else 0,
            "imbalance": float(sizes.max() / max(sizes.min(), 1)) if n_clusters else 0.0,
            "schedule_length": total,
            "epochs_equivalent": float(total / n_usable) if n_usable else 0.0,
            "tokens_drawn": tokens_drawn,
            "excluded_draws": excluded_draws,
            "distinct_documents_seen": int((seen_usable > 0).sum()),
            "never_seen": n_never,
            "never_seen_fraction": float(n_never / n_usable) if n_usable else 0.0,
            "max_repeats_observed": int(seen_usable.max()) if n_usable else 0,
            "n_clipped_clusters": len(clip_events),
            "first_clip_position": clip_events[0]["position"] if clip_events else None,
        },
        "sizes_by_rank": [int(s) for s in sizes[by_size]],
        "shares_by_size_rank": {
            "random": [float(x) for x in random_share[by_size]],
            "uniform": [float(x) for x in uniform_share[by_size]],
            "policy": [float(x) for x in policy_share[by_size]],
        },
        "dynamics": {
            "slice_start": [int(x) for x in slice_edges[:-1]] if total else [],
            "slice_stop": [int(x) for x in slice_edges[1:]] if total else [],
            "rarest_10pct_clusters": [int(k) for k in r10],
            "rarest_50pct_clusters": [int(k) for k in r50],
            "share_rarest_10pct": [float(x) for x in share10],
            "share_rarest_50pct": [float(x) for x in share50],
            "active_clusters": [int(x) for x in slice_active],
            "policy_share_rarest_10pct": float(draws[r10].sum() / total) if total else 0.0,
            "policy_share_rarest_50pct": float(draws[r50].sum() / total) if total else 0.0,
            "random_share_rarest_10pct": float(random_share[r10].sum()) if n_clusters else 0.0,
            "random_share_rarest_50pct": float(random_share[r50].sum()) if n_clusters else 0.0,
            "uniform_share_rarest_10pct": float(len(r10) / max(n_nonempty, 1)),
            "uniform_share_rarest_50pct": float(len(r50) / max(n_nonempty, 1)),
        },
        "clip_events": clip_events,
        "repetitions": {
            "times_seen": list(range(len(repetition_hist))),
            "documents": [int(x) for x in repetition_hist],
        },
        "never_seen_by_size_rank": [int(never[k]) for k in by_size],
        "clusters": clusters_table,
        "keywords_available": bool(inspected),
    }


def _inspect(
    work: WorkDir, n_clusters: int, *, n_keywords: int, n_examples: int
) -> dict[int, dict[str, Any]]:
    """Keywords and examples per cluster, or {} when the corpus cannot be re-read."""
    from clusterclip.describe import inspect_clusters

    try:
        found = inspect_clusters(
            work.path, clusters=None, n_keywords=n_keywords, n_examples=n_examples
        )
    except (ClusterClipError, OSError):
        # Sources moved or unreadable: the report still has every number, minus words.
        return {}
    return {int(entry["cluster"]): entry for entry in found}
