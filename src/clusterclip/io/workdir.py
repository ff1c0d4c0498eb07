"""The one owner of a work directory: its file names, its manifest, its lock and typed accessors.

Every stage writes into one work directory and records an entry in ``manifest.json``
(:mod:`clusterclip.io.manifest`). The directory is clusterclip's alone
(:meth:`WorkDir.claim`: the marker ``.clusterclip-workdir``) and has one writer
at a time (:meth:`WorkDir.lock`). :data:`ARTIFACTS` is the only place the
files' names are spelled; what is inside each file (columns, dtypes, layout),
how it is written and when it is fresh belong to its handle in
:mod:`clusterclip.io.artifacts`. The accessors below delegate to the handles:

==================  ===============================  ==========================================
accessor            file                             checked
==================  ===============================  ==========================================
``documents()``     ``documents.parquet``            rows in index order
``ok_mask()``       ``documents.parquet``            (status == "ok")
``n_tokens()``      ``documents.parquet``            int64, index order
``embeddings()``    ``embeddings/part-NNNNN.npy``    embed complete; parts whole; row count
``labels()``        ``clusters.parquet``             clusters made from the current embeddings
``scores()``        ``clusters.parquet``             same
``centroids()``     ``centroids.npy``                present
``levels()``        ``clusters.parquet``             same as labels (None for flat k-means)
``level_centroids`` ``level_centroids.npz``          same (None for flat k-means)
``duplicate_of()``  ``duplicates.parquet``           groups made from the current clusters
``schedule()``      ``schedule.npy`` + ``.json``     stage fresh, indices = sidecar's hash,
                                                     built from the current labels
``report()``        ``report.json``                  present
``corpus()``        the embedded corpus files        each file unchanged since it was embedded
``record_store()``  ``records/``                     built from the unchanged corpus
==================  ===============================  ==========================================

Examples
--------
>>> from clusterclip.io import WorkDir
>>> work = WorkDir("work")  # doctest: +SKIP
>>> labels = work.labels()  # doctest: +SKIP
>>> indices = work.schedule().indices  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io import artifacts
from clusterclip.io.artifacts.schedule import ScheduleFile
from clusterclip.io.files import fingerprint_file
from clusterclip.io.manifest import (
    MANIFEST_NAME,
    STAGE_COMMANDS,
    check_upstream,
    corpus_key,
    read_manifest,
    read_stage,
    require_stage,
    write_stage,
)
from clusterclip.io.ownership import hold_lock

__all__ = [
    "ARTIFACTS",
    "STAGE_COMMANDS",
    "ScheduleFile",
    "WorkDir",
    "check_upstream",
    "corpus_key",
    "read_manifest",
    "read_stage",
    "register_artifacts",
    "require_stage",
    "write_stage",
]

#: Artifact key -> file or folder name inside the work directory (the only place they are spelled).
ARTIFACTS: dict[str, str] = {
    "manifest": MANIFEST_NAME,
    "documents": "documents.parquet",
    "rejects": "rejects.jsonl",
    "embeddings": "embeddings",
    "embed_state": ".embed-state",
    "tfidf": "embed-tfidf.npz",
    "clusters": "clusters.parquet",
    "centroids": "centroids.npy",
    "level_centroids": "level_centroids.npz",
    "cluster_state": ".cluster-state",
    "keyword_state": ".keyword-state",
    "duplicates": "duplicates.parquet",
    "schedule": "schedule.npy",
    "schedule_meta": "schedule.json",
    "report_html": "report.html",
    "report_json": "report.json",
    "records": "records",
    "marker": ".clusterclip-workdir",
    "lock": ".clusterclip-lock",
    "input_fingerprints": ".input-fingerprints.json",
}
#: Artifacts of stages outside the pipeline (the experiments), added by their owners
#: through :func:`register_artifacts`: the work directory knows only their keys.
_REGISTERED: dict[str, str] = {}


def register_artifacts(names: Mapping[str, str]) -> None:
    """Let a stage outside the pipeline declare its files: ``{key: name in the work directory}``.

    Its module keeps its own names (the work directory does not know them); the
    runner then finds them by key, like the pipeline's. A key or name already
    taken by another artifact is refused.

    >>> register_artifacts({"example": "example-output"})  # doctest: +SKIP
    >>> WorkDir("work").path_of("example").name  # doctest: +SKIP
    'example-output'
    """
    for key, name in names.items():
        taken = {**ARTIFACTS, **_REGISTERED}
        if (key in taken and taken[key] != name) or (
            name in taken.values() and taken.get(key) != name
        ):
            raise ClusterClipError(
                f"work-directory artifact {key!r} -> {name!r} clashes with one already known; "
                "pick another key and name."
            )
        _REGISTERED[key] = name


# --------------------------------------------------------------------------- accessors


class WorkDir:
    """A work directory: file names, manifest and checked, typed readers.

    Parameters
    ----------
    path : path
        The work directory (need not exist yet for writers).

    Examples
    --------
    >>> work = WorkDir("work")
    >>> work.path_of("clusters").name
    'clusters.parquet'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __repr__(self) -> str:
        return f"WorkDir({os.fspath(self.path)!r})"

    # -- names and manifest -------------------------------------------------
    def path_of(self, artifact: str) -> Path:
        """Path of one artifact (a key of :data:`ARTIFACTS`), for the stage that writes it."""
        name = ARTIFACTS.get(artifact) or _REGISTERED.get(artifact)
        if name is None:
            known = ", ".join([*ARTIFACTS, *_REGISTERED])
            raise ClusterClipError(f"unknown work-directory artifact {artifact!r}; known: {known}.")
        return self.path / name

    def exists(self, artifact: str) -> bool:
        """Whether the artifact's file or folder is present."""
        return self.path_of(artifact).exists()

    def damaged(self, artifact: str) -> str | None:
        """What is wrong with a present artifact, checked cheaply (headers and sizes); or None.

        The runner asks this before calling a stage up to date, so a part cut
        short after the stage ran is redone instead of failing every later
        reader. Checks the embedding parts (every ``.npy`` header against its
        file size); other artifacts are taken as written.
        """
        if artifact != "embeddings" or not self.exists(artifact):
            return None
        return artifacts.EmbeddingsArtifact(self).damaged()

    def manifest(self) -> dict[str, Any]:
        """The whole manifest (``{"stages": {}}`` when there is none yet)."""
        return read_manifest(self.path)

    def entry(self, stage: str) -> dict[str, Any] | None:
        """The completed manifest entry of ``stage``, or None."""
        return read_stage(self.path, stage)

    def require(self, stage: str) -> dict[str, Any]:
        """The completed entry of ``stage`` or an error naming the command that makes it."""
        return require_stage(self.path, stage)

    def record(self, stage: str, entry: Mapping[str, Any]) -> None:
        """Write the manifest entry of ``stage`` (atomically)."""
        write_stage(self.path, stage, entry)

    def claim(self) -> bool:
        """Make the directory a clusterclip work directory, or refuse; True if marked now.

        A new or empty directory gets the marker file ``.clusterclip-workdir``;
        one made by an earlier clusterclip (its ``manifest.json``) is adopted;
        any other directory that holds something is refused, naming what it
        holds, and so is a ``manifest.json`` clusterclip did not write.
        """
        from clusterclip.io.ownership import claim

        return claim(self.path, marker=self.path_of("marker"), manifest=self.path_of("manifest"))

    def lock(self, *, log: Callable[[str], None] | None = None) -> AbstractContextManager[None]:
        """Claim the directory (:meth:`claim`) and hold its one-writer lock inside a ``with``.

        A second writer is refused with the holder's pid, host, command and
        start time; a lock whose process is gone (same host) is taken over and
        ``log`` says so. Re-entrant in one process. Readers need no lock.

        >>> with WorkDir("work").lock():  # doctest: +SKIP
        ...     run_stage(stage, work, options)
        """
        return hold_lock(
            self.path, lock=self.path_of("lock"), marker=self.path_of("marker"),
            manifest=self.path_of("manifest"), log=log,
        )  # fmt: skip

    def input_fingerprints(
        self,
        paths: list[Path] | list[str],
        *,
        write: bool = False,
        hash_files: Callable[[list[str]], list[dict[str, Any]]] | None = None,
    ) -> list[dict[str, Any]]:
        """Content fingerprint of each corpus file, cached by (path, size, mtime) in the directory.

        ``write=True`` (a writer holding :meth:`lock`) stores new fingerprints;
        ``hash_files`` hashes the files the cache lacks (e.g. on an engine; see
        :func:`~clusterclip.io.input_cache.cached_fingerprints`).
        """
        from clusterclip.io.input_cache import cached_fingerprints

        cache = self.path_of("input_fingerprints")
        return cached_fingerprints(paths, cache=cache, write=write, hash_files=hash_files)

    def output(self, key: str) -> str | None:
        """Current fingerprint of an output, ``"stage.output"`` (None if not recorded)."""
        stage, _, name = key.partition(".")
        return self.manifest()["stages"].get(stage, {}).get("outputs", {}).get(name)

    def require_fresh(self, stage: str) -> dict[str, Any]:
        """The completed entry of ``stage``, refused when an input changed since it ran."""
        entry = self.require(stage)
        changed = check_upstream(self.path, stage, entry.get("inputs", {}))
        if changed:
            raise ClusterClipError(
                f"the {stage} outputs in {self.path} are stale: {'; '.join(changed)}. Rerun "
                f"`clusterclip run ... --workdir {self.path}` (it redoes every stage downstream "
                "of a change)."
            )
        return entry

    def fingerprint(self, artifact: str) -> str:
        """Content hash of one artifact file."""
        return fingerprint_file(self.path_of(artifact))

    # -- the artifacts' readers (each delegates to its handle in clusterclip.io.artifacts) --
    def documents(self, columns: list[str] | None = None) -> Any:
        """``documents.parquet`` as a pyarrow Table, rows in document index order.

        >>> WorkDir("work").documents(["index", "status"]).num_rows  # doctest: +SKIP
        10000
        """
        return artifacts.DocumentsArtifact(self).read(columns)

    def n_documents(self) -> int:
        """Rows of ``documents.parquet`` (every input record, ok or not)."""
        return artifacts.DocumentsArtifact(self).n_rows()

    def ok_mask(self) -> np.ndarray:
        """bool ``(N,)``: True where the document was embedded (status ``ok``)."""
        return artifacts.DocumentsArtifact(self).ok_mask()

    def status_counts(self) -> dict[str, int]:
        """Documents by status (``ok``, ``empty``, ``malformed``, ...)."""
        return artifacts.DocumentsArtifact(self).status_counts()

    def n_tokens(self) -> np.ndarray:
        """int64 ``(N,)``: tokens per document as counted by the encoder (0 when not ok)."""
        return artifacts.DocumentsArtifact(self).n_tokens()

    def embeddings(self) -> Any:
        """float16 ``(N, dim)`` :class:`~clusterclip.io.shards.ShardedMatrix`, memory-mapped."""
        return artifacts.EmbeddingsArtifact(self).read()

    def labels(self) -> np.ndarray:
        """int32 ``(N,)``: cluster of every document in index order (-1 = excluded).

        Refused when the embeddings changed after clustering.
        """
        return artifacts.ClustersArtifact(self).labels()

    def scores(self) -> np.ndarray:
        """float32 ``(N,)``: cosine of every document to its centroid."""
        return artifacts.ClustersArtifact(self).scores()

    def levels(self) -> np.ndarray | None:
        """int32 ``(N, L-1)``: every document's cluster on each level above its leaf, or None.

        Written by a hierarchical cluster stage (``levels=(k_1, ..., k_{L-1})``):
        column ``l`` is the ``level_l`` column of ``clusters.parquet``, coarse to
        fine (column 0 has ``k_1`` clusters); the leaf is :meth:`labels`. Ids are
        global per level, and a leaf's ancestors are its row here. ``-1`` on
        every level where the leaf is ``-1`` (excluded documents). None when the
        stage ran flat k-means. Rows in index order; refused when the embeddings
        changed after clustering.

        >>> WorkDir("work").levels().shape  # doctest: +SKIP
        (1000000, 2)
        """
        return artifacts.ClustersArtifact(self).levels()

    def level_centroids(self) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
        """``(centroids, parents)`` of a hierarchical cluster stage, or None for flat k-means.

        ``centroids[l]`` is float32 ``(k_l, dim)``, coarse to fine, the last the
        leaves (equal to :meth:`centroids`); ``parents[l]`` is int32 ``(k_{l+1},)``,
        the level-``l`` parent of each node one level down.
        """
        return artifacts.LevelCentroidsArtifact(self).read()

    def cluster_tree(self) -> Any:
        """The :class:`clusterclip.tree.Tree` of a hierarchical cluster stage, or None for flat k-means.

        Built from :meth:`level_centroids`; its leaves are :meth:`centroids`.
        """
        return artifacts.LevelCentroidsArtifact(self).tree()

    def write_level_centroids(
        self, centroids: list[np.ndarray] | tuple[np.ndarray, ...],
        parents: list[np.ndarray] | tuple[np.ndarray, ...],
    ) -> str:  # fmt: skip
        """Write ``level_centroids.npz`` (read by :meth:`level_centroids`); return its fingerprint.

        Atomic, and byte-identical for the same arrays (see
        :meth:`clusterclip.io.artifacts.LevelCentroidsArtifact.write`).
        """
        return artifacts.LevelCentroidsArtifact(self).write(centroids, parents)

    def centroids(self) -> np.ndarray:
        """float32 ``(K, dim)`` centroids of the cluster stage."""
        return artifacts.CentroidsArtifact(self).read()

    def n_clusters(self) -> int:
        """K of the cluster stage (empty clusters included)."""
        return artifacts.CentroidsArtifact(self).n_clusters()

    def duplicates(self) -> Any:
        """``duplicates.parquet`` as a pyarrow Table in index order.

        Columns ``index`` (int64), ``representative`` (int64: lowest index of the
        document's near-duplicate group, its own index when it has no copy),
        ``similarity`` (float32 cosine to the representative), ``exact`` (bool:
        same normalised text as the representative), ``min_similarity``. Refused
        when the clusters or embeddings changed since the dedup stage ran.
        """
        return artifacts.DuplicatesArtifact(self).read()

    def duplicate_of(self) -> np.ndarray:
        """int64 ``(N,)``: the representative of every document's near-duplicate group."""
        return artifacts.DuplicatesArtifact(self).representative()

    def schedule(self) -> ScheduleFile:
        """The saved schedule, memory-mapped, after every check (the one loader).

        Refused when the schedule stage is stale, when ``schedule.npy`` does not
        match its sidecar's fingerprint, or when the current labels are not the
        ones it was built from (:meth:`clusterclip.io.artifacts.ScheduleArtifact.read`).
        """
        return artifacts.ScheduleArtifact(self).read()

    def report(self) -> dict[str, Any]:
        """``report.json`` (every number of the report)."""
        return artifacts.ReportArtifact(self).read()

    # -- the corpus ---------------------------------------------------------
    def corpus_rereadable(self) -> bool:
        """Whether the embed stage read files (which :meth:`corpus` can re-read), not a dataset."""
        entry = self.require("embed")
        names = entry.get("sources") or entry.get("config", {}).get("inputs") or []
        return bool(names) and not any(str(name).startswith("<") for name in names)

    def corpus_files(self) -> list[Path]:
        """The embedded corpus files, each checked unchanged since the embed stage read it."""
        return list(self.corpus_by_name().values())

    def corpus_by_name(self) -> dict[str, Path]:
        """Recorded source name -> the file found for it, each checked unchanged since embedded."""
        entry = self.require("embed")
        names = entry.get("sources") or entry.get("config", {}).get("inputs") or []
        if not names or any(str(name).startswith("<") for name in names):
            raise ClusterClipError(
                f"the embed stage of {self.path} read an in-memory dataset, whose records cannot "
                "be re-read from files. Use clusterclip.adapters.hf.apply_schedule(dataset, ...) "
                "instead, or save the dataset to jsonl or parquet and embed that."
            )
        recorded = entry.get("inputs", {})
        located = entry.get("located") or []
        found = {}
        for position, name in enumerate(names):
            was = recorded.get(corpus_key(position))
            where = located[position] if position < len(located) else {}
            candidates = self._source_candidates(str(name), entry.get("inputs_root"), where)
            # The first file found decides: a changed one is refused, never passed over for
            # another copy. The places are fixed by the work directory (never by the current
            # directory), so a same-named file elsewhere cannot shadow the corpus.
            path = next((p for p in candidates if p.is_file()), None)
            now = None if path is None else self.input_fingerprints([path])[0]
            if path is None or (was is not None and now != was):
                raise self._corpus_error(str(name), was, now, [path] if path else candidates)
            found[str(name)] = path
        return found

    def inputs_root(self) -> str:
        """The current directory, relative to this work directory (recorded by the embed stage).

        Relative corpus names are rooted there, so a later command finds the very
        file that was embedded, whatever its own current directory (and a work
        directory moved together with its corpus still finds it).

        >>> WorkDir("work").inputs_root()  # doctest: +SKIP
        '..'
        """
        return os.path.relpath(Path.cwd(), self.path.absolute())

    def _source_candidates(
        self, name: str, root: str | None, where: Mapping[str, str]
    ) -> list[Path]:
        """Absolute paths where the recorded source ``name`` may be, in order.

        Where it was embedded from (``root``: the embed stage's current directory; older
        entries: from here, the work directory and its parent), then where the last rerun
        found it after a move (``where``, the embed entry's ``located``: as given then, and
        from the work directory, which holds when both were copied together).
        """
        path = Path(name)
        work = self.path.absolute()
        if path.is_absolute():
            paths = [path]
        elif root is not None:
            paths = [work / root / path]
        else:
            paths = [Path.cwd() / path, work / path, work.parent / path]
        if where.get("path") and Path(where["path"]).is_absolute():  # older entries: as given
            paths.append(Path(where["path"]))
        if where.get("from_workdir"):
            paths.append(work / where["from_workdir"])
        return list(dict.fromkeys(Path(os.path.normpath(p)) for p in paths))

    def _corpus_error(self, name: str, was: Any, now: Any, paths: list[Path]) -> ClusterClipError:
        """The error for a source not found as embedded; ``paths``: the absolute paths checked."""
        where = f"{'looked for' if now is None else 'checked'} {' and '.join(map(str, paths))}"
        if now is None:
            what = "is missing"
        elif was and was.get("size") != now.get("size"):
            what = f"changed size ({was.get('size'):,} -> {now.get('size'):,} bytes)"
        else:
            what = "changed content (same size)"
        return ClusterClipError(
            f"corpus file {name} {what} since it was embedded into {self.path} ({where}), so its "
            "records no longer match the work directory. Restore the file as it was, or re-embed "
            f"it: `clusterclip run INPUT... --workdir {self.path}` redoes every stage that "
            "depends on it (a corpus that only moved, with the same bytes, is found there and "
            "not re-embedded)."
        )

    def corpus(self) -> Iterator[Any]:
        """Every record of the embedded corpus, in index order (:class:`~clusterclip.io.readers.Record`).

        The files are checked now, before the first record is read
        (:meth:`corpus_files`), so a caller can refuse before it writes
        anything; a corpus that yields another number of records than
        ``documents.parquet`` lists is refused at its end.

        >>> next(WorkDir("work").corpus()).index  # doctest: +SKIP
        0
        """
        paths = self.corpus_files()
        config = self.require("embed").get("config", {})
        return self._stream_corpus(paths, config, self.n_documents())

    def _stream_corpus(
        self, paths: list[Path], config: Mapping[str, Any], expected: int
    ) -> Iterator[Any]:
        from clusterclip.io.readers import iter_records

        seen = 0
        for record in iter_records(
            [str(p) for p in paths],
            text_field=config.get("text_field"),
            id_field=config.get("id_field"),
        ):
            seen += 1
            if seen > expected:
                break
            yield record
        if seen != expected:
            raise ClusterClipError(
                f"the corpus of {self.path} yields {seen:,}{'+' if seen > expected else ''} records "
                f"but {expected:,} were embedded. Restore the corpus files or re-embed them."
            )

    def record_store(self) -> tuple[np.ndarray, np.ndarray]:
        """Every document's original bytes, memory-mapped (built once from the checked corpus).

        See :meth:`clusterclip.io.artifacts.RecordsArtifact.read`: document ``i`` is
        ``records[offsets[i, 0]:offsets[i, 1]]``.
        """
        return artifacts.RecordsArtifact(self).read()

    def mended_records(self) -> dict[str, dict[str, Any]]:
        """What the record store mended: ``{reason: {"count", "first"}}`` (empty: nothing).

        See :meth:`clusterclip.io.artifacts.RecordsArtifact.mended`.
        """
        return artifacts.RecordsArtifact(self).mended()
