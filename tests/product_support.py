"""Hand-made work directories in the exact file formats of docs/architecture.md.

Used by the report, adapter and export tests so they exercise the consuming
code on real files (real KJV verses, real parquet, real npy) without paying for
an embedding run. Clusters are the Bible books of the verses: a real, naturally
imbalanced partition. The schedule is built by a plain, obviously-correct
loop implementing the online ClusterClip rule (uniform cluster choice,
shuffled passes, clip after ``max_repeats`` passes).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.io import WorkDir, fingerprint_array
from clusterclip.io.artifacts import (
    DOCUMENT_COLUMNS,
    CentroidsArtifact,
    ClustersArtifact,
    DocumentsArtifact,
    ScheduleArtifact,
)
from clusterclip.io.readers import fingerprint_input


def kjv_records(*, step: int, limit: int | None = None) -> list[dict]:
    """Every ``step``-th verse of the bundled KJV corpus (real text, all 66 books)."""
    path = resources.files("clusterclip.data") / "kjv-verses.jsonl.gz"
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for i, line in enumerate(handle) if i % step == 0]
    return records[:limit] if limit else records


def write_sources(directory: Path, records: list[dict]) -> list[Path]:
    """Split records over a .jsonl (with a malformed and an empty line), a .jsonl.gz, a .parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    third = len(records) // 3
    a, b, c = records[:third], records[third : 2 * third], records[2 * third :]
    plain = directory / "part-a.jsonl"
    lines = [json.dumps(r) for r in a]
    lines.insert(3, "{not json")  # malformed
    lines.insert(7, json.dumps({"id": "blank", "book": "None", "text": ""}))  # empty
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    gz = directory / "part-b.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as handle:
        for r in b:
            handle.write(json.dumps(r) + "\n")
    parquet = directory / "part-c.parquet"
    pq.write_table(pa.Table.from_pylist(c), parquet)
    return [plain, gz, parquet]


def read_source_records(paths: list[Path]) -> list[tuple[str, int, str, dict | None]]:
    """(source, line, raw line, parsed record or None) in input order, like the embed stage."""
    import pyarrow.parquet as pq

    out = []
    for path in paths:
        if path.suffix == ".parquet":
            for row_number, row in enumerate(pq.read_table(path).to_pylist()):
                out.append((str(path), row_number, json.dumps(row), row))
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                line = line.rstrip("\n")
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    record = None
                out.append((str(path), line_number, line, record))
    return out


def oracle_online_schedule(
    labels: np.ndarray, *, max_repeats: int, num_samples: int, seed: int
) -> tuple[np.ndarray, list[int]]:
    """Plain-loop online ClusterClip: returns (indices, positions where a cluster was clipped)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
    clusters = sorted(set(int(k) for k in labels if k >= 0))
    members = {k: np.flatnonzero(labels == k) for k in clusters}
    perm = {k: rng.permutation(members[k]) for k in clusters}
    cursor = dict.fromkeys(clusters, 0)
    passes = dict.fromkeys(clusters, 0)
    active = list(clusters)
    out, clips = [], []
    while len(out) < num_samples and active:
        k = active[int(rng.integers(len(active)))]
        out.append(int(perm[k][cursor[k]]))
        cursor[k] += 1
        if cursor[k] == len(perm[k]):
            passes[k] += 1
            cursor[k] = 0
            if passes[k] == max_repeats:
                active.remove(k)
                clips.append(len(out) - 1)
            else:
                perm[k] = rng.permutation(members[k])
    return np.asarray(out, dtype=np.int64), clips


def make_workdir(
    root: Path, *, step: int = 40, max_repeats: int = 2, epochs: float = 1.5, seed: int = 0
) -> dict:
    """Build a complete work directory (embed, cluster, schedule outputs + manifest).

    Every file is written through its artifact's writer (:mod:`clusterclip.io.artifacts`),
    so the fixture has the layout the stages write; only the contents are hand-made.
    """
    records = kjv_records(step=step)
    sources = write_sources(root / "corpus", records)
    workdir = root / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    work = WorkDir(workdir)
    rows = read_source_records(sources)
    books: dict[str, int] = {}
    labels = []
    columns: dict[str, list] = {name: [] for name, _ in DOCUMENT_COLUMNS}
    for index, (source, line, _raw, record) in enumerate(rows):
        if record is None:
            status, text = "malformed", ""
        elif not record.get("text"):
            status, text = "empty", ""
        else:
            status, text = "ok", record["text"]
        ok = status == "ok"
        row = {
            "index": index,
            "source": source,
            "line": line,
            "id": record.get("id") if record else None,
            "n_chars": len(text),
            "n_tokens": len(text.split()) if ok else 0,
            "status": status,
        }
        for name, value in row.items():
            columns[name].append(value)
        labels.append(books.setdefault(record["book"], len(books)) if ok else -1)
    labels = np.asarray(labels, dtype=np.int32)
    documents = DocumentsArtifact(work).write(columns)
    work.record(
        "embed",
        {
            # The corpus as the embed stage records it, so WorkDir.corpus() can re-read it.
            "config": {
                "encoder": "hand-made",
                "inputs": [str(path) for path in sources],
                "text_field": None,
                "id_field": None,
            },
            "inputs": {str(path): fingerprint_input(path) for path in sources},
            "outputs": {"documents": documents, "embeddings": "none"},
            "versions": {},
            "complete": True,
        },
    )
    clusters = ClustersArtifact(work).write(labels, np.ones(len(labels), dtype=np.float32))
    centroids = np.random.default_rng(0).standard_normal((len(books), 8)).astype(np.float32)
    CentroidsArtifact(work).write(centroids / np.linalg.norm(centroids, axis=1)[:, None])
    work.record(
        "cluster",
        {
            "config": {"n_clusters": len(books)},
            "inputs": {"embed.documents": documents},
            "outputs": {"clusters": clusters},
            "versions": {},
            "complete": True,
        },
    )
    n_usable = int((labels >= 0).sum())
    num_samples = int(round(epochs * n_usable))
    indices, clips = oracle_online_schedule(
        labels, max_repeats=max_repeats, num_samples=num_samples, seed=seed
    )
    saved = ScheduleArtifact(work).write(
        indices,
        {
            "config": {
                "policy": "clusterclip",
                "max_repeats": max_repeats,
                "num_samples": num_samples,
                "order": "online",
                "on_exhausted": "stop",
                "seed": seed,
            },
            "version": "hand-made",
            "labels_fingerprint": fingerprint_array(labels.astype(np.int64)),
            "stats": {"length": len(indices)},
        },
    )
    work.record(
        "schedule",
        {
            "config": {"policy": "clusterclip", "max_repeats": max_repeats},
            "inputs": {"cluster.clusters": clusters},
            "outputs": saved,
            "versions": {},
            "complete": True,
        },
    )
    return {
        "workdir": workdir,
        "sources": sources,
        "rows": rows,
        "labels": labels,
        "indices": indices,
        "clips": clips,
        "books": books,
        "max_repeats": max_repeats,
    }


def run_small_workdir(root: Path, *, n_lines: int = 300, n_clusters: int = 5) -> dict:
    """A work directory made by the real pipeline (``clusterclip run``, tf-idf encoder).

    Layout: ``root/verses.jsonl`` (the first ``n_lines`` KJV verses) and
    ``root/work``. The corpus is embedded by its relative name from ``root``, so
    the work directory finds it next to itself wherever ``root`` is copied.
    """
    import contextlib
    import io

    from clusterclip.cli import main

    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "verses.jsonl"
    records = kjv_records(step=1, limit=n_lines)
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with contextlib.chdir(root), contextlib.redirect_stdout(io.StringIO()):
        code = main(
            [
                "run",
                corpus.name,
                "--workdir",
                "work",
                "--encoder",
                "tfidf",
                "--n-clusters",
                str(n_clusters),
                "--epochs",
                "2",
            ]
        )
    if code != 0:
        raise RuntimeError(f"clusterclip run exited with {code}")
    return {"root": root, "workdir": root / "work", "corpus": corpus, "records": records}


REPO = Path(__file__).resolve().parent.parent


def client_python(client: str) -> Path:
    """The interpreter of a trainer-side library's own environment, ``.venvs/CLIENT``.

    ``make test`` builds it (``scripts/install-client-env.sh CLIENT``). When it
    is missing the test is skipped with the command that builds it, except under
    ``CI=true``, where a missing environment is a failure: CI runs ``make test``,
    so a skip there would hide a broken install step.
    """
    import pytest

    venv = REPO / ".venvs" / client
    python = venv / "bin" / "python"
    if python.exists() and (venv / ".installed").exists():
        return python
    message = (
        f".venvs/{client} is not built. Build it with `bash scripts/install-client-env.sh "
        f"{client}` (make test does)."
    )
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def run_client_check(client: str, module: str, root: Path, *, timeout: float = 900) -> str:
    """Run ``python -m module root`` in the client's environment; return its output or fail."""
    import pytest

    python = client_python(client)
    env = {**os.environ, "CLUSTERCLIP_PROGRESS": "0", "PYTHONWARNINGS": "ignore::UserWarning"}
    env.pop("PYTHONPATH", None)  # the client environment has clusterclip installed (editable)
    result = subprocess.run(
        [str(python), "-m", module, str(root)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        pytest.fail(f"{module} in .venvs/{client} exited {result.returncode}:\n{output[-6000:]}")
    return output


def in_ci() -> bool:
    """True under a CI service (``CI`` set to anything but ``0`` / ``false`` / empty)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_module(name: str, extra: str | None = None) -> Any:
    """Import an optional dependency of a test: skip without it, fail under ``CI=true``.

    In CI every extra is installed (``make test``), so a missing one is a broken
    environment, not a reason to pass with the test silently skipped. ``extra``
    names the ``pip install 'clusterclip[extra]'`` line in the reason.
    """
    import importlib

    import pytest

    try:
        return importlib.import_module(name)
    except ImportError as error:
        fix = f": pip install 'clusterclip[{extra}]'" if extra else ""
        reason = f"{name} is not installed{fix} ({error})"
        if in_ci():
            pytest.fail(f"CI=true requires every extra, and {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
