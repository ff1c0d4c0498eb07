"""Export in the authors' layout: one folder per cluster, ``cluster_<k>/data_<j>.jsonl``.

Each line is the original record with two added fields, ``label`` (the cluster)
and ``score`` (cosine to its centroid); a field of that name in the record is
replaced. Documents that were not embedded (status not ``ok``) are left out.
Lines are standard JSON in UTF-8 (:func:`clusterclip.io.jsonlines.encode_json`):
a ``NaN`` or ``Infinity`` in a record, which JSON has no number for, is written
as null and said on stderr.

The labels and the corpus are read through :class:`clusterclip.io.WorkDir`, so
a corpus file that moved or changed since it was embedded is refused before
anything is written. Streaming and bounded memory: the corpus is read once, in
index order, and lines
are buffered per cluster up to ``buffer_bytes`` in total, then appended to their
files (never more than one file open at a time, whatever the number of
clusters). Deterministic: within a cluster, documents keep their index order, and
``data_<j>`` holds documents ``j * shard_size ..`` of the cluster. The export is
written into a new or empty ``out`` that appears whole or not at all
(:mod:`clusterclip.adapters.output`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.errors import ClusterClipError, invalid
from clusterclip.io import WorkDir
from clusterclip.io.jsonlines import MENDED, encode_json

__all__ = ["export_cluster_folders"]


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


def export_cluster_folders(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    shard_size: int = 100_000,
    buffer_bytes: int = 64 << 20,
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
        Bytes of lines held in memory before they are flushed to disk.

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
    buffer_bytes = _check_positive("buffer_bytes", buffer_bytes, "Pass e.g. 64 MiB.")
    out = check_export_folder(out)
    work = WorkDir(workdir)
    labels, scores = work.labels(), work.scores()
    corpus = work.corpus()  # checks the corpus files now, before anything is written
    written = np.zeros(int(labels.max(initial=-1)) + 1, dtype=np.int64)
    buffers: dict[tuple[int, int], list[str]] = {}
    held = 0
    files: set[tuple[int, int]] = set()
    nulled, first_nulled = 0, ""  # records whose NaN / Infinity became null, the first

    def flush(staging: Path) -> None:
        for (cluster, shard), lines in sorted(buffers.items()):
            folder = staging / f"cluster_{cluster}"
            folder.mkdir(exist_ok=True)
            with open(folder / f"data_{shard}.jsonl", "a", encoding="utf-8") as handle:
                handle.writelines(lines)
        buffers.clear()

    with export_folder(out) as staging:
        seen = 0
        for record in corpus:
            if record.index >= len(labels):
                break
            seen += 1
            label = int(labels[record.index])
            if label < 0:
                continue
            row = dict(record.raw) if isinstance(record.raw, dict) else {"text": record.text}
            row["label"] = label
            row["score"] = round(float(scores[record.index]), 6)
            data, replaced = encode_json(row, default=_default)
            if replaced:
                nulled += 1
                first_nulled = first_nulled or f"{record.source}:{record.line}"
            line = data.decode("utf-8") + "\n"
            key = (label, int(written[label] // shard_size))
            written[label] += 1
            files.add(key)
            buffers.setdefault(key, []).append(line)
            held += len(line)
            if held >= buffer_bytes:
                flush(staging)
                held = 0
        flush(staging)
        if seen != len(labels):
            raise ClusterClipError(
                f"the corpus yielded {seen} records but {workdir} clustered {len(labels)}. "
                "Restore the embedded corpus files or rerun embed and cluster."
            )
    if nulled:
        print(
            f"export cluster-folders: {nulled:,} record{'s' if nulled != 1 else ''} held "
            f"{MENDED['non_finite_number']} (first: {first_nulled})",
            file=sys.stderr,
            flush=True,
        )
    return {
        "documents": int(written.sum()),
        "excluded": int((labels < 0).sum()),
        "clusters": int((written > 0).sum()),
        "files": len(files),
        "out": str(out),
    }
