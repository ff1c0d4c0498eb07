"""The cluster stage: fit spherical k-means on the embed stage's output, assign every document.

Reads ``documents.parquet`` and ``embeddings/part-*.npy`` from the work
directory, fits :class:`~clusterclip.cluster.KMeans` on a seeded sample of the
``ok`` documents, assigns every document to its nearest centroid in streamed
blocks (on the engine chosen: in-process or Ray) and writes ``centroids.npy``,
``clusters.parquet`` and the ``cluster`` manifest entry.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.cluster.assignment import assign_files
from clusterclip.cluster.kmeans import KMeans, _check_int
from clusterclip.engines import resolve_options
from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.io import (
    atomic_path,
    check_upstream,
    fingerprint_file,
    read_manifest,
    require_stage,
    versions,
    write_stage,
)

__all__ = ["ClusterResult", "cluster", "cluster_summary"]

CENTROIDS_NAME = "centroids.npy"
CLUSTERS_NAME = "clusters.parquet"

#: Config keys that change the result (a rerun with other values must not skip).
IDENTITY_KEYS = (
    "n_clusters",
    "seed",
    "n_iter",
    "max_points_per_centroid",
    "init",
    "n_init",
    "backend",
)


@dataclass(frozen=True)
class ClusterResult:
    """What :func:`cluster` produced (or found already done).

    Attributes
    ----------
    labels : numpy.ndarray of int32, shape (N,)
        Cluster of each document in index order; ``-1`` for non-``ok`` documents.
    scores : numpy.ndarray of float32, shape (N,)
        Cosine to the assigned centroid (0 for non-``ok`` documents).
    centroids : numpy.ndarray of float32, shape (K, d)
        Unit centroids.
    summary : dict
        Sizes, balance, objective, sample size, backend, timings.
    skipped : bool
        True when the work directory already held this exact result.
    """

    workdir: Path
    labels: np.ndarray
    scores: np.ndarray
    centroids: np.ndarray
    summary: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False


class _RowView:
    """Rows ``rows`` (sorted) of a matrix, as a matrix (the ``ok`` documents)."""

    def __init__(self, matrix: Any, rows: np.ndarray) -> None:
        self.matrix, self.source_rows = matrix, rows
        self.shape = (len(rows), int(matrix.shape[1]))
        self.dtype = matrix.dtype

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.matrix[self.source_rows[key]]


# ------------------------------------------------------------------ summary


def _gini(sizes: np.ndarray) -> float:
    sizes = np.sort(np.asarray(sizes, dtype=np.float64))
    n, total = len(sizes), sizes.sum()
    if n == 0 or total == 0:
        return 0.0
    ranks = np.arange(1, n + 1)
    return float(2.0 * np.sum(ranks * sizes) / (n * total) - (n + 1) / n)


def cluster_summary(labels: np.ndarray, scores: np.ndarray, n_clusters: int) -> dict[str, Any]:
    """Sizes and balance of an assignment (``-1`` labels are left out).

    >>> s = cluster_summary(np.array([0, 0, 1, -1]), np.array([1.0, 0.5, 1.0, 0.0]), 3)
    >>> s["sizes"]["max"], s["empty_clusters"], s["excluded_documents"]
    (2, 1, 1)
    """
    kept = labels >= 0
    sizes = np.bincount(labels[kept], minlength=n_clusters)
    n = int(kept.sum())
    return {
        "documents": len(labels),
        "clustered_documents": n,
        "excluded_documents": int(len(labels) - n),
        "n_clusters": int(n_clusters),
        "sizes": {
            "min": int(sizes.min()),
            "median": float(np.median(sizes)),
            "max": int(sizes.max()),
        },
        "gini": round(_gini(sizes), 6),
        "imbalance_factor": round(
            float(n_clusters * np.square(sizes, dtype=np.float64).sum() / max(n, 1) ** 2), 6
        ),
        "empty_clusters": int((sizes == 0).sum()),
        "mean_score": round(float(np.mean(scores[kept], dtype=np.float64)), 6) if n else 0.0,
    }


# ------------------------------------------------------------------ stage


def _changes(workdir: Path, previous: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """What differs between a recorded run and this one: settings, then upstream outputs."""
    changed = []
    for key in IDENTITY_KEYS:
        was, now = previous.get("config", {}).get(key), config.get(key)
        if was != now:
            changed.append(f"{key} was {was!r}, now {now!r}")
    return changed + check_upstream(workdir, "cluster", previous.get("inputs", {}))


def _outputs_intact(workdir: Path, outputs: Mapping[str, str]) -> bool:
    for key, name in (("clusters", CLUSTERS_NAME), ("centroids", CENTROIDS_NAME)):
        path = workdir / name
        if not path.exists() or fingerprint_file(path) != outputs.get(key):
            return False
    return True


def _load_result(workdir: Path, entry: Mapping[str, Any]) -> ClusterResult:
    pq = require_extra("pyarrow.parquet", "io")
    table = pq.read_table(workdir / CLUSTERS_NAME, columns=["cluster", "score"])
    return ClusterResult(
        workdir=workdir,
        labels=table.column("cluster").to_numpy().astype(np.int32),
        scores=table.column("score").to_numpy().astype(np.float32),
        centroids=np.load(workdir / CENTROIDS_NAME),
        summary=dict(entry.get("summary", {})),
        skipped=True,
    )


def _read_status(workdir: Path) -> np.ndarray:
    """Boolean ``ok`` mask of the documents, in index order."""
    pq = require_extra("pyarrow.parquet", "io")
    path = workdir / "documents.parquet"
    if not path.exists():
        raise ClusterClipError(
            f"{path} is missing although the manifest lists the embed stage. "
            "Rerun `clusterclip embed INPUT... --workdir W --overwrite`."
        )
    table = pq.read_table(path, columns=["index", "status"])
    index = table.column("index").to_numpy()
    if not np.array_equal(index, np.arange(len(index))):
        raise ClusterClipError(
            f"{path}: column `index` is not 0..N-1 in order. "
            "Rerun `clusterclip embed INPUT... --workdir W --overwrite`."
        )
    compute = require_extra("pyarrow.compute", "io")
    ok = compute.equal(table.column("status"), "ok").to_numpy(zero_copy_only=False)
    return np.asarray(ok, dtype=bool)


def cluster(
    workdir: str | Path,
    *,
    n_clusters: int,
    seed: int = 0,
    n_iter: int = 20,
    max_points_per_centroid: int = 256,
    init: str = "k-means++",
    n_init: int = 1,
    backend: str = "auto",
    batch_size: int = 65536,
    overwrite: bool = False,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> ClusterResult:
    """Cluster the embedded documents of a work directory.

    Parameters
    ----------
    workdir : path
        Work directory with a completed ``embed`` stage.
    n_clusters : int
        Number of clusters ``K`` (at most the number of ``ok`` documents).
    seed : int
        Seeds the fit sample, the seeding and the empty-cluster splits.
    n_iter, max_points_per_centroid, init, n_init, backend
        See :class:`~clusterclip.cluster.KMeans`. The fit uses at most
        ``max_points_per_centroid * n_clusters`` documents (``summary["sample_size"]``).
    batch_size : int
        Embedding rows read per block (memory: ``batch_size * (d + K) * 4`` bytes).
    overwrite : bool
        Replace a previous result made with other settings or inputs (otherwise refuse).
    engine : {"local", "ray"}
        Where the assignment step runs (:data:`clusterclip.engines.ENGINES`); the
        fit stays local.
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``, e.g.
        ``{"address": "auto", "num_workers": 8}``; empty for ``"local"``.
    progress : bool
        Progress bars on stderr.

    Returns
    -------
    ClusterResult
        Labels (int32, ``-1`` for non-``ok`` documents), scores, centroids, summary.

    Writes ``centroids.npy`` (float32, unit rows), ``clusters.parquet`` (``index``
    int64, ``cluster`` int32, ``score`` float32) and the ``cluster`` manifest entry.
    Same seed + same inputs + same backend on the same machine -> same labels; a
    rerun with the same settings and inputs returns the stored result.

    Examples
    --------
    >>> result = cluster("work", n_clusters=100, seed=0)  # doctest: +SKIP
    >>> result.summary["sizes"]  # doctest: +SKIP
    {'min': 12, 'median': 290.0, 'max': 1873}
    """
    from clusterclip.cluster.backends import get_backend
    from clusterclip.io.shards import ShardedMatrix

    started = time.perf_counter()
    workdir = Path(workdir)
    ray_options = resolve_options(engine, engine_options)
    batch_size = _check_int("batch_size", batch_size, 1, "Pass e.g. batch_size=65536.")
    model = KMeans(
        n_clusters,
        seed=seed,
        n_iter=n_iter,
        max_points_per_centroid=max_points_per_centroid,
        init=init,
        n_init=n_init,
        backend=backend,
        batch_size=batch_size,
        verbose=progress,
    )
    model._validate()
    embed_entry = require_stage(workdir, "embed")
    embed_outputs = embed_entry.get("outputs", {})
    inputs = {
        "embed.documents": embed_outputs.get("documents"),
        "embed.embeddings": embed_outputs.get("embeddings"),
    }
    config = {
        "n_clusters": int(n_clusters),
        "seed": int(seed),
        "n_iter": int(n_iter),
        "max_points_per_centroid": int(max_points_per_centroid),
        "init": init,
        "n_init": int(n_init),
        "backend": backend,
        "batch_size": batch_size,
        "engine": engine,
    }
    previous = read_manifest(workdir)["stages"].get("cluster")
    if previous and previous.get("complete"):
        changed = _changes(workdir, previous, config)
        if not changed and _outputs_intact(workdir, previous.get("outputs", {})):
            return _load_result(workdir, previous)
        if changed and not overwrite:
            raise ClusterClipError(
                f"work directory {workdir} holds clusters made with other settings or inputs: "
                + "; ".join(changed)
                + ". Pass overwrite=True (--overwrite) to replace them, or use another --workdir."
            )

    ok = _read_status(workdir)
    embeddings = ShardedMatrix.from_directory(workdir / "embeddings")
    if embeddings.shape[0] != len(ok):
        raise ClusterClipError(
            f"{workdir / 'embeddings'} holds {embeddings.shape[0]} rows but documents.parquet "
            f"lists {len(ok)} documents. Rerun `clusterclip embed INPUT... --workdir W --overwrite`."
        )
    usable = np.flatnonzero(ok)
    if int(n_clusters) > len(usable):
        raise invalid(
            "n_clusters",
            f"an int in [1, {len(usable)}] (no more clusters than usable documents: "
            f"{len(usable)} of {len(ok)} documents are ok)",
            n_clusters,
            f"Pass --n-clusters {max(len(usable), 1)} or fewer, or embed more documents.",
        )
    data = embeddings if len(usable) == len(ok) else _RowView(embeddings, usable)
    model.fit(data)
    fitted = time.perf_counter()
    centroids = model.cluster_centers_
    resolved = get_backend(backend).name
    labels, scores = assign_files(
        embeddings.paths,
        centroids,
        backend=resolved,
        block_rows=batch_size,
        engine=engine,
        options=ray_options,
        progress=progress,
    )
    labels = np.asarray(labels, dtype=np.int32)
    scores = np.asarray(scores, dtype=np.float32)
    labels[~ok] = -1
    scores[~ok] = 0.0
    assigned = time.perf_counter()

    outputs = _write_outputs(workdir, labels, scores, centroids)
    summary = cluster_summary(labels, scores, int(n_clusters))
    summary.update(
        {
            "objective": round(model.objective_, 6),
            "sample_size": model.sample_size_,
            "n_iter": model.n_iter_,
            "backend": model.backend_,
            "init": model.init_,
            "seconds": {
                "fit": round(fitted - started, 3),
                "assign": round(assigned - fitted, 3),
                "total": round(time.perf_counter() - started, 3),
            },
        }
    )
    entry: dict[str, Any] = {
        "config": config,
        "inputs": inputs,
        "outputs": outputs,
        "summary": summary,
        "fit_stats": model.stats_,
        "versions": versions("faiss-cpu", "torch", "scipy", "pyarrow", "threadpoolctl"),
        "complete": True,
    }
    if model.backend_ == "faiss" or backend in ("auto", "faiss"):
        entry["blas"] = _blas_record()
    write_stage(workdir, "cluster", entry)
    return ClusterResult(workdir, labels, scores, centroids, summary, skipped=False)


def _blas_record() -> dict[str, Any]:
    import importlib.util

    if importlib.util.find_spec("faiss") is None:
        return {"faiss": "not installed"}
    from clusterclip.cluster.blas import faiss_blas_info

    return faiss_blas_info()


def _write_outputs(
    workdir: Path, labels: np.ndarray, scores: np.ndarray, centroids: np.ndarray
) -> dict[str, str]:
    pa = require_extra("pyarrow", "io")
    pq = require_extra("pyarrow.parquet", "io")
    with atomic_path(workdir / CENTROIDS_NAME) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(centroids, dtype=np.float32))
    table = pa.table(
        {
            "index": pa.array(np.arange(len(labels), dtype=np.int64)),
            "cluster": pa.array(labels.astype(np.int32)),
            "score": pa.array(scores.astype(np.float32)),
        }
    )
    with atomic_path(workdir / CLUSTERS_NAME) as tmp:
        pq.write_table(table, tmp)
    return {
        "clusters": fingerprint_file(workdir / CLUSTERS_NAME),
        "centroids": fingerprint_file(workdir / CENTROIDS_NAME),
    }
