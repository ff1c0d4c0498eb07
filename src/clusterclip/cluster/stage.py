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
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.cluster.assignment import assign_to_parts
from clusterclip.cluster.finishing import Finish, cluster_summary, finish_on_engine
from clusterclip.cluster.hierarchical import HierarchicalKMeans, Tree
from clusterclip.cluster.kmeans import KMeans
from clusterclip.cluster.options import ClusterOptions
from clusterclip.engines import resolve_options
from clusterclip.errors import ClusterClipError, hint, invalid
from clusterclip.io import WorkDir, versions
from clusterclip.io.artifacts import ClustersArtifact
from clusterclip.runner import StageOutput, run_stage

__all__ = ["ClusterResult", "ClusterStage", "cluster", "cluster_summary"]


class ClusterResult:
    """What :func:`cluster` produced (or found already done).

    Attributes
    ----------
    workdir : Path
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

    With ``stored=True``, ``labels``, ``scores`` and ``levels`` not given are read
    from ``clusters.parquet`` when first asked: the stage writes them from a
    worker, and a caller that needs only the summary (the pipeline's driver)
    never holds them.

    Examples
    --------
    >>> result = ClusterResult(Path("work"), np.array([0, -1]), np.array([1.0, 0.0]), np.eye(1))
    >>> result.labels.tolist(), result.levels, result.skipped
    ([0, -1], None, False)
    """

    def __init__(
        self,
        workdir: Path,
        labels: np.ndarray | None,
        scores: np.ndarray | None,
        centroids: np.ndarray,
        summary: dict[str, Any] | None = None,
        skipped: bool = False,
        levels: np.ndarray | None = None,
        *,
        stored: bool = False,
    ) -> None:
        self.workdir, self.centroids, self.skipped = Path(workdir), centroids, skipped
        self.summary = {} if summary is None else summary
        self._arrays: dict[str, Any] = {"labels": labels, "scores": scores, "levels": levels}
        self._read = set() if stored else {"labels", "scores", "levels"}

    def _array(self, name: str) -> Any:
        if name not in self._read:  # once: a flat stage's levels stay None
            self._arrays[name] = getattr(WorkDir(self.workdir), name)()
            self._read.add(name)
        return self._arrays[name]

    @property
    def labels(self) -> np.ndarray:
        return self._array("labels")  # type: ignore[no-any-return]

    @property
    def scores(self) -> np.ndarray:
        return self._array("scores")  # type: ignore[no-any-return]

    @property
    def levels(self) -> np.ndarray | None:
        return self._array("levels")  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (
            f"ClusterResult(workdir={self.workdir!r}, n_clusters={len(self.centroids)}, "
            f"summary={self.summary!r}, skipped={self.skipped})"
        )


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
            work.path, None, None, work.centroids(), dict(entry.get("summary", {})), skipped=True,
            stored=True,
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
    embeddings = _check_usable(work, options)
    model, fitted_on = _fit(work, model, options, stage)
    fitted = time.perf_counter()
    finished = _assign(work, embeddings, model, options, stage, fitted_on["stability"])
    assigned = time.perf_counter()
    summary, small, stability = finished["summary"], finished["small"], finished["stability"]
    summary.update(_fit_summary(options, model, small, stability, fitted_on["threads"]))
    summary["seconds"] = {
        "fit": round(fitted - started, 3),
        "assign": round(assigned - fitted, 3),
        "stability": stability["seconds"] if stability else 0.0,
        "total": round(time.perf_counter() - started, 3),
    }
    tree = finished["tree"]
    if tree is not None:
        summary["levels"] = _levels_summary(options, model, tree, finished["non_empty"])
    record: dict[str, Any] = {
        "engine": stage.engine,
        "fit_stats": model.stats_ if tree is None else model.level_stats_,
        "small_clusters": small,
        "versions": versions("faiss-cpu", "torch", "scipy", "pyarrow", "threadpoolctl"),
    }
    if fitted_on["blas"] is not None:
        record["blas"] = fitted_on["blas"]
    result = ClusterResult(work.path, None, None, finished["centroids"], summary, stored=True)
    return StageOutput(finished["outputs"], summary, record, result)


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


def _check_usable(work: WorkDir, options: ClusterOptions) -> Any:
    """The embeddings; raise when the documents cannot be clustered (counts only, no mask)."""
    counts = work.status_counts()
    n_documents, n_ok = sum(counts.values()), counts.get("ok", 0)
    embeddings = work.embeddings()
    if embeddings.shape[0] != n_documents:
        raise ClusterClipError(
            f"the embeddings of {work.path} hold {embeddings.shape[0]} rows but the document "
            f"index lists {n_documents} documents. Rerun `clusterclip embed INPUT... --workdir W "
            "--overwrite`."
        )
    if not n_ok:  # no range of K would help: account for the records instead
        listed = ", ".join(f"{n:,} {status}" for status, n in counts.items() if n)
        raise ClusterClipError(
            f"no usable document in {work.path}: none of its {n_documents:,} records is ok "
            f"({listed}). Every record and its reason is in {work.path_of('rejects')}; fix the "
            "corpus (or name its text field) and embed it again."
        )
    if options.n_clusters > n_ok:
        raise invalid(
            "n_clusters",
            f"an int in [1, {n_ok}] (no more clusters than usable documents: "
            f"{n_ok} of {n_documents} documents are ok)",
            options.n_clusters,
            f"Pass {hint('n_clusters', max(n_ok, 1))} or fewer, or embed more documents.",
        )
    return embeddings


def _assign(
    work: WorkDir,
    embeddings: Any,
    model: Any,
    options: ClusterOptions,
    stage: ClusterStage,
    stability: dict[str, Any] | None,
) -> dict[str, Any]:
    """Assign every document under the fitted ``model`` and finish the stage on the engine.

    The assignment tasks write their parts into the work directory
    (:func:`~clusterclip.cluster.assignment.assign_to_parts`); one task then reads
    them, dissolves the small clusters and writes the outputs
    (:class:`~clusterclip.cluster.finishing.FinishWorker`, whose result this is).
    """
    tree = model.tree_ if options.levels else None
    centroids = model.centroids_ if tree is not None else model.cluster_centers_
    ClustersArtifact(work).clear_parts()  # an interrupted run's
    blocks = assign_to_parts(
        work.path, embeddings.paths, centroids, backend=model.backend_,
        block_rows=options.assign_batch_size, engine=stage.engine, options=stage.ray_options,
        progress=stage.progress, tree=tree, beam=options.beam,
    )  # fmt: skip
    finish = Finish(
        blocks=blocks, centroids=centroids, tree=tree, min_cluster_size=options.min_cluster_size,
        n_clusters=options.n_clusters, beam=options.beam, stability=stability,
    )  # fmt: skip
    return finish_on_engine(str(work.path), finish, engine=stage.engine, options=stage.ray_options)


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
    options: ClusterOptions, model: Any, tree: Tree, non_empty: list[int]
) -> dict[str, Any]:
    """The hierarchy in the stage summary: counts per level (coarse to fine, leaves last)."""
    return {
        "requested": [*map(int, options.levels), int(options.n_clusters)],
        "n_clusters": [len(c) for c in tree.centroids],
        "non_empty": non_empty,  # of the levels above the leaves, in the same order
        "beam": int(options.beam),
        "split_backend": model.split_backend_,
        "fit": model.level_stats_,
        "stability": "not measured for hierarchical runs",
    }
