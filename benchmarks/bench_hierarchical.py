"""Benchmark: ``policy="hierarchical"`` against a plain shuffle and the flat rule.

K leaf clusters (10^5 by default) under a top level of about sqrt(K) nodes
with uneven fan-out (2 levels: ``levels`` has one column), leaves of 1 to 40
documents, T draws (10^7) at ``max_repeats=8``: tens of thousands of leaves are
clipped on the way, and top nodes empty. In one process, alternating rounds,
best kept (the machine may be shared):

* baseline: ``np.random.default_rng(0).permutation(T)``;
* ``clusterclip`` (flat) over the same labels, streamed with ``iter_schedule``;
* ``hierarchical`` over the same labels and levels, streamed the same way
  (validation of the levels included).

Run::

    PYTHONPATH=src python benchmarks/bench_hierarchical.py            # K=10^5, T=10^7
    PYTHONPATH=src python benchmarks/bench_hierarchical.py --quick    # K=10^4, T=10^6
"""

from __future__ import annotations

import argparse
import gc
import platform
import time

import numpy as np

from clusterclip.schedule import build_schedule, iter_schedule


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), what every speed figure names."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def tree_corpus(n_leaves: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels (N,) and levels (N, 1): leaves of 1..40 documents under ~sqrt(K) top nodes."""
    rng = np.random.default_rng(0)
    n_top = max(1, int(round(n_leaves**0.5)))
    # Uneven fan-out: top node of each leaf drawn with Zipf-like weights.
    weights = 1.0 / np.arange(1, n_top + 1) ** 0.8
    top_of_leaf = rng.choice(n_top, size=n_leaves, p=weights / weights.sum())
    top_of_leaf[:n_top] = np.arange(n_top)  # every top node has a leaf
    sizes = rng.integers(1, 41, n_leaves)
    labels = np.repeat(np.arange(n_leaves, dtype=np.int64), sizes)
    order = rng.permutation(labels.size)
    labels = labels[order]
    return labels, top_of_leaf[labels][:, None]


def consume(labels: np.ndarray, draws: int, **kwargs) -> int:
    count = 0
    for block in iter_schedule(labels, max_repeats=8, num_samples=draws, seed=0, **kwargs):
        count += block.size
    assert count == draws, (count, draws)
    return count


def timed(func) -> float:
    gc.collect()
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K=10^4 leaves, T=10^6 draws")
    parser.add_argument("--leaves", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (best kept)")
    args = parser.parse_args()
    k = args.leaves or (10_000 if args.quick else 100_000)
    t = args.draws or (1_000_000 if args.quick else 10_000_000)
    labels, levels = tree_corpus(k)
    fan_out = np.bincount(np.unique(np.column_stack((levels[:, 0], labels)), axis=0)[:, 0])
    print(f"CPU: {cpu_model()}")
    print(
        f"K={k:,} leaves under {fan_out.size:,} top nodes (fan-out {fan_out.min()}.."
        f"{fan_out.max()}), N={labels.size:,} documents, T={t:,} draws, max_repeats=8"
    )
    # Untimed: how much the clip changes the active sets along the way.
    schedule = build_schedule(
        labels, policy="hierarchical", levels=levels, max_repeats=8, num_samples=t, seed=0
    )
    clipped = schedule.stats.clip_step >= 0  # per leaf id (dense ids 0..K-1)
    top_of_leaf = np.zeros(k, dtype=np.int64)
    top_of_leaf[labels] = levels[:, 0]
    open_leaves = np.bincount(top_of_leaf[~clipped], minlength=fan_out.size)
    print(
        f"clipped during the run: {int(clipped.sum()):,} of {k:,} leaves; "
        f"{int((open_leaves == 0).sum())} of {fan_out.size} top nodes emptied"
    )
    del schedule
    contenders = {
        "permutation": lambda: np.random.default_rng(0).permutation(t),
        "clusterclip": lambda: consume(labels, t),
        "hierarchical": lambda: consume(labels, t, policy="hierarchical", levels=levels),
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, func in contenders.items():
            times[name].append(timed(func))
    best = {name: min(values) for name, values in times.items()}
    for name, values in times.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:>13} wall: best {best[name]:6.2f} s  (rounds: {shown})")
    base = best["permutation"]
    print(
        f"ratio hierarchical / permutation: {best['hierarchical'] / base:.2f}; "
        f"clusterclip / permutation: {best['clusterclip'] / base:.2f}; "
        f"hierarchical / clusterclip: {best['hierarchical'] / best['clusterclip']:.2f}"
    )


if __name__ == "__main__":
    main()
