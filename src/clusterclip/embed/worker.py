"""The embed stage's worker: what runs where the encoder runs, on any engine.

:class:`EmbedWorker` is the factory the stage hands to
:func:`clusterclip.engines.map_shards`: picklable (it holds only an
:class:`~clusterclip.embed.EncoderSpec`), it builds the encoder once per process
and then embeds one shard's texts per call with :func:`embed_shard`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterclip.embed.encoders import EncoderSpec

__all__ = ["EmbedWorker", "embed_shard"]


def embed_shard(encoder: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Embed one shard's texts and count their tokens, where the encoder runs.

    Returns float16 ``(len(texts), dim)`` unit rows and int64 ``(len(texts),)``
    token counts (``n_tokens`` of ``documents.parquet``). Counting here rather
    than on the driver keeps the driver from tokenising the whole corpus alone
    while Ray workers wait.

    >>> from clusterclip.embed.encoders import EncoderSpec
    >>> vectors, tokens = embed_shard(EncoderSpec(encoder="static").build(), ["a verse"])  # doctest: +SKIP
    >>> vectors.dtype, tokens.tolist()  # doctest: +SKIP
    (dtype('float16'), [2])
    """
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float16), np.zeros(0, dtype=np.int64)
    both = getattr(encoder, "encode_with_counts", None)  # one tokenisation for both
    if both is not None:
        vectors, tokens = both(texts)
    else:
        vectors, tokens = encoder.encode(texts), encoder.count_tokens(texts)
    vectors = np.asarray(vectors, dtype=np.float32).astype(np.float16)
    return vectors, np.asarray(tokens, dtype=np.int64)


class EmbedWorker:
    """Embed shards with one encoder, built once per process.

    Pass ``functools.partial(EmbedWorker, spec)`` as the ``worker`` of
    :func:`clusterclip.engines.map_shards`: each process (the driver for the
    local engine, every actor for Ray) constructs one ``EmbedWorker``, which
    builds the encoder (``spec.build()``, cached per process), and calls it
    with each shard's texts.

    Parameters
    ----------
    spec : EncoderSpec
        Picklable description of the encoder.

    Examples
    --------
    >>> worker = EmbedWorker(EncoderSpec(encoder="static", device="cpu"))  # doctest: +SKIP
    >>> vectors, tokens = worker(["In the beginning"])  # doctest: +SKIP
    >>> vectors.shape, vectors.dtype, tokens.tolist()  # doctest: +SKIP
    ((1, 256), dtype('float16'), [3])
    """

    def __init__(self, spec: EncoderSpec) -> None:
        self.encoder = spec.build()

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """float16 ``(len(texts), dim)`` unit rows and int64 token counts of ``texts``."""
        return embed_shard(self.encoder, texts)
