"""The one owner of a work directory: its file names, its manifest and typed accessors.

Every stage writes into one work directory and records an entry in ``manifest.json``::

    {"clusterclip_version": "0.1.0",
     "stages": {"embed": {"config": {...}, "inputs": {...}, "outputs": {...},
                          "versions": {...}, "complete": true, ...},
                "cluster": {...}, "schedule": {...}, "report": {...}}}

A stage records the fingerprints of what it consumed (``inputs``) and of what it
produced (``outputs``). The directory is clusterclip's alone
(:meth:`WorkDir.claim`: the marker ``.clusterclip-workdir``) and has one writer
at a time (:meth:`WorkDir.lock`). :class:`WorkDir` is the only code that knows
the files' names; every reader goes through its accessors, which check index
order and freshness once, in one place:

==================  ===============================  ==========================================
accessor            file                             checked
==================  ===============================  ==========================================
``documents()``     ``documents.parquet``            embed complete; rows in index order
``ok_mask()``       ``documents.parquet``            (status == "ok")
``n_tokens()``      ``documents.parquet``            int64, index order
``embeddings()``    ``embeddings/part-NNNNN.npy``    row count = documents
``labels()``        ``clusters.parquet``             clusters made from the current embeddings
``scores()``        ``clusters.parquet``             same
``centroids()``     ``centroids.npy``                same
``levels()``        ``clusters.parquet``             same (None for flat k-means)
``level_centroids`` ``level_centroids.npz``          same (None for flat k-means)
``duplicate_of()``  ``duplicates.parquet``           groups made from the current clusters
``schedule()``      ``schedule.npy`` + ``.json``     schedule made from the current clusters
``report()``        ``report.json``                  report made from the current schedule
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

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra, spell
from clusterclip.io.files import atomic_path, atomic_write_json, fingerprint_file
from clusterclip.io.ownership import hold_lock, written_by_clusterclip

__all__ = [
    "ARTIFACTS",
    "STAGE_COMMANDS",
    "ScheduleFile",
    "WorkDir",
    "check_upstream",
    "corpus_key",
    "read_manifest",
    "read_stage",
    "require_stage",
    "write_stage",
]

#: Artifact key -> file or folder name inside the work directory (the only place they are spelled).
ARTIFACTS: dict[str, str] = {
    "manifest": "manifest.json",
    "documents": "documents.parquet",
    "rejects": "rejects.jsonl",
    "embeddings": "embeddings",
    "embed_state": ".embed-state",
    "tfidf": "embed-tfidf.npz",
    "clusters": "clusters.parquet",
    "centroids": "centroids.npy",
    "level_centroids": "level_centroids.npz",
    "duplicates": "duplicates.parquet",
    "schedule": "schedule.npy",
    "schedule_meta": "schedule.json",
    "report_html": "report.html",
    "report_json": "report.json",
    "records": "records",
    "experiment": "lm",
    "experiment_corpus": "corpus.jsonl",
    "marker": ".clusterclip-workdir",
    "lock": ".clusterclip-lock",
    "input_fingerprints": ".input-fingerprints.json",
}
MANIFEST_NAME = ARTIFACTS["manifest"]

#: For each stage, the command that produces it (used in error messages).
STAGE_COMMANDS = {
    "embed": "clusterclip embed INPUT... --workdir W",
    "cluster": "clusterclip cluster --workdir W --n-clusters K",
    "dedup": "clusterclip dedup --workdir W",
    "schedule": "clusterclip run ... --workdir W (or clusterclip schedule)",
    "report": "clusterclip report --workdir W",
}

_RECORDS_BIN, _OFFSETS, _RECORDS_META = "records.bin", "offsets.npy", "records.json"
#: Layout of the record store; a store of another format is rebuilt (2: usable records
#: mended into clean JSON lines, see clusterclip.io.jsonlines).
_RECORDS_FORMAT = 2


# --------------------------------------------------------------------------- manifest


def read_manifest(workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of ``workdir`` (an empty one if the directory has none yet).

    A ``manifest.json`` that clusterclip did not write is refused, never merged into.
    """
    path = Path(workdir) / MANIFEST_NAME
    if not path.exists():
        return {"stages": {}}
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as error:
        raise ClusterClipError(
            f"{path}: manifest is not valid JSON ({error}). Delete it and rerun the stages."
        ) from error
    if not written_by_clusterclip(manifest):
        raise ClusterClipError(
            f"{path} was not written by clusterclip (no `clusterclip_version` and `stages`), so "
            f"{path.parent} is not a clusterclip work directory. Pass an empty or new "
            f"{spell('workdir')}."
        )
    _upgrade_embed_inputs(manifest["stages"].get("embed"))
    return manifest


def corpus_key(position: int) -> str:
    """The embed stage's input key of the corpus file at ``position`` (0-based).

    Inputs are keyed by position, not path, so that the same bytes under
    another name or folder are the same input.

    >>> corpus_key(0)
    'corpus file 1'
    """
    return f"corpus file {position + 1}"


def _upgrade_embed_inputs(entry: dict[str, Any] | None) -> None:
    """Key an embed entry of an earlier version (inputs by path) by position, in place."""
    if not isinstance(entry, dict):
        return
    names = entry.get("sources") or entry.get("config", {}).get("inputs") or []
    inputs = entry.get("inputs")
    if not names or not isinstance(inputs, dict) or set(inputs) != set(map(str, names)):
        return
    if any(str(name).startswith("<") for name in names):
        return  # an in-memory dataset: keyed by its fingerprint already
    entry["inputs"] = {corpus_key(i): inputs[str(name)] for i, name in enumerate(names)}


def read_stage(workdir: str | os.PathLike[str], stage: str) -> dict[str, Any] | None:
    """The manifest entry of one stage, or ``None`` if it never completed."""
    entry = read_manifest(workdir)["stages"].get(stage)
    if entry is None or not entry.get("complete", False):
        return None
    return entry


def write_stage(workdir: str | os.PathLike[str], stage: str, entry: Mapping[str, Any]) -> None:
    """Record (replace) one stage's entry in the manifest, atomically.

    Stages run one at a time per work directory (:meth:`WorkDir.lock`), so
    read-modify-write is safe.
    """
    from clusterclip import __version__

    manifest = read_manifest(workdir)
    manifest["clusterclip_version"] = __version__
    manifest["stages"][stage] = dict(entry)
    atomic_write_json(Path(workdir) / MANIFEST_NAME, manifest)


def require_stage(workdir: str | os.PathLike[str], stage: str) -> dict[str, Any]:
    """The completed entry of ``stage`` or an error saying which command makes it."""
    path = Path(workdir)
    if not path.is_dir():
        what = "is a file, not a work directory" if path.exists() else "does not exist"
        raise ClusterClipError(
            f"{path} {what}. Pass the --workdir of an earlier `clusterclip run` (or make one: "
            "`clusterclip run INPUT... --workdir W --n-clusters K`)."
        )
    entry = read_stage(workdir, stage)
    if entry is None:
        command = STAGE_COMMANDS.get(stage, f"the {stage} stage")
        raise ClusterClipError(
            f"work directory {workdir} has no completed `{stage}` stage. Run `{command}` first."
        )
    return entry


def check_upstream(
    workdir: str | os.PathLike[str], stage: str, recorded: Mapping[str, str]
) -> list[str]:
    """Compare fingerprints a stage recorded for its inputs with the current ones.

    Parameters
    ----------
    recorded : mapping
        ``{"<upstream stage>.<output name>": fingerprint}`` as recorded by
        ``stage`` when it ran.

    Returns
    -------
    list of str
        One human-readable line per input that changed (empty if none).
    """
    manifest = read_manifest(workdir)["stages"]
    changed = []
    for key, fingerprint in recorded.items():
        upstream, _, output = key.partition(".")
        current = manifest.get(upstream, {}).get("outputs", {}).get(output)
        if current != fingerprint:
            changed.append(f"{key} changed since `{stage}` ran (was {fingerprint}, now {current})")
    return changed


# --------------------------------------------------------------------------- accessors


@dataclass(frozen=True)
class ScheduleFile:
    """A saved schedule: memory-mapped ``indices`` (int64, shape (T,)) and its sidecar ``meta``."""

    indices: np.ndarray
    meta: dict[str, Any]
    path: Path

    @property
    def config(self) -> dict[str, Any]:
        """The schedule's recorded configuration (policy, max_repeats, seed, ...)."""
        return dict(self.meta.get("config", {}))


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
        try:
            return self.path / ARTIFACTS[artifact]
        except KeyError:
            raise ClusterClipError(
                f"unknown work-directory artifact {artifact!r}; known: {', '.join(ARTIFACTS)}."
            ) from None

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
        from clusterclip.io.shards import npy_problem

        for part in sorted(self.path_of(artifact).glob("part-*.npy")):
            problem = npy_problem(part)
            if problem:
                return f"{part} {problem}"
        return None

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
        self, paths: list[Path] | list[str], *, write: bool = False
    ) -> list[dict[str, Any]]:
        """Content fingerprint of each corpus file, cached by (path, size, mtime) in the directory.

        ``write=True`` (a writer holding :meth:`lock`) stores new fingerprints.
        """
        from clusterclip.io.input_cache import cached_fingerprints

        return cached_fingerprints(paths, cache=self.path_of("input_fingerprints"), write=write)

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

    # -- embed stage --------------------------------------------------------
    def documents(self, columns: list[str] | None = None) -> Any:
        """``documents.parquet`` as a pyarrow Table, rows in document index order.

        >>> WorkDir("work").documents(["index", "status"]).num_rows  # doctest: +SKIP
        10000
        """
        path = self.path_of("documents")
        if not path.exists():
            raise ClusterClipError(
                f"{path} not found. Run `clusterclip embed` (or `clusterclip run`) first."
            )
        pq = require_extra("pyarrow.parquet", "io")
        wanted = None if columns is None else list(dict.fromkeys(["index", *columns]))
        table = pq.read_table(path, columns=wanted)
        index = table.column("index").to_numpy()
        if len(index) and not np.array_equal(index, np.arange(len(index))):
            order = np.argsort(index, kind="stable")
            if not np.array_equal(index[order], np.arange(len(index))):
                raise ClusterClipError(
                    f"{path}: column 'index' is not a permutation of 0..{len(index) - 1}. "
                    "Re-embed: `clusterclip embed INPUT... --workdir W --overwrite`."
                )
            table = table.take(order)
        if columns is not None and "index" not in columns:
            table = table.drop(["index"])
        return table

    def n_documents(self) -> int:
        """Rows of ``documents.parquet`` (every input record, ok or not)."""
        pq = require_extra("pyarrow.parquet", "io")
        return int(pq.ParquetFile(self.path_of("documents")).metadata.num_rows)

    def ok_mask(self) -> np.ndarray:
        """bool ``(N,)``: True where the document was embedded (status ``ok``)."""
        status = self.documents(["status"]).column("status")
        return np.asarray(status.to_pylist(), dtype=object) == "ok"

    def status_counts(self) -> dict[str, int]:
        """Documents by status (``ok``, ``empty``, ``malformed``, ...)."""
        values, counts = np.unique(
            np.asarray(
                self.documents(["status"]).column("status").to_pylist(), dtype=object
            ).astype(str),
            return_counts=True,
        )
        return {str(v): int(c) for v, c in zip(values, counts, strict=True)}

    def n_tokens(self) -> np.ndarray:
        """int64 ``(N,)``: tokens per document as counted by the encoder (0 when not ok)."""
        return self.documents(["n_tokens"]).column("n_tokens").to_numpy().astype(np.int64)

    def embeddings(self) -> Any:
        """float16 ``(N, dim)`` :class:`~clusterclip.io.shards.ShardedMatrix`, memory-mapped."""
        from clusterclip.io.shards import ShardedMatrix

        entry = self.require("embed")
        problem = self.damaged("embeddings")
        if problem:
            raise ClusterClipError(
                f"{problem}. Redo the embed stage: rerun `clusterclip run INPUT... --workdir "
                f"{self.path}` (it redoes an embed stage whose parts are damaged) or "
                f"`clusterclip embed INPUT... --workdir {self.path} --overwrite`."
            )
        matrix = ShardedMatrix.from_directory(self.path_of("embeddings"))
        expected = sum(entry.get("counts", {}).values())
        if expected and len(matrix) != expected:
            raise ClusterClipError(
                f"{self.path_of('embeddings')} has {len(matrix)} rows but the manifest records "
                f"{expected} documents. Rerun `clusterclip embed ... --overwrite`."
            )
        return matrix

    # -- cluster stage ------------------------------------------------------
    def _clusters_table(self, *columns: str) -> np.ndarray:
        """``columns`` of ``clusters.parquet`` in index order, one per column of the result
        (a single column gives a 1-D array)."""
        self.require_fresh("cluster")  # first: "no completed cluster stage" names the command
        path = self.path_of("clusters")
        if not path.exists():
            raise ClusterClipError(
                f"{path} not found. Run `clusterclip cluster --workdir {self.path} --n-clusters K` "
                "(or `clusterclip run`) first."
            )
        pq = require_extra("pyarrow.parquet", "io")
        table = pq.read_table(path, columns=["index", *columns])
        index = table.column("index").to_numpy()
        arrays = [table.column(c).to_numpy() for c in columns]
        values = arrays[0] if len(arrays) == 1 else np.stack(arrays, axis=1)
        if len(index) and not np.array_equal(index, np.arange(len(index))):
            values = values[np.argsort(index, kind="stable")]
        return values

    def labels(self) -> np.ndarray:
        """int32 ``(N,)``: cluster of every document in index order (-1 = excluded).

        Refused when the embeddings changed after clustering.
        """
        return self._clusters_table("cluster").astype(np.int32, copy=False)

    def scores(self) -> np.ndarray:
        """float32 ``(N,)``: cosine of every document to its centroid."""
        return self._clusters_table("score").astype(np.float32, copy=False)

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
        path = self.path_of("clusters")
        if not path.exists():
            self._clusters_table("cluster")  # raises the stale-stage or missing-file error
        pq = require_extra("pyarrow.parquet", "io")
        names = [n for n in pq.read_schema(path).names if n.startswith("level_")]
        if not names:
            self.require_fresh("cluster")
            return None
        names.sort(key=lambda name: int(name.removeprefix("level_")))
        levels = self._clusters_table(*names).astype(np.int32).reshape(-1, len(names))
        return np.ascontiguousarray(levels)

    def level_centroids(self) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
        """``(centroids, parents)`` of a hierarchical cluster stage, or None for flat k-means.

        ``centroids[l]`` is float32 ``(k_l, dim)``, coarse to fine, the last the
        leaves (equal to :meth:`centroids`); ``parents[l]`` is int32 ``(k_{l+1},)``,
        the level-``l`` parent of each node one level down.
        """
        self.require_fresh("cluster")
        path = self.path_of("level_centroids")
        if not path.exists():
            return None
        with np.load(path) as stored:
            count = sum(1 for name in stored.files if name.startswith("centroids_"))
            centroids = [stored[f"centroids_{i}"] for i in range(count)]
            parents = [stored[f"parents_{i}"] for i in range(1, count)]
        return centroids, parents

    def cluster_tree(self) -> Any:
        """The :class:`clusterclip.tree.Tree` of a hierarchical cluster stage, or None for flat k-means.

        Built from :meth:`level_centroids`; its leaves are :meth:`centroids`.
        """
        from clusterclip.tree import Tree

        stored = self.level_centroids()
        return None if stored is None else Tree(tuple(stored[0]), tuple(stored[1]))

    def write_level_centroids(
        self, centroids: list[np.ndarray] | tuple[np.ndarray, ...],
        parents: list[np.ndarray] | tuple[np.ndarray, ...],
    ) -> str:  # fmt: skip
        """Write ``level_centroids.npz`` (read by :meth:`level_centroids`); return its fingerprint.

        Atomic, and byte-identical for the same arrays: the zip members carry a
        fixed timestamp, so a rerun (or another engine) writes the same file.
        """
        import io
        import zipfile

        arrays = [
            (f"centroids_{i}", np.asarray(c, dtype=np.float32)) for i, c in enumerate(centroids)
        ]
        arrays += [
            (f"parents_{i + 1}", np.asarray(p, dtype=np.int32)) for i, p in enumerate(parents)
        ]
        target = self.path_of("level_centroids")
        with atomic_path(target) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
            for name, array in arrays:
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
                member = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(member, buffer.getvalue())
        return self.fingerprint("level_centroids")

    def centroids(self) -> np.ndarray:
        """float32 ``(K, dim)`` centroids of the cluster stage."""
        path = self.path_of("centroids")
        if not path.exists():
            raise ClusterClipError(f"{path} not found. Run `clusterclip cluster` first.")
        return np.load(path)

    def n_clusters(self) -> int:
        """K of the cluster stage (empty clusters included)."""
        path = self.path_of("centroids")
        if not path.exists():
            raise ClusterClipError(f"{path} not found. Run `clusterclip cluster` first.")
        return int(np.load(path, mmap_mode="r").shape[0])

    # -- dedup stage --------------------------------------------------------
    def duplicates(self) -> Any:
        """``duplicates.parquet`` as a pyarrow Table in index order.

        Columns ``index`` (int64), ``representative`` (int64: lowest index of the
        document's near-duplicate group, its own index when it has no copy),
        ``similarity`` (float32 cosine to the representative), ``exact`` (bool:
        same normalised text as the representative). Refused when the clusters
        or embeddings changed since the dedup stage ran.
        """
        self.require_fresh("dedup")
        path = self.path_of("duplicates")
        if not path.exists():
            raise ClusterClipError(
                f"{path} not found. Run `clusterclip dedup --workdir {self.path}` first."
            )
        pq = require_extra("pyarrow.parquet", "io")
        table = pq.read_table(path)
        index = table.column("index").to_numpy()
        if len(index) and not np.array_equal(index, np.arange(len(index))):
            table = table.take(np.argsort(index, kind="stable"))
        return table

    def duplicate_of(self) -> np.ndarray:
        """int64 ``(N,)``: the representative of every document's near-duplicate group."""
        return self.duplicates().column("representative").to_numpy().astype(np.int64)

    # -- schedule stage -----------------------------------------------------
    def schedule(self) -> ScheduleFile:
        """The saved schedule, memory-mapped, refused when its labels changed since."""
        path = self.path_of("schedule")
        if not path.exists():
            raise ClusterClipError(
                f"{path} not found. Build a schedule first: `clusterclip run ... --workdir "
                f"{self.path}` or `clusterclip schedule --workdir W`."
            )
        if self.entry("schedule") is not None:
            self.require_fresh("schedule")
        indices = np.load(path, mmap_mode="r")
        if indices.ndim != 1 or indices.dtype.kind not in "iu":
            raise ClusterClipError(
                f"{path} must hold a 1-D integer array of document indices; got "
                f"{indices.dtype} with shape {indices.shape}. Rebuild the schedule."
            )
        side = self.path_of("schedule_meta")
        meta = json.loads(side.read_text("utf-8")) if side.exists() else {}
        return ScheduleFile(indices=indices, meta=meta, path=path)

    # -- report stage -------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """``report.json`` (every number of the report)."""
        path = self.path_of("report_json")
        if not path.exists():
            raise ClusterClipError(f"{path} not found. Run `clusterclip report --workdir W` first.")
        return json.loads(path.read_text("utf-8"))

    # -- the corpus ---------------------------------------------------------
    def corpus_rereadable(self) -> bool:
        """Whether the embed stage read files (which :meth:`corpus` can re-read), not a dataset."""
        entry = self.require("embed")
        names = entry.get("sources") or entry.get("config", {}).get("inputs") or []
        return bool(names) and not any(str(name).startswith("<") for name in names)

    def corpus_files(self) -> list[Path]:
        """The embedded corpus files, each checked unchanged since the embed stage read it."""
        return list(self._checked_corpus().values())

    def _checked_corpus(self) -> dict[str, Path]:
        """Recorded source name -> the file found for it, after the fingerprint check."""
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

        Returns
        -------
        (records, offsets) : (uint8 memmap, int64 ``(N, 2)``)
            Document ``i`` is ``records[offsets[i, 0]:offsets[i, 1]]``: the exact
            input line for jsonl sources, the row as JSON for parquet; a usable
            record that strict JSON readers would refuse (a byte order mark,
            invalid UTF-8, a carriage return, ``NaN``) is mended
            (:func:`clusterclip.io.jsonlines.clean_line`), and
            :meth:`mended_records` says which.
        """
        from clusterclip.io.corpus_store import build_store

        files = self._checked_corpus()
        store = self.path_of("records")
        documents = self.fingerprint("documents")
        meta_path = store / _RECORDS_META
        if meta_path.exists() and (store / _OFFSETS).exists():
            meta = json.loads(meta_path.read_text("utf-8"))
            if meta.get("documents") == documents and meta.get("format") == _RECORDS_FORMAT:
                return _open_store(store)
        table = self.documents(["source", "line", "status"])
        store.mkdir(parents=True, exist_ok=True)
        with atomic_path(store / _RECORDS_BIN) as tmp:
            offsets, mended = build_store(table, files, tmp)
        with atomic_path(store / _OFFSETS) as tmp, open(tmp, "wb") as handle:
            np.save(handle, offsets)
        atomic_write_json(
            meta_path,
            {
                "documents": documents,
                "n_documents": len(offsets),
                "format": _RECORDS_FORMAT,
                "mended": mended,
            },
        )
        return _open_store(store)

    def mended_records(self) -> dict[str, dict[str, Any]]:
        """What the record store mended: ``{reason: {"count", "first"}}`` (empty: nothing).

        Reasons are the keys of :data:`clusterclip.io.jsonlines.MENDED`;
        ``first`` is the first such record as ``source:line``. Builds the store
        if needed.
        """
        self.record_store()
        meta = json.loads((self.path_of("records") / _RECORDS_META).read_text("utf-8"))
        return dict(meta.get("mended", {}))


def _open_store(store: Path) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.load(store / _OFFSETS, mmap_mode="r")
    size = (store / _RECORDS_BIN).stat().st_size
    records = (
        np.memmap(store / _RECORDS_BIN, dtype=np.uint8, mode="r")
        if size
        else np.zeros(0, dtype=np.uint8)
    )
    return records, offsets
