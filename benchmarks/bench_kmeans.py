"""Benchmark: clusterclip's spherical k-means against its peers and the matmul floor.

Same data, same process, same run (ratios, not absolute times, are the result):

1. ``fit``: n = 200k, d = 384, K = 1024, 20 iterations. Our KMeans (every
   backend; ``auto`` is the one listed first), scikit-learn ``KMeans``
   (Lloyd, k-means++, n_init=1), a straightforward torch re-implementation of
   the authors' loop (random init, fp32 matmul, arg-max, empty clusters left
   stale; also in bf16 where the CPU has native bf16), faiss ``Kmeans`` as
   installed (its OpenBLAS picks the kernels: ``Prescott`` on CPUs it does not
   know) and with the core type fixed (the one clusterclip sets: ``SkylakeX``
   with AVX-512, ``Haswell`` on AVX2), each faiss run in a child process
   because OpenBLAS reads the variable once. Reported: wall
   time, time per iteration / the bare ``n x d @ d x K`` product (the floor of
   any exact Lloyd iteration), and the final mean cosine of every point to its
   nearest centroid (the same exact fp32 evaluation for all).
2. ``assign``: 1M x 384 against 2,000 centroids: documents/s of
   ``assign_matrix`` vs the bare product.
3. ``sample``: n = 1M, K = 1024: fit on the default sample (256 per centroid)
   + assign everything, vs full Lloyd on all 1M rows (time, objective over all rows).
4. ``seeding``: imbalanced data (Zipf 1.2): random vs k-means++ vs AFK-MC2:
   objective, NMI to the true clusters, and how many of the rarest half of
   the true clusters survive (are the majority of some cluster).
5. ``seeding-cost``: n = 200k, d = 384, K = 1024, 20 iterations: k-means++ (the
   default, one centre at a time) vs ``k-means++-rounds``: seeding time, fit time,
   seeding's share of the fit, objective, rare true clusters kept and clusters
   used, on the backend the CPU-flag rule picks (so no probe runs inside the timing).

On a CPU without native bf16 (:func:`clusterclip.threads.native_bfloat16`: neither
``avx512_bf16`` nor ``amx_bf16``) torch emulates bf16, many times slower: the bf16
floors and the authors' bf16 loop are skipped there, with a line saying so.

Data: :func:`clusterclip.cluster.synthetic.vmf_mixture` (seeded): K Zipf-sized
(exponent 1) von Mises-Fisher-like clusters on the unit sphere sharing a common
direction, expected cosine to the centre ~0.71.

Run::

    PYTHONPATH=src python benchmarks/bench_kmeans.py            # all sections (~15 min on 2 cores)
    PYTHONPATH=src python benchmarks/bench_kmeans.py --quick    # small sizes, ~1 min
    PYTHONPATH=src python benchmarks/bench_kmeans.py --section fit
    PYTHONPATH=src python benchmarks/bench_kmeans.py --section seeding-cost --seeds 0,1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

from clusterclip.cluster import KMeans, assign_matrix
from clusterclip.cluster.blas import recommended_coretype
from clusterclip.cluster.synthetic import vmf_mixture
from clusterclip.threads import native_bfloat16

#: Why the bf16 floors and the authors' bf16 loop are skipped on this CPU.
NO_BF16 = (
    "bf16 floors and the authors' bf16 loop skipped: this CPU has no native bfloat16 "
    "(neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo; torch would emulate it)"
)

FULL = {
    "fit": {"n": 200_000, "dim": 384, "k": 1024, "n_iter": 20},
    "assign": {"n": 1_000_000, "dim": 384, "k": 2000},
    "sample": {"n": 1_000_000, "dim": 384, "k": 1024, "n_iter": 20},
    "seeding": {"n": 100_000, "dim": 384, "k": 256, "n_iter": 20},
    "seeding-cost": {"n": 200_000, "dim": 384, "k": 1024, "n_iter": 20},
}
QUICK = {
    "fit": {"n": 20_000, "dim": 384, "k": 128, "n_iter": 20},
    "assign": {"n": 100_000, "dim": 384, "k": 500},
    "sample": {"n": 100_000, "dim": 384, "k": 128, "n_iter": 20},
    "seeding": {"n": 20_000, "dim": 384, "k": 64, "n_iter": 20},
    "seeding-cost": {"n": 20_000, "dim": 384, "k": 256, "n_iter": 20},
}


def log(text: str) -> None:
    print(text, flush=True)


def timed(function, *args, **kwargs) -> tuple[float, Any]:
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def matmul_floor(X: np.ndarray, C: np.ndarray, precision: str, repeat: int = 3) -> float:
    """Best-of-``repeat`` seconds of the bare ``X @ C.T`` (torch, fp32 or bf16).

    In row blocks, as any real E-step (the whole product would not fit in RAM),
    and the best over several block sizes: small blocks keep the scores in
    cache and are often faster, so the floor is not flattered by a bad choice.
    """
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    x = torch.from_numpy(X).to(dtype)
    c = torch.from_numpy(C).to(dtype).T.contiguous()
    best = np.inf
    with torch.inference_mode():
        for step in (2048, 4096, 16384, 65536):
            for _ in range(repeat):
                start = time.perf_counter()
                for row in range(0, len(x), step):
                    torch.mm(x[row : row + step], c)
                best = min(best, time.perf_counter() - start)
    return float(best)


def bf16_floor(X: np.ndarray, C: np.ndarray, repeat: int = 3) -> float | None:
    """:func:`matmul_floor` in bf16, or ``None`` on a CPU without native bf16 (emulated
    there: many times slower than fp32, and no backend of ours uses it)."""
    return matmul_floor(X, C, "bf16", repeat) if native_bfloat16() else None


def as_seconds(value: float | None, digits: int = 3) -> str:
    return "skipped" if value is None else f"{value:.{digits}f} s"


def mean_cosine(X: np.ndarray, centers: np.ndarray) -> float:
    """Exact fp32 mean cosine of every row to its nearest (normalised) centre."""
    centers = np.asarray(centers, dtype=np.float32)
    centers = centers / np.maximum(np.linalg.norm(centers, axis=1, keepdims=True), 1e-12)
    _, scores = assign_matrix(X, centers, backend="torch-fp32", batch_size=65536)
    return float(np.mean(scores, dtype=np.float64))


def authors_loop(X: np.ndarray, k: int, n_iter: int, seed: int, precision: str) -> np.ndarray:
    """The paper's torch k-means, written plainly: random init, matmul, arg-max, mean."""
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    generator = torch.Generator().manual_seed(seed)
    x32 = torch.from_numpy(X)
    x = x32.to(dtype)
    centers = x32[torch.randperm(len(X), generator=generator)[:k]].clone()
    with torch.inference_mode():
        for _ in range(n_iter):
            labels = torch.mm(x, centers.to(dtype).T).argmax(dim=1)
            sums = torch.zeros_like(centers).index_add_(0, labels, x32)
            counts = torch.bincount(labels, minlength=k)
            filled = counts > 0  # empty clusters keep their old centre (stale)
            centers[filled] = torch.nn.functional.normalize(sums[filled], dim=1)
    return centers.numpy()


def sklearn_kmeans(X: np.ndarray, k: int, n_iter: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans as SkKMeans

    model = SkKMeans(
        k,
        init="k-means++",
        n_init=1,
        max_iter=n_iter,
        tol=0.0,
        random_state=seed,
        algorithm="lloyd",
    )
    return model.fit(X).cluster_centers_


def faiss_child(coretype: str | None, config: dict[str, int], seed: int) -> dict[str, Any]:
    """Run faiss.Kmeans in a fresh process with OPENBLAS_CORETYPE=coretype (unset: None)."""
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    command = [sys.executable, __file__, "--faiss-child", json.dumps({**config, "seed": seed})]
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def _faiss_child_main(spec: str) -> None:
    config = json.loads(spec)
    import faiss
    from threadpoolctl import threadpool_info

    X, _ = vmf_mixture(config["n"], config["dim"], config["k"], seed=config["seed"])
    arch = next(
        (
            i.get("architecture")
            for i in threadpool_info()
            if i.get("internal_api") == "openblas" and "faiss" in str(i.get("filepath", ""))
        ),
        None,
    )
    model = faiss.Kmeans(
        config["dim"], config["k"], niter=config["n_iter"], spherical=True, seed=config["seed"],
        max_points_per_centroid=10**9, verbose=False,
    )  # fmt: skip
    seconds, _ = timed(model.train, X)
    print(
        json.dumps(
            {"seconds": seconds, "objective": mean_cosine(X, model.centroids), "architecture": arch}
        )
    )


def section_fit(config: dict[str, int], seed: int, backends: list[str]) -> dict[str, Any]:
    n, dim, k, n_iter = config["n"], config["dim"], config["k"], config["n_iter"]
    log(f"\n== fit: n={n:,} d={dim} K={k} iterations={n_iter} ==")
    X, _ = vmf_mixture(n, dim, k, seed=seed)
    C = X[:k].copy()
    floor32, floor16 = matmul_floor(X, C, "fp32"), bf16_floor(X, C)
    log(
        f"floor: bare X @ C.T  fp32 {floor32:.3f} s   bf16 {as_seconds(floor16)}  (x{n_iter}: "
        f"{floor32 * n_iter:.1f} s / {as_seconds(floor16 and floor16 * n_iter, 1)})"
    )
    rows = []

    def record(name: str, seconds: float, centers: np.ndarray, note: str = "") -> None:
        objective = mean_cosine(X, centers)
        rows.append({"method": name, "seconds": seconds, "objective": objective, "note": note})
        log(
            f"{name:<34} {seconds:8.2f} s  {seconds / n_iter / floor32:5.2f}x fp32 floor/iter  "
            f"objective {objective:.5f}  {note}"
        )

    if "auto" in backends:  # the steady state: the probe runs once per machine and shape
        from clusterclip.cluster.probe import choose_backend

        choice = choose_backend("auto", X, k).as_record()
        log(
            f"auto: {choice['backend']} ({choice['reason']}"
            + (f", probe {choice['probe_seconds']:.2f} s, not in the fit times below"
               if choice["reason"] == "probe" else ": no probe in this run")
            + ")"
        )  # fmt: skip
    for backend in backends:
        # The machine's speed drifts over minutes: the floors a Lloyd iteration is
        # compared with are measured right before and right after this fit (mean).
        before = matmul_floor(X, C, "fp32", repeat=1), bf16_floor(X, C, repeat=1)
        seconds, model = timed(KMeans(k, seed=seed, n_iter=n_iter, backend=backend).fit, X)
        after = matmul_floor(X, C, "fp32", repeat=1), bf16_floor(X, C, repeat=1)
        near32 = (before[0] + after[0]) / 2
        near16 = None if before[1] is None else (before[1] + after[1]) / 2
        per_iteration = sum(s["seconds"] for s in model.stats_) / len(model.stats_)
        versus16 = "" if near16 is None else f", {per_iteration / near16:.2f}x the bf16 floor"
        record(f"clusterclip KMeans ({model.backend_})", seconds, model.cluster_centers_,
               f"init {model.init_['seconds']:.2f} s, sample {model.sample_size_:,}; Lloyd "
               f"iteration {per_iteration:.3f} s = {per_iteration / near32:.2f}x the fp32 "
               f"floor{versus16} (measured around this fit: {near32:.3f} s / "
               f"{as_seconds(near16)})")  # fmt: skip
        rows[-1].update(iteration_seconds=per_iteration, floor_fp32_around=near32,
                        floor_bf16_around=near16)  # fmt: skip
    for precision in ("fp32", "bf16") if native_bfloat16() else ("fp32",):
        seconds, centers = timed(authors_loop, X, k, n_iter, seed, precision)
        record(f"torch authors' loop ({precision})", seconds, centers, "random init")
    seconds, centers = timed(sklearn_kmeans, X, k, n_iter, seed)
    record("scikit-learn KMeans (lloyd)", seconds, centers, "k-means++ init")
    # As installed, faiss's OpenBLAS detects the CPU itself (it misreads recent ones as
    # Prescott); fixed, it gets the core type clusterclip sets (SkylakeX with AVX-512,
    # Haswell on AVX2).
    for coretype in (None, recommended_coretype()):
        result = faiss_child(coretype, config, seed)
        label = "as installed" if coretype is None else "core type fixed"
        rows.append({"method": f"faiss Kmeans ({label})", **result})
        log(
            f"{'faiss Kmeans (' + label + ')':<34} {result['seconds']:8.2f} s  "
            f"{result['seconds'] / n_iter / floor32:5.2f}x fp32 floor/iter  objective {result['objective']:.5f}  "
            f"OpenBLAS {result['architecture']}"
        )
    best_objective = max(r["objective"] for r in rows)
    ours = rows[0]
    peers = [r for r in rows if not r["method"].startswith("clusterclip")]
    log(
        f"ours ({ours['method']}): {ours['seconds'] / min(p['seconds'] for p in peers):.2f}x the fastest peer's time, "
        f"objective {100 * (ours['objective'] / best_objective - 1):+.3f}% vs the best"
    )
    return {"config": config, "floor_fp32": floor32, "floor_bf16": floor16, "rows": rows}


def section_assign(config: dict[str, int], seed: int) -> dict[str, Any]:
    n, dim, k = config["n"], config["dim"], config["k"]
    log(f"\n== assign: {n:,} x {dim} against {k:,} centroids ==")
    X, _ = vmf_mixture(n, dim, k, seed=seed)
    C = X[:: n // k][:k].copy()
    floor32, floor16 = matmul_floor(X, C, "fp32", repeat=2), bf16_floor(X, C, repeat=2)
    rate16 = "" if floor16 is None else f" ({n / floor16:,.0f} docs/s)"
    log(
        f"floor: bare X @ C.T  fp32 {floor32:.2f} s ({n / floor32:,.0f} docs/s)   bf16 "
        f"{as_seconds(floor16, 2)}{rate16}"
    )
    result = {"config": config, "floor_fp32": floor32, "floor_bf16": floor16, "rows": []}
    for backend in ("auto", "torch-fp32", "faiss"):
        seconds, (labels, _) = timed(assign_matrix, X, C, backend=backend)
        result["rows"].append(
            {"backend": backend, "seconds": seconds, "docs_per_second": n / seconds}
        )
        log(
            f"assign_matrix ({backend:<10}) {seconds:7.2f} s  {n / seconds:12,.0f} docs/s  {seconds / floor32:5.2f}x fp32 floor"
        )
    return result


def section_sample(config: dict[str, int], seed: int) -> dict[str, Any]:
    n, dim, k, n_iter = config["n"], config["dim"], config["k"], config["n_iter"]
    log(f"\n== fit on sample + assign vs full Lloyd: n={n:,} K={k} ==")
    X, _ = vmf_mixture(n, dim, k, seed=seed)
    start = time.perf_counter()
    model = KMeans(k, seed=seed, n_iter=n_iter).fit(X)
    _, scores = assign_matrix(X, model.cluster_centers_)
    sampled = time.perf_counter() - start
    objective_sampled = float(np.mean(scores, dtype=np.float64))
    log(
        f"sample {model.sample_size_:,} + assign all   {sampled:8.2f} s  objective (all rows) {objective_sampled:.5f}"
    )
    seconds, full = timed(KMeans(k, seed=seed, n_iter=n_iter, max_points_per_centroid=n).fit, X)
    log(
        f"full Lloyd on {n:,} rows        {seconds:8.2f} s  objective (all rows) {full.objective_:.5f}"
    )
    log(
        f"sample path: {seconds / sampled:.2f}x faster, objective {100 * (objective_sampled / full.objective_ - 1):+.3f}%"
    )
    return {"config": config, "sample_seconds": sampled, "sample_objective": objective_sampled,
            "sample_size": model.sample_size_, "full_seconds": seconds, "full_objective": full.objective_}  # fmt: skip


def section_seeding(config: dict[str, int], seed: int) -> dict[str, Any]:
    from sklearn.metrics import normalized_mutual_info_score

    n, dim, k, n_iter = config["n"], config["dim"], config["k"], config["n_iter"]
    log(f"\n== seeding on imbalanced data: n={n:,} K={k} (true clusters {k}, Zipf 1.2) ==")
    X, truth = vmf_mixture(n, dim, k, seed=seed, zipf=1.2)
    sizes = np.bincount(truth, minlength=k)
    rare = np.argsort(sizes, kind="stable")[: k // 2]
    rare = rare[sizes[rare] > 0]
    rows = []
    for init in ("random", "k-means++", "afk-mc2"):
        seconds, model = timed(KMeans(k, seed=seed, n_iter=n_iter, init=init).fit, X)
        labels = model.predict(X)
        survived = 0
        for true_cluster in rare:
            members = labels[truth == true_cluster]
            top = np.bincount(members, minlength=k).argmax()
            owner = np.bincount(truth[labels == top], minlength=k).argmax()
            survived += int(owner == true_cluster)
        row = {
            "init": init, "seconds": seconds, "init_seconds": model.init_["seconds"],
            "objective": model.objective_, "nmi": normalized_mutual_info_score(truth, labels),
            "rare_survived": survived, "rare_total": len(rare),
        }  # fmt: skip
        rows.append(row)
        log(
            f"{init:<10} objective {row['objective']:.5f}  NMI {row['nmi']:.4f}  rare clusters kept "
            f"{survived}/{len(rare)}  seeding {row['init_seconds']:.2f} s  total {seconds:.2f} s"
        )
    return {"config": config, "rows": rows}


def rare_kept(truth: np.ndarray, labels: np.ndarray, rare: np.ndarray, k: int) -> int:
    """How many of the true clusters ``rare`` are the majority of the cluster most of them went to."""
    kept = 0
    for true_cluster in rare:
        top = np.bincount(labels[truth == true_cluster], minlength=k).argmax()
        kept += int(np.bincount(truth[labels == top], minlength=k).argmax() == true_cluster)
    return kept


def section_seeding_cost(config: dict[str, int], seeds: list[int]) -> dict[str, Any]:
    from clusterclip.cluster.backends import resolve_backend
    from clusterclip.cluster.seeding import picks_per_round

    n, dim, k, n_iter = config["n"], config["dim"], config["k"], config["n_iter"]
    backend = resolve_backend("auto")  # the CPU-flag rule: no probe inside the timings
    log(f"\n== seeding cost: n={n:,} d={dim} K={k} iterations={n_iter}, backend {backend}, "
        f"rounds of {picks_per_round(k)} centres ==")  # fmt: skip
    rows = []
    for seed in seeds:
        X, truth = vmf_mixture(n, dim, k, seed=seed)
        sizes = np.bincount(truth, minlength=k)
        rare = np.argsort(sizes, kind="stable")[: k // 2]
        rare = rare[sizes[rare] > 0]
        for init in ("k-means++", "k-means++-rounds"):
            model = KMeans(k, seed=seed, n_iter=n_iter, init=init, backend=backend).fit(X)
            labels = model.predict(X)
            row = {
                "seed": seed, "init": init, "seeding_seconds": model.init_["seconds"],
                "fit_seconds": model.fit_seconds_, "objective": model.objective_,
                "rare_kept": rare_kept(truth, labels, rare, k), "rare_total": len(rare),
                "clusters_used": int(len(np.unique(labels))),
                "smallest": int(np.bincount(labels, minlength=k).min()),
            }  # fmt: skip
            row["share"] = row["seeding_seconds"] / row["fit_seconds"]
            rows.append(row)
            log(f"seed {seed}  {init:<21} seeding {row['seeding_seconds']:6.2f} s  fit "
                f"{row['fit_seconds']:6.2f} s  share {100 * row['share']:5.1f} %  objective "
                f"{row['objective']:.5f}  rare clusters kept {row['rare_kept']}/{len(rare)}  "
                f"clusters used {row['clusters_used']}/{k} (smallest {row['smallest']})")  # fmt: skip
    for init in ("k-means++", "k-means++-rounds"):
        mine = [r for r in rows if r["init"] == init]
        log(f"mean  {init:<21} seeding {np.mean([r['seeding_seconds'] for r in mine]):6.2f} s  "
            f"share {100 * np.mean([r['share'] for r in mine]):5.1f} %  objective "
            f"{np.mean([r['objective'] for r in mine]):.5f}  rare kept "
            f"{np.mean([r['rare_kept'] for r in mine]):.1f}")  # fmt: skip
    return {"config": config, "backend": backend, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument(
        "--section",
        choices=["fit", "assign", "sample", "seeding", "seeding-cost", "all"],
        default="all",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds", default="0", help="data and k-means seeds of `seeding-cost` (comma-separated)"
    )
    parser.add_argument(
        "--backends",
        default="auto,faiss,torch-fp32,numpy",
        help="our backends to time in `fit` (comma-separated)",
    )
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--faiss-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.faiss_child:
        _faiss_child_main(args.faiss_child)
        return
    import torch

    from clusterclip.cluster.backends import resolve_backend
    from clusterclip.cluster.blas import cpu_model, faiss_blas_info

    sizes = QUICK if args.quick else FULL
    log(f"CPU: {cpu_model()}")
    if not native_bfloat16():
        log(NO_BF16)
    log(f"torch threads {torch.get_num_threads()}, CPU cores {os.cpu_count()}, CPU-flag rule backend = {resolve_backend('auto')}, "
        f"faiss OpenBLAS {faiss_blas_info()}")  # fmt: skip
    sections = (
        ["fit", "assign", "sample", "seeding", "seeding-cost"]
        if args.section == "all"
        else [args.section]
    )
    results = {}
    for name in sections:
        if name == "fit":
            results[name] = section_fit(sizes[name], args.seed, args.backends.split(","))
        elif name == "assign":
            results[name] = section_assign(sizes[name], args.seed)
        elif name == "sample":
            results[name] = section_sample(sizes[name], args.seed)
        elif name == "seeding-cost":
            seeds = [int(seed) for seed in args.seeds.split(",")]
            results[name] = section_seeding_cost(sizes[name], seeds)
        else:
            results[name] = section_seeding(sizes[name], args.seed)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
