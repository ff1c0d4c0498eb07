"""Benchmark: streaming ClusterClip schedule vs a plain shuffle of the same length.

N documents in K clusters with Zipf-distributed sizes, T draws. Measures, in
one process, the wall time and the peak traced memory (tracemalloc sees numpy
allocations) of

* baseline: ``np.random.default_rng(0).permutation(T)`` (a random order of the
  same length, materialised: what a plain shuffled sampler costs);
* the streaming clusterclip schedule (``iter_schedule``, online order),
  consumed block by block, at T and at T / 5 (peak memory must not grow with T);
* the planned order at T.

``--many-clusters`` runs another section instead: K clusters of 1 to 20
documents each (10^6 by default), one ``build_schedule`` of T draws (10^7), with
dense ids (0..K-1) and with the same clusters under sparse ids in [0, 2**31).
Each build runs in a child process of its own, which reports its wall time and
its peak resident memory (``ru_maxrss``: labels, schedule and statistics
included), next to a child running ``rng.permutation(T)``; rounds alternate.

``--table`` prints the figure the schedule core is held to: for K = 10, 10^2, ...,
10^6 clusters (N = 10^7 documents, cluster sizes drawn uniformly in 1..2N/K and
scaled to sum to N, shuffled), each order (online, planned) and each
``--max-repeats`` of 1, 2, 4, 8 and none, one ``build_schedule`` of
T = min(10^7, R N) draws per fresh child process, against a child running
``rng.permutation(T)``; it prints the best time of each over the rounds, the
range of the per-round ratios (the machine may be shared), and the build's
peak RSS. ``--policies`` adds rows for the other policies (``hierarchical``
with one level of about sqrt(K) top nodes, online only; ``temperature`` with
alpha 0.5; ``uniform`` and ``random`` ignore or need no clusters' R).

Run::

    PYTHONPATH=src python benchmarks/bench_schedule.py            # N=10M, K=2000, T=50M
    PYTHONPATH=src python benchmarks/bench_schedule.py --quick    # N=1M, K=500, T=5M
    PYTHONPATH=src python benchmarks/bench_schedule.py --many-clusters   # K=10^6 tiny, T=10^7
    PYTHONPATH=src python benchmarks/bench_schedule.py --table --rounds 3
    PYTHONPATH=src python benchmarks/bench_schedule.py --table --policies clusterclip,random
    ... --schedule-version 1   # an older draw rule (default: the rule of new schedules)
    PYTHONPATH=src python benchmarks/bench_schedule.py --profile --clusters 100000 \
        --order online --max-repeats 4 --one-cpu   # where one build's time goes
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from clusterclip.schedule import build_schedule, iter_schedule


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


VERSION: int | None = None  # --schedule-version (None: the default rule)


def consume(labels: np.ndarray, total: int, order: str) -> int:
    checksum = 0
    count = 0
    for block in iter_schedule(
        labels,
        policy="clusterclip",
        max_repeats=8,
        num_samples=total,
        order=order,
        seed=0,
        schedule_version=VERSION,
    ):
        checksum ^= int(block[-1])
        count += block.size
    assert count == total, (count, total)
    return checksum


def tiny_cluster_sizes(n_clusters: int) -> np.ndarray:
    """The documents of each of K tiny clusters (1..20, the first draws of seed 0)."""
    return np.random.default_rng(0).integers(1, 21, n_clusters)


def tiny_cluster_labels(n_clusters: int, *, sparse: bool) -> np.ndarray:
    """K clusters of 1..20 documents (shuffled); ``sparse``: the same under ids in [0, 2**31)."""
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 21, n_clusters)  # == tiny_cluster_sizes(n_clusters)
    labels = np.repeat(np.arange(n_clusters, dtype=np.int64), sizes)
    labels = labels[rng.permutation(labels.size)]
    if sparse:  # distinct random ids, ascending like the dense ones (same cluster order)
        ids = np.sort(rng.choice(2**31, size=n_clusters, replace=False))
        labels = ids[labels]
    return labels


def _resident_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(case: str, n_clusters: int, draws: int, max_repeats: int | None) -> None:
    """One measured build in this (fresh) process; prints one JSON line."""
    labels = None
    if case != "permutation":
        labels = tiny_cluster_labels(n_clusters, sparse=case == "sparse")
    before = _resident_mib()
    start = time.perf_counter()
    if labels is None:
        np.random.default_rng(0).permutation(draws)
    else:
        schedule = build_schedule(
            labels,
            max_repeats=max_repeats,
            num_samples=draws,
            seed=0,
            schedule_version=VERSION,
        )
        assert len(schedule) == draws
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux
    print(json.dumps({"wall": wall, "peak_mib": peak, "before_mib": before}))


def many_clusters(args: argparse.Namespace) -> None:
    k, t = args.clusters or 1_000_000, args.draws or 10_000_000
    repeats = None if args.max_repeats in ("none", "inf") else int(args.max_repeats)
    available = None if repeats is None else repeats * int(tiny_cluster_sizes(k).sum())
    if available is not None and t > available:
        sys.exit(
            f"bench_schedule.py: --draws {t:,} is more than the {available:,} draws that "
            f"{k:,} clusters of 1..20 documents hold at --max-repeats {repeats} (every "
            f"cluster is clipped before); pass --draws {available} or fewer, more "
            "--clusters, or --max-repeats none"
        )
    print(
        f"K={k:,} clusters of 1..20 documents, T={t:,} draws, max_repeats={repeats}, "
        "build_schedule in a child process per run"
    )
    runs: dict[str, list[dict[str, float]]] = {"permutation": [], "dense": [], "sparse": []}
    for _ in range(args.rounds):  # the machine is shared: alternate, keep each one's best
        for case in runs:
            command = [sys.executable, __file__, "--child", case, "--clusters", str(k)]
            command += ["--draws", str(t), "--max-repeats", str(args.max_repeats)]
            if VERSION is not None:
                command += ["--schedule-version", str(VERSION)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            runs[case].append(json.loads(done.stdout.strip().splitlines()[-1]))
    best = {case: min(r["wall"] for r in values) for case, values in runs.items()}
    for case, values in runs.items():
        shown = ", ".join(f"{r['wall']:.2f}" for r in values)
        peak = max(r["peak_mib"] for r in values)
        print(
            f"{case:>12}: wall best {best[case]:6.2f} s (rounds: {shown}); peak RSS "
            f"{peak:7.1f} MiB ({values[0]['before_mib']:.1f} MiB before the timed part)"
        )
    base = best["permutation"]
    dense_peak = max(r["peak_mib"] for r in runs["dense"])
    sparse_peak = max(r["peak_mib"] for r in runs["sparse"])
    print(
        f"ratio dense / permutation: {best['dense'] / base:.1f}, sparse / permutation: "
        f"{best['sparse'] / base:.1f}  (target <= 3)"
    )
    print(
        f"peak RSS dense {dense_peak:.0f} MiB, sparse ids up to 2**31 {sparse_peak:.0f} MiB "
        f"(ratio {sparse_peak / dense_peak:.2f}; target < 1024 MiB, ratio ~1)"
    )


#: --table: documents, draws, and the grid.
TABLE_DOCUMENTS = 10_000_000
TABLE_DRAWS = 10_000_000
TABLE_CLUSTERS = (10, 100, 1_000, 10_000, 100_000, 1_000_000)
TABLE_REPEATS = ("1", "2", "4", "8", "none")
TABLE_ORDERS = ("online", "planned")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, as ``lscpu`` prints it)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def table_sizes(n_clusters: int, n_documents: int = TABLE_DOCUMENTS) -> np.ndarray:
    """K cluster sizes drawn uniformly in 1..2N/K, scaled to sum to exactly N (each >= 1)."""
    rng = np.random.default_rng(n_clusters)
    mean = n_documents // n_clusters
    raw = rng.integers(0, 2 * mean + 1, n_clusters).astype(np.float64) + 1e-9
    sizes = 1 + np.floor(raw / raw.sum() * (n_documents - n_clusters)).astype(np.int64)
    sizes[: n_documents - int(sizes.sum())] += 1
    return sizes


def table_corpus(
    n_clusters: int, policy: str, depth: int = 1
) -> tuple[np.ndarray, np.ndarray | None]:
    """Shuffled labels of :func:`table_sizes`, and for ``hierarchical`` levels of parents.

    One level (``depth=1``, the table's): ~sqrt(K) top nodes of uneven fan-out. Two:
    ~K / 3 middle nodes (about three leaves each) under ~K**(1/3) top nodes.
    """
    sizes = table_sizes(n_clusters)
    labels = np.repeat(np.arange(n_clusters, dtype=np.int64), sizes)
    labels = labels[np.random.default_rng(1).permutation(labels.size)]
    if policy != "hierarchical":
        return labels, None
    fan_outs = [n_clusters**0.5] if depth == 1 else [n_clusters / 3, n_clusters ** (1 / 3)]
    parent_of = np.arange(n_clusters, dtype=np.int64)  # of every node of the level below
    columns = []
    for seed, nodes in enumerate(fan_outs, start=2):
        n_parents = max(1, int(round(nodes)))
        parent = np.random.default_rng(seed).integers(0, n_parents, parent_of.max() + 1)
        parent[: min(n_parents, parent.size)] = np.arange(min(n_parents, parent.size))
        parent_of = parent[parent_of]
        columns.insert(0, parent_of)
    return labels, np.stack(columns, axis=1)[labels]


def table_draws(n_clusters: int, policy: str, repeats: int | None) -> int:
    if repeats is None or policy == "uniform":
        return TABLE_DRAWS
    return min(TABLE_DRAWS, repeats * TABLE_DOCUMENTS)


def table_build(labels, levels, policy: str, repeats: int | None, draws: int, order: str):
    """One build of a --table cell (its policy's options, seed 0, the chosen version)."""
    kwargs = {"alpha": 0.5} if policy == "temperature" else {}
    if levels is not None:
        kwargs["levels"] = levels
    return build_schedule(
        labels,
        policy=policy,
        max_repeats=repeats,
        num_samples=draws,
        order=order,
        seed=0,
        schedule_version=VERSION,
        **kwargs,
    )


def table_child(args: argparse.Namespace) -> None:
    """One measured build (or permutation) of the --table grid in this fresh process."""
    repeats = None if args.max_repeats in ("none", "inf") else int(args.max_repeats)
    draws = args.draws
    labels = levels = None
    if args.policy != "permutation":
        labels, levels = table_corpus(args.clusters, args.policy)
    before = _resident_mib()
    start = time.perf_counter()
    if labels is None:
        np.random.default_rng(0).permutation(draws)
    else:
        schedule = table_build(labels, levels, args.policy, repeats, draws, args.order)
        assert len(schedule) == draws, (len(schedule), draws)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux
    print(json.dumps({"wall": wall, "peak_mib": peak, "before_mib": before}))


def _table_run(policy: str, clusters: int, order: str, repeats: str, draws: int) -> dict:
    command = [sys.executable, __file__, "--child", "table", "--policy", policy]
    command += ["--clusters", str(clusters), "--order", order, "--max-repeats", repeats]
    command += ["--draws", str(draws)]
    if VERSION is not None:
        command += ["--schedule-version", str(VERSION)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(args: argparse.Namespace) -> None:
    """The K x order x R grid: build time / permutation time and peak RSS, per row."""
    policies = args.policies.split(",")
    clusters = [int(k) for k in args.table_clusters.split(",")] if args.table_clusters else None
    grid_repeats = args.table_repeats.split(",") if args.table_repeats else TABLE_REPEATS
    rows = []
    for policy in policies:
        for k in clusters or TABLE_CLUSTERS:
            for order in TABLE_ORDERS:
                if order == "planned" and policy in ("hierarchical", "random"):
                    continue  # hierarchical is online only; random has no clusters to plan
                for repeats in grid_repeats:
                    if policy == "uniform" and repeats != "none":
                        continue  # uniform never clips
                    r = None if repeats == "none" else int(repeats)
                    rows.append((policy, k, order, repeats, table_draws(k, policy, r)))
    version = "the default rule" if VERSION is None else f"schedule_version={VERSION}"
    print(
        f"CPU: {cpu_model()}; N={TABLE_DOCUMENTS:,} documents, {version}; "
        f"{args.rounds} rounds, each build and permutation in a fresh child"
    )
    lengths = sorted({row[4] for row in rows})
    bases: dict[int, list[float]] = {t: [] for t in lengths}
    walls: dict[tuple, list[float]] = {row: [] for row in rows}
    peaks: dict[tuple, float] = {row: 0.0 for row in rows}
    ratios: dict[tuple, list[float]] = {row: [] for row in rows}
    for _ in range(args.rounds):  # the machine is shared: interleave, keep the best
        for t in lengths:
            bases[t].append(_table_run("permutation", 1, "online", "none", t)["wall"])
        for row in rows:
            result = _table_run(*row)
            walls[row].append(result["wall"])
            peaks[row] = max(peaks[row], result["peak_mib"])
            ratios[row].append(result["wall"] / bases[row[4]][-1])
        print(f"  round done ({len(rows)} builds)", file=sys.stderr, flush=True)
    for t in lengths:
        shown = ", ".join(f"{w:.2f}" for w in bases[t])
        print(f"permutation({t:,}): best {min(bases[t]):.2f} s (rounds: {shown})")
    print(
        f"{'policy':>12} {'K':>9} {'order':>8} {'R':>5} {'T':>11} {'best s':>7} "
        f"{'ratio':>6} {'per-round ratios':>17} {'peak RSS':>9}"
    )
    worst = 0.0
    for row in rows:
        policy, k, order, repeats, t = row
        ratio = min(walls[row]) / min(bases[t])
        worst = max(worst, ratio)
        spread = f"{min(ratios[row]):.1f}-{max(ratios[row]):.1f}"
        print(
            f"{policy:>12} {k:>9,} {order:>8} {repeats:>5} {t:>11,} {min(walls[row]):7.2f} "
            f"{ratio:6.2f} {spread:>17} {peaks[row]:6.0f} MiB"
        )
    print(f"largest ratio (best build / best permutation): {worst:.2f}  (target <= 3)")


def profile(args: argparse.Namespace) -> None:
    """Where one build of a --table cell spends its time (cProfile of the main thread).

    The second of two builds is profiled (the first loads what a process loads once).
    With ``--one-cpu`` the process runs on one CPU, so the build has no helper thread
    and the profile sees all of its work.
    """
    import cProfile
    import pstats

    if args.one_cpu:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    clusters = args.clusters or 100_000
    repeats = None if args.max_repeats in ("none", "inf") else int(args.max_repeats)
    labels, levels = table_corpus(clusters, args.policy, args.tree_depth)
    draws = args.draws or table_draws(clusters, args.policy, repeats)

    def build() -> None:
        table_build(labels, levels, args.policy, repeats, draws, args.order)

    build()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(build)
    wall = time.perf_counter() - start
    cpus = "one CPU" if args.one_cpu else f"{len(os.sched_getaffinity(0))} CPUs"
    print(
        f"CPU: {cpu_model()}; {args.policy}, K={clusters:,}, {args.order}, R={args.max_repeats}, "
        f"T={draws:,}, on {cpus}: {wall:.2f} s under the profiler"
    )
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=1M, K=500, T=5M")
    parser.add_argument(
        "--many-clusters",
        action="store_true",
        help="K=10^6 clusters of 1..20 documents, T=10^7: dense and sparse ids, in children",
    )
    parser.add_argument(
        "--table",
        action="store_true",
        help="K = 10..10^6 x order x R: build time / permutation time and peak RSS, in children",
    )
    parser.add_argument(
        "--policies", default="clusterclip", help="--table: comma-separated policies"
    )
    parser.add_argument("--table-clusters", default=None, help="--table: comma-separated K")
    parser.add_argument(
        "--table-repeats", default=None, help="--table: comma-separated R (none: no cap)"
    )
    parser.add_argument("--policy", default="clusterclip", help="--profile: the policy")
    parser.add_argument("--order", default="online", help="--profile: online or planned")
    parser.add_argument("--max-repeats", default="4", help="--many-clusters, --profile: R, or none")
    parser.add_argument(
        "--child",
        choices=("permutation", "dense", "sparse", "table"),
        help="one measured run of --many-clusters or --table, in this process (prints JSON)",
    )
    parser.add_argument("--documents", type=int, default=None)
    parser.add_argument("--clusters", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--skip-planned", action="store_true")
    parser.add_argument(
        "--schedule-version", type=int, default=None, help="draw rule (default: the default rule)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (best kept)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile one build of the --table corpus (--clusters, --order, --max-repeats)",
    )
    parser.add_argument(
        "--one-cpu", action="store_true", help="--profile: on one CPU (no helper thread)"
    )
    parser.add_argument(
        "--tree-depth",
        type=int,
        choices=(1, 2),
        default=1,
        help="--profile, hierarchical: levels above the leaves (2: ~K/3 middle nodes)",
    )
    args = parser.parse_args()
    global VERSION
    VERSION = args.schedule_version
    if args.profile:
        profile(args)
        return
    if args.child == "table":
        table_child(args)
        return
    if args.table:
        table(args)
        return
    if args.child:
        repeats = None if args.max_repeats in ("none", "inf") else int(args.max_repeats)
        child(args.child, args.clusters, args.draws, repeats)
        return
    if args.many_clusters:
        many_clusters(args)
        return
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
