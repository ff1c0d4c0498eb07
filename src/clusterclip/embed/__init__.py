"""The embed stage: corpus -> document index + float16 embedding shards.

>>> import clusterclip
>>> result = clusterclip.embed("corpus.jsonl.gz", workdir="w", encoder="static")  # doctest: +SKIP
>>> result.summary["counts"]["ok"], result.embeddings.shape  # doctest: +SKIP
(31102, (31102, 256))

See docs/embed.md for the encoders, the file formats and resume semantics.
"""

from __future__ import annotations

from clusterclip._callable import make_module_callable
from clusterclip.embed.encoders import Encoder, EncoderSpec, get_encoder
from clusterclip.embed.job import (
    DEFAULT_SHARD_SIZE,
    EmbedResult,
    EmbedStage,
    embed,
    open_embeddings,
)
from clusterclip.embed.options import EmbedOptions
from clusterclip.embed.worker import EmbedWorker, embed_shard

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "EmbedOptions",
    "EmbedResult",
    "EmbedStage",
    "EmbedWorker",
    "Encoder",
    "EncoderSpec",
    "embed",
    "embed_shard",
    "get_encoder",
    "open_embeddings",
]


make_module_callable(__name__, "clusterclip.embed.job:embed")
