"""Embed files added to a finished embed stage: only them, after the documents already there.

The added files become new shards (:class:`~clusterclip.io.readplan.ShardTask`) whose
numbers continue the stage's parts and whose global document indices continue its
index, embedded on the engine by the same :class:`~clusterclip.embed.worker.ShardWorker`
and encoder (the manifest's settings; a TF-IDF fit is reused, not redone). The
existing parts are not touched; ``documents.parquet`` and ``rejects.jsonl`` are
extended (:meth:`~clusterclip.io.artifacts.DocumentsArtifact.extend`).

A document's row and index entry are what a from-scratch embed of the union would
write for it (each document is embedded alone); only the cut into parts differs:
the added shards start a new part after the stage's last one, which may be short.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

from clusterclip.embed.encoders import get_encoder
from clusterclip.embed.job import (
    EmbedStage,
    TaskFiles,
    embed_shards,
    encoder_spec,
    listed_counts,
    located_paths,
)
from clusterclip.embed.options import EmbedOptions
from clusterclip.embed.static import ensure_static_model
from clusterclip.engines import map_shards
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir, corpus_key
from clusterclip.io.artifacts import EmbeddingsArtifact
from clusterclip.io.files import remove_own
from clusterclip.io.readplan import plan_reads

__all__ = ["PartFingerprintWorker", "embed_added", "recorded_options"]


def recorded_options(entry: dict[str, Any]) -> EmbedOptions:
    """The options a finished embed stage ran with (its manifest ``config``), as recorded.

    >>> recorded_options({"config": {"encoder": "static"}}).encoder
    'static'
    """
    names = {field.name for field in dataclasses.fields(EmbedOptions)}
    config = entry.get("config", {})
    return EmbedOptions(**{name: value for name, value in config.items() if name in names})


def embed_added(
    work: WorkDir, entry: dict[str, Any], stage: EmbedStage
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Embed ``stage``'s files after the documents of the finished embed ``entry``.

    The caller holds the work directory's lock, has checked the files are new, and
    records the returned entry.

    Parameters
    ----------
    work : WorkDir
    entry : dict
        The embed stage's complete manifest entry.
    stage : EmbedStage
        The added files (``stage.paths``, named ``stage.sources``) and the engine.

    Returns
    -------
    (dict, dict)
        The embed entry over the union (sources, inputs, located, counts, outputs,
        summary) and what was added (``documents``, ``first_index``, ``shards``,
        ``embedded_docs``, ``counts``).

    Examples
    --------
    >>> entry, added = embed_added(work, work.require("embed"), EmbedStage(["new.jsonl"]))  # doctest: +SKIP
    >>> added["first_index"], added["documents"]  # doctest: +SKIP
    (31102, 1200)
    """
    started = time.perf_counter()
    options = recorded_options(entry)
    config = stage.resolved(entry.get("config", {}), entry)
    for name in ("device", "precision", "runtime"):  # as the stage resolved them
        if name in config:
            options = dataclasses.replace(options, **{name: config[name]})
    plan = TaskFiles(work, options.shard_size)
    old_shards = int(entry.get("summary", {}).get("shards", len(plan.embeddings.part_paths())))
    old_documents = work.n_documents()
    _remove_after(plan, old_shards)  # left by an add that stopped before its record
    reads = plan_reads(stage.paths, engine=stage.engine, options=stage.ray_options)
    if reads.n_records == 0:
        raise ClusterClipError(
            f"{', '.join(stage.sources)} hold no record. Name files with records to add."
        )
    spec = encoder_spec(work, options)
    if options.encoder == "static":
        ensure_static_model(spec)
    if options.encoder == "tfidf" and not work.exists("tfidf"):
        raise ClusterClipError(
            f"the TF-IDF fit of {work.path} is missing, so new files cannot be embedded like "
            "the others. Re-embed every file: `clusterclip run INPUT... --workdir W`."
        )
    dim = get_encoder(spec).dim
    if entry.get("dim") is not None and dim != int(entry["dim"]):
        raise ClusterClipError(
            f"the recorded encoder now gives {dim}-dimensional embeddings where {work.path} "
            f"holds {entry['dim']}-dimensional ones (was its model replaced?). Re-embed every "
            "file: `clusterclip run INPUT... --workdir W`."
        )
    stats, stream, parts = embed_shards(
        plan, reads, spec, stage, options, after=(old_shards, old_documents)
    )
    n_shards = old_shards + stats["shards"]
    parts.update(_old_part_fingerprints(work, stage, old_shards))
    counts = plan.documents.extend(old_shards, stats["shards"])
    remove_own(plan.state, "index-*.parquet")
    total = listed_counts(_sum_counts(entry.get("counts", {}), counts))
    added = {
        "documents": reads.n_records,
        "first_index": old_documents,
        "shards": stats["shards"],
        "embedded_docs": stats["embedded_docs"],
        "counts": listed_counts(counts),
        "dim": dim,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return _union_entry(work, entry, stage, total, n_shards, parts, stream), added


class PartFingerprintWorker:
    """Hashes embedding parts where the engine runs it, so the driver reads no part.

    Pass ``functools.partial(PartFingerprintWorker, workdir)`` to
    :func:`clusterclip.engines.map_shards`; each call takes a part number and returns
    :meth:`~clusterclip.io.artifacts.EmbeddingsArtifact.part_fingerprint` of it.

    >>> PartFingerprintWorker("/shared/w")(0)  # doctest: +SKIP
    '5d41402abc4b2a76b9719d911017c592'
    """

    def __init__(self, workdir: str) -> None:
        self.embeddings = EmbeddingsArtifact(WorkDir(workdir))

    def __call__(self, part: int) -> str:
        return self.embeddings.part_fingerprint(part)


def _old_part_fingerprints(work: WorkDir, stage: EmbedStage, n_parts: int) -> dict[int, str]:
    """``{part: fingerprint}`` of the stage's parts before the added ones, one task per part."""
    worker = functools.partial(PartFingerprintWorker, str(work.path.resolve()))
    tasks = ((part, part) for part in range(n_parts))
    return dict(map_shards(tasks, worker, engine=stage.engine, options=stage.ray_options))


def _remove_after(plan: TaskFiles, first: int) -> None:
    """Delete parts and fragments of shards ``first`` and later (the stage ends before them)."""
    for path in plan.embeddings.part_paths():
        if int(path.stem.removeprefix("part-")) >= first:
            path.unlink()
    for path in plan.documents.fragment_paths():
        path.unlink()


def _sum_counts(old: dict[str, int], new: Any) -> Any:
    from collections import Counter

    total: Counter[str] = Counter({status: int(n) for status, n in old.items()})
    total.update(new)
    return total


def _union_entry(
    work: WorkDir,
    entry: dict[str, Any],
    stage: EmbedStage,
    counts: dict[str, int],
    n_shards: int,
    parts: dict[int, str],
    stream: Any,
) -> dict[str, Any]:
    """The embed entry of the union: the old one with the added files, counts and outputs."""
    old_sources = list(entry.get("sources", []))
    inputs = dict(entry.get("inputs", {}))
    added_inputs = stage.inputs(work, recorded_options(entry))  # cached: hashed by the checks
    for position in range(len(stage.sources)):
        inputs[corpus_key(len(old_sources) + position)] = added_inputs[corpus_key(position)]
    old_located = list(entry.get("located") or [])
    old_located += [{}] * (len(old_sources) - len(old_located))  # an entry of an older version
    plan = TaskFiles(work, 1)
    summary = dict(entry.get("summary", {}))
    summary.update(
        documents=sum(counts.values()),
        counts=counts,
        shards=n_shards,
        blank_lines=int(summary.get("blank_lines", 0)) + stream.blank_lines,
        replaced_utf8_lines=int(summary.get("replaced_utf8_lines", 0) or 0)
        + stream.replaced_utf8_lines,
        bytes={
            "embeddings": sum(plan.embeddings.part_path(s).stat().st_size for s in range(n_shards)),
            "documents": plan.documents.path.stat().st_size,
            "rejects": plan.documents.rejects_path.stat().st_size,
        },
    )
    outputs = {
        **entry.get("outputs", {}),
        "documents": plan.documents.fingerprint(),
        "embeddings": plan.embeddings.fingerprint(n_shards, known=parts),
    }
    return {
        **entry,
        "sources": [*old_sources, *stage.sources],
        "inputs": inputs,
        "located": [*old_located, *located_paths(work, [Path(p) for p in stage.paths])],
        "counts": counts,
        "outputs": outputs,
        "summary": summary,
        "complete": True,
    }
