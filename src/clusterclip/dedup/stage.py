"""The dedup stage: embeddings + clusters (+ corpus text) -> ``duplicates.parquet``.

Reads everything through :class:`clusterclip.io.WorkDir`: the cluster labels,
the embeddings (memory-mapped, gathered one cluster at a time) and, for exact
copies, the corpus text. The per-document work runs as tasks on the engine
(local or Ray): read tasks hash the texts (:mod:`clusterclip.dedup.hashes`),
row tasks find each document's second-nearest cluster, cluster tasks
compare each cluster's documents (:mod:`clusterclip.dedup.compare`), border
tasks merge groups across clusters (:mod:`clusterclip.dedup.borders`) and run
tasks compute each grouped document's similarity to its representative
(:mod:`clusterclip.dedup.similarity`); the driver sends document indices and
merges hashes, groups, border pairs and similarities. Writes ``duplicates.parquet``
atomically (``index``, ``representative``, ``similarity``, ``exact``,
``min_similarity``) and the ``dedup`` manifest entry; the runner
(:mod:`clusterclip.runner`) skips it when its options (the grouping method
among them) and its inputs are unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.dedup.borders import BorderBatch, BorderWorker, border_tasks
from clusterclip.dedup.compare import CompareWorker, NeighbourWorker, compare_tasks
from clusterclip.dedup.detect import (
    DuplicateGroups,
    find_groups,
    neighbour_step,
    shown_cosine,
)
from clusterclip.dedup.hashes import hash_corpus
from clusterclip.dedup.options import DedupOptions
from clusterclip.dedup.similarity import SimilarityWorker
from clusterclip.engines import map_shards, resolve_options
from clusterclip.io import WorkDir, versions
from clusterclip.io.artifacts import DuplicatesArtifact
from clusterclip.io.readplan import corpus_plan
from clusterclip.runner import StageOutput, run_stage
from clusterclip.threads import on_driver_threads

__all__ = ["DedupResult", "DedupStage", "dedup", "group_rows"]

#: Rows of one second-nearest task (about; whole scoring blocks): a speed knob only.
NEIGHBOUR_TASK_ROWS = 2**20


class DedupResult:
    """What :func:`dedup` produced (or found already done).

    Attributes
    ----------
    workdir : Path
    duplicate_of : ndarray of int64, shape (N,)
        Representative (lowest index) of every document's group; its own index
        when it has no copy. A result found already done reads it from
        ``duplicates.parquet`` when first asked (a stage that reads the groups
        itself, such as the schedule on a Ray worker, never needs it here).
    summary : dict
        Groups, documents in groups, exact / near groups, largest groups, timings.
    skipped : bool
        True when the work directory already held this result.

    Examples
    --------
    >>> result = DedupResult(Path("work"), np.array([0, 0, 2]), {"groups": 1})
    >>> result.duplicate_of.tolist(), result.skipped
    ([0, 0, 2], False)
    """

    def __init__(
        self,
        workdir: Path,
        duplicate_of: np.ndarray | Callable[[], np.ndarray],
        summary: dict[str, Any] | None = None,
        skipped: bool = False,
    ) -> None:
        self.workdir, self.skipped = workdir, skipped
        self.summary = {} if summary is None else summary
        self._duplicate_of = duplicate_of

    @property
    def duplicate_of(self) -> np.ndarray:
        if callable(self._duplicate_of):
            self._duplicate_of = self._duplicate_of()
        return self._duplicate_of

    def __repr__(self) -> str:
        return f"DedupResult(workdir={self.workdir!r}, summary={self.summary!r}, skipped={self.skipped})"


def dedup(
    workdir: str | Path,
    *,
    threshold: float = DedupOptions.threshold,
    exact: bool = DedupOptions.exact,
    block_size: int = DedupOptions.block_size,
    overwrite: bool = False,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> DedupResult:
    """Find the near-duplicate groups of a clustered work directory.

    Parameters
    ----------
    workdir : path
        Work directory with a completed ``cluster`` stage.
    threshold : float
        Cosine in (0, 1] at or above which two documents of one cluster are
        near-duplicates (default chosen by measurement, docs/clustering.md).
    exact : bool
        Also group exact copies (same normalised text) across clusters; needs
        one pass over the corpus files (skipped, and said so, for a corpus
        embedded from an in-memory dataset).
    block_size : int
        Rows of a cluster compared at once: ``block_size x cluster size``
        float32 scores in memory.
    overwrite : bool
        Replace groups made with other settings (otherwise refuse).
    engine : {"local", "ray"}
        Where the comparisons run (:data:`clusterclip.engines.ENGINES`): tasks of
        whole clusters and of rows for the second-nearest clusters; the groups
        are the same on every engine.
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    DedupResult

    Examples
    --------
    >>> result = dedup("work", threshold=0.9)  # doctest: +SKIP
    >>> result.summary["groups"], result.summary["documents_in_groups"]  # doctest: +SKIP
    (41, 97)
    """
    options = DedupOptions(threshold=threshold, exact=exact, block_size=block_size)
    stage = DedupStage(engine=engine, engine_options=engine_options)
    outcome = run_stage(stage, WorkDir(workdir), options, on_change="refuse", force=overwrite)
    return outcome.result


class DedupStage:
    """The dedup stage in the runner's contract (progress bars follow ``CLUSTERCLIP_PROGRESS``).

    >>> DedupStage().name, DedupStage().artifacts
    ('dedup', ('duplicates',))
    """

    name = "dedup"
    artifacts = ("duplicates",)

    def __init__(
        self, *, engine: str = "local", engine_options: Mapping[str, Any] | None = None
    ) -> None:
        self.engine = engine
        self.ray_options = resolve_options(engine, engine_options)  # checked before any work

    def inputs(self, work: WorkDir, options: DedupOptions) -> dict[str, Any]:
        """The clusters, the embeddings and the document index (the corpus is checked on read)."""
        work.require("cluster")
        return {
            "embed.documents": work.output("embed.documents"),
            "embed.embeddings": work.output("embed.embeddings"),
            "cluster.clusters": work.output("cluster.clusters"),
        }

    def load(self, work: WorkDir, entry: Mapping[str, Any]) -> DedupResult:
        """The stored result."""
        return DedupResult(
            work.path, work.duplicate_of, dict(entry.get("summary", {})), skipped=True
        )

    def run(self, work: WorkDir, options: DedupOptions, *, resume: bool) -> StageOutput:
        """Hash the texts (``exact``), link near copies cluster by cluster, write the table."""
        from clusterclip.progress import progress_bar

        started = time.perf_counter()
        labels = work.labels()
        embeddings = work.embeddings()
        hashes, exact_note = None, "off"
        if options.exact and work.corpus_rereadable():
            # the files are checked first: a changed one is refused before any work
            plan, read_options = corpus_plan(work, engine=self.engine, options=self.ray_options)
            with progress_bar(total=len(labels), desc="dedup: hash texts", unit="doc") as bar:
                hashes = hash_corpus(
                    plan, read_options, engine=self.engine, options=self.ray_options,
                    progress=bar.update,
                )  # fmt: skip
            exact_note = "on"
        elif options.exact:
            exact_note = "skipped: the corpus was an in-memory dataset, its texts cannot be re-read"
        hashed = time.perf_counter()
        usable = int((labels >= 0).sum())
        n_centroids = work.n_clusters()
        neighbours, neighbour_note = None, "off: the centroids do not match the labels"
        if n_centroids > int(labels.max(initial=-1)):  # centroids match the labels
            tree = work.cluster_tree()
            with progress_bar(total=len(labels), desc="dedup: neighbours", unit="doc") as bar:
                neighbours = self._neighbours(
                    work, labels, n_centroids, tree is not None, bar.update
                )
            neighbour_note = "exact" if tree is None else "coarse to fine (beam 2)"
        compare = partial(
            self._compare, partial(CompareWorker, str(work.path.resolve()), options.threshold,
                                   options.block_size),
        )  # fmt: skip
        merge = partial(self._merge, partial(BorderWorker, str(work.path.resolve()),
                                             options.threshold))  # fmt: skip
        describe = partial(self._describe, partial(SimilarityWorker, str(work.path.resolve())))
        with progress_bar(total=usable, desc="dedup: compare", unit="doc") as bar:
            groups = find_groups(
                embeddings.__getitem__, labels, threshold=options.threshold,
                block_size=options.block_size, hashes=hashes, neighbours=neighbours,
                progress=bar.update, compare=compare, merge=merge, describe=describe,
            )  # fmt: skip
        compared = time.perf_counter()
        outputs = _write(work, groups)
        sizes = np.bincount(labels[labels >= 0]) if usable else np.zeros(0, np.int64)
        summary = {
            **groups.summary(),
            "documents": int(len(labels)),
            "usable_documents": usable,
            "threshold": options.threshold,
            "exact": exact_note,
            "second_nearest": neighbour_note,
            "largest_cluster": int(sizes.max()) if sizes.size else 0,
            "peak_scores_bytes": int(min(options.block_size, sizes.max(initial=0)))
            * int(sizes.max(initial=0))
            * 4,
            "seconds": {
                "hash": round(hashed - started, 3),
                "compare": round(compared - hashed, 3),
                "total": round(time.perf_counter() - started, 3),
            },
        }
        result = DedupResult(work.path, groups.representative, summary)
        return StageOutput(outputs, summary, {"versions": versions("pyarrow")}, result)

    def _neighbours(
        self, work: WorkDir, labels: np.ndarray, n_centroids: int, hierarchical: bool,
        progress: Any,
    ) -> np.ndarray:  # fmt: skip
        """Every document's second-nearest cluster, in tasks of whole scoring blocks."""
        n = labels.shape[0]
        step = neighbour_step(n_centroids, hierarchical=hierarchical)
        rows = step * max(1, NEIGHBOUR_TASK_ROWS // step)
        tasks = ((start, (start, labels[start : start + rows])) for start in range(0, n, rows))
        out = np.empty(n, dtype=np.int64)
        found = self._map(tasks, partial(NeighbourWorker, str(work.path.resolve())))
        for start, part in found:
            out[start : start + part.size] = part
            progress(int(part.size))
        return out

    def _map(self, tasks: Any, worker: Any) -> Any:
        """:func:`~clusterclip.engines.map_shards` on the stage's engine, each worker on the
        driver's thread counts (:func:`~clusterclip.threads.on_driver_threads`): the
        scores' bits, so the groups, are the local engine's on any engine."""
        worker = on_driver_threads(worker, self.engine)
        return map_shards(tasks, worker, engine=self.engine, options=self.ray_options)

    def _merge(self, worker: Any, works: Any) -> Any:
        """The border sets' merges from :class:`BorderWorker` tasks on the engine, one
        :class:`~clusterclip.dedup.borders.BorderMerged` per task (its sets' joined)."""
        tasks = ((task, BorderBatch.pack(batch)) for task, batch in border_tasks(works))
        for _, answer in self._map(tasks, worker):
            yield answer

    def _describe(self, worker: Any, works: Any) -> Any:
        """Each run's similarities from :class:`SimilarityWorker` tasks on the engine, in order."""
        for _, values in self._map(enumerate(works), worker):
            yield values

    def _compare(self, worker: Any, works: Any) -> Any:
        """The clusters' answers from :class:`CompareWorker` tasks on the engine, in order."""
        for _, answers in self._map(compare_tasks(works), worker):
            yield from answers


def _write(work: WorkDir, groups: DuplicateGroups) -> dict[str, str]:
    fingerprint = DuplicatesArtifact(work).write(
        groups.representative, similarity=groups.similarity, exact=groups.exact,
        min_similarity=groups.min_similarity,
    )  # fmt: skip
    return {"duplicates": fingerprint}


def group_rows(work: WorkDir, *, top: int | None = None) -> list[dict[str, Any]]:
    """The groups of two or more documents, largest first (ties: lowest representative).

    Each is ``{"representative": {"index", "id"}, "cluster", "size", "kind",
    "min_similarity", "duplicates": [{"index", "id", "similarity", "exact"}, ...]}``
    with ``kind`` ``exact`` (every member an exact copy) or ``near``,
    ``min_similarity`` the lowest cosine between two distinct texts of the
    group (at least the threshold; 1 for an exact group); ids are the corpus
    ids (``None`` when the corpus has none).

    Parameters
    ----------
    top : int, optional
        Only the ``top`` largest groups.
    """
    table = work.duplicates()
    rep = table.column("representative").to_numpy()
    similarity = table.column("similarity").to_numpy()
    exact = table.column("exact").to_numpy(zero_copy_only=False)
    lowest = table.column("min_similarity").to_numpy()
    ids = work.documents(["id"]).column("id").to_pylist()
    labels = work.labels()
    grouped = np.flatnonzero(rep != np.arange(rep.size))
    order = np.lexsort((grouped, rep[grouped]))
    members = grouped[order]
    heads, starts, counts = np.unique(rep[members], return_index=True, return_counts=True)
    ranking = np.lexsort((heads, -counts))
    if top is not None:
        ranking = ranking[:top]
    rows = []
    for g in ranking.tolist():
        head = int(heads[g])
        these = members[starts[g] : starts[g] + counts[g]]
        rows.append(
            {
                "representative": {"index": head, "id": ids[head]},
                "cluster": int(labels[head]),
                "size": int(counts[g]) + 1,
                "kind": "exact" if bool(exact[these].all()) else "near",
                "min_similarity": shown_cosine(lowest[head]),
                "duplicates": [
                    {
                        "index": int(d),
                        "id": ids[d],
                        "similarity": shown_cosine(similarity[d]),
                        "exact": bool(exact[d]),
                    }
                    for d in these.tolist()
                ],  # fmt: skip
            }
        )
    return rows
