"""Measurement: how stable the clusters are across k-means seeds, and what the figure costs.

For a work directory with a completed embed stage, runs the cluster stage
(:func:`clusterclip.cluster.stage.cluster`, default settings) for every K and
seed given, in a copy of the work directory, and prints per run:

- the stage's own stability figure (``summary["stability"]``: ARI and pairs kept
  between its labels and a cheaper second k-means with another seed, on up to
  20,000 documents) and its share of the stage's time;
- the ARI between the labels of the stage run with seed ``s`` and with seed ``s + 1``
  (two full runs: the figure the cheap estimate stands for).

Run::

    PYTHONPATH=src python benchmarks/bench_stability.py WORKDIR --n-clusters 20 50 100 200 --seeds 0
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path


def run(workdir: Path, k: int, seed: int, scratch: Path):
    from clusterclip.cluster.stage import cluster

    copy = scratch / f"w-{k}-{seed}"
    if not copy.exists():
        shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns("clusters.parquet",
                                                                    "centroids.npy", "schedule*",
                                                                    "report*"))  # fmt: skip
    started = time.perf_counter()
    result = cluster(copy, n_clusters=k, seed=seed, overwrite=True)
    return result, time.perf_counter() - started


def main() -> None:
    from clusterclip.cluster.blas import cpu_model
    from clusterclip.cluster.stability import agreement

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--n-clusters", type=int, nargs="+", default=[20, 50, 100, 200])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; work directory {args.workdir}")
    with tempfile.TemporaryDirectory() as scratch:
        for k in args.n_clusters:
            for seed in args.seeds:
                first, seconds = run(args.workdir, k, seed, Path(scratch))
                second, _ = run(args.workdir, k, seed + 1, Path(scratch))
                ok = first.labels >= 0
                full = agreement(first.labels[ok], second.labels[ok])
                s = first.summary
                st = s["stability"]
                print(
                    f"K={k:4d} seed {seed}: clusters {s['n_clusters']}, stage figure ARI "
                    f"{st['ari']:.3f} (pairs kept {st['pairs_kept']:.3f}, on {st['sample_size']:,} "
                    f"docs, {st['seconds']:.2f} s = {st['seconds'] / seconds:.0%} of the stage's "
                    f"{seconds:.2f} s); two full runs (seeds {seed}, {seed + 1}): ARI "
                    f"{full['ari']:.3f}, pairs kept {full['pairs_kept']:.3f}; backend {s['backend']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
