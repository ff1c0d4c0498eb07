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
    from clusterclip.io import WorkDir
    from clusterclip.io.artifacts import DocumentsArtifact, EmbeddingsArtifact

    n = len(embeddings)
    status = status or ["ok"] * n
    workdir.mkdir(parents=True, exist_ok=True)
    work = WorkDir(workdir)
    matrix = np.asarray(embeddings, dtype=np.float16).copy()
    matrix[np.asarray(status) != "ok"] = 0
    parts = EmbeddingsArtifact(work)
    n_tasks = 0
    for task, start in enumerate(range(0, n, shard_rows)):
        parts.write_part(task, matrix[start : start + shard_rows])
        n_tasks += 1
    documents = DocumentsArtifact(work).write(
        {
            "index": list(range(n)),
            "source": [str(corpus or "synthetic")] * n,
            "line": list(range(1, n + 1)),
            "id": [f"doc-{i}" for i in range(n)],
            "n_chars": [10] * n,
            "n_tokens": [3] * n,
            "status": list(status),
        }
    )
    work.record(
        "embed",
        {
            "config": {
                "inputs": [str(corpus)] if corpus else [],
                "text_field": "text",
                "id_field": "id",
            },
            "inputs": {},
            "outputs": {"documents": documents, "embeddings": parts.fingerprint(n_tasks)},
            "complete": True,
        },
    )
    return workdir
