"""Benchmark: numpy's sort of int64 against the radix passes the schedule takes instead.

The schedule orders integers in its hot paths (``clusterclip.schedule.sorting``).
numpy sorts int64 with a vectorised quicksort chosen by CPU at import time; on
some CPUs (AMD Zen 4: its AVX-512 compress-stores are microcoded) that kernel is
several times slower than numpy's AVX2 one on the same machine. This script
prints, for 10^7 keys, the best of three of

* ``np.sort`` of packed int64 keys, whole and in batches of 2**17 (the pass sorts);
* two 16-bit radix passes (``radix_order``, 32-bit values), whole and in batches;
* one 16-bit radix pass (``np.argsort`` of uint16, stable);
* ``rng.permutation(10^7)``, the schedule table's baseline;

and what ``quicksort_is_slow()`` answers here. With ``--both`` it runs once as
is and once in a child with numpy's AVX-512 kernels switched off
(``NPY_DISABLE_CPU_FEATURES="AVX512_ICL X86_V4"``), side by side.

Run::

    PYTHONPATH=src python benchmarks/bench_sorts.py
    PYTHONPATH=src python benchmarks/bench_sorts.py --both
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from clusterclip.cluster.blas import cpu_model
from clusterclip.schedule.sorting import quicksort_is_slow, radix_order

N = 10_000_000
BATCH = 2**17
AVX2_ONLY = "AVX512_ICL X86_V4"


def best(function, rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def measure() -> dict[str, float]:
    rng = np.random.default_rng(0)
    packed = rng.integers(0, 2**62, N)
    wide = rng.integers(0, 2**32, N)
    narrow = rng.integers(0, 2**16, N).astype(np.uint16)
    return {
        "np.sort int64, whole": best(lambda: np.sort(packed)),
        "np.sort int64, batches of 2**17": best(
            lambda: [np.sort(packed[i : i + BATCH]) for i in range(0, N, BATCH)]
        ),
        "radix_order 32-bit, whole": best(lambda: radix_order(wide, 32)),
        "radix_order 32-bit, batches of 2**17": best(
            lambda: [radix_order(wide[i : i + BATCH], 32) for i in range(0, N, BATCH)]
        ),
        "argsort uint16 stable, whole": best(lambda: np.argsort(narrow, kind="stable")),
        "rng.permutation(10^7)": best(lambda: np.random.default_rng(0).permutation(N)),
        "quicksort_is_slow()": float(quicksort_is_slow()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--both", action="store_true", help="also run with AVX-512 kernels off")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    mine = measure()
    if args.json:
        print(json.dumps(mine))
        return
    columns = {"as is": mine}
    if args.both:
        env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=AVX2_ONLY)
        done = subprocess.run(
            [sys.executable, __file__, "--json"], env=env, capture_output=True, text=True
        )
        if done.returncode == 0:
            columns["AVX-512 kernels off"] = json.loads(done.stdout)
        else:
            print(f"the child without AVX-512 failed:\n{done.stderr}", file=sys.stderr)
    print(f"CPU: {cpu_model()}; numpy {np.__version__}; best of 3, seconds, N = {N:,}")
    if args.both:
        print(f"AVX-512 kernels off: a child with NPY_DISABLE_CPU_FEATURES={AVX2_ONLY!r}")
    print(f"{'':38s}" + "".join(f"{name:>22s}" for name in columns))
    for row in mine:
        cells = []
        for values in columns.values():
            value = values[row]
            cells.append(f"{bool(value)!s:>22s}" if row.endswith("()") else f"{value:22.3f}")
        print(f"{row:38s}" + "".join(cells))


if __name__ == "__main__":
    main()
