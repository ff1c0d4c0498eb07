"""MDS shards written by engine tasks, in the bytes of mosaicml-streaming's ``MDSWriter``.

The MDS export (:mod:`clusterclip.adapters.mds`) writes what ``MDSWriter(columns=
MDS_COLUMNS, compression=..., size_limit=...)`` writes when it is given the
samples one by one (mosaicml-streaming 0.13, read from its source), but in
parallel:

* a *sample* is its text's byte size (uint32), then the columns in name order:
  ``index`` and ``position`` (int64) and the text (UTF-8);
* a *shard* is the sample count (uint32), the ``count + 1`` offsets of the
  samples (uint32, from the file's start), the writer's configuration as JSON
  (sorted keys), then the samples; ``shard.NNNNN.mds``, and its compressed copy
  ``shard.NNNNN.mds.<ext>`` instead when ``compression`` is set;
* the writer cuts a new shard *before* a sample that would take the open shard
  past ``size_limit``, counting 8 bytes plus the configuration per shard and
  4 bytes per sample beyond the samples' own (:class:`ShardCuts`). So a shard
  may hold one sample larger than the limit, and a first sample larger than the
  limit comes after an empty shard.

Every cut depends only on the sizes of the samples, which the driver knows from
the texts' byte lengths: it cuts the shards, and each task (:class:`ShardWorker`)
writes whole shards, named by their global number, at once (a retried task
rewrites the same files). ``tests/clients/mds_check.py`` compares the files with
``MDSWriter``'s, byte for byte.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MDS_COLUMNS",
    "SHARD_TASK_BYTES",
    "ShardCuts",
    "ShardWorker",
    "mds_config",
    "sample_sizes",
    "shard_tasks",
]

#: MDS column encodings of a sample.
MDS_COLUMNS = {"text": "str", "index": "int64", "position": "int64"}
#: Bytes of a sample besides its text: the text's size (uint32), ``index`` and ``position``.
_FIXED = np.dtype([("size", np.uint32), ("index", np.int64), ("position", np.int64)])
#: What the writer counts for a sample beyond its bytes (its offset in the shard header).
_PER_SAMPLE = 4
#: Sample bytes one shard task writes, about (a speed knob only: the bytes do not depend on it).
SHARD_TASK_BYTES = 1 << 28


def mds_config(compression: str | None, size_limit: int) -> dict[str, Any]:
    """The configuration ``MDSWriter`` records in every shard and in ``index.json``.

    >>> sorted(mds_config(None, 1 << 26))[:3]
    ['column_encodings', 'column_names', 'column_sizes']
    """
    names = sorted(MDS_COLUMNS)
    encodings = [MDS_COLUMNS[name] for name in names]
    return {
        "version": 2,
        "format": "mds",
        "compression": compression,
        "hashes": [],
        "size_limit": size_limit,
        "column_names": names,
        "column_encodings": encodings,
        "column_sizes": [None if e == "str" else 8 for e in encodings],
    }


def _config_bytes(config: dict[str, Any]) -> bytes:
    return json.dumps(config, sort_keys=True).encode("utf-8")


def sample_sizes(text_bytes: np.ndarray) -> np.ndarray:
    """What the writer counts for samples whose texts take ``text_bytes`` bytes (int64).

    >>> sample_sizes(np.array([0, 5])).tolist()
    [24, 29]
    """
    return np.asarray(text_bytes, dtype=np.int64) + (_FIXED.itemsize + _PER_SAMPLE)


class ShardCuts:
    """``MDSWriter``'s shard boundaries, fed the sample sizes block by block.

    Parameters
    ----------
    size_limit : int
    config : dict
        :func:`mds_config` (its JSON counts in every shard).

    Attributes
    ----------
    shards : list of (int, int, int)
        The cut shards so far: first and end position, and the bytes the writer
        counted for each (its samples' sizes plus the shard's own).

    Examples
    --------
    >>> cuts = ShardCuts(260, mds_config(None, 260))
    >>> cuts.base  # what a shard counts of its own: 8 bytes and the configuration
    217
    >>> cuts.add(np.array([10, 10]))
    >>> cuts.add(np.array([30, 10]))  # 217 + 10 + 10 + 30 > 260: a new shard before the 30
    >>> cuts.finish()
    [(0, 2, 237), (2, 4, 257)]
    >>> cuts = ShardCuts(1, mds_config(None, 1))  # a first sample over the limit: an empty shard
    >>> cuts.add(np.array([30, 5]))
    >>> cuts.finish()
    [(0, 0, 215), (0, 1, 245), (1, 2, 220)]
    """

    def __init__(self, size_limit: int, config: dict[str, Any]) -> None:
        self.limit = int(size_limit)
        self.base = 8 + len(_config_bytes(config))
        self.shards: list[tuple[int, int, int]] = []
        self._first = 0  # the open shard's first position
        self._size = self.base  # and the bytes the writer counts for it
        self._position = 0  # the next sample's position

    def add(self, sizes: np.ndarray) -> None:
        """The next samples' sizes (:func:`sample_sizes`), in schedule order."""
        sizes = np.asarray(sizes, dtype=np.int64)
        ends = np.cumsum(sizes)  # bytes of samples i..j: ends[j] - before
        i, n = 0, sizes.size
        while i < n:
            before = int(ends[i - 1]) if i else 0
            # samples i.. fit while the open shard stays within the limit; the first
            # that does not closes it (before it is added) and opens the next shard
            j = int(np.searchsorted(ends, self.limit - self._size + before, side="right"))
            j = max(j, i)  # an open shard already past the limit (one large sample) closes
            if j >= n:
                self._size += int(ends[-1]) - before
                break
            self._size += (int(ends[j - 1]) if j else 0) - before
            self.shards.append((self._first, self._position + j, self._size))
            self._first = self._position + j
            self._size = self.base + int(sizes[j])
            i = j + 1
        self._position += n

    def finish(self) -> list[tuple[int, int, int]]:
        """Every shard, the open one closed (the writer's ``finish``)."""
        if self._position > self._first:
            self.shards.append((self._first, self._position, self._size))
            self._first = self._position
            self._size = self.base
        return self.shards


def shard_tasks(
    shards: list[tuple[int, int, int]],
) -> Iterator[tuple[int, tuple[int, list[tuple[int, int]]]]]:
    """Runs of consecutive shards of about :data:`SHARD_TASK_BYTES` each, as engine tasks.

    Yields ``(task, (first shard number, [(first, end position) of each shard]))``.

    >>> list(shard_tasks([(0, 2, 10), (2, 5, 10)]))
    [(0, (0, [(0, 2), (2, 5)]))]
    """
    task, first, run, held = 0, 0, [], 0
    for number, (low, high, size) in enumerate(shards):
        run.append((low, high))
        held += size
        if held >= SHARD_TASK_BYTES:
            yield task, (first, run)
            task, first, run, held = task + 1, number + 1, [], 0
    if run:
        yield task, (first, run)


class ShardWorker:
    """Writes whole MDS shards (an engine task).

    Pass ``functools.partial(ShardWorker, schedule, spans, texts, folder,
    compression, size_limit)`` (the paths of ``schedule.npy``, of the documents'
    ``(N, 2)`` byte spans in the text cache and of that cache, the output folder,
    and the writer's settings) to :func:`clusterclip.engines.map_shards`; each
    payload comes from :func:`shard_tasks`. Returns each shard's entry of
    ``index.json``, in order.
    """

    def __init__(
        self,
        schedule: str,
        spans: str,
        texts: str,
        folder: str,
        compression: str | None,
        size_limit: int,
    ) -> None:
        self.indices = np.load(schedule, mmap_mode="r")
        self.spans = np.load(spans, mmap_mode="r")
        size = os.path.getsize(texts)
        self.texts = np.memmap(texts, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        self.folder = Path(folder)
        self.compression = compression
        self.config = mds_config(compression, size_limit)
        self.config_data = _config_bytes(self.config)
        self._compress = None
        self._extension = None
        if compression:  # streaming's own codecs, so the compressed bytes are its own
            from streaming.base.compression import compress, get_compression_extension

            self._compress = compress
            self._extension = get_compression_extension(compression)

    def __call__(self, task: tuple[int, list[tuple[int, int]]]) -> list[dict[str, Any]]:
        number, runs = task
        entries = []
        for offset, (low, high) in enumerate(runs):
            raw = self._shard(low, high)
            entries.append(self._write(number + offset, raw, high - low))
        return entries

    def _shard(self, low: int, high: int) -> bytes:
        """The uncompressed bytes of the shard of positions ``low .. high - 1``."""
        documents = np.asarray(self.indices[low:high], dtype=np.int64)
        spans = np.take(self.spans, documents, axis=0).reshape(-1, 2)
        lengths = spans[:, 1] - spans[:, 0]
        fixed = np.empty(documents.size, dtype=_FIXED)
        fixed["size"] = lengths
        fixed["index"] = documents
        fixed["position"] = np.arange(low, high, dtype=np.int64)
        sizes = lengths + _FIXED.itemsize
        head = 4 + 4 * (documents.size + 1) + len(self.config_data)
        offsets = np.zeros(documents.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        offsets += head
        body = bytearray(int(offsets[-1]))
        texts = memoryview(self.texts)
        body[:head] = (
            np.uint32(documents.size).tobytes()
            + offsets.astype(np.uint32).tobytes()
            + self.config_data
        )
        record = fixed.tobytes()
        step = _FIXED.itemsize
        for i, (at, (begin, end)) in enumerate(
            zip(offsets[:-1].tolist(), spans.tolist(), strict=True)
        ):
            body[at : at + step] = record[i * step : (i + 1) * step]
            body[at + step : at + step + end - begin] = texts[begin:end]
        return bytes(body)

    def _write(self, number: int, raw: bytes, samples: int) -> dict[str, Any]:
        """Write shard ``number`` (compressed if asked) atomically; its ``index.json`` entry."""
        raw_name = f"shard.{number:05}.mds"
        raw_info = {"basename": raw_name, "bytes": len(raw), "hashes": {}}
        zip_info, data, name = None, raw, raw_name
        if self._compress is not None:
            data = self._compress(self.compression, raw)
            name = f"{raw_name}.{self._extension}"
            zip_info = {"basename": name, "bytes": len(data), "hashes": {}}
        tmp = self.folder / f".{name}.tmp-{os.getpid()}"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, self.folder / name)
        return {"samples": samples, "raw_data": raw_info, "zip_data": zip_info, **self.config}
