"""The driver's per-document helpers against what they replaced, measured in one run.

Each row times the current helper and the code it replaced (kept here as the
baseline, the same computation) on the same 10^6-row input, checks that both
give the same result, and prints the best of ``--rounds`` CPU times and their
ratio. Rows:

- ``distinct``: :func:`clusterclip.arrays.distinct` against plain ``np.unique``
  on 10^6 distinct int64 values (numpy >= 2.3 hashes there);
- ``ok_mask``: :meth:`clusterclip.io.artifacts.DocumentsArtifact.ok_mask` (Arrow)
  against the statuses as Python strings compared one by one, on a
  ``documents.parquet`` of 10^6 rows written here;
- ``nearest``: :func:`clusterclip.describe.nearest_documents` (rounds of
  per-cluster maxima) against one lexsort of every document, one per cluster;
- ``label order``: the keyword sample's packed-value sort against a stable argsort.

Run::

    PYTHONPATH=src python benchmarks/bench_driver_helpers.py
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

N = 1_000_000


def _best(function: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(rounds):
        start = time.process_time()
        result = function()
        best = min(best, time.process_time() - start)
    return best, result


def _documents(folder: Path) -> Any:
    """A documents.parquet of N rows (1% of them not ok), written by the embed stage's writer."""
    from clusterclip.io import WorkDir
    from clusterclip.io.artifacts import DocumentsArtifact

    status = np.full(N, "ok", dtype=object)
    status[::100] = "empty"
    documents = DocumentsArtifact(WorkDir(folder))
    documents.write(
        {
            "index": np.arange(N, dtype=np.int64),
            "source": ["corpus.jsonl"] * N,
            "line": np.arange(1, N + 1, dtype=np.int64),
            "id": [None] * N,
            "n_chars": np.full(N, 100, dtype=np.int64),
            "n_tokens": np.where(status == "ok", 25, 0),
            "status": status.tolist(),
            "reason": [None if s == "ok" else "empty text" for s in status.tolist()],
        }
    )
    return documents


def rows(rounds: int) -> list[tuple[str, float, float, bool]]:
    from clusterclip.arrays import distinct
    from clusterclip.describe.inspect import _by_label, _nearest_sorted, nearest_documents

    rng = np.random.default_rng(0)
    found = []
    values = rng.integers(0, 10**12, N)
    new, a = _best(lambda: distinct(values), rounds)
    old, b = _best(lambda: np.unique(values), rounds)
    found.append(("distinct", new, old, bool(np.array_equal(a, b))))
    with tempfile.TemporaryDirectory() as folder:
        documents = _documents(Path(folder))
        documents.ok_mask()  # pyarrow's first use, outside the timing
        new, a = _best(documents.ok_mask, rounds)
        old, b = _best(lambda: documents.statuses() == "ok", rounds)
        found.append(("ok_mask", new, old, bool(np.array_equal(a, b))))
    labels = rng.integers(-1, 250, N)
    scores = rng.random(N).astype(np.float32)
    new, a = _best(lambda: nearest_documents(labels, scores, 1), rounds)
    old, b = _best(lambda: _nearest_sorted(labels, scores, 1), rounds)
    found.append(("nearest", new, old, a == b))
    new, a = _best(lambda: _by_label(labels), rounds)
    old, b = _best(lambda: np.argsort(labels, kind="stable"), rounds)
    found.append(("label order", new, old, bool(np.array_equal(a, b))))
    return found


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (best kept)")
    args = parser.parse_args()
    print(f"CPU: {_cpu()}; numpy {np.__version__}; N = {N:,}; best of {args.rounds} CPU times")
    print(f"{'helper':>12} {'new s':>7} {'baseline s':>10} {'baseline / new':>14} {'same':>5}")
    for name, new, old, same in rows(args.rounds):
        print(f"{name:>12} {new:7.3f} {old:10.3f} {old / max(new, 1e-9):13.1f}x {str(same):>5}")


if __name__ == "__main__":
    main()
