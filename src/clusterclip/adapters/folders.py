"""Export in the authors' layout: one folder per cluster, ``cluster_<k>/data_<j>.jsonl``.

Each line is the original record with two added fields, ``label`` (the cluster)
and ``score`` (cosine to its centroid); a field of that name in the record is
replaced. Documents that were not embedded (status not ``ok``) are left out.
Lines are standard JSON in UTF-8 (:func:`clusterclip.io.jsonlines.encode_json`):
a ``NaN`` or ``Infinity`` in a record, which JSON has no number for, is written
as null and said on stderr. Deterministic: within a cluster, documents keep their
index order, and ``data_<j>`` holds documents ``j * shard_size ..`` of the cluster.

The work runs as tasks of the engine, in two rounds; the local engine runs the
same tasks in-process, so the files are the same bytes on every engine:

1. *Read tasks* (:class:`FolderWorker`), cut as the embed stage cuts the corpus
   (:mod:`clusterclip.io.readplan`): each reads and judges its own documents,
   writes their lines into one part file, grouped by destination file
   ``(cluster, j)`` and in index order within a group, and a sidecar listing the
   groups (``.parts/part-<first document>.jsonl`` and ``.npz`` in the staging folder,
   atomic, so a retried task rewrites its own).
2. *Assembly tasks* (:class:`AssembleWorker`), one per run of clusters: each appends,
   for its clusters, every part's groups in task order to their files, with the
   kernel's file copy where it can.

The driver reads the labels and scores (the export's index: 8 bytes per document)
and sends each read task its documents' clusters, scores and destination files; it
reads no text and copies no line. The corpus files are checked before anything is
written, and the export is written into a new or empty ``out`` that appears whole or
not at all (:mod:`clusterclip.adapters.output`), so every worker must see ``out``'s
parent folder at the same path.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.arrays import run_ranks
from clusterclip.engines import map_shards, resolve_options
from clusterclip.errors import ClusterClipError, invalid
from clusterclip.io import WorkDir
from clusterclip.io.files import atomic_path
from clusterclip.io.jsonlines import MENDED, encode_json
from clusterclip.io.readplan import ShardTask, corpus_plan, shard_records

__all__ = ["AssembleWorker", "FolderTask", "FolderWorker", "export_cluster_folders"]

#: Documents one read task reads (a speed knob only: the bytes do not depend on it).
FOLDER_TASK_DOCUMENTS = 2**16
#: Assembly tasks per cluster run aim at this many documents (a speed knob only).
ASSEMBLE_DOCUMENTS = 2**20


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    return str(obj)


def _check_positive(name: str, value: Any, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise invalid(name, "an int in [1, inf)", value, fix)
    return int(value)


@dataclass(frozen=True)
class FolderTask:
    """One read task: its documents' clusters (-1: left out), scores and files ``j``."""

    shard: ShardTask
    labels: np.ndarray
    scores: np.ndarray
    files: np.ndarray
    part: str


class FolderWorker:
    """Write a :class:`FolderTask`'s lines into its part, grouped by destination file.

    Pass ``functools.partial(FolderWorker, read_options)`` to
    :func:`clusterclip.engines.map_shards`. Writes ``part + ".jsonl"`` (the lines,
    group after group in ``(cluster, j)`` order, index order within a group) and
    ``part + ".npz"`` (``clusters``, ``files``, ``sizes``: bytes per group); returns
    ``(documents, nulled, first_nulled)``: lines written, records whose ``NaN`` or
    ``Infinity`` became null, and where the first of them is.
    """

    def __init__(self, read_options: Mapping[str, Any]) -> None:
        self.read_options = dict(read_options)

    def __call__(self, task: FolderTask) -> tuple[int, int, str]:
        first = task.shard.first_index
        lines: list[bytes] = []
        keys: list[int] = []
        nulled, first_nulled, read = 0, "", 0
        for record in shard_records(task.shard, self.read_options):
            read += 1
            label = int(task.labels[record.index - first])
            if label < 0:
                continue
            row = dict(record.raw) if isinstance(record.raw, dict) else {"text": record.text}
            row["label"] = label
            row["score"] = round(float(task.scores[record.index - first]), 6)
            data, replaced = encode_json(row, default=_default)
            if replaced:
                nulled += 1
                first_nulled = first_nulled or f"{record.source}:{record.line}"
            lines.append(data + b"\n")
            keys.append(label << 32 | int(task.files[record.index - first]))
        if read != task.shard.rows:
            raise ClusterClipError(
                f"cluster-folders task at document {first:,}: read {read:,} records where the "
                f"plan counted {task.shard.rows:,}; did a corpus file change during the run? "
                "Rerun the command."
            )
        key = np.array(keys, dtype=np.int64)
        order = np.argsort(key, kind="stable")  # by file, index order within one
        sizes = np.array([len(line) for line in lines], dtype=np.int64)[order]
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
        with atomic_path(task.part + ".jsonl") as tmp, open(tmp, "wb") as handle:
            handle.writelines(lines[i] for i in order.tolist())
        with atomic_path(task.part + ".npz") as tmp, open(tmp, "wb") as handle:
            np.savez(handle, clusters=key[starts] >> 32, files=key[starts] & 0xFFFFFFFF,
                     sizes=np.add.reduceat(sizes, starts) if key.size else sizes)  # fmt: skip
        return len(lines), nulled, first_nulled


def _copy_range(source: int, offset: int, length: int, target: int) -> None:
    """Append ``length`` bytes of ``source`` from ``offset`` to ``target`` (file descriptors)."""
    done = 0
    try:
        while done < length:
            step = os.copy_file_range(source, target, length - done, offset + done)
            if step == 0:
                break
            done += step
    except (AttributeError, OSError):  # no copy_file_range here: an ordinary copy
        pass
    while done < length:
        chunk = os.pread(source, min(length - done, 1 << 20), offset + done)
        if not chunk:
            raise ClusterClipError("a cluster-folders part ended early; rerun the command.")
        os.write(target, chunk)
        done += len(chunk)


class AssembleWorker:
    """Append the parts' groups of a run of clusters to their files, in task order.

    Pass ``functools.partial(AssembleWorker, staging, parts)`` (the export's staging
    folder and the read tasks' part prefixes, in task order) to
    :func:`clusterclip.engines.map_shards`; each payload is ``(first, end)``, the
    clusters ``first <= k < end``. Returns the number of lines' bytes written.
    """

    def __init__(self, staging: str, parts: Sequence[str]) -> None:
        self.staging, self.parts = Path(staging), list(parts)

    def __call__(self, clusters: tuple[int, int]) -> int:
        low, high = clusters
        written = 0
        for part in self.parts:
            with np.load(part + ".npz") as index:
                groups, files, sizes = index["clusters"], index["files"], index["sizes"]
            offsets = np.r_[0, np.cumsum(sizes)]
            inside = np.flatnonzero((groups >= low) & (groups < high))
            if not inside.size:
                continue
            source = os.open(part + ".jsonl", os.O_RDONLY)
            try:
                for g in inside.tolist():
                    folder = self.staging / f"cluster_{int(groups[g])}"
                    folder.mkdir(exist_ok=True)
                    path = folder / f"data_{int(files[g])}.jsonl"
                    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
                    try:
                        _copy_range(source, int(offsets[g]), int(sizes[g]), target)
                    finally:
                        os.close(target)
                    written += int(sizes[g])
            finally:
                os.close(source)
        return written


def _cluster_runs(sizes: np.ndarray) -> Iterator[tuple[int, tuple[int, int]]]:
    """Consecutive runs of clusters of about :data:`ASSEMBLE_DOCUMENTS` documents each.

    >>> list(_cluster_runs(np.array([3, 0, 2**20, 1])))
    [(0, (0, 3)), (1, (3, 4))]
    """
    run, low, held = 0, 0, 0
    for cluster, size in enumerate(sizes.tolist()):
        held += size
        if held >= ASSEMBLE_DOCUMENTS:
            yield run, (low, cluster + 1)
            run, low, held = run + 1, cluster + 1, 0
    if low < sizes.size:
        yield run, (low, int(sizes.size))


def export_cluster_folders(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    shard_size: int = 100_000,
    buffer_bytes: int = 64 << 20,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``out/cluster_<k>/data_<j>.jsonl`` for every non-empty cluster.

    Parameters
    ----------
    workdir : path
        Work directory with completed ``embed`` and ``cluster`` stages (the
        corpus files must still be where they were embedded from).
    out : path
        Output folder; must not exist yet (or be empty). Nothing is left there
        when the export fails.
    shard_size : int
        Documents per ``data_<j>.jsonl`` file.
    buffer_bytes : int
        Kept for compatibility; each read task holds its own lines (about
        :data:`FOLDER_TASK_DOCUMENTS` documents) instead.
    engine, engine_options
        Where the read and assembly tasks run (:func:`clusterclip.engines.map_shards`);
        the same bytes on each.

    Returns
    -------
    dict
        ``documents`` written, ``excluded`` (not ok), ``clusters`` (folders), ``files``, ``out``.

    Examples
    --------
    >>> export_cluster_folders("work", "export")  # doctest: +SKIP
    {'documents': 2225, 'excluded': 0, 'clusters': 5, 'files': 5, 'out': 'export'}
    """
    shard_size = _check_positive("shard_size", shard_size, "Pass e.g. --shard-size 100000.")
    _check_positive("buffer_bytes", buffer_bytes, "Pass e.g. 64 MiB.")
    out = check_export_folder(out)
    options = resolve_options(engine, engine_options)
    work = WorkDir(workdir)
    labels, scores = work.labels(), work.scores()
    plan, read_options = corpus_plan(work, engine=engine, options=options)  # checked now
    if plan.n_records != len(labels):
        raise ClusterClipError(
            f"the corpus yielded {plan.n_records} records but {workdir} clustered {len(labels)}. "
            "Restore the embedded corpus files or rerun embed and cluster."
        )
    kept = labels >= 0
    sizes = np.bincount(labels[kept], minlength=int(labels.max(initial=-1)) + 1)
    order = np.flatnonzero(kept)[np.argsort(labels[kept], kind="stable")]
    files = np.full(labels.size, -1, dtype=np.int64)
    files[order] = run_ranks(labels[order]) // shard_size  # rank within the cluster
    with export_folder(out) as staging:
        staging = staging.resolve()  # the tasks may run in another folder
        (staging / ".parts").mkdir()
        parts: list[str] = []

        def tasks() -> Iterator[tuple[int, FolderTask]]:
            for shard in plan.shards(FOLDER_TASK_DOCUMENTS):
                low, high = shard.first_index, shard.first_index + shard.rows
                parts.append(str(staging / ".parts" / f"part-{low:012d}"))
                task = FolderTask(shard, labels[low:high], scores[low:high], files[low:high],
                                  parts[-1])  # fmt: skip
                yield low, task

        read = functools.partial(FolderWorker, read_options)
        done = [result for _, result in map_shards(tasks(), read, engine=engine, options=options)]
        assemble = functools.partial(AssembleWorker, str(staging), parts)
        for _ in map_shards(_cluster_runs(sizes), assemble, engine=engine, options=options):
            pass
        shutil.rmtree(staging / ".parts")
    nulled = sum(n for _, n, _ in done)
    if nulled:
        first_nulled = next(where for _, n, where in done if n)
        print(
            f"export cluster-folders: {nulled:,} record{'s' if nulled != 1 else ''} held "
            f"{MENDED['non_finite_number']} (first: {first_nulled})",
            file=sys.stderr,
            flush=True,
        )
    return {
        "documents": int(sum(n for n, _, _ in done)),
        "excluded": int((~kept).sum()),
        "clusters": int((sizes > 0).sum()),
        "files": int((-(-sizes // shard_size)).sum()),
        "out": str(out),
    }
