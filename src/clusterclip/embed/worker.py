"""The embed stage's workers: what runs where the encoder runs, on any engine.

:class:`ShardWorker` is the factory the stage hands to
:func:`clusterclip.engines.map_shards`: picklable (an
:class:`~clusterclip.embed.EncoderSpec`, the work directory's path, the read
options), it builds the encoder once per process and then reads, embeds and
writes one shard per call. :class:`EmbedWorker` embeds texts it is given
(:func:`embed_shard`), for callers that hold the texts already.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterclip.embed.encoders import EncoderSpec
from clusterclip.embed.index import IndexRows
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import EMBEDDING_DTYPE, DocumentsArtifact, EmbeddingsArtifact
from clusterclip.io.readplan import ReadStats, ShardTask, shard_records

__all__ = ["EmbedWorker", "ShardWorker", "embed_shard"]


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


class ShardWorker:
    """Read, validate, tokenise, embed and write whole shards, wherever the engine runs it.

    The factory the embed stage hands to :func:`clusterclip.engines.map_shards`
    (``functools.partial(ShardWorker, spec, workdir, read_options)``): each
    process builds the encoder once; each call takes a
    :class:`~clusterclip.io.readplan.ShardTask` (file names and record
    ranges, no text), reads its records, embeds the ``ok`` ones, and writes
    the shard's index fragment, then its embedding part, atomically and named
    by the shard, through the artifact handles. A retried task overwrites
    its own files with the same bytes. It returns only the shard's
    :class:`~clusterclip.io.readplan.ReadStats` and its part's fingerprint: no
    text and no embedding row travels back to the driver.

    Parameters
    ----------
    spec : EncoderSpec
        Picklable description of the encoder.
    workdir : str
        Absolute path of the work directory (shared by every node).
    read_options : dict
        ``text_field``, ``id_field`` and ``strict`` of the reader.
    dataset : datasets.Dataset, optional
        The corpus when it is a Hugging Face dataset.
    """

    def __init__(
        self, spec: EncoderSpec, workdir: str, read_options: dict[str, Any], dataset: Any = None
    ) -> None:
        self.encoder = spec.build()
        work = WorkDir(workdir)
        self.documents, self.embeddings = DocumentsArtifact(work), EmbeddingsArtifact(work)
        self.read_options, self.dataset = dict(read_options), dataset

    def __call__(self, task: ShardTask) -> tuple[ReadStats, str]:
        """Embed and write shard ``task.shard``; return its :class:`ReadStats` and the
        fingerprint of its part (hashed here, so the driver reads no embedding)."""

        stream = shard_records(task, self.read_options, self.dataset)
        rows, texts, positions = IndexRows(), [], []
        for record in stream:
            if record.status == "ok":
                positions.append(len(rows))
                texts.append(record.text)
            rows.add(record)
        if len(rows) != task.rows:
            raise ClusterClipError(
                f"shard {task.shard}: read {len(rows)} records where the plan counted "
                f"{task.rows}; did a corpus file change during the run? Rerun the command."
            )
        found = ReadStats(
            counts=stream.counts, examples=stream.examples, text_fields=stream.text_fields,
            replaced_utf8_lines=stream.replaced_utf8_lines,
            first_replaced_utf8=stream.first_replaced_utf8,
        )  # fmt: skip
        if not task.write:  # finished before: read again for the statistics only
            return found, self.embeddings.part_fingerprint(task.shard)
        vectors, tokens = embed_shard(self.encoder, texts)
        rows.set_tokens(positions, tokens)
        # The fragment first, the part last: a shard is finished when both exist.
        self.documents.write_fragment(task.shard, rows.columns)
        part = np.zeros((len(rows), self.encoder.dim), dtype=EMBEDDING_DTYPE)
        part[np.asarray(positions, dtype=np.int64)] = vectors
        self.embeddings.write_part(task.shard, part)
        return found, self.embeddings.part_fingerprint(task.shard)
