"""Export a schedule for trainers that read files: ordered jsonl shards and a sample index.

Ordered jsonl
    :func:`export_ordered_jsonl` writes the *original* records (the exact input
    line for jsonl sources, the row as JSON for parquet) in schedule order, one
    record per line, ``shard_size`` lines per ``part-NNNNN.jsonl``, plus an
    ``index.json``. A trainer that reads files sequentially (no shuffling) then
    sees exactly the ClusterClip order. Every line is a JSON object in UTF-8
    that strict readers (``datasets.load_dataset("json")``) load: a source line
    with a byte order mark, invalid UTF-8, a carriage return or ``NaN`` is
    mended in the record store (:func:`clusterclip.io.jsonlines.clean_line`),
    said on stderr and in ``index.json`` (``mended_records``); clean lines are
    copied byte for byte.

    The schedule jumps around the corpus, and compressed inputs cannot be
    seeked, so the export first builds a **record store** once per work
    directory: ``W/records/records.bin`` (every record's bytes, back to back,
    read from the sources in one streaming pass) and ``W/records/offsets.npy``
    (int64 ``(N, 2)``: start and stop byte of document ``i``). Both are then
    memory-mapped and the schedule is streamed in blocks, so memory stays
    bounded (``O(N)`` for the offsets, nothing per draw) whatever the corpus
    and schedule size. The store is owned by
    :meth:`clusterclip.io.WorkDir.record_store`: it is rebuilt when
    ``documents.parquet`` changes, and every corpus file is checked unchanged
    since it was embedded first, so a shifted or edited corpus is refused
    instead of exported as the wrong documents.

Sample index
    :func:`export_sample_index` writes the schedule as a flat int64 ``.npy`` of
    document indices in training order (Megatron-LM / GPT-NeoX style), with a
    JSON sidecar. See ``docs/adapters.md`` for wiring it into those pipelines.

Both write into a new or empty ``out`` that appears whole or not at all
(:mod:`clusterclip.adapters.output`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from clusterclip.adapters.output import check_export_folder, export_folder, new_files
from clusterclip.errors import ClusterClipError, hint, invalid
from clusterclip.io import (
    ScheduleFile,
    WorkDir,
    atomic_path,
    atomic_write_json,
    fingerprint_file,
)
from clusterclip.io.jsonlines import describe_mended
from clusterclip.progress import progress_bar

__all__ = ["build_record_store", "export_ordered_jsonl", "export_sample_index"]

_BLOCK = 1 << 16


def build_record_store(workdir: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Build (or reuse) the memory-mapped record store of a work directory.

    A thin wrapper over :meth:`clusterclip.io.WorkDir.record_store`, which checks
    that every corpus file is unchanged since it was embedded first.

    Returns
    -------
    (records, offsets) : (memmap uint8, memmap int64 of shape (N, 2))
        Document ``i`` is ``records[offsets[i, 0]:offsets[i, 1]]``.

    >>> records, offsets = build_record_store("work")  # doctest: +SKIP
    >>> bytes(records[offsets[0, 0]:offsets[0, 1]])  # doctest: +SKIP
    b'{"id": "Genesis 1:1", ...}'
    """
    return WorkDir(workdir).record_store()


def export_ordered_jsonl(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    shard_size: int = 100_000,
) -> list[Path]:
    """Write the original records in schedule order as jsonl shards.

    Parameters
    ----------
    workdir : path
        Work directory with a schedule; the corpus files it embedded must be
        unchanged (a moved, edited or truncated file is refused, nothing written).
    out : path
        Output directory, new or empty; receives ``part-00000.jsonl``, ... and
        ``index.json``, all at once (nothing when the export fails).
    shard_size : int
        Records per shard (the last one may hold fewer).

    Returns
    -------
    list of pathlib.Path
        The shard files, in order. Line ``j`` of the concatenation is the record
        at schedule position ``j``; repeated documents are written again.

    Examples
    --------
    >>> export_ordered_jsonl("work", "ordered", shard_size=50_000)  # doctest: +SKIP
    [PosixPath('ordered/part-00000.jsonl'), PosixPath('ordered/part-00001.jsonl')]
    """
    if not isinstance(shard_size, int) or isinstance(shard_size, bool) or shard_size < 1:
        raise invalid(
            "shard_size", "an int in [1, inf)", shard_size, f"Pass {hint('shard_size', 100_000)}."
        )
    work, out = WorkDir(workdir), check_export_folder(out)
    schedule = work.schedule()
    indices = schedule.indices
    records, offsets = work.record_store()
    if len(indices) and int(indices.max()) >= len(offsets):
        raise ClusterClipError(
            f"{schedule.path} refers to documents beyond the {len(offsets)} embedded ones "
            f"({int(indices.max())} >= {len(offsets)}). Rebuild the schedule with `clusterclip run`."
        )
    mended = work.mended_records()
    if mended:
        print(f"export ordered-jsonl: {describe_mended(mended)}", file=sys.stderr, flush=True)
    names: list[str] = []
    total = len(indices)
    with (
        export_folder(out) as folder,
        progress_bar(total=total, desc="export jsonl", unit="doc") as bar,
    ):
        for shard_number, first in enumerate(range(0, total, shard_size)):
            names.append(f"part-{shard_number:05d}.jsonl")
            last = min(first + shard_size, total)
            with open(folder / names[-1], "wb", buffering=1 << 20) as handle:
                for start in range(first, last, _BLOCK):
                    block = np.asarray(indices[start : min(start + _BLOCK, last)])
                    spans = offsets[block]
                    if (spans[:, 0] < 0).any():
                        missing = int(block[np.flatnonzero(spans[:, 0] < 0)[0]])
                        raise ClusterClipError(
                            f"document {missing} is scheduled but has no record in the store. "
                            f"Delete {work.path_of('records')} and export again."
                        )
                    for begin, stop in spans:
                        handle.write(records[begin:stop].tobytes())
                        handle.write(b"\n")
                    bar.update(len(block))
        index = {
            "format": "ordered-jsonl",
            "n_records": total,
            "shard_size": shard_size,
            "shards": [
                {
                    "file": name,
                    "first_position": i * shard_size,
                    "n_records": min(shard_size, total - i * shard_size),
                }
                for i, name in enumerate(names)
            ],
            "schedule": fingerprint_file(schedule.path),
            "workdir": str(work.path),
        }
        if mended:  # said only when it happened: a clean corpus keeps its bytes
            index["mended_records"] = mended
        atomic_write_json(folder / "index.json", index)
    return [out / name for name in names]


def export_sample_index(workdir: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write the schedule as a Megatron-style sample index: flat int64 ``.npy``.

    Parameters
    ----------
    workdir : path
        Work directory with ``schedule.npy``.
    out : path
        A ``.npy`` file name (it and its ``.json`` must not exist yet), or a new
        or empty directory (``sample_index.npy`` inside).

    Returns
    -------
    pathlib.Path
        The ``.npy`` written: ``index[j]`` is the document (0-based, input
        order of the embed stage) the trainer sees at sample ``j``. A sidecar
        ``<name>.json`` records the length, document count and schedule fingerprint.

    Examples
    --------
    >>> path = export_sample_index("work", "megatron/")  # doctest: +SKIP
    >>> np.load(path, mmap_mode="r")[:3]  # doctest: +SKIP
    memmap([1841,  302, 77810])
    """
    work, out = WorkDir(workdir), Path(out)
    schedule = work.schedule()
    if out.suffix != ".npy":
        with export_folder(out) as folder:
            _write_sample_index(work, schedule, folder / "sample_index.npy")
        return out / "sample_index.npy"
    with new_files(out, out.with_suffix(".json")):
        _write_sample_index(work, schedule, out)
    return out


def _write_sample_index(work: WorkDir, schedule: ScheduleFile, out: Path) -> None:
    """The ``.npy`` (streamed from the memory-mapped schedule) and its ``.json`` sidecar."""
    indices = schedule.indices
    with atomic_path(out) as tmp:
        # open_memmap streams the copy: the schedule is never fully in memory twice.
        target = np.lib.format.open_memmap(tmp, mode="w+", dtype="<i8", shape=(len(indices),))
        for start in range(0, len(indices), 1 << 22):
            target[start : start + (1 << 22)] = indices[start : start + (1 << 22)]
        target.flush()
        del target
    n_documents = work.n_documents() if work.exists("documents") else None
    atomic_write_json(
        out.with_suffix(".json"),
        {
            "format": "sample-index",
            "dtype": "int64",
            "n_samples": len(indices),
            "n_documents": n_documents,
            "meaning": "index[j] = 0-based document index (embed input order) of training sample j",
            "schedule": fingerprint_file(schedule.path),
        },
    )
