"""Overhead of the Ray engine against the local one, same data, same run.

Embeds the same KJV verses into fresh work directories with ``engine="local"``
and ``engine="ray"`` (1 and 2 actors on a local Ray instance with 2 CPUs; the
local engine also with torch and BLAS held to 1 thread, like a 1-CPU actor), then
assigns the resulting rows to 100 centroids with the local and the Ray
assignment, and prints the wall-clock ratios ray / local. Ray's start-up is
timed separately (it is paid once per process, or not at all when joining a
running cluster).

    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/bench_ray.py          # MiniLM, 1,500 verses
    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/bench_ray.py --quick  # tfidf, 3,000 verses

Not part of the test suite. Numbers are noisy on a shared machine; the ratios
come from runs made one after the other in this process.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import clusterclip
from clusterclip.cluster.assignment import assign_files
from clusterclip.cluster.kmeans import assign_matrix
from clusterclip.embed import embed
from clusterclip.engines import RayOptions
from clusterclip.io.shards import ShardedMatrix


def write_corpus(path: Path, n_documents: int) -> None:
    source = Path(clusterclip.__file__).parent / "data" / "kjv-verses.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as lines, open(path, "w") as out:
        for number, line in enumerate(lines):
            if number == n_documents:
                break
            out.write(json.dumps({"text": json.loads(line)["text"]}) + "\n")


@contextlib.contextmanager
def threads(count: int | None) -> Iterator[None]:
    """Limit this process's torch and BLAS threads (``None``: leave them as they are).

    A Ray actor reserving 1 CPU runs with ``OMP_NUM_THREADS=1``; the local
    engine uses every core. "local, 1 thread" compares like with like.
    """
    if count is None:
        yield
        return
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        with threadpool_limits(count):
            yield
    finally:
        torch.set_num_threads(before)


def timed_embed(
    corpus: Path, workdir: Path, fit: Path | None, *, threads_: int | None = None, **kwargs
) -> tuple[float, object]:
    if fit is not None:  # the tfidf fit (seeded, identical) is not what we measure
        workdir.mkdir(parents=True)
        shutil.copy(fit, workdir / fit.name)
    with threads(threads_):
        start = time.perf_counter()
        result = embed(corpus, workdir=workdir, **kwargs)
        return time.perf_counter() - start, result


N_CENTROIDS = 100
ASSIGN_BLOCK_ROWS = 256


def time_assignment(embeddings: ShardedMatrix, repeats: int) -> dict[str, float]:
    """Local vs Ray assignment of the same rows to the same centroids (labels must agree)."""
    rng = np.random.default_rng(np.random.SeedSequence([0, 0xA551]))
    rows = np.sort(rng.choice(embeddings.shape[0], size=N_CENTROIDS, replace=False))
    centroids = np.asarray(embeddings[rows], dtype=np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    backend = "numpy"
    contenders = {
        "local": lambda: assign_matrix(
            embeddings, centroids, backend=backend, batch_size=ASSIGN_BLOCK_ROWS
        ),
        "ray, 1 actor": lambda: assign_files(
            embeddings.paths, centroids, backend=backend, block_rows=ASSIGN_BLOCK_ROWS,
            engine="ray", options=RayOptions(num_workers=1),
        ),
        "ray, 2 actors": lambda: assign_files(
            embeddings.paths, centroids, backend=backend, block_rows=ASSIGN_BLOCK_ROWS,
            engine="ray", options=RayOptions(num_workers=2),
        ),
    }  # fmt: skip
    best: dict[str, float] = {}
    reference = None
    for _ in range(repeats):
        for name, run in contenders.items():
            start = time.perf_counter()
            labels, _ = run()
            seconds = time.perf_counter() - start
            reference = labels if reference is None else reference
            same = np.array_equal(labels, reference)
            best[name] = min(best.get(name, np.inf), seconds)
            print(f"  assign {name:<16} {seconds:7.2f} s  (labels equal to local: {same})")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tfidf encoder, 3,000 verses")
    parser.add_argument("--documents", type=int, default=None, help="verses to embed")
    parser.add_argument("--encoder", default=None, help="sentence-transformers, static or tfidf")
    parser.add_argument("--shard-size", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=1, help="keep the best of N runs")
    args = parser.parse_args()
    encoder = args.encoder or ("tfidf" if args.quick else "sentence-transformers")
    n_documents = args.documents or (3000 if args.quick else 1500)
    os.environ.setdefault("CLUSTERCLIP_PROGRESS", "0")

    import ray

    scratch = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        corpus = scratch / "kjv.jsonl"
        write_corpus(corpus, n_documents)
        options = {"encoder": encoder, "shard_size": args.shard_size, "device": "cpu"}

        # Warm-up: load the model (and fit tfidf) once so no contender pays for it.
        _, warm = timed_embed(corpus, scratch / "warm", None, **options)
        fit = scratch / "warm" / "embed-tfidf.npz"
        fit = fit if fit.exists() else None

        start = time.perf_counter()
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - start

        contenders = {
            "local": {},
            "local, 1 thread": {"threads_": 1},
            "ray, 1 actor": {"engine": "ray", "engine_options": {"num_workers": 1}},
            "ray, 2 actors": {"engine": "ray", "engine_options": {"num_workers": 2}},
        }
        best: dict[str, float] = {}
        for repeat in range(args.repeats):
            for name, engine in contenders.items():
                workdir = scratch / f"{name.replace(', ', '-').replace(' ', '')}-{repeat}"
                seconds, result = timed_embed(corpus, workdir, fit, **options, **engine)
                same = np.array_equal(result.embeddings[:], warm.embeddings[:])
                best[name] = min(best.get(name, np.inf), seconds)
                print(f"  {name:<16} {seconds:7.2f} s  (embeddings equal to local: {same})")
        assign_best = time_assignment(warm.embeddings, args.repeats)
        ray.shutdown()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    report(
        f"embed {n_documents:,} KJV verses, encoder={encoder}, shards of {args.shard_size}",
        best,
        n_documents,
        args.repeats,
        ray_start,
    )
    report(
        f"assign the same {n_documents:,} rows to {N_CENTROIDS} centroids, blocks of {ASSIGN_BLOCK_ROWS}",
        assign_best,
        n_documents,
        args.repeats,
        None,
    )


def report(
    title: str, best: dict[str, float], n_documents: int, repeats: int, ray_start: float | None
) -> None:
    """Seconds per contender, and ratios to the local engine (as is, and on 1 thread)."""
    local = best["local"]
    single = best.get("local, 1 thread", local)
    print(f"\n{title}, {os.cpu_count()} CPUs, best of {repeats}")
    if ray_start is not None:
        print(f"  ray.init (local instance, 2 CPUs): {ray_start:.1f} s, once per process")
    print(
        f"  {'engine':<16} {'seconds':>8} {'docs/s':>8} {'/ local':>8} "
        f"{'/ local 1 thread':>17} {'extra s vs 1 thread':>20}"
    )
    for name, seconds in best.items():
        print(
            f"  {name:<16} {seconds:8.2f} {n_documents / seconds:8.0f} {seconds / local:8.2f} "
            f"{seconds / single:17.2f} {seconds - single:20.1f}"
        )


if __name__ == "__main__":
    main()
