"""The embed stage: corpus -> document index + float16 embedding shards.

>>> import clusterclip
>>> result = clusterclip.embed("corpus.jsonl.gz", workdir="w", encoder="static")  # doctest: +SKIP
>>> result.summary["counts"]["ok"], result.embeddings.shape  # doctest: +SKIP
(31102, (31102, 256))

See docs/embed.md for the encoders, the file formats and resume semantics.
"""

from __future__ import annotations

import importlib
from typing import Any

from clusterclip._callable import make_module_callable

#: Public name -> module defining it, imported on first use: reading the stage's
#: options (clusterclip.embed.options, for the CLI) must not load the encoders.
_LAZY = {
    "DEFAULT_SHARD_SIZE": "clusterclip.embed.job",
    "EmbedResult": "clusterclip.embed.job",
    "EmbedStage": "clusterclip.embed.job",
    "embed": "clusterclip.embed.job",
    "open_embeddings": "clusterclip.embed.job",
    "EmbedOptions": "clusterclip.embed.options",
    "EmbedWorker": "clusterclip.embed.worker",
    "embed_shard": "clusterclip.embed.worker",
    "Encoder": "clusterclip.embed.encoders",
    "EncoderSpec": "clusterclip.embed.encoders",
    "get_encoder": "clusterclip.embed.encoders",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'clusterclip.embed' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


make_module_callable(__name__, "clusterclip.embed.job:embed")
