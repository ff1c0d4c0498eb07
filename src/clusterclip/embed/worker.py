"""The embed stage's workers: what runs where the encoder runs, on any engine.

:class:`ShardWorker` is the factory the stage hands to
:func:`clusterclip.engines.map_shards`: picklable (an
:class:`~clusterclip.embed.EncoderSpec`, the work directory's path, the read
options), it builds the encoder once per process and then reads, embeds and
writes one shard per call. :class:`EmbedWorker` embeds texts it is given
(:func:`embed_shard`), for callers that hold the texts already.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clusterclip.embed.base import zero_norm_rows
from clusterclip.embed.encoders import EncoderSpec
from clusterclip.embed.index import IndexRows
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import EMBEDDING_DTYPE, DocumentsArtifact, EmbeddingsArtifact
from clusterclip.io.readplan import ReadStats, ShardTask, shard_records

__all__ = ["ZERO_VECTOR", "EmbedWorker", "ShardWorker", "embed_shard"]

#: Status of a document with text whose embedding has no direction (a zero norm).
ZERO_VECTOR = "zero_vector"


def embed_shard(encoder: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Embed one shard's texts and count their tokens, where the encoder runs.

    Returns float16 ``(len(texts), dim)`` unit rows and int64 ``(len(texts),)``
    token counts (``n_tokens`` of ``documents.parquet``). Counting here rather
    than on the driver keeps the driver from tokenising the whole corpus alone
    while Ray workers wait.

    A text whose vector has no direction (:func:`~clusterclip.embed.base.zero_norm_rows`
    in float32 as the encoder gave it, or after the cast to float16, whose
    smallest value is 6e-8) gets an exactly all-zero row: for example a text
    none of whose tokens the encoder knows. :class:`ShardWorker` records such a
    document as ``zero_vector`` rather than ``ok``.

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
    vectors = np.asarray(vectors, dtype=np.float32)
    rows = vectors.astype(np.float16)
    rows[zero_norm_rows(vectors) | zero_norm_rows(rows)] = 0
    return rows, np.asarray(tokens, dtype=np.int64)


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
    by the shard, through the artifact handles. A document whose embedding
    has a zero norm (:func:`embed_shard`) becomes :data:`ZERO_VECTOR`, with a
    reason, like a record the reader rejected: the cluster stage leaves it out
    instead of refusing the whole run. A retried task overwrites
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
        self.encoder, self.encoder_name = spec.build(), spec.encoder
        work = WorkDir(workdir)
        self.documents, self.embeddings = DocumentsArtifact(work), EmbeddingsArtifact(work)
        self.read_options, self.dataset = dict(read_options), dataset

    def __call__(self, task: ShardTask) -> tuple[ReadStats, str]:
        """Embed and write shard ``task.shard``; return its :class:`ReadStats` and the
        fingerprint of its part (hashed here, so the driver reads no embedding)."""

        if not task.write:  # finished before: its statistics are in its fragment
            notes = self.documents.fragment_notes(task.shard)
            if notes is not None and "read_stats" in notes:
                found = ReadStats.from_dict(notes["read_stats"])
                return found, self.embeddings.part_fingerprint(task.shard)
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
        if not task.write:  # finished by an earlier version: read again for the statistics
            fragment = self.documents.read_fragment(self.documents.fragment_path(task.shard))
            _count_zero_vectors(found, fragment.to_pydict())
            return found, self.embeddings.part_fingerprint(task.shard)
        vectors, tokens = embed_shard(self.encoder, texts)
        rows.set_tokens(positions, tokens)
        self._reject_zero_vectors(
            rows, [positions[i] for i in np.flatnonzero(zero_norm_rows(vectors))]
        )
        _count_zero_vectors(found, rows.columns)
        # The fragment first, the part last: a shard is finished when both exist.
        self.documents.write_fragment(
            task.shard, rows.columns, notes={"read_stats": found.to_dict()}
        )
        part = np.zeros((len(rows), self.encoder.dim), dtype=EMBEDDING_DTYPE)
        part[np.asarray(positions, dtype=np.int64)] = vectors
        self.embeddings.write_part(task.shard, part)
        return found, self.embeddings.part_fingerprint(task.shard)

    def _reject_zero_vectors(self, rows: IndexRows, zero: list[int]) -> None:
        """Record the rows at positions ``zero`` as :data:`ZERO_VECTOR` (``--strict``: refuse)."""
        for position in zero:
            reason = (
                f"the {self.encoder_name} encoder gave its text "
                f"({rows.columns['n_tokens'][position]:,} tokens) an embedding with a zero norm "
                "(no token it knows, or words outside what it was fitted on): no direction to "
                "cluster by"
            )
            rows.reject(position, ZERO_VECTOR, reason)
        if zero and self.read_options.get("strict"):
            source, line, reason = (
                rows.columns[name][zero[0]] for name in ("source", "line", "reason")
            )
            raise ClusterClipError(
                f"{source}:{line}: {ZERO_VECTOR}: {reason}. Remove the record or use another "
                "encoder, or run without --strict to record it in rejects.jsonl."
            )


def _count_zero_vectors(found: ReadStats, columns: Mapping[str, Sequence[Any]]) -> None:
    """Move the shard's :data:`ZERO_VECTOR` documents from ``ok`` to their own count.

    The reader counted them ``ok`` (their text is fine); ``columns`` are the
    shard's index rows as written (``source``, ``line``, ``status``, ``reason``).
    The first one becomes the status's example, as the reader quotes its rejects.
    """
    statuses = columns["status"]
    for row in (row for row, status in enumerate(statuses) if status == ZERO_VECTOR):
        found.counts["ok"] -= 1
        found.counts[ZERO_VECTOR] += 1
        where = f"{columns['source'][row]}:{columns['line'][row]}"
        found.examples.setdefault(ZERO_VECTOR, f"{where}: {columns['reason'][row]}")
