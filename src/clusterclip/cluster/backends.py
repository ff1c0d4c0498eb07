"""E-step backends: nearest centroid by inner product, on faiss, torch or numpy.

Every backend answers one question for a block of unit rows ``X`` (n, d) and unit
centroids ``C`` (K, d): the index of the most similar centroid and the cosine to
it. The Lloyd loop in :mod:`clusterclip.cluster.kmeans` is written once against
this protocol (``prepare`` once per fit, ``assign_and_sum`` per iteration: the
E-step's ``top1`` and the M-step's ``centroid_sums``), so all backends share the
seeding, empty-cluster splitting and statistics.

Backends
--------
``faiss``
    ``IndexFlatIP.search(X, 1)``: exact fp32 BLAS with a fused arg-max, after
    :func:`clusterclip.cluster.blas.import_faiss` fixed the OpenBLAS core type;
    on every GPU when a faiss GPU build sees one (not tested here: no GPU).
``torch-bf16``
    bf16 matrix product (AMX tiles on Sapphire Rapids and later) in cache-sized
    row blocks with a two-level arg-max (:class:`TorchBackend`); the cosine
    reported for the chosen centroid is recomputed in fp32.
    Near-ties (|difference| below bf16 resolution, ~4e-3) may pick the other
    centroid; on real and synthetic data the final objective equals fp32 to 1e-4
    (``benchmarks/bench_kmeans.py``).
``torch-fp32``
    exact fp32 products (MKL / oneDNN).
``numpy``
    exact fp32 products (numpy's OpenBLAS) in fixed blocks of rows, each on one
    BLAS thread, the blocks (product, arg-max) and the M-step's sums spread over
    as many Python threads as the BLAS has: the same bits on any thread count.
``torch``
    ``torch-bf16`` on CPUs with AMX-BF16, else ``torch-fp32``.
``torch-cuda``
    exact fp32 products on the first CUDA device (TF32 off), the same blocked
    arg-max as the CPU torch backends; the M-step's sums are taken on the host
    (a CUDA ``index_add_`` adds in no fixed order, so its bits could vary
    between runs). The same code runs on the CPU with ``device="cpu"``, which is
    how the tests check it on a machine without a GPU.
``auto`` (the default)
    a fixed rule of the machine type, never a timing (:func:`auto_rule`):
    ``torch-cuda`` when torch sees a CUDA device, else ``torch-bf16`` on CPUs
    with native bf16 (AMX-BF16 or AVX512-BF16) when torch is installed, else
    ``numpy`` on AVX2 CPUs without AVX-512 (numpy's newer OpenBLAS is the
    fastest exact product there), else ``faiss`` when installed (with its
    OpenBLAS on fast kernels), else ``torch-fp32``, else ``numpy``. So the same
    command on the same inputs gives the same labels on every run of one
    machine type (CPU model, core count, library versions), whatever the load
    and whatever is cached.
``fastest``
    measured: in :class:`~clusterclip.cluster.KMeans` and the cluster stage, the
    fastest candidate timed on the fit sample the first time, then from a cache
    (:mod:`clusterclip.cluster.probe`); where there is no fit to measure
    (:func:`resolve_backend`, :func:`clusterclip.cluster.assign` called alone)
    the ``auto`` rule. A later probe (a deleted cache, another load) may pick
    another backend, whose labels differ at near-ties.

Results are deterministic for a given backend on a given machine type; different
backends may differ on near-ties. A product's last bits can depend on the thread
count (MKL's, and OpenBLAS's on an AVX2-only EPYC), so the Lloyd loop's thread
count is timed per fit (:func:`clusterclip.cluster.kmeans.lloyd_threads`) only
for the backends whose bits were shown not to (``THREAD_INVARIANT``;
``tests/abuse/test_reproducible.py`` checks them); the others keep the default
threads (numpy's bits do not follow them either, see ``THREAD_INVARIANT``).
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.threads import avx2_only

__all__ = ["BACKENDS", "Backend", "auto_rule", "get_backend", "resolve_backend"]

BACKENDS = ("auto", "fastest", "faiss", "torch", "torch-bf16", "torch-fp32", "torch-cuda", "numpy")

#: Bytes of fp32 scores in one block of the numpy backend, and its most rows.
_NUMPY_BLOCK_BYTES = 32 << 20
_NUMPY_MAX_ROWS = 65536
#: The torch backends keep each block of scores this small, so it stays in cache.
_ARGMAX_BLOCK_BYTES = 8 << 20
#: Column groups of the torch two-level arg-max (used from 16 * this many centroids).
_ARGMAX_GROUPS = 16


def _numpy_block_rows(n_centroids: int) -> int:
    """Rows per block of the numpy backend: 32 MiB of fp32 scores, 256 to 65,536 rows
    (8,192 at ``K = 1024``; several blocks per thread on a fit sample).

    >>> _numpy_block_rows(1024), _numpy_block_rows(10), _numpy_block_rows(10**6)
    (8192, 65536, 256)
    """
    return min(_NUMPY_MAX_ROWS, max(256, _NUMPY_BLOCK_BYTES // max(1, 4 * n_centroids)))


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def cpu_has_amx_bf16() -> bool:
    from clusterclip.cluster.blas import cpu_flags

    return "amx_bf16" in cpu_flags()


def native_bf16() -> list[str]:
    """This CPU's bf16 product instructions (``amx_bf16``, ``avx512_bf16``; empty if none)."""
    from clusterclip.cluster.blas import cpu_flags

    return [name for name in ("amx_bf16", "avx512_bf16") if name in cpu_flags()]


def cuda_device() -> str | None:
    """The name of the CUDA device torch would use, or None (no GPU, or no CUDA torch).

    Imports torch only where an NVIDIA driver is loaded, so a CPU machine pays nothing.

    >>> cuda_device() is None or isinstance(cuda_device(), str)
    True
    """
    import os

    if not _has("torch") or not os.path.exists("/proc/driver/nvidia/version"):
        return None
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def auto_rule() -> tuple[str, str]:
    """The backend ``auto`` stands for on this machine, and why.

    A function of the CPU's flags and of which libraries are installed (and
    whether faiss's OpenBLAS runs on fast kernels), never of a timing: reruns
    on one machine type give the same backend, so the same labels. bf16
    products are ~3x faster than the exact ones wherever the CPU has them
    (docs/performance.md). Among the exact backends, numpy's OpenBLAS ran Lloyd
    iterations ~12% faster than faiss's on an AVX2-only EPYC, in two runs; on
    the AVX-512 Xeon measured, faiss and numpy traded places between runs, so a
    measurement would only pick among them by chance there.

    Returns
    -------
    backend : str
        ``torch-cuda``, ``torch-bf16``, ``faiss``, ``torch-fp32`` or ``numpy``.
    why : str
        The facts that chose it, e.g. ``'native bf16 (amx_bf16), torch installed'``.

    >>> auto_rule()[0] in ("torch-cuda", "torch-bf16", "faiss", "torch-fp32", "numpy")
    True
    """
    gpu = cuda_device()
    if gpu is not None:
        return "torch-cuda", f"CUDA device {gpu}, torch installed"
    bf16 = native_bf16()
    torch = _has("torch")
    if torch and bf16:
        return "torch-bf16", f"native bf16 ({', '.join(bf16)}), torch installed"
    facts = [
        f"native bf16 ({', '.join(bf16)}) but torch not installed" if bf16 else "no native bf16"
    ]
    from clusterclip.cluster.blas import cpu_flags

    if not bf16 and avx2_only(cpu_flags()):
        # numpy's OpenBLAS (0.3.31) ran Lloyd iterations ~12% faster than faiss's bundled
        # 0.3.15 and ~19% faster than torch's MKL on an AVX2-only EPYC (docs/performance.md)
        return "numpy", f"{facts[0]}, AVX2 without AVX-512: numpy's OpenBLAS"
    if _has("faiss"):
        from clusterclip.cluster.blas import faiss_blas_info

        info = faiss_blas_info()
        if not info["slow"]:
            return "faiss", f"{facts[0]}, faiss installed"
        facts.append(f"faiss's OpenBLAS on slow {info['architecture']} kernels")
    else:
        facts.append("faiss not installed")
    if torch:
        return "torch-fp32", ", ".join([*facts, "torch installed"])
    return "numpy", ", ".join([*facts, "torch not installed"])


def resolve_backend(name: str) -> str:
    """The concrete backend ``name`` stands for on this machine.

    ``auto``, and ``fastest`` where there is no fit to measure, are
    :func:`auto_rule`; a fit measures ``fastest``
    (:func:`clusterclip.cluster.probe.choose_backend`).

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
    if name in ("auto", "fastest"):
        return auto_rule()[0]
    return name


class Backend:
    """One E-step implementation (see the module docstring)."""

    name = "numpy"

    def prepare(self, X: np.ndarray) -> Any:
        """Hold the fit sample (float32, unit rows) in the backend's own format."""
        return X

    def top1(self, prepared: Any, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(labels int64, scores float32)`` of the most similar centroid per row.

        numpy's exact fp32 product, in blocks of :func:`_numpy_block_rows` rows,
        each multiplied on one BLAS thread; the blocks (product, arg-max, score)
        are spread over as many Python threads as numpy's BLAS has
        (:func:`clusterclip.threads.blas_per_thread`). So the arg-max runs in
        parallel too, and the bits are the same on one thread and on many: a
        block's product is always taken on one thread, and its height depends
        only on ``K`` and where the rows end.
        """
        from clusterclip.threads import blas_per_thread, spread

        n = prepared.shape[0]
        labels = np.empty(n, dtype=np.int64)
        scores = np.empty(n, dtype=np.float32)
        step = _numpy_block_rows(len(centroids))
        transposed = np.ascontiguousarray(centroids.T, dtype=np.float32)

        def block(start: int) -> None:
            products = prepared[start : start + step] @ transposed
            best = products.argmax(axis=1)
            labels[start : start + len(best)] = best
            scores[start : start + len(best)] = np.take_along_axis(products, best[:, None], 1)[:, 0]

        with blas_per_thread() as workers:
            spread(block, range(0, n, step), workers)
        return labels, scores

    def centroid_sums(
        self, prepared: Any, X: np.ndarray, labels: np.ndarray, n_clusters: int
    ) -> np.ndarray:
        """Sum of the rows of each cluster, float32 ``(K, d)``.

        One sparse one-hot product (scipy; each cluster's rows added in row
        order), its clusters cut into ranges of about equal rows that run on
        as many threads as numpy's BLAS has: the same bits as one call. The
        torch backends fuse the sums into the E-step instead (:meth:`assign_and_sum`).
        """
        from clusterclip.threads import blas_threads, spread

        sparse = require_extra("scipy.sparse", "cluster")
        n = len(labels)
        onehot = sparse.csr_matrix(
            (np.ones(n, dtype=np.float32), (labels, np.arange(n))), shape=(n_clusters, n)
        )
        sums = np.empty((n_clusters, X.shape[1]), dtype=np.float32)
        workers = max(1, min(blas_threads(), n // 4096)) if n_clusters > 1 else 1
        # cluster boundaries at equal shares of the rows (the one-hot's row pointer)
        cuts = np.searchsorted(onehot.indptr, np.linspace(0, n, workers + 1), side="left")
        cuts[0], cuts[-1] = 0, n_clusters
        ranges = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]

        def part(bounds: tuple[int, int]) -> None:
            first, end = bounds
            sums[first:end] = onehot[first:end] @ X

        spread(part, ranges, len(ranges))
        return sums

    def assign_and_sum(
        self, prepared: Any, X: np.ndarray, centroids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One Lloyd pass: ``top1`` labels and scores, and the M-step's ``centroid_sums``."""
        labels, scores = self.top1(prepared, centroids)
        return labels, scores, self.centroid_sums(prepared, X, labels, len(centroids))

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
    """bf16 or fp32 products on torch, with a blocked two-level arg-max.

    ``torch.max(dim=1)`` on a wide score block runs an index-tracking
    reduction that costs as much as the product itself, and a block of 64 MiB
    of scores spills every cache. So the rows go through in blocks whose
    scores fit in a few MiB, and the arg-max is taken in two steps: the
    ``K`` columns are viewed as ``groups x width``; a vectorised ``amax``
    across the groups gives the best column offset per row, and only the
    ``groups`` candidates at that offset go through an index-tracking max.
    (``benchmarks/bench_kmeans.py``, 200k x 1024: a bf16 Lloyd iteration in
    ~0.35x the fp32 product and ~3x the bf16 one; fp32 in ~1.25x its product.)
    Ties between equal scores are broken deterministically (not always
    towards the lowest index).
    """

    def __init__(self, precision: str, device: str = "cpu", *, fused: bool | None = None) -> None:
        self.torch = require_extra("torch", "torch")
        self.precision = precision
        self.device = device
        # Sums fused into the E-step (index_add_) on the CPU only: see the module docstring.
        self.fused = device == "cpu" if fused is None else fused
        self.name = "torch-cuda" if device.startswith("cuda") else f"torch-{precision}"
        self.dtype = self.torch.bfloat16 if precision == "bf16" else self.torch.float32
        if device.startswith("cuda") and not self.torch.cuda.is_available():
            raise ClusterClipError(
                "backend torch-cuda: torch sees no CUDA device in this process (on Ray: give "
                "the workers GPUs with --num-gpus-per-worker). Pass --backend torch-fp32 "
                "to run on the CPU."
            )

    @property
    def exact_scores(self) -> bool:
        return self.precision == "fp32"

    def prepare(self, X: np.ndarray) -> Any:
        rows = self.torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
        return rows.to(device=self.device, dtype=self.dtype)

    def top1(self, prepared: Any, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        labels, scores, _ = self._blocked(prepared, centroids, None)
        return labels, scores

    def assign_and_sum(
        self, prepared: Any, X: np.ndarray, centroids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fused on the CPU: each block's rows are added to their centroid's sum right
        after its arg-max, while they are still in cache (``index_add_``, rows in
        order, so deterministic); elsewhere the sums are taken on the host."""
        if not self.fused:
            labels, scores = self.top1(prepared, centroids)
            return labels, scores, self.centroid_sums(prepared, X, labels, len(centroids))
        return self._blocked(prepared, centroids, np.ascontiguousarray(X, dtype=np.float32))

    def _blocked(
        self, prepared: Any, centroids: np.ndarray, rows_fp32: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        torch = self.torch
        if isinstance(prepared, np.ndarray):
            prepared = self.prepare(prepared)
        n_centroids = len(centroids)
        groups, width = 1, n_centroids
        if n_centroids >= 16 * _ARGMAX_GROUPS:  # width: a whole number of 64-byte vectors
            width = -(-n_centroids // (_ARGMAX_GROUPS * 32)) * 32
            groups = -(-n_centroids // width)
        # Pad to groups * width columns with copies of centroid 0 (mapped back to 0).
        padding = groups * width - n_centroids
        padded = np.concatenate([centroids, np.repeat(centroids[:1], padding, axis=0)])
        transposed = torch.from_numpy(np.ascontiguousarray(padded, dtype=np.float32))
        transposed = transposed.to(device=self.device, dtype=self.dtype).T.contiguous()
        n = prepared.shape[0]
        labels = torch.empty(n, dtype=torch.int64, device=self.device)
        scores = torch.empty(n, dtype=torch.float32, device=self.device)
        sums = None
        if rows_fp32 is not None:
            source = torch.from_numpy(rows_fp32)
            sums = torch.zeros((n_centroids, source.shape[1]), dtype=torch.float32)
        itemsize = 2 if self.precision == "bf16" else 4
        step = min(65536, max(256, _ARGMAX_BLOCK_BYTES // (groups * width * itemsize)))
        # Reused output buffers: a fresh multi-MiB tensor per block is page-faulted in.
        buffer = torch.empty((min(step, n), groups * width), dtype=self.dtype, device=self.device)
        column_max = torch.empty((min(step, n), width), dtype=self.dtype, device=self.device)
        with torch.inference_mode():
            for start in range(0, n, step):
                rows = min(step, n - start)
                block = torch.mm(prepared[start : start + rows], transposed, out=buffer[:rows])
                if groups == 1:
                    best, where = block.max(dim=1)
                else:
                    grid = block.view(rows, groups, width)
                    column = torch.amax(grid, dim=1, out=column_max[:rows]).argmax(dim=1)
                    candidates = grid.gather(2, column.view(rows, 1, 1).expand(rows, groups, 1))
                    best, group = candidates.squeeze(2).max(dim=1)
                    where = group * width + column
                    if padding:
                        where = where.masked_fill(where >= n_centroids, 0)
                labels[start : start + rows] = where
                scores[start : start + rows] = best.float()
                if sums is not None:
                    sums.index_add_(0, where, source[start : start + rows])
        labels, scores = labels.cpu().numpy(), scores.cpu().numpy()
        return labels, scores, None if sums is None else sums.numpy()


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
    if resolved == "torch-cuda":
        return TorchBackend("fp32", device="cuda")
    return NumpyBackend()
