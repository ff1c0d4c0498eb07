"""Benchmark: streaming ClusterClip schedule vs a plain shuffle of the same length.

N documents in K clusters with Zipf-distributed sizes, T draws. Measures, in
one process, the wall time and the peak traced memory (tracemalloc sees numpy
allocations) of

* baseline: ``np.random.default_rng(0).permutation(T)`` (a random order of the
  same length, materialised: what a plain shuffled sampler costs);
* the streaming clusterclip schedule (``iter_schedule``, online order),
  consumed block by block, at T and at T / 5 (peak memory must not grow with T);
* the planned order at T.

Run::

    PYTHONPATH=src python benchmarks/bench_schedule.py            # N=10M, K=2000, T=50M
    PYTHONPATH=src python benchmarks/bench_schedule.py --quick    # N=1M, K=500, T=5M
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np

from clusterclip.schedule import iter_schedule


def zipf_labels(n_documents: int, n_clusters: int, *, exponent: float = 1.0) -> np.ndarray:
    """Labels with cluster sizes proportional to 1 / rank**exponent (each >= 1), shuffled."""
    raw = 1.0 / np.arange(1, n_clusters + 1) ** exponent
    sizes = np.maximum(1, np.floor(raw / raw.sum() * n_documents)).astype(np.int64)
    sizes[0] += n_documents - sizes.sum()
    labels = np.repeat(np.arange(n_clusters, dtype=np.int32), sizes)
    return labels[np.random.default_rng(1).permutation(labels.size)]


def measure(func):
    """Wall time of an untraced run, then peak traced memory of a second run.

    tracemalloc slows Python-level work, so time and memory come from
    separate runs of the same function.
    """
    gc.collect()
    start = time.perf_counter()
    result = func()
    wall = time.perf_counter() - start
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    func()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return wall, peak, result


def consume(labels: np.ndarray, total: int, order: str) -> int:
    checksum = 0
    count = 0
    for block in iter_schedule(
        labels, policy="clusterclip", max_repeats=8, num_samples=total, order=order, seed=0
    ):
        checksum ^= int(block[-1])
        count += block.size
    assert count == total, (count, total)
    return checksum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=1M, K=500, T=5M")
    parser.add_argument("--documents", type=int, default=None)
    parser.add_argument("--clusters", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--skip-planned", action="store_true")
    args = parser.parse_args()
    n = args.documents or (1_000_000 if args.quick else 10_000_000)
    k = args.clusters or (500 if args.quick else 2000)
    t = args.draws or (5_000_000 if args.quick else 50_000_000)
    labels = zipf_labels(n, k)
    sizes = np.bincount(labels)
    print(
        f"N={n:,} documents, K={k:,} clusters (sizes {sizes.min():,}..{sizes.max():,}), T={t:,} draws"
    )

    base_wall, base_peak, _ = measure(lambda: np.random.default_rng(0).permutation(t))
    print(f"baseline permutation(T):      {base_wall:7.2f} s   peak {base_peak / 2**20:8.1f} MiB")
    rows = []
    for total in (t // 5, t):
        wall, peak, _ = measure(lambda total=total: consume(labels, total, "online"))
        rows.append((total, wall, peak))
        print(f"clusterclip online T={total:>12,}: {wall:7.2f} s   peak {peak / 2**20:8.1f} MiB")
    if not args.skip_planned:
        p_wall, p_peak, _ = measure(lambda: consume(labels, t, "planned"))
        print(f"clusterclip planned T={t:>11,}: {p_wall:7.2f} s   peak {p_peak / 2**20:8.1f} MiB")
    wall = rows[-1][1]
    print(f"time ratio online / permutation at T={t:,}: {wall / base_wall:.2f}  (target <= 2)")
    if not args.skip_planned:
        print(f"time ratio planned / permutation:        {p_wall / base_wall:.2f}")
    print(
        f"peak memory online: {rows[0][2] / 2**20:.1f} MiB at T={rows[0][0]:,}, "
        f"{rows[1][2] / 2**20:.1f} MiB at T={rows[1][0]:,} "
        f"(ratio {rows[1][2] / rows[0][2]:.2f}; independent of T if ~1); "
        f"permutation(T) alone: {base_peak / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
