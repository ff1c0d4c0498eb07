"""The sentence-transformers encoder: a transformer run in fixed-shape micro-batches.

Token counts use the model's own tokenizer. Every forward pass has a shape that
depends only on the lengths of the texts it holds (:func:`plan_micro_batches`),
so a text's vector depends on the text alone, never on its shard or batch.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterclip.embed.base import resolve_model, tokenizer_counter
from clusterclip.embed.onnx_runtime import (
    GRAPH_RUNTIMES,
    PROBE_COSINE,
    PROBES,
    choose_runtime,
    load_onnx_forward,
)
from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.threads import cpu_flags, native_bfloat16

if TYPE_CHECKING:
    from clusterclip.embed.encoders import EncoderSpec

__all__ = [
    "CPU_BATCH_TOKENS",
    "GPU_BATCH_TOKENS",
    "SentenceTransformerEncoder",
    "bucket_length",
    "cpu_supports_bfloat16",
    "micro_batch_rows",
    "plan_micro_batches",
    "resolve_compute",
    "resolve_runtime",
]

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


def resolve_compute(device: str, precision: str, runtime: str = "auto") -> tuple[str, str]:
    """What ``auto`` device and precision of the sentence-transformers encoder become here.

    Device ``auto``: ``cuda`` when torch sees a GPU, else ``cpu``. Precision
    ``auto``: float16 on CUDA, bfloat16 on CPUs with AVX512-BF16/AMX, else
    float32 (always float32 when ``runtime`` is ``onnxruntime`` or ``openvino``). Other values
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
        elif runtime in GRAPH_RUNTIMES:
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
    With ``runtime="onnxruntime"`` (or ``"openvino"``) the float32 forward
    pass runs in ONNX Runtime (:mod:`clusterclip.embed.onnx_runtime`) or
    OpenVINO (:mod:`clusterclip.embed.openvino_runtime`).
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
        self._count = tokenizer_counter(model.tokenizer.backend_tokenizer)
        # sentence-transformers >= 6 renamed `tokenize` to `preprocess`
        self._preprocess = getattr(model, "preprocess", None) or model.tokenize
        self._pad_id = int(getattr(model.tokenizer, "pad_token_id", None) or 0)
        self.runtime, self.runtime_reason = choose_runtime(
            spec.runtime, device=device, precision=precision
        )
        self._graph = None  # the exported graph's runner (ONNX Runtime or OpenVINO)
        if self.runtime in GRAPH_RUNTIMES:
            self._start_graph()

    def _start_graph(self) -> None:
        """Load (or export once) the exported graph in its runtime; torch where it fails
        or differs, saying why."""
        names = [
            key for key, value in self._preprocess(["probe"]).items()
            if getattr(value, "ndim", 0) == 2
        ]  # fmt: skip
        runtime = self.runtime
        try:
            if runtime == "openvino":
                from clusterclip.embed.openvino_runtime import load_openvino_forward

                load = load_openvino_forward
            else:
                load = load_onnx_forward
            self._graph = load(self.model, names, self._torch.get_num_threads())
            graph_rows = self.encode(list(PROBES))
            self._graph, graph = None, self._graph
            torch_rows = self.encode(list(PROBES))
            self._graph = graph
            cosine = float((graph_rows * torch_rows).sum(axis=1).min())
            if not cosine >= PROBE_COSINE:
                raise ClusterClipError(
                    f"its vectors differ from torch's (min cosine {cosine:.6f} on probe texts)"
                )
        except Exception as error:  # export, load or check failed: torch computes the same
            self._graph = None
            reason = f"{runtime} unusable for this model: {error}"
            if self.spec.runtime == runtime:
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
                if self._graph is not None:
                    pooled = torch.from_numpy(self._graph.run(batch))
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
            **({"onnx_model": str(self._graph.path)} if self._graph is not None else {}),
            "max_length": int(self.model.max_seq_length),
            "batch_size": self.batch_size,
            "batch_tokens": self.batch_tokens,
            "batching": "fixed shapes per document length (bucket_length, micro_batch_rows)",
            "pooling": "as configured by the model (mean for plain HF models)",
            "normalized": True,
            "tokenizer": self.spec.model_id(),
            "trust_remote_code": self.spec.trust_remote_code,
        }
