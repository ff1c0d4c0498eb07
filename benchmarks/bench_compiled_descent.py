"""Benchmark: the tree descent of ``policy="hierarchical"`` in numpy against compiled loops.

An experiment for issue 31, item 2 (not a code path of the package): would
compiling the schedule's hot loops make the worst cells of
``bench_schedule.py --table`` meet "at most 3x a numpy permutation"? The tree
descent (:meth:`clusterclip.schedule.treewindows.TreeWindows._descend`) is the
largest part of the slowest cell (``hierarchical``, 10^6 leaves under ~10^3
top nodes, R = 4, 10^7 draws). This script draws the same chunks three ways
and checks that every chunk (groups, draw numbers, last-draw flags) is the same:

* ``numpy``: the package's descent, as shipped;
* ``loop``: version 4's rule as one compiled loop over positions (numba),
  taking each node's stream candidates in order until one's child is active;
* ``batched``: the same loop in batches of 8,192 positions, whose candidate
  children and their counts are first loaded for the whole batch (independent
  loads the CPU overlaps), then taken in order; a node whose candidate was
  rejected redraws in order for the rest of the batch;
* ``C batched``: that batched loop in C, compiled here with ``cc -O2`` and called
  through ctypes (skipped with a note when no C compiler is found).

It prints the seconds spent in the descent and in the whole choice (every
``next()``), best of ``--rounds``, and what numba costs a fresh process before
any work: ``import numba`` plus the first call of the two kernels, loaded from
numba's cache (the kernels are compiled and cached by an earlier child), against
loading the C library (``ctypes.CDLL``) in a fresh process. numba is not a dependency of clusterclip:
install it to run this (``pip install numba``).

Run::

    pip install numba
    PYTHONPATH=src python benchmarks/bench_compiled_descent.py
    PYTHONPATH=src python benchmarks/bench_compiled_descent.py --clusters 100000 --max-repeats none
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from clusterclip.cluster.blas import cpu_model
from clusterclip.schedule import SchedulePolicy
from clusterclip.schedule.api import open_stream
from clusterclip.schedule.treewindows import TreeWindows

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_schedule import table_corpus  # noqa: E402  (the --table corpus)

try:
    import numba
except ImportError:  # an experiment: say what it needs
    sys.exit(
        "bench_compiled_descent.py needs numba (not a clusterclip dependency): pip install numba"
    )

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
BATCH = 8192


@numba.njit(inline="always", cache=True)
def _mix(z):  # splitmix64's output function, as feistel.mix64
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


@numba.njit(inline="always", cache=True)
def _listed_index(key, n, m):
    """Listed child number of candidate ``n`` of a node's stream with window key ``key``."""
    word = _mix(key + np.uint64(n + 1) * _GAMMA)
    index = np.int64(np.float64(word >> np.uint64(11)) * 2.0**-53 * np.float64(m))
    return min(index, m - 1)


@numba.njit(cache=True)
def _take(v, child, dead, state, i, out):
    """Position ``i`` takes ``child`` of node ``v``: its draw number and last-draw flag."""
    count, cap = state[child, 0], state[child, 1]
    state[child, 0] = count + 1
    out[0][i], out[1][i], out[2][i] = child, count, count + 1 == cap
    if count + 1 == cap:
        dead[v] += 1


@numba.njit(cache=True)
def descend_loop(entries, keys, start, listed, children, next_n, dead, state, window, out):
    """Each position in turn takes its node's next candidates until one's child is active."""
    after = np.uint64(window + 1) * _GAMMA
    for i in range(entries.size):
        v = entries[i]
        key = _mix(keys[v] + after)
        n = next_n[v]
        while True:
            child = children[start[v] + _listed_index(key, n, listed[v])]
            n += 1
            if state[child, 0] < state[child, 1]:
                break
        next_n[v] = n
        _take(v, child, dead, state, i, out)


@numba.njit(cache=True)
def descend_batched(entries, keys, start, listed, children, next_n, dead, state, window, out):
    """:func:`descend_loop` with each batch's candidate children and counts loaded first."""
    after = np.uint64(window + 1) * _GAMMA
    planned = next_n.copy()  # each node's counter if no candidate is rejected
    numbers = np.empty(BATCH, np.int64)
    slots = np.empty(BATCH, np.int64)
    kids = np.empty(BATCH, np.int64)
    touched = np.empty(BATCH, np.int64)
    for first in range(0, entries.size, BATCH):
        last = min(first + BATCH, entries.size)
        for i in range(first, last):  # candidate numbers and listed slots
            v = entries[i]
            numbers[i - first] = planned[v]
            planned[v] += 1
            key = _mix(keys[v] + after)
            slots[i - first] = start[v] + _listed_index(key, numbers[i - first], listed[v])
        for j in range(last - first):  # independent loads: the CPU overlaps them
            kids[j] = children[slots[j]]
        for j in range(last - first):
            touched[j] = state[kids[j], 0]
        for i in range(first, last):  # in order, as the rule says
            v = entries[i]
            child = kids[i - first]
            n = next_n[v]
            if numbers[i - first] != n or state[child, 0] >= state[child, 1]:
                key = _mix(keys[v] + after)  # rejected before: redraw in order
                while True:
                    child = children[start[v] + _listed_index(key, n, listed[v])]
                    if state[child, 0] < state[child, 1]:
                        break
                    n += 1
            next_n[v] = n + 1
            _take(v, child, dead, state, i, out)
        for i in range(first, last):
            planned[entries[i]] = next_n[entries[i]]


_C_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#define GAMMA 0x9E3779B97F4A7C15ULL
#define BATCH 8192
static inline uint64_t mix(uint64_t z) {
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27; z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline int64_t listed_index(uint64_t key, int64_t n, int64_t m) {
    uint64_t word = mix(key + (uint64_t)(n + 1) * GAMMA);
    int64_t index = (int64_t)((double)(word >> 11) * 0x1p-53 * (double)m);
    return index < m - 1 ? index : m - 1;
}
int descend_batched(int64_t size, const int64_t *entries, const uint64_t *keys,
                    const int64_t *start, const int64_t *listed, const int64_t *children,
                    int64_t *next_n, int64_t n_nodes, int64_t *dead, int64_t *state,
                    int64_t window, int64_t *out_child, int64_t *out_draws, uint8_t *out_final) {
    uint64_t after = (uint64_t)(window + 1) * GAMMA;
    int64_t *planned = malloc(sizeof(int64_t) * (n_nodes + 4 * BATCH));
    if (!planned) return -1;
    int64_t *numbers = planned + n_nodes, *slots = numbers + BATCH;
    int64_t *kids = slots + BATCH, *touched = kids + BATCH;
    for (int64_t v = 0; v < n_nodes; v++) planned[v] = next_n[v];
    for (int64_t first = 0; first < size; first += BATCH) {
        int64_t last = first + BATCH < size ? first + BATCH : size;
        for (int64_t i = first; i < last; i++) {
            int64_t v = entries[i];
            numbers[i - first] = planned[v]++;
            slots[i - first] = start[v] + listed_index(mix(keys[v] + after), numbers[i - first], listed[v]);
        }
        for (int64_t j = 0; j < last - first; j++) kids[j] = children[slots[j]];
        for (int64_t j = 0; j < last - first; j++) touched[j] = state[2 * kids[j]];
        for (int64_t i = first; i < last; i++) {
            int64_t v = entries[i], child = kids[i - first], n = next_n[v];
            if (numbers[i - first] != n || state[2 * child] >= state[2 * child + 1]) {
                uint64_t key = mix(keys[v] + after);
                for (;; n++) {
                    child = children[start[v] + listed_index(key, n, listed[v])];
                    if (state[2 * child] < state[2 * child + 1]) break;
                }
            }
            next_n[v] = n + 1;
            int64_t count = state[2 * child], cap = state[2 * child + 1];
            state[2 * child] = count + 1;
            out_child[i] = child; out_draws[i] = count; out_final[i] = count + 1 == cap;
            if (count + 1 == cap) dead[v]++;
        }
        for (int64_t i = first; i < last; i++) planned[entries[i]] = next_n[entries[i]];
    }
    free(planned);
    return 0;
}
"""


def c_library(directory: str) -> str | None:
    """Compile the C kernel into ``directory``; its path, or None without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source = os.path.join(directory, "descent.c")
    library = os.path.join(directory, "descent.so")
    with open(source, "w") as handle:
        handle.write(_C_SOURCE)
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def c_kernel(library: str):
    """The C kernel with the numba kernels' signature."""
    function = ctypes.CDLL(library).descend_batched  # ctypes releases the GIL in the call
    function.restype = ctypes.c_int

    def kernel(entries, keys, start, listed, children, next_n, dead, state, window, out):
        arrays = (entries, keys, start, listed, children, next_n, dead, state, *out)
        for array in arrays:  # the C side reads packed 8-byte integers (1-byte flags)
            expected = 1 if array.dtype == bool else 8
            assert array.flags.c_contiguous and array.dtype.itemsize == expected
        pointer = [ctypes.c_void_p(a.ctypes.data) for a in arrays]
        done = function(
            ctypes.c_int64(entries.size), *pointer[:6], ctypes.c_int64(next_n.size),
            pointer[6], pointer[7], ctypes.c_int64(window), *pointer[8:],
        )  # fmt: skip
        if done != 0:
            raise MemoryError("descent.so: out of memory")

    return kernel


class Timed(TreeWindows):
    """TreeWindows whose descent is timed, shipped (``kernel=None``) or compiled."""

    def __init__(self, kernel, *args) -> None:
        super().__init__(*args)
        self.kernel = kernel
        self.seconds = 0.0

    def _descend(self, depth, entries):
        begin = time.perf_counter()
        if self.kernel is None:
            result = super()._descend(depth, entries)
        else:
            level = self.levels[depth]
            below = self.levels[depth + 1] if depth + 1 < len(self.levels) else None
            state = self._leaves if below is None else below.state
            result = (
                np.empty(entries.size, np.int64),
                np.empty(entries.size, np.int64),
                np.empty(entries.size, np.bool_),
            )
            self.kernel(
                entries, level.keys, level.start, level.listed, level.children,
                self.next_n[depth], level.dead, state, self.window, result,
            )  # fmt: skip
        self.seconds += time.perf_counter() - begin
        return result


def run(kernel, prep, draws: int) -> tuple[float, float, str]:
    """Seconds in the descent, in the whole choice, and a hash of every chunk."""
    windows = Timed(kernel, prep.config.seed, prep.weights, prep.caps, prep.tree_paths)
    digest = hashlib.sha256()
    begin = time.perf_counter()
    while windows.position < draws:
        chunk = windows.next()
        if chunk is None:
            break
        for part in (chunk.groups, chunk.draws, chunk.clips):
            digest.update(part.astype("<i8").tobytes())
    return windows.seconds, time.perf_counter() - begin, digest.hexdigest()


_STARTUP = """
import time
start = time.perf_counter()
import numba
imported = time.perf_counter() - start
import numpy as np
import bench_compiled_descent as bench
entries = np.zeros(4, np.int64)
for kernel in (bench.descend_loop, bench.descend_batched):
    out = (np.empty(4, np.int64), np.empty(4, np.int64), np.empty(4, np.bool_))
    state = np.array([[0, 9], [0, 9]], np.int64)
    begin = time.perf_counter()
    kernel(entries, np.ones(1, np.uint64), np.zeros(1, np.int64), np.full(1, 2),
           np.arange(2), np.zeros(1, np.int64), np.zeros(1, np.int64), state, 0, out)
    imported += time.perf_counter() - begin
print(imported)
"""


_C_STARTUP = """
import ctypes, sys, time
start = time.perf_counter()
ctypes.CDLL(sys.argv[1]).descend_batched
print(time.perf_counter() - start)
"""


def startup_seconds(library: str | None) -> tuple[float, float | None]:
    """Seconds a fresh process spends before the first descent: numba's, and the C library's.

    numba: ``import numba`` and the first calls of the cached kernels; C: loading
    the library. Best of the later of three children (the first may write numba's cache).
    """
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    results: dict[str, float] = {}
    for name, command in (("numba", [_STARTUP]), ("c", [_C_STARTUP, str(library)])):
        if name == "c" and library is None:
            continue
        seconds = []
        for _ in range(3):
            done = subprocess.run(
                [sys.executable, "-c", *command],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            seconds.append(float(done.stdout.split()[-1]))
        results[name] = min(seconds[1:])
    return results["numba"], results.get("c")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1_000_000)
    parser.add_argument("--max-repeats", default="4", help="R, or none")
    parser.add_argument("--draws", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    repeats = None if args.max_repeats == "none" else int(args.max_repeats)
    labels, levels = table_corpus(args.clusters, "hierarchical")
    policy = SchedulePolicy(
        policy="hierarchical", max_repeats=repeats, num_samples=args.draws, seed=0
    )
    prep = open_stream(labels, policy, levels=levels).prep
    tiny = SchedulePolicy(policy="hierarchical", max_repeats=repeats, num_samples=1000, seed=0)
    small = open_stream(labels[:10_000], tiny, levels=levels[:10_000]).prep
    with tempfile.TemporaryDirectory() as directory:
        library = c_library(directory)
        kernels = [("numpy", None), ("loop", descend_loop), ("batched", descend_batched)]
        if library is not None:
            kernels.append(("C batched", c_kernel(library)))
        for _, kernel in kernels[1:]:
            run(kernel, small, 1000)  # compile outside the timing
        print(
            f"CPU: {cpu_model()}; hierarchical, K={args.clusters:,} leaves, "
            f"R={args.max_repeats}, T={args.draws:,}; best of {args.rounds}, one thread"
        )
        if library is None:
            print("no C compiler (cc, gcc) found: the C kernel is left out")
        hashes = {}
        for name, kernel in kernels:
            times = [run(kernel, prep, args.draws) for _ in range(args.rounds)]
            hashes[name] = {t[2] for t in times}
            descent = min(t[0] for t in times)
            choice = min(t[1] for t in times)
            print(f"{name:>9}: descent {descent:5.2f} s, whole choice {choice:5.2f} s")
        same = all(h == hashes["numpy"] and len(h) == 1 for h in hashes.values())
        print(f"same chunks (groups, draws, last draws) every way: {same}")
        numba_start, c_start = startup_seconds(library)
    print(f"numba in a fresh process (import + first calls, cached): {numba_start:.2f} s")
    if c_start is not None:
        print(f"the C library in a fresh process (ctypes.CDLL): {c_start * 1e3:.1f} ms")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
