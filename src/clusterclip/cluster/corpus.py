"""Re-read the corpus a work directory was embedded from, with each document's cluster.

Inspection and export need the texts, which the work directory does not store:
they re-read the embed stage's inputs (its manifest config holds ``inputs``,
``text_field`` and ``id_field``) in one streaming pass, after checking that the
files are still the ones that were embedded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io import check_upstream, require_stage

__all__ = ["iter_corpus", "read_clusters"]


def read_clusters(workdir: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(labels int32, scores float32)`` of every document from ``clusters.parquet``.

    Refuses a stale result (the embeddings changed after clustering).

    >>> labels, scores = read_clusters("work")  # doctest: +SKIP
    """
    workdir = Path(workdir)
    entry = require_stage(workdir, "cluster")
    changed = check_upstream(workdir, "cluster", entry.get("inputs", {}))
    if changed:
        raise ClusterClipError(
            f"the clusters in {workdir} are stale: {'; '.join(changed)}. "
            "Rerun `clusterclip cluster --workdir W --n-clusters K --overwrite`."
        )
    pq = require_extra("pyarrow.parquet", "io")
    table = pq.read_table(workdir / "clusters.parquet", columns=["cluster", "score"])
    return (
        table.column("cluster").to_numpy().astype(np.int32),
        table.column("score").to_numpy().astype(np.float32),
    )


def iter_corpus(workdir: str | Path) -> Iterator[Any]:
    """Every record of the embedded corpus in index order (``clusterclip.io.readers.Record``).

    >>> next(iter_corpus("work")).index  # doctest: +SKIP
    0
    """
    workdir = Path(workdir)
    entry = require_stage(workdir, "embed")
    config = entry.get("config", {})
    inputs = config.get("inputs") or []
    if not inputs or any(str(name).startswith("<") for name in inputs):
        raise ClusterClipError(
            f"the embed stage of {workdir} read an in-memory dataset, which cannot be re-read "
            "for texts. Save it to jsonl or parquet and embed that file instead."
        )
    try:
        from clusterclip.io.readers import fingerprint_input, iter_records
    except ImportError as error:  # pragma: no cover - the embed stage ships the readers
        raise ClusterClipError(
            f"reading the corpus needs clusterclip.io.readers ({error}). Upgrade clusterclip."
        ) from error
    recorded = entry.get("inputs", {})
    for name in inputs:
        path = Path(name)
        if not path.exists():
            raise ClusterClipError(
                f"corpus file {path} (embedded into {workdir}) is missing. Restore it at that "
                "path, or embed the corpus again."
            )
        if name in recorded and recorded[name] != fingerprint_input(path):
            raise ClusterClipError(
                f"corpus file {path} changed since it was embedded into {workdir}; its texts no "
                "longer match the embeddings. Restore it or rerun `clusterclip embed ... --overwrite`."
            )
    yield from iter_records(
        [str(name) for name in inputs],
        text_field=config.get("text_field"),
        id_field=config.get("id_field"),
    )
