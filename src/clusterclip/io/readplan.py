"""Read tasks over the corpus: ranges from metadata, counts from the engine, shard tasks.

Every stage that reads the corpus on the engine plans it here (the embed
stage to embed it, the dedup stage to hash its texts); the driver never reads
a record. It plans in three steps:

1. **ranges** (:func:`clusterclip.io.ranges.plan_ranges`): the corpus cut into
   byte ranges, row groups and whole compressed files, from file metadata;
2. **counts**: the ranges whose record count is not metadata (jsonl) are
   counted by :class:`CountWorker` tasks on the engine; each reports
   ``(lines, records)``. Global document indices follow from these counts by
   prefix sums, in input order, so they are deterministic whatever ran the counts;
3. **shards**: shard ``s`` is documents ``[s * shard_size, (s + 1) * shard_size)``;
   :meth:`ReadPlan.shards` describes each as the pieces of ranges that hold
   those documents (a :class:`ShardTask`: a few integers and file names). The
   task reads its records itself (:func:`shard_records`), e.g.
   :class:`~clusterclip.embed.worker.ShardWorker`, which embeds and writes them.

Because the embed stage's shards are cut by global index exactly as before, the
files a shard task writes (``.embed-state/index-NNNNN.parquet``,
``embeddings/part-NNNNN.npy``) are the ones the stage has always written, and a
run interrupted by an earlier version resumes shard by shard.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.engines import RayOptions, map_shards
from clusterclip.io.ranges import Piece, ReadRange, count_range, plan_ranges, read_pieces
from clusterclip.io.readers import RecordStream

__all__ = [
    "CountWorker",
    "ReadPlan",
    "ReadStats",
    "ShardTask",
    "corpus_plan",
    "plan_reads",
    "shard_records",
]


@dataclass(frozen=True)
class ShardTask:
    """One embed task: shard ``shard`` holds documents ``first_index .. first_index + rows``.

    ``write=False``: the shard is finished; the task reads its statistics
    (:class:`ReadStats`) back from its fragment, and embeds and writes nothing
    (a fragment written before the statistics were kept there: the task reads
    the shard's records again to count them).
    """

    shard: int
    first_index: int
    rows: int
    pieces: tuple[Piece, ...]
    write: bool = True


@dataclass
class ReadStats:
    """What reading the corpus found, summed over the shard tasks in shard order.

    The attributes of :class:`~clusterclip.io.readers.RecordStream` the stage
    reports (``counts``, ``examples``, ``blank_lines``, ``text_fields``, ...).
    """

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    text_fields: Counter[str] = field(default_factory=Counter)
    blank_lines: int = 0
    replaced_utf8_lines: int = 0
    first_replaced_utf8: str | None = None

    def add(self, other: ReadStats) -> None:
        """Add the next shard's statistics (the first example of a status stays the first)."""
        self.counts.update(other.counts)
        self.text_fields.update(other.text_fields)
        for status, example in other.examples.items():
            self.examples.setdefault(status, example)
        self.blank_lines += other.blank_lines
        self.replaced_utf8_lines += other.replaced_utf8_lines
        self.first_replaced_utf8 = self.first_replaced_utf8 or other.first_replaced_utf8

    def to_dict(self) -> dict[str, Any]:
        """The statistics as JSON-able values (orders kept), for :meth:`from_dict`.

        >>> stats = ReadStats(counts=Counter(ok=3, empty=1), blank_lines=2)
        >>> ReadStats.from_dict(stats.to_dict()) == stats
        True
        """
        return {
            "counts": dict(self.counts),
            "examples": dict(self.examples),
            "text_fields": dict(self.text_fields),
            "blank_lines": self.blank_lines,
            "replaced_utf8_lines": self.replaced_utf8_lines,
            "first_replaced_utf8": self.first_replaced_utf8,
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ReadStats:
        """The statistics :meth:`to_dict` gave."""
        return cls(
            counts=Counter(values["counts"]),
            examples=dict(values["examples"]),
            text_fields=Counter(values["text_fields"]),
            blank_lines=int(values["blank_lines"]),
            replaced_utf8_lines=int(values["replaced_utf8_lines"]),
            first_replaced_utf8=values["first_replaced_utf8"],
        )


class CountWorker:
    """Counts the lines and records of read ranges (the engine's worker of the count step).

    Parameters
    ----------
    dataset : datasets.Dataset, optional
        The corpus when it is a Hugging Face dataset (shipped once per process).
    """

    def __init__(self, dataset: Any = None) -> None:
        self.dataset = dataset

    def __call__(self, read_range: ReadRange) -> tuple[int, int]:
        return count_range(read_range, self.dataset)


@dataclass
class ReadPlan:
    """Read ranges with their counts: where every document of the corpus is.

    Attributes
    ----------
    ranges : list of ReadRange
        In input order.
    lines, records : numpy.ndarray
        int64 ``(n_ranges,)``: lines (jsonl; blank ones too) and records per range.
    """

    ranges: list[ReadRange]
    lines: np.ndarray
    records: np.ndarray

    @property
    def n_records(self) -> int:
        """Records in the corpus (documents of ``documents.parquet``)."""
        return int(self.records.sum())

    @property
    def blank_lines(self) -> int:
        """Whitespace-only jsonl lines, which are not records."""
        return int((self.lines - self.records).sum())

    def first_lines(self) -> np.ndarray:
        """int64 ``(n_ranges,)``: the file line (jsonl, 1-based) or row (0-based) each range starts at."""
        first = np.zeros(len(self.ranges), dtype=np.int64)
        line, previous = 0, None
        for number, read_range in enumerate(self.ranges):
            if read_range.kind in ("parquet", "dataset"):
                first[number] = read_range.first_row
                continue
            if read_range.source != previous:
                line, previous = 1, read_range.source
            first[number] = line
            line += int(self.lines[number])
        return first

    def whole_pieces(self) -> list[Piece]:
        """Every range read whole, in input order: the whole corpus (for the TF-IDF fit)."""
        first_lines = self.first_lines()
        return [
            Piece(read_range, int(first_lines[number]), 0, int(self.records[number]))
            for number, read_range in enumerate(self.ranges)
            if self.records[number]
        ]

    def shards(self, shard_size: int) -> Iterator[ShardTask]:
        """Every shard of ``shard_size`` documents as the range pieces that hold it, in order."""
        ends = np.cumsum(self.records)
        starts = ends - self.records
        first_lines = self.first_lines()
        for shard, low in enumerate(range(0, self.n_records, shard_size)):
            high = min(low + shard_size, self.n_records)
            pieces = []
            number = int(np.searchsorted(ends, low, side="right"))
            while number < len(self.ranges) and starts[number] < high:
                begin, end = max(low, int(starts[number])), min(high, int(ends[number]))
                if end > begin:
                    skip = begin - int(starts[number])
                    pieces.append(
                        Piece(self.ranges[number], int(first_lines[number]), skip, end - begin)
                    )
                number += 1
            yield ShardTask(shard, low, high - low, tuple(pieces))


def plan_reads(
    paths: list[Path],
    *,
    dataset: Any = None,
    engine: str = "local",
    options: RayOptions | None = None,
    range_bytes: int | None = None,
) -> ReadPlan:
    """Plan the corpus's read ranges and count the ones metadata does not, on ``engine``.

    Parameters
    ----------
    paths : list of Path
        Corpus files in input order (:func:`~clusterclip.io.readers.expand_inputs`).
    dataset : datasets.Dataset, optional
        The corpus when it is a Hugging Face dataset (``paths`` empty).
    engine, options
        Where the counting tasks run (:func:`clusterclip.engines.map_shards`).
    range_bytes : int, optional
        Bytes of uncompressed jsonl per range (default
        :data:`~clusterclip.io.ranges.DEFAULT_RANGE_BYTES`).

    Returns
    -------
    ReadPlan
        Deterministic: the counts do not depend on the engine or the order tasks finish.
    """
    ranges = plan_ranges(paths, dataset=dataset, range_bytes=range_bytes)
    lines = np.zeros(len(ranges), dtype=np.int64)
    records = np.zeros(len(ranges), dtype=np.int64)
    unknown = []
    for number, read_range in enumerate(ranges):
        if read_range.rows is None:
            unknown.append((number, read_range))
        else:
            lines[number] = records[number] = read_range.rows
    worker = functools.partial(CountWorker, dataset)
    for number, (n_lines, n_records) in map_shards(unknown, worker, engine=engine, options=options):
        lines[number], records[number] = n_lines, n_records
    return ReadPlan(ranges, lines, records)


def shard_records(
    task: ShardTask, read_options: Mapping[str, Any], dataset: Any = None
) -> RecordStream:
    """The records of ``task``'s documents, judged as a stream over the whole corpus judges them.

    Parameters
    ----------
    task : ShardTask
        Documents ``task.first_index ..`` and the range pieces that hold them.
    read_options : mapping
        ``text_field``, ``id_field`` and ``strict`` of the reader.
    dataset : datasets.Dataset, optional
        The corpus when it is a Hugging Face dataset.

    Returns
    -------
    RecordStream
        Its records carry their global indices; its counts are the task's.

    Examples
    --------
    >>> plan = plan_reads([Path("corpus.jsonl")])  # doctest: +SKIP
    >>> task = next(plan.shards(1000))  # doctest: +SKIP
    >>> [r.index for r in shard_records(task, {"text_field": None, "id_field": None,
    ...                                         "strict": False})][:2]  # doctest: +SKIP
    [0, 1]
    """

    def raw(stream: RecordStream) -> Iterator[Any]:
        return read_pieces(stream, task.pieces, dataset)

    return RecordStream(None, **read_options, start=task.first_index, raw=raw)


def corpus_plan(
    work: Any, *, engine: str = "local", options: RayOptions | None = None
) -> tuple[ReadPlan, dict[str, Any]]:
    """The read plan of a work directory's embedded corpus, checked, and its read options.

    For the stages that read the corpus again (dedup's hashes, the report's
    keywords, token exports). The files are checked unchanged first
    (:meth:`~clusterclip.io.WorkDir.corpus_files`), before anything is counted
    or written; a corpus that now holds another number of records than were
    embedded is refused.

    >>> plan, read_options = corpus_plan(WorkDir("work"))  # doctest: +SKIP
    >>> plan.n_records == WorkDir("work").n_documents()  # doctest: +SKIP
    True
    """
    from clusterclip.errors import ClusterClipError

    # absolute: a task may run in another folder, or on another node
    paths = [Path(path).resolve() for path in work.corpus_files()]
    plan = plan_reads(paths, engine=engine, options=options)
    expected = work.n_documents()
    if plan.n_records != expected:
        raise ClusterClipError(
            f"the corpus of {work.path} yields {plan.n_records:,} records but {expected:,} "
            "were embedded. Restore the corpus files or re-embed them."
        )
    config = work.require("embed").get("config", {})
    read_options = {
        "text_field": config.get("text_field"), "id_field": config.get("id_field"),
        "strict": False,
    }  # fmt: skip
    return plan, read_options
