"""Helpers of the cluster tests: a work directory as the embed stage leaves it."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_workdir(
    workdir: Path,
    embeddings: np.ndarray,
    status: list[str] | None = None,
    *,
    corpus: Path | None = None,
    shard_rows: int = 1000,
) -> Path:
    """A work directory as the embed stage leaves it (documents, shards, manifest).

    Rows whose status is not ``ok`` are zeroed, as the embed stage does.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clusterclip.io import fingerprint_file, write_stage

    n = len(embeddings)
    status = status or ["ok"] * n
    workdir.mkdir(parents=True, exist_ok=True)
    parts = workdir / "embeddings"
    parts.mkdir(exist_ok=True)
    matrix = np.asarray(embeddings, dtype=np.float16).copy()
    matrix[np.asarray(status) != "ok"] = 0
    paths = []
    for shard, start in enumerate(range(0, n, shard_rows)):
        path = parts / f"part-{shard:05d}.npy"
        np.save(path, matrix[start : start + shard_rows])
        paths.append(path)
    table = pa.table(
        {
            "index": pa.array(np.arange(n, dtype=np.int64)),
            "source": pa.array([str(corpus or "synthetic")] * n),
            "line": pa.array(np.arange(1, n + 1, dtype=np.int64)),
            "id": pa.array([f"doc-{i}" for i in range(n)]),
            "n_chars": pa.array(np.full(n, 10, dtype=np.int64)),
            "n_tokens": pa.array(np.full(n, 3, dtype=np.int64)),
            "status": pa.array(status),
        }
    )
    pq.write_table(table, workdir / "documents.parquet")
    write_stage(
        workdir,
        "embed",
        {
            "config": {
                "inputs": [str(corpus)] if corpus else [],
                "text_field": "text",
                "id_field": "id",
            },
            "inputs": {},
            "outputs": {
                "documents": fingerprint_file(workdir / "documents.parquet"),
                "embeddings": "-".join(fingerprint_file(p) for p in paths),
            },
            "complete": True,
        },
    )
    return workdir
