"""Exact copies on the engine: each read task hashes its own documents' texts.

Step 1 of :mod:`clusterclip.dedup.detect` needs a hash of every usable text.
The corpus is cut into read tasks as the embed stage cuts it
(:mod:`clusterclip.io.readplan`): the driver plans them from file metadata and
the counts, and each task (:class:`HashWorker`) reads, judges and hashes its
documents where the engine runs it, returning 16 bytes per document and no
text. The hashes are those of :func:`~clusterclip.dedup.detect.hash_texts`
over the whole corpus, on every engine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from clusterclip.dedup.detect import hash_texts
from clusterclip.engines import RayOptions, map_shards
from clusterclip.errors import ClusterClipError
from clusterclip.io.readplan import ReadPlan, ShardTask, shard_records

__all__ = ["HASH_TASK_DOCUMENTS", "HashWorker", "hash_corpus"]

#: Documents one hash task reads (a speed knob only: the hashes do not depend on it).
HASH_TASK_DOCUMENTS = 2**16


class HashWorker:
    """Hash the usable texts of a :class:`~clusterclip.io.readplan.ShardTask` (a task's worker).

    Pass ``functools.partial(HashWorker, read_options)`` to
    :func:`clusterclip.engines.map_shards`.

    >>> worker = HashWorker({"text_field": None, "id_field": None, "strict": False})
    >>> worker(task).shape  # doctest: +SKIP
    (65536, 2)
    """

    def __init__(self, read_options: dict[str, Any]) -> None:
        self.read_options = dict(read_options)

    def __call__(self, task: ShardTask) -> np.ndarray:
        """``(task.rows, 2)`` uint64 hashes; zeros for a document without usable text."""
        stream = shard_records(task, self.read_options)
        texts = (record.text if record.status == "ok" else None for record in stream)
        hashes = hash_texts(texts, task.rows)
        if stream.counts.total() != task.rows:
            raise ClusterClipError(
                f"hash task at document {task.first_index:,}: read "
                f"{stream.counts.total():,} records where the plan counted {task.rows:,}; "
                "did a corpus file change during the run? Rerun the command."
            )
        return hashes


def hash_corpus(
    plan: ReadPlan,
    read_options: dict[str, Any],
    *,
    engine: str = "local",
    options: RayOptions | None = None,
    progress: Callable[[int], object] | None = None,
) -> np.ndarray:
    """:func:`~clusterclip.dedup.detect.hash_texts` of the embedded corpus, in read tasks.

    ``plan`` and ``read_options`` come from :func:`~clusterclip.io.readplan.corpus_plan`
    (which checks the corpus files first).

    Returns
    -------
    ndarray of uint64, shape (N, 2)
    """
    tasks = ((task.first_index, task) for task in plan.shards(HASH_TASK_DOCUMENTS))
    worker = functools.partial(HashWorker, read_options)
    hashes = np.zeros((plan.n_records, 2), dtype=np.uint64)
    for first, part in map_shards(tasks, worker, engine=engine, options=options):
        hashes[first : first + part.shape[0]] = part
        if progress is not None:
            progress(part.shape[0])
    return hashes
