"""How much of a clustering is chance: agreement with a clustering from another seed.

k-means finds one of many local optima; which one depends on the seed. Since
ClusterClip gives every cluster the same share of the draws, a document's
upsampling depends on its cluster, so the part of the clustering that changes
with the seed is the part of the balance that is chance.

:func:`seed_stability` fits a second k-means with another seed on a seeded
sample of the documents (at most ``sample_size``, default 20,000) and compares
it with the stage's labels on that sample:

- ``ari``: adjusted Rand index (1 = the same partition, 0 = chance level);
- ``pairs_kept``: of the document pairs the stage's clustering puts together,
  the share the other seed puts together too (recall over pairs; it is also
  the precision, up to the cluster sizes: the Fowlkes-Mallows index is
  ``fowlkes_mallows``).

The second fit is deliberately cheaper than the stage's own (at most 64
documents per centroid and 10 Lloyd iterations on the same backend), so the
figure costs a small share of the stage; ``benchmarks/bench_stability.py``
compares it with a full second fit.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["agreement", "compare_stability", "seed_stability", "stability_fit"]

#: The second fit's cap on documents per centroid and Lloyd iterations.
STABILITY_POINTS_PER_CENTROID = 64
STABILITY_ITERATIONS = 10


def _pairs(counts: np.ndarray) -> float:
    counts = np.asarray(counts, dtype=np.float64)
    return float((counts * (counts - 1) / 2).sum())


def agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """ARI, Fowlkes-Mallows and pairs kept between two labelings of the same documents.

    >>> agreement(np.array([0, 0, 1, 1]), np.array([5, 5, 7, 7]))["ari"]
    1.0
    >>> round(agreement(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))["pairs_kept"], 3)
    0.0
    """
    a = np.unique(np.asarray(a), return_inverse=True)[1].ravel()
    b = np.unique(np.asarray(b), return_inverse=True)[1].ravel()
    n = len(a)
    table = np.bincount(a * (int(b.max(initial=0)) + 1) + b)
    together_both = _pairs(table)
    together_a = _pairs(np.bincount(a))
    together_b = _pairs(np.bincount(b))
    total = n * (n - 1) / 2
    expected = together_a * together_b / total if total else 0.0
    top = (together_a + together_b) / 2 - expected
    ari = 1.0 if top == 0 else (together_both - expected) / top
    fmi = together_both / np.sqrt(together_a * together_b) if together_a and together_b else 1.0
    kept = together_both / together_a if together_a else 1.0
    return {"ari": float(ari), "fowlkes_mallows": float(fmi), "pairs_kept": float(kept)}


def seed_stability(
    matrix: Any,
    labels: np.ndarray,
    usable: np.ndarray,
    *,
    n_clusters: int,
    seed: int,
    sample_size: int,
    init: str,
    backend: str,
    batch_size: int,
) -> dict[str, Any]:
    """Agreement of ``labels`` with a k-means of another seed, on a sample of documents.

    Parameters
    ----------
    matrix : matrix-like, (N, d)
        The embeddings (any of :class:`~clusterclip.cluster.KMeans`'s inputs).
    labels : numpy.ndarray of int, (N,)
        The stage's labels (after dissolving small clusters).
    usable : numpy.ndarray of int64
        Rows of the ``ok`` documents (sorted).
    n_clusters, init, backend, batch_size
        As the stage's fit; ``n_clusters`` is the number requested.
    seed : int
        The stage's seed; the second fit uses ``SeedSequence(seed, spawn_key=(7,))``
        and the sample ``spawn_key=(8,)``, never the stage's own streams.
    sample_size : int
        Documents compared (at most the usable ones).

    Returns
    -------
    dict
        ``ari``, ``fowlkes_mallows``, ``pairs_kept``, ``sample_size``, ``other_seed``,
        ``seconds``. Deterministic for the same inputs, seed and backend.
    """
    second = stability_fit(
        matrix, usable, n_clusters=n_clusters, seed=seed, sample_size=sample_size, init=init,
        backend=backend, batch_size=batch_size,
    )  # fmt: skip
    return compare_stability(labels, second)


def stability_fit(
    matrix: Any,
    usable: np.ndarray,
    *,
    n_clusters: int,
    seed: int,
    sample_size: int,
    init: str,
    backend: str,
    batch_size: int,
) -> dict[str, Any]:
    """The second fit of :func:`seed_stability`: its sample's rows and their labels.

    Needs no label of the stage, so it runs with the stage's fit (on the engine's
    worker); :func:`compare_stability` then compares. Parameters as
    :func:`seed_stability`.

    Returns
    -------
    dict
        ``rows`` (int64, sorted), ``labels`` (the other seed's cluster of each),
        ``other_seed``, ``seconds``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(m, 0.1, (50, 3)) for m in np.eye(3)])
    >>> second = stability_fit(X, np.arange(150), n_clusters=3, seed=0, sample_size=60,
    ...                        init="k-means++", backend="numpy", batch_size=1024)
    >>> len(second["rows"]), len(second["labels"])
    (60, 60)
    """
    from clusterclip.cluster.kmeans import KMeans

    started = time.perf_counter()
    size = min(int(sample_size), len(usable))
    key = np.random.SeedSequence(seed, spawn_key=(8,))
    rng = np.random.Generator(np.random.PCG64(key))
    rows = np.sort(rng.choice(usable, size=size, replace=False)) if size < len(usable) else usable
    block = np.asarray(matrix[rows], dtype=np.float32)
    other_seed = int(np.random.SeedSequence(seed, spawn_key=(7,)).generate_state(1, np.uint64)[0])
    other_seed &= (1 << 63) - 1
    k = min(int(n_clusters), size)
    model = KMeans(
        k, seed=other_seed, n_iter=STABILITY_ITERATIONS,
        max_points_per_centroid=STABILITY_POINTS_PER_CENTROID, init=init, backend=backend,
        batch_size=batch_size,
    )  # fmt: skip
    other = model.fit(block).predict(block)
    return {"rows": rows, "labels": other, "other_seed": other_seed,
            "seconds": time.perf_counter() - started}  # fmt: skip


def compare_stability(labels: np.ndarray, second: dict[str, Any]) -> dict[str, Any]:
    """The record of :func:`seed_stability` from the stage's labels and a :func:`stability_fit`.

    >>> second = {"rows": np.array([0, 1, 2]), "labels": np.array([4, 4, 5]),
    ...           "other_seed": 1, "seconds": 0.0}
    >>> compare_stability(np.array([0, 0, 1]), second)["ari"]
    1.0
    """
    started = time.perf_counter()
    result = agreement(labels[second["rows"]], second["labels"])
    return {
        **{name: round(value, 4) for name, value in result.items()},
        "sample_size": int(len(second["rows"])),
        "other_seed": second["other_seed"],
        "fit": {
            "max_points_per_centroid": STABILITY_POINTS_PER_CENTROID,
            "n_iter": STABILITY_ITERATIONS,
        },
        "seconds": round(second["seconds"] + time.perf_counter() - started, 3),
    }
