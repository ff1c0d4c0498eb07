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


def wall(func) -> float:
    gc.collect()
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def traced_peak(func) -> int:
    """Peak memory traced while ``func`` runs (numpy reports its buffers to tracemalloc).

    A separate run from the timed ones: tracing slows Python-level work.
    """
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    func()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


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
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (best kept)")
    args = parser.parse_args()
    n = args.documents or (1_000_000 if args.quick else 10_000_000)
    k = args.clusters or (500 if args.quick else 2000)
    t = args.draws or (5_000_000 if args.quick else 50_000_000)
    labels = zipf_labels(n, k)
    sizes = np.bincount(labels)
    print(
        f"N={n:,} documents, K={k:,} clusters (sizes {sizes.min():,}..{sizes.max():,}), T={t:,} draws"
    )

    def baseline() -> None:
        np.random.default_rng(0).permutation(t)

    mib = 2**20
    base_peak = traced_peak(baseline)
    small_peak = traced_peak(lambda: consume(labels, t // 5, "online"))
    full_peak = traced_peak(lambda: consume(labels, t, "online"))
    print(
        f"peak traced memory: permutation(T) {base_peak / mib:.1f} MiB; streaming online "
        f"{small_peak / mib:.1f} MiB at T={t // 5:,}, {full_peak / mib:.1f} MiB at T={t:,} "
        f"(ratio {full_peak / small_peak:.2f}: independent of T)"
    )
    # The machine is shared: alternate the contenders and keep each one's best time.
    times: dict[str, list[float]] = {"permutation": [], "online": [], "planned": []}
    for _ in range(args.rounds):
        times["permutation"].append(wall(baseline))
        times["online"].append(wall(lambda: consume(labels, t, "online")))
        if not args.skip_planned:
            times["planned"].append(wall(lambda: consume(labels, t, "planned")))
    best = {name: min(values) for name, values in times.items() if values}
    for name, values in times.items():
        if values:
            shown = ", ".join(f"{v:.2f}" for v in values)
            print(f"{name:>12} wall: best {best[name]:6.2f} s  (rounds: {shown})")
    print(f"ratio online / permutation: {best['online'] / best['permutation']:.2f}  (target <= 2)")
    if "planned" in best:
        print(f"ratio planned / permutation: {best['planned'] / best['permutation']:.2f}")


if __name__ == "__main__":
    main()
