"""The embed stage's settings, declared once (flags, TOML keys and docs come from here)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterclip.errors import hint, invalid
from clusterclip.options import check_fields, option

__all__ = ["ENCODERS", "EmbedOptions"]

ENCODERS = ("sentence-transformers", "static", "tfidf")
#: Device names torch understands (checked before any stage runs, whatever the encoder).
_DEVICE = re.compile(r"auto|cpu|mps|(cuda|xpu|npu|hpu|mlu)(:[0-9]+)?")


@dataclass(frozen=True, kw_only=True)
class EmbedOptions:
    """Settings of the embed stage (:func:`clusterclip.embed`).

    Every field changes the embeddings or the document index, so a change makes
    the stage run again (``clusterclip run``) or refuse (``clusterclip embed``
    without ``--overwrite``). Where the work runs is not a setting of the stage
    (see :class:`clusterclip.engines.RayOptions`).

    >>> EmbedOptions(encoder="static").shard_size
    20000
    """

    encoder: str = option(
        "sentence-transformers",
        "Text encoder: sentence-transformers (best quality), static (model2vec distilled "
        "from the model: fast on CPU) or tfidf (no model).",
        choices=ENCODERS,
    )
    model: str | None = option(
        None, "Model name or path (default: all-MiniLM-L6-v2 for sentence-transformers)."
    )
    text_field: str | None = option(
        None, "Record field holding the text (default: `content`, else `text`)."
    )
    id_field: str | None = option(None, "Record field holding the id (default: `id` if present).")
    batch_size: int | None = option(
        None,
        "Texts per batch of the static encoder. The sentence-transformers encoder records it "
        "only: its passes have fixed shapes per text length, so no vector depends on its "
        "batch (docs/embed.md).",
        kind="int",
        minimum=1,
    )
    max_length: int | None = option(
        None, "Truncate texts to this many tokens (default: the encoder's).", kind="int", minimum=1
    )
    device: str = option("auto", "`auto` (CUDA when available), `cpu`, `cuda`, `cuda:1`, ...")
    precision: str = option(
        "auto",
        "Transformer compute precision (auto: float16 on GPU, bfloat16 on CPUs with "
        "AVX512-BF16/AMX, else float32).",
        choices=("auto", "float32", "bfloat16", "float16"),
    )
    runtime: str = option(
        "auto",
        "What runs the transformer's forward pass (auto: for float32 on a CPU without native "
        "bfloat16, OpenVINO where installed, else ONNX Runtime; torch elsewhere; onnxruntime, "
        "openvino: float32 on CPU in that runtime, exported once per model; docs/embed.md).",
        choices=("auto", "torch", "onnxruntime", "openvino"),
    )
    strict: bool = option(
        False,
        "Fail at the first bad record instead of listing it in rejects.jsonl.",
        kind="bool",
    )
    shard_size: int = option(
        20_000, "Documents per embeddings part file and unit of resume.", kind="int", minimum=1
    )
    trust_remote_code: bool = option(
        False,
        "Let the model run its own Python code (e.g. jina-embeddings-v2; only models you trust).",
        kind="bool",
    )
    seed: int = option(0, "Seed of the tfidf sample and SVD.", kind="seed")

    def __post_init__(self) -> None:
        check_fields(self)
        for name, default in (("text_field", "`content`, else `text`"), ("id_field", "`id`")):
            if getattr(self, name) == "":
                raise invalid(name, "a non-empty field name", "", f"Leave it out to use {default}.")
        if not _DEVICE.fullmatch(self.device):
            raise invalid(
                "device",
                "auto, cpu, mps, or an accelerator with an optional index (cuda, cuda:1, xpu:0)",
                self.device,
                f"Pass {hint('device', 'auto')} to use a GPU when there is one.",
            )
