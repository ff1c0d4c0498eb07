"""The embed stage: corpus -> document index + float16 embedding shards.

>>> import clusterclip
>>> result = clusterclip.embed("corpus.jsonl.gz", workdir="w", encoder="static")  # doctest: +SKIP
>>> result.summary["counts"]["ok"], result.embeddings.shape  # doctest: +SKIP
(31102, (31102, 256))

See docs/embed.md for the encoders, the file formats and resume semantics.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from clusterclip.embed.encoders import Encoder, EncoderSpec, get_encoder
from clusterclip.embed.job import (
    DEFAULT_SHARD_SIZE,
    ENGINES,
    EmbedResult,
    embed,
    embed_shard,
    open_embeddings,
    run_shards_local,
)

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "ENGINES",
    "EmbedResult",
    "Encoder",
    "EncoderSpec",
    "embed",
    "embed_shard",
    "get_encoder",
    "open_embeddings",
    "run_shards_local",
]


class _CallableModule(types.ModuleType):
    """Lets ``clusterclip.embed(...)`` work even after ``import clusterclip.embed``.

    Importing the sub-package sets the attribute ``clusterclip.embed`` to this
    module (Python always binds a sub-module on its parent), which would hide
    the :func:`embed` function that ``clusterclip.__init__`` exposes lazily.
    Making the module callable keeps both spellings working.
    """

    def __call__(self, inputs: Any, **options: Any) -> EmbedResult:
        return embed(inputs, **options)


sys.modules[__name__].__class__ = _CallableModule
