"""What the exports that store samples by value (MDS, LitData) share.

Both formats hold every training sample as bytes of its own, so a document the
schedule repeats is written again each time it is drawn. These helpers open
the work directory's schedule and record store (through
:class:`clusterclip.io.WorkDir` only), say the disk cost before anything is
written, and stream ``(position, document, text)`` in blocks so memory stays
bounded whatever the schedule length: the offsets (16 bytes per document) and
one block of texts.

A sample is three columns, the same in both formats:

``text`` (str)
    The document's text as the embed stage read it (the ``text_field`` it was
    given, else ``content`` then ``text``).
``index`` (int64)
    The document's index in the work directory (embed input order).
``position`` (int64)
    The sample's position in the schedule.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir, atomic_write_json, fingerprint_file, human_bytes
from clusterclip.io.jsonlines import without_lone_surrogates
from clusterclip.io.readers import DEFAULT_TEXT_FIELDS

__all__ = ["ScheduledTexts", "open_scheduled_texts", "write_sidecar"]

_BLOCK = 1 << 14
#: Written into every export folder: what was exported, from which schedule.
SIDECAR = "clusterclip.json"


@dataclass(frozen=True)
class ScheduledTexts:
    """A work directory's schedule with random access to every scheduled text."""

    work: WorkDir
    indices: np.ndarray  # int64 (T,), memory-mapped
    records: np.ndarray  # uint8, memory-mapped
    offsets: np.ndarray  # int64 (N, 2), memory-mapped
    text_fields: tuple[str, ...]
    schedule_path: Path

    def __len__(self) -> int:
        return len(self.indices)

    def cost(self) -> tuple[int, int, int]:
        """(bytes of the scheduled records, bytes of every usable record, distinct documents drawn).

        Record bytes (the input line, or the parquet row as JSON) bound the
        text bytes from above; the ratio of the first two is what repeats cost.
        """
        spans = np.asarray(self.offsets)
        lengths = np.where(spans[:, 0] >= 0, spans[:, 1] - spans[:, 0], 0)
        corpus = int(lengths[self.work.ok_mask()].sum())
        scheduled = 0
        drawn = np.zeros(len(lengths), dtype=bool)
        for start in range(0, len(self.indices), 1 << 20):
            block = np.asarray(self.indices[start : start + (1 << 20)])
            scheduled += int(lengths[block].sum())
            drawn[block] = True
        return scheduled, corpus, int(drawn.sum())

    def announce(self, what: str) -> None:
        """Print the disk cost of writing every draw by value (to stderr, before writing)."""
        scheduled, corpus, distinct = self.cost()
        ratio = scheduled / corpus if corpus else 0.0
        print(
            f"{what}: {len(self):,} draws of {distinct:,} documents; writing {ratio:.2f}x the "
            f"corpus: about {human_bytes(scheduled)} (repeated documents are stored again)",
            file=sys.stderr,
            flush=True,
        )

    def text(self, document: int) -> str:
        """The text of one scheduled document."""
        begin, stop = (int(v) for v in self.offsets[document])
        if begin < 0:
            raise ClusterClipError(
                f"document {document} is scheduled but has no record in the store. "
                f"Delete {self.work.path_of('records')} and export again."
            )
        record = json.loads(self.records[begin:stop].tobytes())
        for field in self.text_fields:
            value = record.get(field) if isinstance(record, dict) else None
            if isinstance(value, bytes):
                value = value.decode("utf-8", errors="replace")
            if isinstance(value, str):
                return without_lone_surrogates(value)[0]  # as the reader gave it to embed
        raise ClusterClipError(
            f"document {document} is scheduled but its record has no text in "
            f"{' or '.join(self.text_fields)}. Rebuild the work directory with `clusterclip run`."
        )

    def samples(self, positions: np.ndarray | None = None) -> Iterator[tuple[int, int, str]]:
        """``(position, document, text)`` for each position (all of them, in order, by default).

        Streams in blocks: positions are read and texts decoded a block at a time.
        """
        if positions is None:
            for start in range(0, len(self.indices), _BLOCK):
                stop = min(start + _BLOCK, len(self.indices))
                block = np.asarray(self.indices[start:stop])
                for offset, document in enumerate(block.tolist()):
                    yield start + offset, document, self.text(document)
            return
        for start in range(0, len(positions), _BLOCK):
            chunk = np.asarray(positions[start : start + _BLOCK])
            documents = np.asarray(self.indices[chunk]) if len(chunk) else chunk
            for position, document in zip(chunk.tolist(), documents.tolist(), strict=True):
                yield position, document, self.text(document)

    def sidecar(self, out: Path, fields: dict[str, Any]) -> None:
        """Record what was exported next to it: format, length, schedule fingerprint."""
        write_sidecar(out, fields, self.work, len(self), self.schedule_path)


def write_sidecar(
    out: Path, fields: dict[str, Any], work: WorkDir, n_samples: int, schedule_path: Path
) -> None:
    """Write ``clusterclip.json`` into ``out``: ``fields``, the length, columns and schedule."""
    atomic_write_json(
        out / SIDECAR,
        {
            **fields,
            "n_samples": n_samples,
            "columns": {"text": "str", "index": "int64", "position": "int64"},
            "schedule": fingerprint_file(schedule_path),
            "workdir": str(work.path),
        },
    )


def open_scheduled_texts(workdir: str | os.PathLike[str]) -> ScheduledTexts:
    """Open the schedule and the record store of ``workdir`` (building the store once).

    Refuses a stale schedule, a changed corpus, or a schedule naming documents
    the store lacks, before anything is written.
    """
    work = WorkDir(workdir)
    schedule = work.schedule()
    records, offsets = work.record_store()
    indices = schedule.indices
    if len(indices) and int(indices.max()) >= len(offsets):
        raise ClusterClipError(
            f"{schedule.path} refers to documents beyond the {len(offsets)} embedded ones "
            f"({int(indices.max())} >= {len(offsets)}). Rebuild the schedule with `clusterclip run`."
        )
    field = work.require("embed").get("config", {}).get("text_field")
    fields = (field,) if field else DEFAULT_TEXT_FIELDS
    return ScheduledTexts(work, indices, records, offsets, fields, schedule.path)
