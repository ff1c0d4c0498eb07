"""Keyword counts and example texts from read tasks on the engine, merged on the driver.

:func:`clusterclip.describe.inspect_clusters` counts the words of every
cluster and keeps the texts of a few documents per cluster, in one pass over
the corpus. Here that pass is cut into read tasks exactly as the embed stage
cuts the corpus (:mod:`clusterclip.io.readplan`): each task
(:class:`KeywordWorker`) reads and judges its own documents, counts their words
into a partial :class:`~clusterclip.describe.keywords.KeywordCounter` and keeps
the texts of the examples that fall in its range. The driver sends the labels
of the task's documents and receives word counts (as
:class:`~clusterclip.describe.keywords.WordTables`, added by a
:class:`~clusterclip.describe.keywords.TableMerger` in numpy) and a few texts,
never the corpus; word counts are integers, so the merged counts, and the
keywords, are the same on every engine and for any cut into tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterclip.arrays import distinct
from clusterclip.describe.keywords import KeywordCounter, TableMerger, WordTables
from clusterclip.engines import RayOptions, map_shards
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.io.readplan import ShardTask, corpus_plan, shard_records

__all__ = [
    "KEYWORD_TASK_DOCUMENTS",
    "TEXT_TASK_DOCUMENTS",
    "KeywordTask",
    "KeywordWorker",
    "TextTask",
    "TextWorker",
    "read_clusters",
    "read_texts",
]

#: Documents one keyword task reads (a speed knob only: the counts do not depend on it).
KEYWORD_TASK_DOCUMENTS = 2**16
#: Documents one text task covers: only the tasks holding a wanted document run.
TEXT_TASK_DOCUMENTS = 2**12


@dataclass(frozen=True)
class KeywordTask:
    """One read task: its documents, their labels, which count and which are examples.

    ``labels[i]`` is document ``shard.first_index + i``'s cluster (-1: not
    counted); ``counted`` (bool, or None for every one) marks the documents
    whose words count; ``examples`` lists the global indices whose texts are
    wanted.
    """

    shard: ShardTask
    labels: np.ndarray
    counted: np.ndarray | None
    examples: tuple[int, ...]


class KeywordWorker:
    """Count the words and keep the example texts of a :class:`KeywordTask` (a task's worker).

    Pass ``functools.partial(KeywordWorker, read_options, kept, count)`` to
    :func:`clusterclip.engines.map_shards`: ``kept`` is the clusters whose own
    counts are kept (None: all), ``count`` whether words are counted at all.
    Returns ``(tables, examples)``: the word counts of the task's documents
    (:meth:`KeywordCounter.tables`) and ``{index: (id, text)}`` of its examples.
    """

    def __init__(
        self, read_options: Mapping[str, Any], kept: frozenset[int] | None, count: bool
    ) -> None:
        self.read_options = dict(read_options)
        self.kept = kept
        self.count = count

    def __call__(self, task: KeywordTask) -> tuple[WordTables, dict[int, tuple[Any, str]]]:
        counter = KeywordCounter(self.kept)
        examples: dict[int, tuple[Any, str]] = {}
        wanted = set(task.examples)
        first = task.shard.first_index
        read = 0
        for record in shard_records(task.shard, self.read_options):
            read += 1
            label = int(task.labels[record.index - first])
            if label < 0 or record.text is None:
                continue
            if self.count and (task.counted is None or task.counted[record.index - first]):
                counter.add(label, record.text)
            if record.index in wanted:
                examples[int(record.index)] = (record.id, record.text)
        _check_read("keyword", task.shard, read)
        return counter.tables(), examples


def _check_read(kind: str, shard: ShardTask, read: int) -> None:
    """Refuse a task that read another number of records than the plan counted."""
    if read != shard.rows:
        raise ClusterClipError(
            f"{kind} task at document {shard.first_index:,}: read {read:,} records where the "
            f"plan counted {shard.rows:,}; did a corpus file change during the run? Rerun the "
            "command."
        )


def read_clusters(
    work: WorkDir,
    labels: np.ndarray,
    *,
    kept: frozenset[int] | None,
    counted: np.ndarray | None,
    examples: set[int],
    count: bool,
    engine: str = "local",
    options: RayOptions | None = None,
) -> tuple[WordTables, dict[int, tuple[Any, str]]]:
    """Word counts of the checked corpus and the texts of ``examples``, from read tasks.

    Parameters
    ----------
    work : WorkDir
        Its corpus files are checked unchanged first; a corpus that now holds
        another number of records than were embedded is refused.
    labels : ndarray of int, shape (N,)
        Cluster of every document (-1: not counted).
    kept, counted, count
        See :class:`KeywordWorker` and :class:`KeywordTask`.
    examples : set of int
        Global indices whose ``(id, text)`` are returned.
    engine, options
        Where the tasks run (:func:`clusterclip.engines.map_shards`).

    Returns
    -------
    (WordTables, dict)
        The counts of every task merged, and ``{index: (id, text)}``.
    """
    plan, read_options = corpus_plan(work, engine=engine, options=options)
    if plan.n_records != len(labels):
        raise ClusterClipError(
            f"{work.path} has {len(labels):,} labels for {plan.n_records:,} documents; "
            "rerun the cluster stage."
        )
    ordered = np.array(sorted(examples), dtype=np.int64)

    def tasks() -> Any:
        for shard in plan.shards(KEYWORD_TASK_DOCUMENTS):
            low, high = shard.first_index, shard.first_index + shard.rows
            inside = ordered[np.searchsorted(ordered, low) : np.searchsorted(ordered, high)]
            part = None if counted is None else counted[low:high]
            task = KeywordTask(shard, labels[low:high], part, tuple(inside.tolist()))
            yield shard.first_index, task

    worker = functools.partial(KeywordWorker, read_options, kept, count)
    merger = TableMerger()
    texts: dict[int, tuple[Any, str]] = {}
    for _, (tables, found) in map_shards(tasks(), worker, engine=engine, options=options):
        merger.add(tables)
        texts.update(found)
    return merger.result(), texts


@dataclass(frozen=True)
class TextTask:
    """One read task of :func:`read_texts`: a shard and the global indices wanted in it."""

    shard: ShardTask
    wanted: tuple[int, ...]


class TextWorker:
    """Read a :class:`TextTask`'s shard and return ``{index: (id, text)}`` of its wanted documents.

    Pass ``functools.partial(TextWorker, read_options)`` to
    :func:`clusterclip.engines.map_shards`.
    """

    def __init__(self, read_options: Mapping[str, Any]) -> None:
        self.read_options = dict(read_options)

    def __call__(self, task: TextTask) -> dict[int, tuple[Any, str | None]]:
        wanted, found, read = set(task.wanted), {}, 0
        for record in shard_records(task.shard, self.read_options):
            read += 1
            if record.index in wanted:
                found[int(record.index)] = (record.id, record.text)
        _check_read("text", task.shard, read)
        return found


def read_texts(
    work: WorkDir, indices: Any, *, engine: str = "local", options: RayOptions | None = None
) -> dict[int, tuple[Any, str | None]]:
    """``{index: (id, text)}`` of the documents ``indices``, read by tasks on ``engine``.

    Only the shards of :data:`TEXT_TASK_DOCUMENTS` documents that hold a wanted
    index are read, each by its own task, so the driver reads no text and the
    cost does not grow with where in the corpus the documents are. Indices
    outside the corpus are left out. The corpus is checked unchanged first
    (:func:`~clusterclip.io.readplan.corpus_plan`).

    >>> read_texts(WorkDir("work"), [3, 12])[3]  # doctest: +SKIP
    (None, 'And God called the light Day, ...')
    """
    wanted = distinct(np.asarray(list(indices), dtype=np.int64))
    if not wanted.size:
        return {}
    plan, read_options = corpus_plan(work, engine=engine, options=options)

    def tasks() -> Any:
        for shard in plan.shards(TEXT_TASK_DOCUMENTS):
            low, high = shard.first_index, shard.first_index + shard.rows
            inside = wanted[np.searchsorted(wanted, low) : np.searchsorted(wanted, high)]
            if inside.size:
                yield shard.first_index, TextTask(shard, tuple(inside.tolist()))

    found: dict[int, tuple[Any, str | None]] = {}
    worker = functools.partial(TextWorker, read_options)
    for _, part in map_shards(tasks(), worker, engine=engine, options=options):
        found.update(part)
    return found
