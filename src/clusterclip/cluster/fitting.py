"""The fit of the cluster stage as one engine task: the worker reads its own sample rows.

The driver plans the fit: it builds the unfitted estimator (its parameters and
seed, from which the sample's row numbers follow), resolves ``auto`` to a
backend, and hands :class:`FitWorker` to :func:`clusterclip.engines.map_shards`
with that estimator as the one task's payload. The worker opens the work
directory itself, reads the ``ok`` documents and the sample rows from the
memory-mapped embeddings, fits, and sends back the fitted estimator without its
sample-sized arrays (the centroids and the fit's records: small), plus the
thread counts it ran on and the seed-stability fit's labels. No embedding row
travels from the driver; on the local engine the same worker runs in-process.

Thread counts: the fit's products may split their sums by thread
(``kmeans.THREAD_INVARIANT`` lists the backends that do not), and a Ray actor
reserving one CPU starts with ``OMP_NUM_THREADS=1``. So the driver sends the
thread counts it would have used (:func:`driver_threads`) and the worker runs
the fit on those (:func:`pinned_threads`); the local engine sends none and
changes nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.threads import available_cpus, driver_threads, pinned_threads

__all__ = ["FitWorker", "driver_threads", "fit_on_engine", "pinned_threads", "threads_record"]

#: Fitted attributes as long as the fit sample: left on the worker (the stage reads none).
SAMPLE_SIZED = ("labels_", "sample_indices_")


class RowView:
    """Rows ``rows`` (sorted) of a matrix, as a matrix (the ``ok`` documents).

    Examples
    --------
    >>> view = RowView(np.arange(6.0).reshape(3, 2), np.array([0, 2]))
    >>> view.shape, view[np.array([1])].tolist()
    ((2, 2), [[4.0, 5.0]])
    """

    def __init__(self, matrix: Any, rows: np.ndarray) -> None:
        self.matrix, self.source_rows = matrix, rows
        self.shape = (len(rows), int(matrix.shape[1]))
        self.dtype = matrix.dtype

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.matrix[self.source_rows[key]]


def threads_record() -> dict[str, Any]:
    """Threads of the libraries loaded in this process (recorded in the stage summary).

    Results on the exact backends may differ in the last bits with another
    count: sums are split differently.

    >>> threads_record()["cpus"] >= 1
    True
    """
    threads: dict[str, Any] = {"cpus": available_cpus()}
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            threads.setdefault(pool["internal_api"], pool["num_threads"])
    except ImportError:
        pass
    if "torch" in sys.modules:
        threads["torch"] = sys.modules["torch"].get_num_threads()
    return threads


class FitWorker:
    """Fit the cluster stage's estimator on the sample rows it reads from the work directory.

    Pass ``functools.partial(FitWorker, workdir, threads, stability, blas)`` as the
    ``worker`` of :func:`clusterclip.engines.map_shards` and the unfitted
    estimator (:class:`~clusterclip.cluster.KMeans` or
    :class:`~clusterclip.cluster.HierarchicalKMeans`, its ``backend`` already
    resolved) as the task's payload.

    Parameters
    ----------
    workdir : str
        The work directory (every Ray node must see it at this path).
    threads : mapping or None
        ``{"blas": n, "torch": n}`` to run the fit on (:func:`driver_threads`), or
        None to keep this process's.
    stability : mapping or None
        Keyword arguments of :func:`clusterclip.cluster.stability.stability_fit`
        (less the matrix, the rows and the backend, which is the fit's), or None.
    blas : bool
        Also record faiss's BLAS (:func:`clusterclip.cluster.blas.faiss_blas_info`).

    Returns (when called) a dict: ``model`` (fitted, without ``labels_`` and
    ``sample_indices_``), ``threads`` (:func:`threads_record` inside the fit's
    threads), ``blas`` (faiss's BLAS, or None) and ``stability`` (the second
    fit's rows and labels, or None).

    Examples
    --------
    >>> from clusterclip.cluster import KMeans
    >>> FitWorker("work", None, None, False)(KMeans(8, seed=0, backend="numpy"))  # doctest: +SKIP
    {'model': KMeans(...), 'threads': {...}, 'blas': None, 'stability': None}
    """

    def __init__(
        self,
        workdir: str,
        threads: Mapping[str, int] | None,
        stability: Mapping[str, Any] | None,
        blas: bool = False,
    ) -> None:
        self.workdir, self.threads, self.blas = str(workdir), threads, bool(blas)
        self.stability = None if stability is None else dict(stability)

    def __call__(self, model: Any) -> dict[str, Any]:
        from clusterclip.io import WorkDir

        work = WorkDir(self.workdir)
        ok = work.ok_mask()
        embeddings = work.embeddings()
        usable = np.flatnonzero(ok)
        data = embeddings if len(usable) == len(ok) else RowView(embeddings, usable)
        with pinned_threads(self.threads):
            model.fit(data)
            threads = threads_record()
            stability = None
            if self.stability is not None:
                from clusterclip.cluster.stability import stability_fit

                stability = stability_fit(
                    embeddings, usable, backend=model.backend_, **self.stability
                )
        for name in SAMPLE_SIZED:
            if hasattr(model, name):
                delattr(model, name)
        return {"model": model, "threads": threads, "blas": _blas_record() if self.blas else None,
                "stability": stability}  # fmt: skip


def _blas_record() -> dict[str, Any]:
    """faiss's BLAS (the stage records it where the fit may have used faiss)."""
    import importlib.util

    if importlib.util.find_spec("faiss") is None:
        return {"faiss": "not installed"}
    from clusterclip.cluster.blas import faiss_blas_info

    return faiss_blas_info()


def fit_on_engine(
    model: Any,
    workdir: str | os.PathLike[str],
    *,
    engine: str = "local",
    options: Any = None,
    stability: Mapping[str, Any] | None = None,
    blas: bool = False,
) -> dict[str, Any]:
    """Run :class:`FitWorker` on ``model`` as one task of ``engine``; its result.

    Parameters
    ----------
    model : KMeans or HierarchicalKMeans
        Unfitted; pickled to the worker (parameters only: a few hundred bytes).
    workdir : path
        The work directory the worker reads.
    engine, options
        See :func:`clusterclip.engines.map_shards`. Away from the local engine the
        worker runs on :func:`driver_threads`, so the fit gives the local bytes.
    stability : mapping, optional
        See :class:`FitWorker`.
    blas : bool
        See :class:`FitWorker`.

    Returns
    -------
    dict
        See :class:`FitWorker`.

    Examples
    --------
    >>> from clusterclip.cluster import KMeans
    >>> fit_on_engine(KMeans(8, seed=0), "work")["model"].cluster_centers_  # doctest: +SKIP
    """
    import functools

    from clusterclip.engines import run_task

    threads = None if engine == "local" else driver_threads()
    worker = functools.partial(FitWorker, str(Path(workdir)), threads, stability, blas)
    return run_task(worker, model, engine=engine, options=options)
