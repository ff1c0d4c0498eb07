"""Seeded synthetic embeddings: a von Mises-Fisher-like mixture with Zipf-sized clusters.

Used by the tests and ``benchmarks/bench_kmeans.py``. Real sentence embeddings
are anisotropic (they share a common direction) and their topics are
imbalanced; the generator imitates both:

* centre ``k`` = normalise(``shared * u0 + g_k / sqrt(d)``) with a common
  direction ``u0`` and Gaussian ``g_k``;
* cluster sizes follow Zipf's law, size(rank r) proportional to ``r ** -zipf``;
* a point of cluster ``k`` = normalise(centre_k + ``spread`` * g / sqrt(d)), so its
  expected cosine to its centre is about ``1 / sqrt(1 + spread**2)`` (0.71 for 1).
"""

from __future__ import annotations

import numpy as np

__all__ = ["vmf_mixture"]


def vmf_mixture(
    n: int,
    dim: int,
    n_clusters: int,
    *,
    seed: int,
    zipf: float = 1.0,
    spread: float = 1.0,
    shared: float = 0.5,
    dtype: type = np.float32,
    block_rows: int = 65536,
) -> tuple[np.ndarray, np.ndarray]:
    """``(X (n, dim) unit rows, labels (n,) int32)``, deterministic in ``seed``.

    >>> X, y = vmf_mixture(1000, 16, 10, seed=0)
    >>> X.shape, int(np.bincount(y).argmax())
    ((1000, 16), 0)
    """
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(7,))))
    common = rng.standard_normal(dim)
    common /= np.linalg.norm(common)
    centres = shared * common + rng.standard_normal((n_clusters, dim)) / np.sqrt(dim)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    weights = np.arange(1, n_clusters + 1, dtype=np.float64) ** -zipf
    labels = rng.choice(n_clusters, size=n, p=weights / weights.sum()).astype(np.int32)
    X = np.empty((n, dim), dtype=dtype)
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        noise = rng.standard_normal((stop - start, dim), dtype=np.float32)
        block = centres[labels[start:stop]].astype(np.float32) + (spread / np.sqrt(dim)) * noise
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        X[start:stop] = block
    return X, labels
