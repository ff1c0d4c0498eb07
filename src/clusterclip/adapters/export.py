"""Export a schedule for trainers that read files: ordered jsonl shards and a sample index.

Ordered jsonl
    :func:`export_ordered_jsonl` writes the *original* records (the exact input
    line for jsonl sources, the row as JSON for parquet) in schedule order, one
    record per line, ``shard_size`` lines per ``part-NNNNN.jsonl``, plus an
    ``index.json``. A trainer that reads files sequentially (no shuffling) then
    sees exactly the ClusterClip order.

    The schedule jumps around the corpus, and compressed inputs cannot be
    seeked, so the export first builds a **record store** once per work
    directory: ``W/records/records.bin`` (every record's bytes, back to back,
    read from the sources in one streaming pass) and ``W/records/offsets.npy``
    (int64 ``(N, 2)``: start and stop byte of document ``i``). Both are then
    memory-mapped and the schedule is streamed in blocks, so memory stays
    bounded (``O(N)`` for the offsets, nothing per draw) whatever the corpus
    and schedule size. The store is rebuilt when ``documents.parquet`` changes.

Sample index
    :func:`export_sample_index` writes the schedule as a flat int64 ``.npy`` of
    document indices in training order (Megatron-LM / GPT-NeoX style), with a
    JSON sidecar. See ``docs/adapters.md`` for wiring it into those pipelines.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.progress import progress_bar

__all__ = ["build_record_store", "export_ordered_jsonl", "export_sample_index"]

STORE_DIR = "records"
_BLOCK = 1 << 16


def _schedule(workdir: Path) -> np.ndarray:
    from clusterclip.report.data import load_schedule_indices

    indices, _meta = load_schedule_indices(workdir)
    return indices


@contextmanager
def _open_binary_lines(path: Path) -> Iterator[IO[bytes]]:
    name = path.name
    if name.endswith(".gz"):
        with gzip.open(path, "rb") as handle:
            yield handle
    elif name.endswith(".zst"):
        zstandard = require_extra("zstandard", "io")
        with open(path, "rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            with io.BufferedReader(reader) as handle:
                yield handle
    else:
        with open(path, "rb") as handle:
            yield handle


def _iter_source(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number as the embed stage counts it, record bytes) for one source file."""
    if path.name.endswith(".parquet"):
        pq = require_extra("pyarrow.parquet", "io")
        row = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            for record in batch.to_pylist():
                yield row, json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
                row += 1
        return
    with _open_binary_lines(path) as handle:
        for line, data in enumerate(handle, start=1):
            yield line, data.rstrip(b"\r\n")


def _resolve_source(source: str, workdir: Path) -> Path:
    path = Path(source)
    for candidate in (path, workdir / path, workdir.parent / path):
        if candidate.exists():
            return candidate
    if source == "<dataset>":
        raise ClusterClipError(
            "the corpus was a Hugging Face Dataset object, so its records cannot be re-read "
            "from files. Use clusterclip.adapters.hf.apply_schedule(dataset, schedule) instead, "
            "or save the dataset to parquet and embed the files."
        )
    raise ClusterClipError(
        f"source file {source} (recorded in documents.parquet) not found. Run the export from "
        "the directory you embedded from, or restore the file."
    )


def build_record_store(workdir: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Build (or reuse) the memory-mapped record store of a work directory.

    Returns
    -------
    (records, offsets) : (memmap uint8, memmap int64 of shape (N, 2))
        Document ``i`` is ``records[offsets[i, 0]:offsets[i, 1]]``.

    >>> records, offsets = build_record_store("work")  # doctest: +SKIP
    >>> bytes(records[offsets[0, 0]:offsets[0, 1]])  # doctest: +SKIP
    b'{"id": "Genesis 1:1", ...}'
    """
    from clusterclip.io import atomic_path, atomic_write_json, fingerprint_file

    workdir = Path(workdir)
    documents_path = workdir / "documents.parquet"
    if not documents_path.exists():
        raise ClusterClipError(
            f"{documents_path} not found. Run `clusterclip embed` (or `clusterclip run`) first."
        )
    store = workdir / STORE_DIR
    meta_path = store / "records.json"
    fingerprint = fingerprint_file(documents_path)
    if meta_path.exists():
        meta = json.loads(meta_path.read_text("utf-8"))
        if meta.get("documents") == fingerprint and (store / "offsets.npy").exists():
            return _open_store(store)

    pq = require_extra("pyarrow.parquet", "io")
    table = pq.read_table(documents_path, columns=["index", "source", "line"])
    index = table.column("index").to_numpy().astype(np.int64)
    lines = table.column("line").to_numpy().astype(np.int64)
    sources = np.asarray(table.column("source").to_pylist(), dtype=object)
    n = int(index.max()) + 1 if len(index) else 0
    offsets = np.full((n, 2), -1, dtype=np.int64)
    order_of_sources = list(dict.fromkeys(sources.tolist()))
    store.mkdir(parents=True, exist_ok=True)
    with (
        atomic_path(store / "records.bin") as tmp,
        open(tmp, "wb") as out,
        progress_bar(total=n, desc="record store", unit="doc") as bar,
    ):
        position = 0
        for source in order_of_sources:
            members = np.flatnonzero(sources == source)
            members = members[np.argsort(lines[members], kind="stable")]
            wanted_lines, wanted_index = lines[members], index[members]
            cursor = 0
            for line, data in _iter_source(_resolve_source(source, workdir)):
                if cursor == len(wanted_lines):
                    break
                if line != wanted_lines[cursor]:
                    continue
                out.write(data)
                offsets[wanted_index[cursor]] = (position, position + len(data))
                position += len(data)
                cursor += 1
                bar.update(1)
            if cursor != len(wanted_lines):
                raise ClusterClipError(
                    f"{source} has changed since it was embedded: line {wanted_lines[cursor]} "
                    "is missing. Rerun `clusterclip run` (it re-embeds changed inputs)."
                )
    with atomic_path(store / "offsets.npy") as tmp, open(tmp, "wb") as handle:
        np.save(handle, offsets)
    atomic_write_json(meta_path, {"documents": fingerprint, "n_documents": n})
    return _open_store(store)


def _open_store(store: Path) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.load(store / "offsets.npy", mmap_mode="r")
    size = (store / "records.bin").stat().st_size
    records = (
        np.memmap(store / "records.bin", dtype=np.uint8, mode="r")
        if size
        else np.zeros(0, dtype=np.uint8)
    )
    return records, offsets


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
        Work directory with ``documents.parquet`` and ``schedule.npy``; the
        source files recorded in ``documents.parquet`` must still be readable.
    out : path
        Output directory; receives ``part-00000.jsonl``, ... and ``index.json``.
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
    from clusterclip.io import atomic_path, atomic_write_json, fingerprint_file

    if not isinstance(shard_size, int) or isinstance(shard_size, bool) or shard_size < 1:
        raise invalid("shard_size", "an int in [1, inf)", shard_size, "Pass shard_size=100000.")
    workdir, out = Path(workdir), Path(out)
    indices = _schedule(workdir)
    records, offsets = build_record_store(workdir)
    if len(indices) and int(indices.max()) >= len(offsets):
        raise ClusterClipError(
            f"schedule.npy in {workdir} refers to documents beyond documents.parquet "
            f"({int(indices.max())} >= {len(offsets)}). Rebuild the schedule with `clusterclip run`."
        )
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("part-*.jsonl"):
        stale.unlink()
    shards: list[Path] = []
    total = len(indices)
    with progress_bar(total=total, desc="export jsonl", unit="doc") as bar:
        for shard_number, first in enumerate(range(0, total, shard_size)):
            path = out / f"part-{shard_number:05d}.jsonl"
            last = min(first + shard_size, total)
            with atomic_path(path) as tmp, open(tmp, "wb", buffering=1 << 20) as handle:
                for start in range(first, last, _BLOCK):
                    block = np.asarray(indices[start : min(start + _BLOCK, last)])
                    spans = offsets[block]
                    if (spans[:, 0] < 0).any():
                        missing = int(block[np.flatnonzero(spans[:, 0] < 0)[0]])
                        raise ClusterClipError(
                            f"document {missing} is scheduled but has no record in the store. "
                            f"Delete {workdir / STORE_DIR} and export again."
                        )
                    for begin, stop in spans:
                        handle.write(records[begin:stop].tobytes())
                        handle.write(b"\n")
                    bar.update(len(block))
            shards.append(path)
    atomic_write_json(
        out / "index.json",
        {
            "format": "ordered-jsonl",
            "n_records": total,
            "shard_size": shard_size,
            "shards": [
                {
                    "file": p.name,
                    "first_position": i * shard_size,
                    "n_records": min(shard_size, total - i * shard_size),
                }
                for i, p in enumerate(shards)
            ],
            "schedule": fingerprint_file(workdir / "schedule.npy"),
            "workdir": str(workdir),
        },
    )
    return shards


def export_sample_index(workdir: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write the schedule as a Megatron-style sample index: flat int64 ``.npy``.

    Parameters
    ----------
    workdir : path
        Work directory with ``schedule.npy``.
    out : path
        A ``.npy`` file name, or a directory (``sample_index.npy`` inside).

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
    from clusterclip.io import atomic_path, atomic_write_json, fingerprint_file

    workdir, out = Path(workdir), Path(out)
    indices = _schedule(workdir)
    if out.suffix != ".npy":
        out = out / "sample_index.npy"
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        # open_memmap streams the copy: the schedule is never fully in memory twice.
        target = np.lib.format.open_memmap(tmp, mode="w+", dtype="<i8", shape=(len(indices),))
        for start in range(0, len(indices), 1 << 22):
            target[start : start + (1 << 22)] = indices[start : start + (1 << 22)]
        target.flush()
        del target
    n_documents = _n_documents(workdir)
    atomic_write_json(
        out.with_suffix(".json"),
        {
            "format": "sample-index",
            "dtype": "int64",
            "n_samples": len(indices),
            "n_documents": n_documents,
            "meaning": "index[j] = 0-based document index (embed input order) of training sample j",
            "schedule": fingerprint_file(workdir / "schedule.npy"),
        },
    )
    return out


def _n_documents(workdir: Path) -> Any:
    path = workdir / "documents.parquet"
    if not path.exists():
        return None
    pq = require_extra("pyarrow.parquet", "io")
    return pq.ParquetFile(path).metadata.num_rows
