"""A corpus that grows: add files to a finished work directory without redoing it.

:func:`add` (``clusterclip.add``) embeds only the new files (same encoder and
settings as the embed stage recorded; new shards whose document indices continue
the index), then
assigns their documents to the existing centroids, or with ``refit=True`` reruns
the cluster stage over the union. The embed entry of the manifest then describes
the union (its files in order, their fingerprints, counts and outputs) and lists
every addition under ``additions`` (files, time, documents, how they were
clustered). So ``clusterclip run OLD... NEW... --workdir W`` afterwards finds the
embed stage (and an assigned cluster stage) fresh, and reruns dedup, schedule and
report over the union, whose inputs changed. It is also how separately embedded
parts of one corpus become one schedule.

Refused before anything is written: a work directory without a finished embed
stage, a file already part of the corpus (same path or same content), and a
corpus file that changed since it was embedded.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir, corpus_key

__all__ = ["add"]


def add(
    inputs: Any,
    *,
    workdir: str | os.PathLike[str],
    refit: bool = False,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Embed new corpus files into a finished work directory and cluster their documents.

    Parameters
    ----------
    inputs : path, glob, directory or a sequence of them
        The new files (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``, ``.parquet``),
        none of them already part of the corpus.
    workdir : path
        A work directory with a finished embed stage.
    refit : bool
        Rerun the cluster stage (k-means) over the union, with its recorded
        settings, instead of assigning the new documents to the existing centroids.
    engine : {"local", "ray"}
        Where the shards are embedded and the documents assigned; ``engine_options``
        are the fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.
    log : callable, optional
        Receives one line per step.

    Returns
    -------
    dict
        ``sources`` (the files added, as recorded), ``first_index`` (index of their
        first document), ``documents``, ``embedded_docs``, ``counts`` (by status),
        ``clusters`` (``"assigned"``, ``"refit"`` or ``"none"``: no fresh cluster
        stage, so the next ``clusterclip run`` clusters the union) and ``time``.

    Notes
    -----
    Deterministic: every added document gets the embedding row and index entry a
    from-scratch embed of the union gives it (only the cut into parts differs),
    and, when assigned, the label of its nearest existing centroid. The stages
    downstream (dedup, schedule, report) are left to rerun: ``clusterclip run``
    with every file, old then new, redoes them over the union.

    Examples
    --------
    >>> import clusterclip
    >>> clusterclip.add("more.jsonl", workdir="w")["clusters"]  # doctest: +SKIP
    'assigned'
    """
    from clusterclip.embed.job import EmbedStage

    work = WorkDir(workdir)
    stage = EmbedStage(inputs, engine=engine, engine_options=dict(engine_options or {}))
    if not stage.paths:
        raise ClusterClipError(
            "clusterclip add takes corpus files; an in-memory dataset cannot be added. Save it "
            "to jsonl or parquet and add that."
        )
    with work.lock(log=log):
        added = _add_locked(work, stage, refit=refit, log=log)
    if added["clusters"] == "refit":
        _refit(work, engine=engine, engine_options=engine_options, log=log)
    return added


def _add_locked(
    work: WorkDir, stage: Any, *, refit: bool, log: Callable[[str], None] | None
) -> dict[str, Any]:
    """Check, embed, record the embed entry, assign (the caller holds the lock)."""
    from clusterclip.cluster.grow import FittedClusters, assign_added
    from clusterclip.embed.grow import embed_added

    entry = _finished_embed(work)
    _check_new(work, entry, stage)
    _name_for_workdir(work, entry, stage)
    fitted = None if refit else FittedClusters.read(work)
    # "assigned" is recorded once the assignment is: a stop before leaves "none", which is true
    clustered = "refit" if refit and work.entry("cluster") else "none"
    work.record("embed", {**entry, "complete": False, "adding": list(stage.sources)})
    union, added = embed_added(work, entry, stage)
    addition = {
        "sources": list(stage.sources),
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "first_index": added["first_index"],
        "documents": added["documents"],
        "counts": added["counts"],
        "clusters": clustered,
    }
    union.pop("adding", None)
    union["additions"] = [*entry.get("additions", []), addition]
    work.record("embed", union)
    _say(log, f"embed     added {added['documents']:,} documents from {len(stage.sources)} file(s)")
    if fitted is not None:
        work.record(
            "cluster",
            assign_added(
                work, fitted, added["first_index"], engine=stage.engine,
                engine_options=_engine_options(stage),
            ),
        )  # fmt: skip
        addition["clusters"] = "assigned"
        work.record("embed", union)  # holds ``addition``
        _say(log, f"cluster   assigned {added['documents']:,} documents to the existing centroids")
    return {**addition, "embedded_docs": added["embedded_docs"], "workdir": str(work.path)}


def _engine_options(stage: Any) -> dict[str, Any] | None:
    """The Ray settings of ``stage`` as ``engine_options`` (None for the local engine)."""
    options = stage.ray_options
    return None if options is None else options.engine_options()


def _finished_embed(work: WorkDir) -> dict[str, Any]:
    """The complete embed entry of ``work``, or the error that says what to do instead."""
    entry = work.manifest()["stages"].get("embed") if work.path.is_dir() else None
    if entry is not None and entry.get("adding") and not entry.get("complete"):
        raise ClusterClipError(
            f"an earlier `clusterclip add` of {', '.join(entry['adding'])} into {work.path} "
            "stopped before the end. Re-embed every file: `clusterclip run OLD... NEW... "
            f"--workdir {work.path}` (or `clusterclip embed ... --overwrite`)."
        )
    if entry is None or not entry.get("complete"):
        raise ClusterClipError(
            f"work directory {work.path} has no finished embed stage, so there is nothing to add "
            "to. Embed the whole corpus first: `clusterclip run INPUT... --workdir W` (or "
            "`clusterclip embed INPUT... --workdir W`)."
        )
    if not work.corpus_rereadable():
        raise ClusterClipError(
            f"the embed stage of {work.path} read an in-memory dataset; files cannot be added to "
            "it. Embed the dataset saved as jsonl or parquet, then add files."
        )
    return entry


def _check_new(work: WorkDir, entry: dict[str, Any], stage: Any) -> None:
    """Refuse a file already in the corpus; refuse when a corpus file changed since embedded."""
    present = work.corpus_by_name()  # raises, naming the file, when one changed or is missing
    by_path = {Path(path).resolve(): name for name, path in present.items()}
    by_content = {
        _content(fingerprint): name
        for name, fingerprint in zip(entry.get("sources", []), _recorded(entry), strict=False)
    }
    new = work.input_fingerprints(stage.paths, write=True)
    for source, path, fingerprint in zip(stage.sources, stage.paths, new, strict=True):
        same = by_path.get(Path(path).resolve()) or by_content.get(_content(fingerprint))
        if same is not None:
            raise ClusterClipError(
                f"{source} is already part of the corpus of {work.path} (as {same}"
                f"{'' if Path(path).resolve() in by_path else ', with the same content'}). "
                "Name only files that are not embedded yet."
            )


def _recorded(entry: dict[str, Any]) -> list[Any]:
    inputs = entry.get("inputs", {})
    return [inputs.get(corpus_key(i)) for i in range(len(entry.get("sources", [])))]


def _content(fingerprint: Any) -> str:
    """A fingerprint's content part, comparable between files (sorted JSON of its fields)."""
    import json

    return json.dumps(fingerprint, sort_keys=True, default=str)


def _name_for_workdir(work: WorkDir, entry: dict[str, Any], stage: Any) -> None:
    """Name relative files absolutely when this command's directory is not the embed stage's.

    Relative source names are rooted where the embed stage ran (its ``inputs_root``);
    a file given relative to another directory is recorded by its absolute path.
    """
    root = entry.get("inputs_root")
    here = Path.cwd().resolve()
    if root is None or (work.path.absolute() / root).resolve() == here:
        return
    stage.paths = [path if path.is_absolute() else path.resolve() for path in stage.paths]
    stage.sources = [str(path) for path in stage.paths]
    stage.input_labels = {corpus_key(i): name for i, name in enumerate(stage.sources)}


def _refit(
    work: WorkDir,
    *,
    engine: str,
    engine_options: Mapping[str, Any] | None,
    log: Callable[[str], None] | None,
) -> None:
    """Rerun the cluster stage over the union with its recorded settings."""
    from clusterclip.cluster.options import ClusterOptions
    from clusterclip.cluster.stage import ClusterStage
    from clusterclip.runner import run_stage

    config = (work.entry("cluster") or {}).get("config", {})
    names = {field.name for field in dataclasses.fields(ClusterOptions)}
    values = {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in config.items()
        if name in names
    }
    stage = ClusterStage(engine=engine, engine_options=engine_options)
    run_stage(stage, work, ClusterOptions(**values), on_change="redo", log=log)


def _say(log: Callable[[str], None] | None, line: str) -> None:
    if log is not None:
        log(line)
