"""E-step backends: nearest centroid by inner product, on faiss, torch or numpy.

Every backend answers one question for a block of unit rows ``X`` (n, d) and unit
centroids ``C`` (K, d): the index of the most similar centroid and the cosine to
it. The Lloyd loop in :mod:`clusterclip.cluster.kmeans` is written once against
this protocol (``prepare`` once per fit, ``top1`` per iteration, ``centroid_sums``
for the M-step), so all backends share the seeding, empty-cluster splitting and
statistics.

Backends
--------
``faiss``
    ``IndexFlatIP.search(X, 1)``: exact fp32 BLAS with a fused arg-max, after
    :func:`clusterclip.cluster.blas.import_faiss` fixed the OpenBLAS core type;
    on every GPU when a faiss GPU build sees one (not tested here: no GPU).
``torch-bf16``
    bf16 matrix product (AMX tiles on Sapphire Rapids and later) with an fp32
    arg-max; the cosine reported for the chosen centroid is recomputed in fp32.
    Near-ties (|difference| below bf16 resolution, ~4e-3) may pick the other
    centroid; on real and synthetic data the final objective equals fp32 to 1e-4
    (``benchmarks/bench_kmeans.py``).
``torch-fp32``, ``numpy``
    exact fp32 products (oneDNN / OpenBLAS).
``torch``
    ``torch-bf16`` on CPUs with AMX-BF16, else ``torch-fp32``.
``auto``
    the fastest one measured by ``benchmarks/bench_kmeans.py`` for this kind of
    machine: ``torch-bf16`` on AMX CPUs, else ``faiss`` when installed (with its
    OpenBLAS on fast kernels), else ``torch-fp32``, else ``numpy``.

Results are deterministic for a given backend on a given machine; different
backends may differ on near-ties.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy as np

from clusterclip.errors import invalid, require_extra

__all__ = ["BACKENDS", "Backend", "get_backend", "resolve_backend"]

BACKENDS = ("auto", "faiss", "torch", "torch-bf16", "torch-fp32", "numpy")

#: Bytes of scores held at once by the blocked products (bounds memory).
_SCORE_BLOCK_BYTES = 64 << 20


def _block_rows(n_centroids: int, itemsize: int = 4) -> int:
    return max(256, _SCORE_BLOCK_BYTES // max(1, n_centroids * itemsize))


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def cpu_has_amx_bf16() -> bool:
    from clusterclip.cluster.blas import cpu_flags

    return "amx_bf16" in cpu_flags()


def resolve_backend(name: str) -> str:
    """The concrete backend ``name`` stands for on this machine.

    >>> resolve_backend("numpy")
    'numpy'
    """
    if name not in BACKENDS:
        raise invalid(
            "backend",
            f"one of {list(BACKENDS)}",
            name,
            "Pass backend='auto' to let clusterclip pick.",
        )
    if name == "torch":
        require_extra("torch", "torch")
        return "torch-bf16" if cpu_has_amx_bf16() else "torch-fp32"
    if name != "auto":
        return name
    if _has("torch") and cpu_has_amx_bf16():
        return "torch-bf16"
    if _has("faiss"):
        from clusterclip.cluster.blas import faiss_blas_info

        if not faiss_blas_info()["slow"]:
            return "faiss"
    if _has("torch"):
        return "torch-fp32"
    return "numpy"


class Backend:
    """One E-step implementation (see the module docstring)."""

    name = "numpy"

    def prepare(self, X: np.ndarray) -> Any:
        """Hold the fit sample (float32, unit rows) in the backend's own format."""
        return X

    def top1(self, prepared: Any, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(labels int64, scores float32)`` of the most similar centroid per row."""
        n = prepared.shape[0]
        labels = np.empty(n, dtype=np.int64)
        scores = np.empty(n, dtype=np.float32)
        step = _block_rows(len(centroids))
        transposed = np.ascontiguousarray(centroids.T)
        for start in range(0, n, step):
            block = prepared[start : start + step] @ transposed
            best = block.argmax(axis=1)
            labels[start : start + step] = best
            scores[start : start + step] = block[np.arange(len(best)), best]
        return labels, scores

    def centroid_sums(
        self, prepared: Any, X: np.ndarray, labels: np.ndarray, n_clusters: int
    ) -> np.ndarray:
        """Sum of the rows of each cluster, float32 ``(K, d)``.

        One sparse one-hot product, single-threaded (scipy) for every backend:
        on a busy 2-core machine it beat torch's ``index_add_`` 2-3x, whose
        parallel regions wait for both cores.
        """
        sparse = require_extra("scipy.sparse", "cluster")
        n = len(labels)
        onehot = sparse.csr_matrix(
            (np.ones(n, dtype=np.float32), (labels, np.arange(n))), shape=(n_clusters, n)
        )
        return np.asarray(onehot @ X, dtype=np.float32)

    @property
    def exact_scores(self) -> bool:
        return True


class NumpyBackend(Backend):
    name = "numpy"


class FaissBackend(Backend):
    name = "faiss"

    def __init__(self) -> None:
        from clusterclip.cluster.blas import import_faiss

        self.faiss = import_faiss()

    def top1(self, prepared: Any, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        index = self.faiss.IndexFlatIP(centroids.shape[1])
        if hasattr(self.faiss, "index_cpu_to_all_gpus") and self.faiss.get_num_gpus() > 0:
            index = self.faiss.index_cpu_to_all_gpus(index)  # a faiss GPU build with a GPU
        index.add(np.ascontiguousarray(centroids, dtype=np.float32))
        scores, labels = index.search(np.ascontiguousarray(prepared, dtype=np.float32), 1)
        return labels[:, 0].astype(np.int64), scores[:, 0].astype(np.float32)


class TorchBackend(Backend):
    def __init__(self, precision: str) -> None:
        self.torch = require_extra("torch", "torch")
        self.precision = precision
        self.name = f"torch-{precision}"
        self.dtype = self.torch.bfloat16 if precision == "bf16" else self.torch.float32

    @property
    def exact_scores(self) -> bool:
        return self.precision == "fp32"

    def prepare(self, X: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32)).to(self.dtype)

    def top1(self, prepared: Any, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        torch = self.torch
        if isinstance(prepared, np.ndarray):
            prepared = self.prepare(prepared)
        n = prepared.shape[0]
        labels = torch.empty(n, dtype=torch.int64)
        scores = torch.empty(n, dtype=torch.float32)
        transposed = torch.from_numpy(np.ascontiguousarray(centroids, dtype=np.float32))
        transposed = transposed.to(self.dtype).T.contiguous()
        step = _block_rows(len(centroids), 2 if self.precision == "bf16" else 4)
        with torch.inference_mode():
            for start in range(0, n, step):
                block = torch.mm(prepared[start : start + step], transposed)
                best, where = block.max(dim=1)
                labels[start : start + step] = where
                scores[start : start + step] = best.float()
        return labels.numpy(), scores.numpy()


@functools.cache
def get_backend(name: str) -> Backend:
    """The backend object for a concrete or ``auto`` name (cached: backends hold no state).

    >>> get_backend("numpy").name
    'numpy'
    """
    resolved = resolve_backend(name)
    if resolved == "faiss":
        return FaissBackend()
    if resolved == "torch-bf16":
        return TorchBackend("bf16")
    if resolved == "torch-fp32":
        return TorchBackend("fp32")
    return NumpyBackend()
