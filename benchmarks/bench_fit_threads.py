"""k-means fit on a shared machine: ours (threads measured) vs one thread vs the authors' bf16 loop.

The fit section of ``bench_kmeans.py`` is measured on an idle machine. On a machine that
another job shares, every parallel region of a fit waits for the thread that the
scheduler has parked; our Lloyd iteration has several per block of rows, the authors'
plain loop three per iteration. This benchmark alternates, in one process and at the
machine's current load (printed):

* ``ours``: ``KMeans(backend="torch-bf16")`` as shipped: torch's default threads, and the
  fit times one E-step on all threads and on one and runs its Lloyd iterations on the
  faster (``clusterclip.cluster.kmeans.lloyd_threads``; its choice is printed);
* ``ours-1``: the same with ``torch.set_num_threads(1)`` (what ``OMP_NUM_THREADS=1`` gives);
* ``authors-bf16``: the paper's plain torch loop in bf16 (``bench_kmeans.authors_loop``),
  default threads.

It prints each round's seconds, the best of each, and the ratios to the authors' loop.
Run it once idle and once next to another job (e.g. the test suite)::

    PYTHONPATH=src python benchmarks/bench_fit_threads.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from bench_kmeans import authors_loop

from clusterclip.cluster import KMeans
from clusterclip.cluster.blas import cpu_model
from clusterclip.cluster.synthetic import vmf_mixture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="rows (default 100,000)")
    parser.add_argument("--k", type=int, default=1024, help="clusters (default 1024)")
    parser.add_argument("--iterations", type=int, default=10, help="Lloyd iterations")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    args = parser.parse_args()
    default_threads = torch.get_num_threads()
    print(f"CPU: {cpu_model()}; cores {os.cpu_count()}; torch threads {default_threads}")
    X, _ = vmf_mixture(args.n, 384, args.k, seed=0)
    times: dict[str, list[float]] = {"ours": [], "ours-1": [], "authors-bf16": []}
    for round_ in range(args.rounds):
        for name in times:
            torch.set_num_threads(1 if name == "ours-1" else default_threads)
            started = time.perf_counter()
            chose = ""
            if name.startswith("ours"):
                model = KMeans(args.k, seed=0, n_iter=args.iterations, backend="torch-bf16")
                threads = model.fit(X).init_["lloyd_threads"]
                chose = f"   Lloyd on {threads['threads']} thread(s) {threads['seconds'] or ''}"
            else:
                authors_loop(X, args.k, args.iterations, 0, "bf16")
            seconds = time.perf_counter() - started
            times[name].append(seconds)
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"round {round_} {name:<13} {seconds:7.2f} s   load {load}{chose}", flush=True)
    torch.set_num_threads(default_threads)
    best = {name: float(np.min(values)) for name, values in times.items()}
    for name, seconds in best.items():
        print(
            f"best {name:<13} {seconds:7.2f} s   {seconds / best['authors-bf16']:.2f}x the authors' loop"
        )


if __name__ == "__main__":
    main()
