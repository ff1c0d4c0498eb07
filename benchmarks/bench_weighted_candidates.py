"""Benchmark: the weighted candidates of the schedule's windows against ``np.searchsorted``.

A temperature (or weighted) schedule draws each window's candidates by mapping
``rng.random(WINDOW)`` through the cumulative weights of the listed groups:
``np.searchsorted(cdf, u, side="right")``. The package finds the same indices
with a guide (:func:`clusterclip.schedule.windows.cdf_guide`: where each of
``L`` equal slices of [0, 1) starts in the cdf) and a compiled loop
(:func:`clusterclip.schedule.kernels.inverse_cdf`). This script times, on the
weights of the ``bench_schedule.py --table`` corpus (``|C_k| ** 0.5``), the
windows of one 10^7-draw build (``--windows`` of ``WINDOW`` uniforms each):

* ``searchsorted``: numpy's binary search, the baseline measured in the same run;
* ``guided``: the package's compiled loop with its guide;
* ``guided, int64 guide``: the same loop with the guide widened to int64
  (what it was before the guide was made int32).

Each is checked to give searchsorted's indices, and the best of ``--rounds``
is printed with its ratio to the baseline. The loop alone, with the cdf and the
guide in cache between windows: a build interleaves other work, so the same
windows take longer there (``bench_schedule.py --profile``).

Run::

    PYTHONPATH=src python benchmarks/bench_weighted_candidates.py
    PYTHONPATH=src python benchmarks/bench_weighted_candidates.py --clusters 100000
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from clusterclip.cluster.blas import cpu_model
from clusterclip.schedule import kernels
from clusterclip.schedule.windows import WINDOW, cdf_guide, listed_cdf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_schedule import table_corpus  # noqa: E402  (the --table corpus)
from bench_sorts import best  # noqa: E402  (the fastest of some calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=1_000_000, help="K (default 10^6)")
    parser.add_argument("--windows", type=int, default=168, help="windows of 65,536 draws")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (best kept)")
    args = parser.parse_args()
    if not kernels.compiled():
        sys.exit("the compiled kernels are not built: pip install . (or setup.py build_ext)")
    labels, _ = table_corpus(args.clusters, "temperature")
    weights = np.sqrt(np.bincount(labels).astype(np.float64))
    cdf = listed_cdf(weights, np.flatnonzero(weights > 0))
    guide = cdf_guide(cdf)
    rng = np.random.default_rng(0)
    windows = [rng.random(WINDOW) for _ in range(args.windows)]
    expected = [np.searchsorted(cdf, u, side="right") for u in windows]
    wide = guide.astype(np.int64)
    ways = {
        "searchsorted": lambda u: np.searchsorted(cdf, u, side="right"),
        f"guided ({guide.dtype} guide)": lambda u: kernels.inverse_cdf(cdf, u, guide),
        "guided, int64 guide": lambda u: kernels.inverse_cdf(cdf, u, wide),
    }
    print(
        f"CPU: {cpu_model()}; {cdf.size:,} weighted groups, {args.windows} windows of "
        f"{WINDOW:,} draws, best of {args.rounds}"
    )
    base = None
    for name, way in ways.items():
        for u, want in zip(windows, expected, strict=True):
            if not np.array_equal(way(u), want):
                sys.exit(f"{name}: not searchsorted's indices")
        seconds = best(lambda way=way: [way(u) for u in windows], args.rounds)
        base = seconds if base is None else base
        print(f"  {name:28s} {seconds:7.3f} s   {seconds / base:5.2f}x searchsorted")


if __name__ == "__main__":
    main()
