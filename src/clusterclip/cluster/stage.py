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

from clusterclip.arrays import distinct
from clusterclip.cluster.assignment import assign_files
from clusterclip.cluster.hierarchical import HierarchicalKMeans, Tree, dissolve_small_leaves
from clusterclip.cluster.kmeans import KMeans
from clusterclip.cluster.options import ClusterOptions
from clusterclip.cluster.small import dissolve_small_clusters, effective_min_size
from clusterclip.engines import resolve_options
from clusterclip.errors import ClusterClipError, hint, invalid
from clusterclip.io import WorkDir, versions
from clusterclip.io.artifacts import CentroidsArtifact, ClustersArtifact, LevelCentroidsArtifact
from clusterclip.runner import StageOutput, run_stage

__all__ = ["ClusterResult", "ClusterStage", "cluster", "cluster_summary"]


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
    levels : numpy.ndarray of int32, shape (N, L-1), or None
        With ``levels``: each document's cluster on every level above its leaf,
        coarse to fine (``-1`` for non-``ok`` documents); None for flat k-means.
    """

    workdir: Path
    labels: np.ndarray
    scores: np.ndarray
    centroids: np.ndarray
    summary: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False
    levels: np.ndarray | None = None


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


def cluster(
    workdir: str | Path,
    *,
    n_clusters: int,
    seed: int = ClusterOptions.seed,
    n_iter: int = ClusterOptions.n_iter,
    max_points_per_centroid: int = ClusterOptions.max_points_per_centroid,
    init: str = ClusterOptions.init,
    n_init: int = ClusterOptions.n_init,
    backend: str = ClusterOptions.backend,
    min_cluster_size: int = ClusterOptions.min_cluster_size,
    stability_sample: int = ClusterOptions.stability_sample,
    assign_batch_size: int = ClusterOptions.assign_batch_size,
    levels: tuple[int, ...] = ClusterOptions.levels,
    beam: int = ClusterOptions.beam,
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
        See :class:`~clusterclip.cluster.KMeans` and :class:`ClusterOptions`. The fit
        uses at most ``max_points_per_centroid * n_clusters`` documents (``summary["sample_size"]``).
    min_cluster_size : int
        After assignment, clusters with fewer documents than
        ``min(min_cluster_size, ceil(N / 4K))`` are dissolved: their documents go to
        the nearest kept centroid, the dissolved centroids are removed and the rest
        renumbered (:mod:`clusterclip.cluster.small`), so fewer than ``n_clusters``
        clusters may come out (``summary["n_clusters"]``; the manifest's
        ``small_clusters`` lists the dissolved ones). 1 turns it off.
    stability_sample : int
        Compare the result with a cheaper k-means of another seed on this many
        documents (:mod:`clusterclip.cluster.stability`): ``summary["stability"]``
        holds the ARI and the share of document pairs kept together. 0 turns it off.
    assign_batch_size : int
        Embedding rows read per block (memory: ``assign_batch_size * (d + K) * 4`` bytes).
    levels : tuple of int
        Hierarchical k-means (:class:`~clusterclip.cluster.HierarchicalKMeans`): the
        cluster counts of the levels above the ``n_clusters`` leaves, coarse to fine,
        increasing. Every document is assigned coarse to fine; ``clusters.parquet``
        gains int32 columns ``level_0`` .. ``level_{L-2}`` (read them with
        :meth:`clusterclip.io.WorkDir.levels`) and ``level_centroids.npz`` holds every
        level's centroids. Small leaves are dissolved within the tree
        (:func:`~clusterclip.cluster.hierarchical.dissolve_small_leaves`); the seed
        stability is not measured (``summary["stability"]`` is None). Requires
        ``n_init=1``. Empty (the default): flat k-means.
    beam : int
        With ``levels``: nodes kept per level by the coarse-to-fine assignment.
    overwrite : bool
        Replace a previous result made with other settings or inputs (otherwise refuse).
    engine : {"local", "ray"}
        Where the fit (one task: the worker reads its own sample rows) and the
        assignment run (:data:`clusterclip.engines.ENGINES`); the same bytes on each.
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
    int64, ``cluster`` int32, ``score`` float32, and with ``levels`` ``level_0`` ..
    int32) and the ``cluster`` manifest entry.
    Same seed + same inputs + same backend (``auto`` included: a rule of the CPU
    and the installed libraries, not a timing) on the same machine type -> the
    same labels; a rerun with the same settings and inputs returns the stored result.

    Examples
    --------
    >>> result = cluster("work", n_clusters=100, seed=0)  # doctest: +SKIP
    >>> result.summary["sizes"]  # doctest: +SKIP
    {'min': 12, 'median': 290.0, 'max': 1873}
    """
    options = ClusterOptions(
        n_clusters=n_clusters, seed=seed, n_iter=n_iter,
        max_points_per_centroid=max_points_per_centroid, init=init, n_init=n_init,
        backend=backend, min_cluster_size=min_cluster_size, stability_sample=stability_sample,
        assign_batch_size=assign_batch_size, levels=levels, beam=beam,
    )  # fmt: skip
    stage = ClusterStage(engine=engine, engine_options=engine_options, progress=progress)
    outcome = run_stage(stage, WorkDir(workdir), options, on_change="refuse", force=overwrite)
    return outcome.result


class ClusterStage:
    """The cluster stage in the runner's contract (:mod:`clusterclip.runner`).

    ``engine``, ``engine_options`` and ``progress`` say where and how the
    assignment runs; they are not part of the configuration (same result).
    """

    name = "cluster"
    artifacts = ("clusters", "centroids")

    def __init__(
        self,
        *,
        engine: str = "local",
        engine_options: Mapping[str, Any] | None = None,
        progress: bool = False,
    ) -> None:
        self.engine = engine
        self.ray_options = resolve_options(engine, engine_options)  # checked before any work
        self.progress = progress

    def inputs(self, work: WorkDir, options: ClusterOptions) -> dict[str, Any]:
        """The embed stage's outputs this stage reads."""
        work.require("embed")
        return {"embed.documents": work.output("embed.documents"),
                "embed.embeddings": work.output("embed.embeddings")}  # fmt: skip

    def resolved(self, config: dict[str, Any], entry: Mapping[str, Any] | None) -> dict[str, Any]:
        """``config`` with ``backend`` as resolved (see the runner's ``_settled``).

        What the finished fit ran on (``entry``), or what a named backend is on
        this machine; ``auto`` is measured by the fit, so it stays ``auto``.
        """
        from clusterclip.cluster.backends import resolve_backend

        config = dict(config)
        if entry is not None:
            config["backend"] = (entry.get("summary") or {}).get("backend", config.get("backend"))
        elif config.get("backend") != "auto":
            config["backend"] = resolve_backend(str(config.get("backend")))
        return config

    def load(self, work: WorkDir, entry: Mapping[str, Any]) -> ClusterResult:
        """The finished stage's result, without recomputing anything."""
        return ClusterResult(
            workdir=work.path, labels=work.labels(), scores=work.scores(),
            centroids=work.centroids(), summary=dict(entry.get("summary", {})), skipped=True,
            levels=work.levels(),
        )  # fmt: skip

    def run(self, work: WorkDir, options: ClusterOptions, *, resume: bool) -> StageOutput:
        """Fit k-means on a sample, assign every document, write the outputs."""
        return _run_cluster(work, options, self)


def _run_cluster(work: WorkDir, options: ClusterOptions, stage: ClusterStage) -> StageOutput:
    started = time.perf_counter()
    if options.n_clusters is None:
        raise invalid("n_clusters", "an int in [1, inf)", None, f"Pass {hint('n_clusters', 100)}.")
    model = _model(options, stage)
    model._validate()
    ok, embeddings, usable = _usable_documents(work, options)
    model, fitted_on = _fit(work, model, options, stage)
    fitted = time.perf_counter()
    labels, scores, centroids, tree, small = _assign(embeddings, ok, usable, model, options, stage)
    assigned = time.perf_counter()
    stability = None
    if fitted_on["stability"] is not None:
        from clusterclip.cluster.stability import compare_stability

        stability = compare_stability(labels, fitted_on["stability"])
    levels = None if tree is None else tree.ancestors(labels)
    outputs = _write_outputs(work, labels, scores, centroids, levels=levels, tree=tree)
    summary = cluster_summary(labels, scores, len(centroids))
    summary.update(_fit_summary(options, model, small, stability, fitted_on["threads"]))
    summary["seconds"] = {
        "fit": round(fitted - started, 3),
        "assign": round(assigned - fitted, 3),
        "stability": stability["seconds"] if stability else 0.0,
        "total": round(time.perf_counter() - started, 3),
    }
    if tree is not None:
        summary["levels"] = _levels_summary(options, model, tree, levels)
    record: dict[str, Any] = {
        "engine": stage.engine,
        "fit_stats": model.stats_ if tree is None else model.level_stats_,
        "small_clusters": small,
        "versions": versions("faiss-cpu", "torch", "scipy", "pyarrow", "threadpoolctl"),
    }
    if fitted_on["blas"] is not None:
        record["blas"] = fitted_on["blas"]
    result = ClusterResult(work.path, labels, scores, centroids, summary, skipped=False,
                           levels=levels)  # fmt: skip
    return StageOutput(outputs, summary, record, result)


def _fit(
    work: WorkDir, model: Any, options: ClusterOptions, stage: ClusterStage
) -> tuple[Any, dict[str, Any]]:
    """Fit ``model`` as one task of the stage's engine (:mod:`clusterclip.cluster.fitting`).

    The driver sends the unfitted estimator, its backend already resolved here
    (``auto`` and ``torch`` are rules of the driver's machine; the worker runs the
    backend they name), and the worker reads its sample rows itself. ``fastest``
    is a timing of the fit sample, so the worker measures it (its cache is the
    worker's). Returns the fitted model and the rest of the task's result
    (threads, faiss's BLAS, the seed-stability fit).
    """
    from clusterclip.cluster.fitting import fit_on_engine
    from clusterclip.cluster.probe import choose_backend

    choice = None
    if options.backend != "fastest":
        empty = np.zeros((0, 0), dtype=np.float32)  # a rule: no sample needed
        choice = choose_backend(options.backend, empty, options.n_clusters)
        model.backend = choice.backend
    stability = None
    if options.stability_sample > 0 and not options.levels:
        stability = {
            "n_clusters": options.n_clusters, "seed": options.seed,
            "sample_size": options.stability_sample, "init": options.init,
            "batch_size": options.assign_batch_size,
        }  # fmt: skip
    blas = options.backend in ("auto", "fastest", "faiss") or model.backend == "faiss"
    fitted_on = fit_on_engine(
        model, work.path, engine=stage.engine, options=stage.ray_options, stability=stability,
        blas=blas,
    )  # fmt: skip
    model = fitted_on["model"]
    if choice is not None:  # the worker saw the resolved name; the choice was the driver's
        model.backend = options.backend
        model.backend_choice_ = choice.as_record()
    return model, fitted_on


def _usable_documents(work: WorkDir, options: ClusterOptions) -> tuple[np.ndarray, Any, np.ndarray]:
    """The ok mask, the embeddings and the ok rows; raise when they cannot be clustered."""
    ok = work.ok_mask()
    embeddings = work.embeddings()
    if embeddings.shape[0] != len(ok):
        raise ClusterClipError(
            f"the embeddings of {work.path} hold {embeddings.shape[0]} rows but the document "
            f"index lists {len(ok)} documents. Rerun `clusterclip embed INPUT... --workdir W "
            "--overwrite`."
        )
    usable = np.flatnonzero(ok)
    if not len(usable):  # no range of K would help: account for the records instead
        counts = ", ".join(f"{n:,} {status}" for status, n in work.status_counts().items() if n)
        raise ClusterClipError(
            f"no usable document in {work.path}: none of its {len(ok):,} records is ok "
            f"({counts}). Every record and its reason is in {work.path_of('rejects')}; fix the "
            "corpus (or name its text field) and embed it again."
        )
    if options.n_clusters > len(usable):
        raise invalid(
            "n_clusters",
            f"an int in [1, {len(usable)}] (no more clusters than usable documents: "
            f"{len(usable)} of {len(ok)} documents are ok)",
            options.n_clusters,
            f"Pass {hint('n_clusters', max(len(usable), 1))} or fewer, or embed more documents.",
        )
    return ok, embeddings, usable


def _assign(
    embeddings: Any,
    ok: np.ndarray,
    usable: np.ndarray,
    model: Any,
    options: ClusterOptions,
    stage: ClusterStage,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any, dict[str, Any]]:
    """Every document's label and score under the fitted ``model``, small clusters dissolved.

    Returns ``(labels, scores, centroids, tree, small)``: ``-1`` and ``0.0`` for the
    documents that are not ok, ``tree`` ``None`` unless ``options.levels``, and
    ``small`` the record of the dissolved clusters.
    """
    tree = model.tree_ if options.levels else None
    centroids = model.centroids_ if tree is not None else model.cluster_centers_
    labels, scores = assign_files(
        embeddings.paths, centroids, backend=model.backend_,
        block_rows=options.assign_batch_size, engine=stage.engine, options=stage.ray_options,
        progress=stage.progress, tree=tree, beam=options.beam,
    )  # fmt: skip
    labels = np.asarray(labels, dtype=np.int32)
    scores = np.asarray(scores, dtype=np.float32)
    labels[~ok] = -1
    scores[~ok] = 0.0
    min_size = effective_min_size(options.min_cluster_size, len(usable), options.n_clusters)
    if tree is None:
        labels, scores, centroids, small = dissolve_small_clusters(
            labels, scores, centroids, lambda rows: embeddings[rows], min_size=min_size
        )
    else:
        labels, scores, tree, small = dissolve_small_leaves(
            labels, scores, tree, lambda rows: embeddings[rows], min_size=min_size,
            beam=options.beam,
        )  # fmt: skip
        centroids = tree.centroids[-1]
    return labels, scores, centroids, tree, small


def _fit_summary(
    options: ClusterOptions,
    model: Any,
    small: dict[str, Any],
    stability: dict[str, Any] | None,
    threads: dict[str, Any],
) -> dict[str, Any]:
    """The summary's entries about the fit: what was asked, what was dissolved, how it ran."""
    return {
        "requested_clusters": int(options.n_clusters),
        "min_cluster_size": small["min_cluster_size"],
        "dissolved_clusters": len(small["dissolved"]) + small.get("empty_removed", 0),
        "dissolved_documents": int(sum(d["size"] for d in small["dissolved"])),
        "objective": round(model.objective_, 6),
        "sample_size": model.sample_size_,
        "n_iter": getattr(model, "n_iter_", None),
        "backend": model.backend_,
        "backend_choice": model.backend_choice_,
        "threads": threads,
        "stability": stability,
        "init": getattr(model, "init_", None),
    }


def _model(options: ClusterOptions, stage: ClusterStage) -> Any:
    """The estimator the options ask for: flat KMeans, or HierarchicalKMeans with levels."""
    if not options.levels:
        return KMeans(
            options.n_clusters, seed=options.seed, n_iter=options.n_iter,
            max_points_per_centroid=options.max_points_per_centroid, init=options.init,
            n_init=options.n_init, backend=options.backend, batch_size=options.assign_batch_size,
            min_cluster_size=options.min_cluster_size, verbose=stage.progress,
        )  # fmt: skip
    if options.n_init != 1:
        raise invalid(
            "n_init",
            "1 when levels are given (hierarchical k-means fits each node once)",
            options.n_init,
            f"Pass {hint('n_init', 1)}, or leave out levels for flat k-means.",
        )
    return HierarchicalKMeans(
        options.n_clusters, levels=options.levels, seed=options.seed, n_iter=options.n_iter,
        max_points_per_centroid=options.max_points_per_centroid, init=options.init,
        backend=options.backend, batch_size=options.assign_batch_size,
        min_cluster_size=options.min_cluster_size, beam=options.beam, verbose=stage.progress,
    )  # fmt: skip


def _levels_summary(
    options: ClusterOptions, model: Any, tree: Tree, levels: np.ndarray
) -> dict[str, Any]:
    """The hierarchy in the stage summary: counts per level (coarse to fine, leaves last)."""
    kept = levels[:, 0] >= 0 if levels.shape[1] else np.zeros(0, dtype=bool)
    used = [int(len(distinct(levels[kept, level]))) for level in range(levels.shape[1])]
    return {
        "requested": [*map(int, options.levels), int(options.n_clusters)],
        "n_clusters": [len(c) for c in tree.centroids],
        "non_empty": used,  # of the levels above the leaves, in the same order
        "beam": int(options.beam),
        "split_backend": model.split_backend_,
        "fit": model.level_stats_,
        "stability": "not measured for hierarchical runs",
    }


def _write_outputs(
    work: WorkDir,
    labels: np.ndarray,
    scores: np.ndarray,
    centroids: np.ndarray,
    *,
    levels: np.ndarray | None = None,
    tree: Tree | None = None,
) -> dict[str, str]:
    centroids_fingerprint = CentroidsArtifact(work).write(centroids)
    outputs = {
        "clusters": ClustersArtifact(work).write(labels, scores, levels=levels),
        "centroids": centroids_fingerprint,
    }
    level_centroids = LevelCentroidsArtifact(work)
    if tree is None:
        level_centroids.remove()  # a former hierarchical run's
        return outputs
    outputs["level_centroids"] = level_centroids.write(tree.centroids, tree.parents)
    return outputs
