"""Spherical (cosine) k-means fitted on a seeded sample, out of core.

The estimator follows the scikit-learn contract: ``__init__`` stores the
parameters, :meth:`KMeans.fit` returns ``self`` and learned state ends in ``_``.
The data may be anything with ``shape``, ``dtype`` and ``__getitem__`` taking a
slice or an int array: a numpy array, a float16 ``numpy.memmap`` larger than
RAM, or a :class:`clusterclip.io.shards.ShardedMatrix`. Only the fit sample
(at most ``max_points_per_centroid * n_clusters`` rows, float32) and one block
of ``batch_size`` rows are ever held in memory.

Algorithm (Lloyd, as faiss does it): draw the sample with a seeded generator,
normalise its rows, seed the centroids (:mod:`~clusterclip.cluster.seeding`),
then ``n_iter`` times assign every sample row to its most similar centroid
(E-step, :mod:`~clusterclip.cluster.backends`), replace each centroid by the
normalised mean of its rows, and re-split empty clusters: an empty centroid
takes a copy of a centroid drawn with probability proportional to its size
minus one, and the two are pushed apart along a seeded random direction (norm 1/1024).
A final E-step gives ``labels_`` and ``objective_`` consistent with
``cluster_centers_``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

import numpy as np

from clusterclip.cluster.arrays import (
    PURPOSE_INIT,
    PURPOSE_SAMPLE,
    PURPOSE_SPLIT,
    check_int,
    check_matrix,
    gather_rows,
    normalise_rows,
    random_stream,
)
from clusterclip.errors import invalid
from clusterclip.options import check_seed
from clusterclip.threads import available_cpus, one_thread

__all__ = ["KMeans", "assign", "assign_matrix", "k_means"]

#: Norm of the seeded push that separates a re-split empty centroid from its copy.
_SPLIT_EPS = 1.0 / 1024.0


#: Rows of the fit sample timed by :func:`lloyd_threads`.
THREAD_PROBE_ROWS = 16384
#: Backends whose Lloyd pass gives the same bits on one thread and on all, so a timing
#: may choose the thread count (``tests/abuse/test_reproducible.py`` checks each one).
#: Not torch-fp32: MKL's product of a one-row block differs in the last bit between
#: one thread and two, which can move a near-tie. Not faiss: its OpenBLAS did the same
#: on an AVX2-only EPYC (Zen 2, 778 rows), though not on the Xeon where it was first
#: checked. numpy's bits do not follow the threads (each block's product runs on one
#: BLAS thread, :class:`~clusterclip.cluster.backends.Backend`), but it is not timed:
#: its blocks go to whichever thread is free (no thread waits for a parked one at
#: every product), and an untimed fit saves the probe's four passes.
THREAD_INVARIANT = ("torch-bf16", "torch-cuda")


def lloyd_threads(engine: Any, sample: np.ndarray, centroids: np.ndarray) -> dict[str, Any]:
    """Whether this fit's Lloyd iterations run faster on one thread than on all, measured now.

    Times one fused E-step (``assign_and_sum``) on the first
    :data:`THREAD_PROBE_ROWS` rows with the default threads and with one,
    alternating, best of two each. On an idle machine all threads win; on one
    another job shares, each of the iteration's parallel regions waits for the
    thread the scheduler parked, and one thread won 0.94x vs 1.25x the authors'
    loop (``benchmarks/bench_fit_threads.py``). Only the time depends on the
    choice: it is made only for the :data:`THREAD_INVARIANT` backends, whose
    results are the same on any thread count; the others keep the default
    threads, untimed. Returns ``{"threads", "seconds": {"all", "one"}}``; one
    core (or one thread already), or another backend: ``{"threads": n,
    "seconds": None}`` untimed.
    """
    torch = sys.modules.get("torch")
    default = torch.get_num_threads() if torch is not None else (os.cpu_count() or 1)
    if default <= 1 or available_cpus() <= 1:
        return {"threads": 1, "seconds": None}
    if engine.name not in THREAD_INVARIANT:  # a timing must not choose what changes results
        return {"threads": int(default), "seconds": None}
    rows = np.ascontiguousarray(sample[:THREAD_PROBE_ROWS])
    prepared = engine.prepare(rows)
    best = {"all": np.inf, "one": np.inf}
    for _ in range(2):
        for name in best:
            with one_thread() if name == "one" else contextlib.nullcontext():
                started = time.perf_counter()
                engine.assign_and_sum(prepared, rows, centroids)
                best[name] = min(best[name], time.perf_counter() - started)
    threads = 1 if best["one"] < best["all"] else int(default)
    return {"threads": threads, "seconds": {k: round(v, 5) for k, v in best.items()}}


def _final_step(
    engine: Any, prepared: Any, sample: np.ndarray, centroids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The fit's final E-step: each sample row's nearest centroid and its fp32 score."""
    labels, scores = engine.top1(prepared, centroids)
    if not engine.exact_scores:
        scores = np.einsum("ij,ij->i", sample, centroids[labels])
    return labels, np.asarray(scores, dtype=np.float32)


def _imbalance(counts: np.ndarray) -> float:
    n = counts.sum()
    return float(len(counts) * np.square(counts, dtype=np.float64).sum() / (float(n) ** 2))


def _update_centroids(
    sums: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, int]:
    """M-step: normalised cluster means, then faiss-style splits of empty clusters."""
    counts = counts.astype(np.int64).copy()
    norms = np.sqrt(np.einsum("ij,ij->i", sums, sums))
    empty = (counts == 0) | (norms == 0)
    counts[empty] = 0
    centroids = np.zeros_like(sums, dtype=np.float32)
    centroids[~empty] = sums[~empty] / norms[~empty, None]
    for empty_row in np.flatnonzero(empty):
        weights = np.maximum(counts - 1, 0).astype(np.float64)
        if weights.sum() == 0:  # fewer rows than clusters in use: nothing to split
            donor = int(np.argmax(counts))
        else:
            donor = int(rng.choice(len(counts), p=weights / weights.sum()))
        # faiss scales alternate coordinates by 1 +- eps, which cannot separate
        # sparse directions (e.g. one-hot rows); a seeded random direction can.
        base = centroids[donor].copy()
        direction = rng.standard_normal(len(base)).astype(np.float32)
        direction *= _SPLIT_EPS / np.linalg.norm(direction)
        centroids[empty_row] = base + direction
        centroids[donor] = base - direction
        for row in (empty_row, donor):
            centroids[row] /= np.linalg.norm(centroids[row])
        counts[empty_row] = counts[donor] // 2
        counts[donor] -= counts[empty_row]
    return centroids, int(empty.sum())


def assign(
    block: np.ndarray,
    centroids: np.ndarray,
    *,
    backend: str = "auto",
    offset: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest centroid and cosine for every row of one block (a pure function).

    Parameters
    ----------
    block : numpy.ndarray, shape (n, d)
        Embeddings (any float dtype; rows are normalised here). All-zero rows
        (documents left out by the embed stage) get label ``-1`` and score 0.
    centroids : numpy.ndarray, shape (K, d)
        Unit centroids (``centroids.npy``).
    backend : str
        E-step backend (:mod:`clusterclip.cluster.backends`).
    offset : int
        Row number of ``block[0]``, used only to name rows in error messages.

    Returns
    -------
    labels : numpy.ndarray of int32, shape (n,)
    scores : numpy.ndarray of float32, shape (n,)
        Cosine similarity to the assigned centroid, computed in fp32.

    Deterministic for a given backend on a given machine; independent of how
    the rows are cut into blocks.

    Examples
    --------
    >>> C = np.eye(2, dtype=np.float32)
    >>> labels, scores = assign(np.array([[0.0, 2.0], [3.0, 0.0]]), C, backend="numpy")
    >>> labels.tolist(), scores.tolist()
    ([1, 0], [1.0, 1.0])
    """
    from clusterclip.cluster.backends import get_backend

    block = np.asarray(block)
    centroids = np.ascontiguousarray(centroids, dtype=np.float32)
    n, dim = check_matrix(block, "block")
    if centroids.ndim != 2 or centroids.shape[1] != dim:
        raise invalid(
            "centroids",
            f"a (K, {dim}) matrix matching the embeddings' dimension",
            f"shape {centroids.shape}",
            "Use centroids fitted on embeddings from the same model, or rerun "
            "`clusterclip cluster --overwrite` after re-embedding.",
        )
    rows = np.arange(offset, offset + n)
    unit = normalise_rows(block, rows, allow_zero=True)
    engine = get_backend(backend)
    labels, scores = engine.top1(engine.prepare(unit), centroids)
    labels = labels.astype(np.int32)
    if not engine.exact_scores:
        scores = np.einsum("ij,ij->i", unit, centroids[labels])
    zero = ~unit.any(axis=1)
    labels[zero] = -1
    scores = np.asarray(scores, dtype=np.float32)
    scores[zero] = 0.0
    return labels, scores


def assign_matrix(
    X: Any,
    centroids: np.ndarray,
    *,
    backend: str = "auto",
    batch_size: int = 65536,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`assign` streamed over every row of a matrix, ``batch_size`` rows at a time.

    >>> C = np.eye(2, dtype=np.float32)
    >>> assign_matrix(np.eye(2)[::-1], C, backend="numpy")[0].tolist()
    [1, 0]
    """
    from clusterclip.progress import progress_bar

    n, _ = check_matrix(X)
    batch_size = check_int("batch_size", batch_size, 1, "Pass e.g. batch_size=65536.")
    labels = np.empty(n, dtype=np.int32)
    scores = np.empty(n, dtype=np.float32)
    bar = progress_bar(total=n, desc="assign", unit="doc") if progress else None
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        labels[start:stop], scores[start:stop] = assign(
            X[start:stop], centroids, backend=backend, offset=start
        )
        if bar is not None:
            bar.update(stop - start)
    if bar is not None:
        bar.close()
    return labels, scores


class KMeans:
    """Spherical (cosine) k-means on a seeded sample, for in-memory or out-of-core data.

    Parameters
    ----------
    n_clusters : int
        Number of clusters ``K``.
    seed : int
        Seeds the sample, the seeding and the empty-cluster splits (independent
        ``SeedSequence`` streams). Same seed + same data + same backend on the
        same machine type -> identical centroids and labels (``auto`` included;
        not ``fastest``, whose pick follows a timing).
    n_iter : int
        Lloyd iterations (stops earlier if the labels stop changing).
    max_points_per_centroid : int
        The fit uses at most ``max_points_per_centroid * n_clusters`` rows drawn
        without replacement (all rows if there are fewer); ``sample_size_`` says how many.
    init : {"k-means++", "k-means++-rounds", "afk-mc2", "random"}
        Seeding (:mod:`clusterclip.cluster.seeding`). ``k-means++`` is greedy
        k-means++, one centre at a time; ``k-means++-rounds`` draws the centres in
        about 64 rounds (cheaper, slightly lower objective at large ``K``).
    n_init : int
        Independent seedings + Lloyd runs on the same sample; the one with the
        best objective is kept (each run costs a full fit).
    backend : {"auto", "fastest", "faiss", "torch", "torch-bf16", "torch-fp32", "numpy"}
        E-step backend (:mod:`clusterclip.cluster.backends`). ``auto`` follows the
        CPU's bf16 support and the installed libraries, never a timing
        (:func:`~clusterclip.cluster.backends.auto_rule`). ``fastest`` times the
        candidates on the fit sample the first time a machine meets this kind of
        shape and caches the winner (:mod:`clusterclip.cluster.probe`).
    batch_size : int
        Rows read at a time when sampling and predicting.
    min_cluster_size : int
        k-means++ seeding passes over candidates that would seed a cluster of
        fewer documents than this (isolated points; see
        :func:`~clusterclip.cluster.seeding.seed_centroids`); 1 = plain greedy
        k-means++. The estimator does not dissolve small clusters itself: the
        cluster stage does (:mod:`clusterclip.cluster.small`).
    verbose : bool
        Show a progress bar over the iterations.

    Attributes
    ----------
    cluster_centers_ : numpy.ndarray of float32, shape (K, d)
        Unit centroids.
    labels_ : numpy.ndarray of int32, shape (sample_size_,)
        Cluster of each sample row (``sample_indices_`` gives their row numbers).
    sample_indices_ : numpy.ndarray of int64
        Sorted row numbers of the fit sample.
    sample_size_ : int
    objective_ : float
        Mean cosine of the sample rows to their centroid (higher is better).
    n_iter_ : int
    stats_ : list of dict
        Per iteration: ``iteration``, ``objective`` (mean cosine before the
        update), ``imbalance_factor`` (``K * sum(size^2) / n^2``, 1 = balanced),
        ``empty_resplit`` and ``seconds``.
    backend_ : str
        The backend that ran (``auto`` or ``fastest`` resolved); ``predict`` uses it too.
    backend_choice_ : dict
        How it was chosen (:class:`~clusterclip.cluster.probe.BackendChoice`:
        ``reason`` ``"CPU rule"``, ``"probe"``, ``"cached"`` or ``"forced by user"``,
        a probe's ``seconds`` per candidate, the cache file).
    init_ : dict
        Seeding record of the kept run (``init``, ``pool_size``, ``seconds``),
        ``runs`` and the final ``objectives`` of every run.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(m, 0.1, (50, 3)) for m in np.eye(3)])
    >>> km = KMeans(3, seed=0, backend="numpy").fit(X)
    >>> sorted(np.bincount(km.labels_).tolist())
    [50, 50, 50]
    >>> km.predict(np.eye(3)).tolist() == km.predict(X[::50]).tolist()
    True
    """

    def __init__(
        self,
        n_clusters: int,
        *,
        seed: int,
        n_iter: int = 20,
        max_points_per_centroid: int = 256,
        init: str = "k-means++",
        n_init: int = 1,
        backend: str = "auto",
        batch_size: int = 65536,
        min_cluster_size: int = 1,
        verbose: bool = False,
    ) -> None:
        self.n_clusters = n_clusters
        self.seed = seed
        self.n_iter = n_iter
        self.max_points_per_centroid = max_points_per_centroid
        self.init = init
        self.n_init = n_init
        self.backend = backend
        self.batch_size = batch_size
        self.min_cluster_size = min_cluster_size
        self.verbose = verbose

    def _validate(self) -> None:
        from clusterclip.cluster.backends import BACKENDS
        from clusterclip.cluster.seeding import INITS

        check_int("n_clusters", self.n_clusters, 1, "Pass n_clusters=2 or more.")
        check_seed(self.seed)
        check_int("n_iter", self.n_iter, 1, "Pass n_iter=20 (the default) or more.")
        check_int(
            "max_points_per_centroid",
            self.max_points_per_centroid,
            1,
            "Pass e.g. 256 (the default).",
        )
        check_int("batch_size", self.batch_size, 1, "Pass e.g. batch_size=65536.")
        check_int("n_init", self.n_init, 1, "Pass n_init=1 (the default) or more.")
        check_int(
            "min_cluster_size", self.min_cluster_size, 1, "Pass min_cluster_size=1 (no filter)."
        )
        if self.init not in INITS:
            raise invalid("init", f"one of {list(INITS)}", self.init, "Pass init='k-means++'.")
        if self.backend not in BACKENDS:
            raise invalid(
                "backend", f"one of {list(BACKENDS)}", self.backend, "Pass backend='auto'."
            )

    def fit(self, X: Any, y: None = None) -> KMeans:
        """Fit the centroids on a seeded sample of the rows of ``X``; returns ``self``.

        Parameters
        ----------
        X : array-like of shape (n_rows, d)
            numpy array, float16 memmap or ShardedMatrix; rows need not be unit
            norm (they are normalised), but must be finite and non-zero.
        y : None
            Ignored (scikit-learn signature).
        """
        from clusterclip.cluster.backends import get_backend
        from clusterclip.cluster.probe import choose_backend
        from clusterclip.cluster.seeding import seed_centroids

        self._validate()
        n, _ = check_matrix(X)
        k = int(self.n_clusters)
        if n == 0:
            raise invalid("X", "a matrix with at least one row", "0 rows", "Pass the embeddings.")
        if k > n:
            raise invalid(
                "n_clusters",
                f"an int in [1, {n}] (no more clusters than usable rows)",
                k,
                f"Pass n_clusters={n} or fewer, or add documents.",
            )
        started = time.perf_counter()
        sample_size = min(n, int(self.max_points_per_centroid) * k)
        if sample_size < n:
            rows = np.sort(
                random_stream(self.seed, PURPOSE_SAMPLE).choice(n, sample_size, replace=False)
            )
        else:
            rows = np.arange(n, dtype=np.int64)
        sample = gather_rows(X, rows, int(self.batch_size))
        # "auto" is a rule of the machine type; "fastest" is measured (cluster/probe.py).
        choice = choose_backend(self.backend, sample, k)
        engine = get_backend(choice.backend)
        prepared = engine.prepare(sample)
        best: tuple[Any, ...] | None = None
        objectives = []
        for run in range(int(self.n_init)):
            seeding_started = time.perf_counter()
            centroids, init_info = seed_centroids(
                sample,
                k,
                init=self.init,
                rng=random_stream(self.seed, PURPOSE_INIT, run),
                min_cluster_size=int(self.min_cluster_size),
                n_rows=n,
            )
            init_info["seconds"] = round(time.perf_counter() - seeding_started, 4)
            threads = lloyd_threads(engine, sample, centroids)
            init_info["lloyd_threads"] = threads
            with one_thread() if threads["threads"] == 1 else contextlib.nullcontext():
                centroids, stats = self._lloyd(
                    engine,
                    prepared,
                    sample,
                    centroids,
                    random_stream(self.seed, PURPOSE_SPLIT, run),
                )
            # The final E-step on the default threads, whichever Lloyd ran on: a product's
            # last bits can depend on the thread count, the reported objective must not.
            labels, scores = _final_step(engine, prepared, sample, centroids)
            objective = float(np.mean(scores, dtype=np.float64))
            objectives.append(round(objective, 6))
            if best is None or objective > best[0]:
                best = (objective, centroids, labels, stats, init_info)
        objective, centroids, labels, stats, init_info = best
        init_info["runs"] = int(self.n_init)
        init_info["objectives"] = objectives
        self.cluster_centers_ = np.ascontiguousarray(centroids, dtype=np.float32)
        self.labels_ = labels.astype(np.int32)
        self.sample_indices_ = rows
        self.sample_size_ = int(sample_size)
        self.objective_ = objective
        self.n_iter_ = len(stats)
        self.stats_ = stats
        self.backend_ = engine.name
        self.backend_choice_ = choice.as_record()
        self.init_ = init_info
        self.fit_seconds_ = round(time.perf_counter() - started, 4)
        return self

    def _lloyd(
        self,
        engine: Any,
        prepared: Any,
        sample: np.ndarray,
        centroids: np.ndarray,
        split_rng: np.random.Generator,
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """``n_iter`` Lloyd iterations (at most): the centroids and per-iteration stats."""
        from clusterclip.progress import progress_bar

        k = int(self.n_clusters)
        stats: list[dict[str, Any]] = []
        previous = None
        bar = (
            progress_bar(total=int(self.n_iter), desc="k-means", unit="iter")
            if self.verbose
            else None
        )
        for iteration in range(int(self.n_iter)):
            tick = time.perf_counter()
            labels, scores, sums = engine.assign_and_sum(prepared, sample, centroids)
            counts = np.bincount(labels, minlength=k)
            centroids, n_split = _update_centroids(sums, counts, split_rng)
            stats.append(
                {
                    "iteration": iteration + 1,
                    "objective": float(np.mean(scores, dtype=np.float64)),
                    "imbalance_factor": _imbalance(counts),
                    "empty_resplit": n_split,
                    "seconds": round(time.perf_counter() - tick, 4),
                }
            )
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"objective {stats[-1]['objective']:.4f}")
            if previous is not None and n_split == 0 and np.array_equal(previous, labels):
                break
            previous = labels
        if bar is not None:
            bar.close()
        return centroids, stats

    def _check_fitted(self) -> None:
        if not hasattr(self, "cluster_centers_"):
            from clusterclip.errors import ClusterClipError

            raise ClusterClipError("this KMeans is not fitted yet. Call fit(X) first.")

    def predict(self, X: Any) -> np.ndarray:
        """Cluster of every row of ``X`` (int32), streamed ``batch_size`` rows at a time.

        All-zero rows get ``-1``. See :func:`assign_matrix` for the scores as well.
        """
        self._check_fitted()
        labels, _ = assign_matrix(
            X, self.cluster_centers_, backend=self.backend_, batch_size=int(self.batch_size)
        )
        return labels

    def fit_predict(self, X: Any, y: None = None) -> np.ndarray:
        """``fit(X)`` then ``predict(X)`` (labels of every row, not just the sample)."""
        return self.fit(X).predict(X)


def k_means(
    X: Any,
    n_clusters: int,
    *,
    seed: int,
    n_iter: int = 20,
    max_points_per_centroid: int = 256,
    init: str = "k-means++",
    n_init: int = 1,
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray, float]:
    """Function twin of :class:`KMeans`: ``(cluster_centers, labels of every row, objective)``.

    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> centers, labels, objective = k_means(X, 2, seed=0, backend="numpy")
    >>> bool(labels[0] == labels[1] != labels[2] == labels[3])
    True
    """
    model = KMeans(
        n_clusters,
        seed=seed,
        n_iter=n_iter,
        max_points_per_centroid=max_points_per_centroid,
        init=init,
        n_init=n_init,
        backend=backend,
    ).fit(X)
    return model.cluster_centers_, model.predict(X), model.objective_
