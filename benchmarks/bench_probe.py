"""Benchmark: what ``backend="fastest"``'s probe costs and picks, and whether its pick is faster.

On a synthetic n x d matrix (:func:`clusterclip.cluster.synthetic.vmf_mixture`,
default 200k x 384, K = 1024):

1. the probe on the fit sample, with an empty temporary cache: its wall time,
   each candidate's seconds per Lloyd pass on the probe rows, the skipped ones
   and the pick; then the same call again (a cache hit) and its time;
2. the backend the CPU-flag rule (``auto``, deterministic since issue 29) picks;
3. a whole 20-iteration fit on the probe's pick and on the flag rule's pick
   (one fit if they agree), alternated ``--repeats`` times in this process;
   with ``--all``, a fit on every candidate, to check the probe's ranking.

Run::

    PYTHONPATH=src python benchmarks/bench_probe.py                 # 200k x 384, K = 1024
    PYTHONPATH=src python benchmarks/bench_probe.py --quick         # 20k x 384, K = 128
    PYTHONPATH=src python benchmarks/bench_probe.py --all --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from clusterclip.cluster import KMeans
from clusterclip.cluster.synthetic import vmf_mixture


def log(text: str) -> None:
    print(text, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k x 384, K = 128")
    parser.add_argument("--n", type=int, help="rows (default 200,000; 20,000 with --quick)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, help="clusters (default 1024; 128 with --quick)")
    parser.add_argument("--n-iter", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="fits per backend, alternated")
    parser.add_argument("--all", action="store_true", help="also fit on every candidate")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    n = args.n or (20_000 if args.quick else 200_000)
    k = args.k or (128 if args.quick else 1024)

    import torch

    from clusterclip.cluster.backends import resolve_backend
    from clusterclip.cluster.blas import cpu_model
    from clusterclip.cluster.probe import available_candidates, choose_backend
    from clusterclip.io import versions

    log(f"CPU: {cpu_model()}; {os.cpu_count()} cores, torch threads {torch.get_num_threads()}")
    log(f"versions: {versions('torch', 'faiss-cpu')}")
    log(f"data: vmf_mixture n={n:,} d={args.dim} K={k}, seed {args.seed}; {args.n_iter} iterations")
    X, _ = vmf_mixture(n, args.dim, k, seed=args.seed)
    sample_rows = min(n, 256 * k)  # KMeans's default sample: the probe sees this many rows
    sample = X[:sample_rows]

    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        choice = choose_backend("fastest", sample, k, cache_dir=cache)
        probe_wall = time.perf_counter() - start
        start = time.perf_counter()
        cached = choose_backend("fastest", sample, k, cache_dir=cache)
        cached_wall = time.perf_counter() - start
    rule = resolve_backend("auto")
    log(f"candidates: {', '.join(available_candidates())}")
    log(
        f"probe: {probe_wall:.2f} s wall on {choice.probe_rows:,} rows (1 warm-up + 2 timed passes each)"
    )
    for name, seconds in sorted(choice.seconds.items(), key=lambda item: item[1]):
        log(f"  {name:<11} {seconds:.4f} s per pass")
    for name, error in choice.skipped.items():
        log(f"  {name:<11} skipped: {error}")
    log(f"probe pick: {choice.backend}; CPU-flag rule pick: {rule}")
    log(f"second call: {cached.reason} in {1000 * cached_wall:.1f} ms -> {cached.backend}")

    backends = list(dict.fromkeys([choice.backend, rule]))
    if args.all:
        backends += [name for name in choice.seconds if name not in backends]
    fits: dict[str, list[dict[str, float]]] = {name: [] for name in backends}
    for repeat in range(args.repeats):
        for name in backends:
            model = KMeans(k, seed=args.seed, n_iter=args.n_iter, backend=name).fit(X)
            lloyd = sum(stat["seconds"] for stat in model.stats_)
            fits[name].append({"seconds": model.fit_seconds_, "lloyd": lloyd,
                               "seeding": model.init_["seconds"], "objective": model.objective_})  # fmt: skip
            log(f"fit {repeat + 1}/{args.repeats} {name:<11} {model.fit_seconds_:7.2f} s "
                f"(Lloyd {lloyd:6.2f} s, seeding {model.init_['seconds']:.2f} s, "
                f"{model.n_iter_} iterations)  objective {model.objective_:.5f}")  # fmt: skip
    best = {name: min(f["seconds"] for f in runs) for name, runs in fits.items()}
    if rule != choice.backend:
        log(f"fit on the probe's pick ({choice.backend}) {best[choice.backend]:.2f} s vs the "
            f"flag rule's ({rule}) {best[rule]:.2f} s: {best[rule] / best[choice.backend]:.2f}x; "
            f"the probe cost {probe_wall:.2f} s once")  # fmt: skip
    else:
        log(
            f"probe and flag rule agree ({rule}): fit {best[rule]:.2f} s; probe cost {probe_wall:.2f} s once"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"n": n, "dim": args.dim, "k": k, "cpu": cpu_model(), "probe_wall": probe_wall,
                       "choice": choice.as_record(), "rule": rule, "fits": fits}, handle, indent=2)  # fmt: skip


if __name__ == "__main__":
    main()
