"""Keyword counts and example texts from read tasks on the engine; nothing per document on the driver.

:func:`clusterclip.describe.inspect_clusters` counts the words of every
cluster and keeps the texts of a few documents per cluster, in one pass over
the corpus. Here that pass is cut into read tasks exactly as the embed stage
cuts the corpus (:mod:`clusterclip.io.readplan`): each task
(:class:`KeywordWorker`) reads and judges its own documents, takes their
clusters from the plan task's labels (memory-mapped from a
:class:`~clusterclip.io.artifacts.KeywordState`), counts their words into a
partial :class:`~clusterclip.describe.keywords.KeywordCounter`, writes the counts
as its part (:class:`~clusterclip.describe.keywords.WordTables` as arrays) and
sends back the texts of the examples in its range. One more task
(:class:`MergeWorker`) adds the parts in task order (a
:class:`~clusterclip.describe.keywords.TableMerger`) and scores the words. The
driver sends shard descriptions and receives a few texts and the keywords, never
the corpus, a label or a word count; word counts are integers, so the merged
counts, and the keywords, are the same on every engine and for any cut into tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterclip.arrays import distinct
from clusterclip.describe.keywords import KeywordCounter, TableMerger, WordTables
from clusterclip.engines import RayOptions, map_shards, run_task
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import KeywordState
from clusterclip.io.readplan import ShardTask, corpus_plan, shard_records

__all__ = [
    "KEYWORD_TASK_DOCUMENTS",
    "TEXT_TASK_DOCUMENTS",
    "KeywordTask",
    "KeywordWorker",
    "MergeWorker",
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
    """One read task: its documents, and the global indices whose texts are wanted."""

    shard: ShardTask
    examples: tuple[int, ...]


class KeywordWorker:
    """Count the words and keep the example texts of a :class:`KeywordTask` (a task's worker).

    Pass ``functools.partial(KeywordWorker, read_options, kept, count, state)`` to
    :func:`clusterclip.engines.map_shards`: ``kept`` is the clusters whose own
    counts are kept (None: all), ``count`` whether words are counted at all, and
    ``state`` the :class:`~clusterclip.io.artifacts.KeywordState` holding each
    document's cluster (-1: its words do not count). With ``count``, the
    task's word counts (:meth:`KeywordCounter.tables`) are written as its part.
    Returns ``{index: (id, text)}`` of its examples.
    """

    def __init__(
        self,
        read_options: Mapping[str, Any],
        kept: frozenset[int] | None,
        count: bool,
        state: KeywordState,
    ) -> None:
        self.read_options = dict(read_options)
        self.kept = kept
        self.count = count
        self.state = state

    def __call__(self, task: KeywordTask) -> dict[int, tuple[Any, str]]:
        counter = KeywordCounter(self.kept)
        examples: dict[int, tuple[Any, str]] = {}
        wanted = set(task.examples)
        first = task.shard.first_index
        labels = np.array(self.state.labels()[first : first + task.shard.rows])
        read = 0
        for record in shard_records(task.shard, self.read_options):
            read += 1
            if record.text is None:
                continue
            if record.index in wanted:
                examples[int(record.index)] = (record.id, record.text)
            label = int(labels[record.index - first])
            if self.count and label >= 0:
                counter.add(label, record.text)
        _check_read("keyword", task.shard, read)
        if self.count:
            self.state.write_part(first, counter.tables().arrays())
        return examples


class MergeWorker:
    """Add the keyword tasks' parts in task order and score the words (one task's worker).

    Pass ``functools.partial(MergeWorker, state)`` to
    :func:`clusterclip.engines.run_task` with the payload ``(firsts, n, clusters)``:
    the parts' first documents, in task order, and :meth:`WordTables.top_all`'s
    ``n`` and ``clusters``; returns what ``top_all`` returns.
    """

    def __init__(self, state: KeywordState) -> None:
        self.state = state

    def __call__(
        self, payload: tuple[Sequence[int], int, Sequence[int]]
    ) -> dict[int, list[tuple[str, float]]]:
        firsts, n, clusters = payload
        merger = TableMerger()
        for first in firsts:
            merger.add(WordTables.from_arrays(self.state.read_part(first)))
        return merger.result().top_all(n, clusters)


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
    state: KeywordState,
    *,
    n_documents: int,
    kept: frozenset[int] | None,
    examples: set[int],
    n_keywords: int,
    clusters: Sequence[int],
    engine: str = "local",
    options: RayOptions | None = None,
) -> tuple[dict[int, list[tuple[str, float]]], dict[int, tuple[Any, str]]]:
    """Keywords of ``clusters`` from the checked corpus, and the texts of ``examples``.

    Parameters
    ----------
    work : WorkDir
        Its corpus files are checked unchanged first; a corpus that now holds
        another number of records than ``n_documents`` is refused.
    state : KeywordState
        Holds each document's cluster for the word counts (written by the plan
        task); the read tasks write their counts there.
    kept : frozenset of int or None
        See :class:`KeywordWorker`.
    examples : set of int
        Global indices whose ``(id, text)`` are returned.
    n_keywords, clusters
        Words per cluster (0: none, and no word is counted) and the clusters scored.
    engine, options
        Where the tasks run (:func:`clusterclip.engines.map_shards`).

    Returns
    -------
    (dict, dict)
        ``{cluster: [(word, score), ...]}`` (:meth:`WordTables.top_all`) and
        ``{index: (id, text)}``.
    """
    plan, read_options = corpus_plan(work, engine=engine, options=options)
    if plan.n_records != n_documents:
        raise ClusterClipError(
            f"{work.path} has {n_documents:,} labels for {plan.n_records:,} documents; "
            "rerun the cluster stage."
        )
    ordered = np.array(sorted(examples), dtype=np.int64)

    def tasks() -> Any:
        for shard in plan.shards(KEYWORD_TASK_DOCUMENTS):
            low, high = shard.first_index, shard.first_index + shard.rows
            inside = ordered[np.searchsorted(ordered, low) : np.searchsorted(ordered, high)]
            yield shard.first_index, KeywordTask(shard, tuple(inside.tolist()))

    count = n_keywords > 0
    worker = functools.partial(KeywordWorker, read_options, kept, count, state)
    firsts: list[int] = []
    texts: dict[int, tuple[Any, str]] = {}
    for first, found in map_shards(tasks(), worker, engine=engine, options=options):
        firsts.append(first)
        texts.update(found)
    if not count:
        return {}, texts
    merge = functools.partial(MergeWorker, state)
    keywords = run_task(merge, (firsts, n_keywords, list(clusters)), engine=engine, options=options)
    return keywords, texts


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
