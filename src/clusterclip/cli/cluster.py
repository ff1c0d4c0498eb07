"""``clusterclip cluster``: spherical k-means over the embedded documents of a work directory."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "cluster the embeddings with spherical k-means and assign every document"
DESCRIPTION = (
    "Fit spherical (cosine) k-means on a seeded sample of the embedded documents "
    "(at most MAX_POINTS_PER_CENTROID * K of them), then assign every document to its "
    "nearest centroid. Writes centroids.npy, clusters.parquet and the manifest entry; "
    "a rerun with the same settings is skipped."
)
EXAMPLE = """example:
  clusterclip embed corpus.jsonl --workdir work
  clusterclip cluster --workdir work --n-clusters 100 --seed 0
  clusterclip cluster --workdir work --n-clusters 100 --engine ray --num-workers 8
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir", required=True, help="work directory with a completed embed stage"
    )
    parser.add_argument("--n-clusters", type=int, required=True, help="number of clusters K")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the sample, seeding and splits (default 0)"
    )
    parser.add_argument("--n-iter", type=int, default=20, help="Lloyd iterations (default 20)")
    parser.add_argument(
        "--max-points-per-centroid",
        type=int,
        default=256,
        help="fit on at most this many documents per cluster (default 256)",
    )
    parser.add_argument(
        "--init",
        choices=["k-means++", "afk-mc2", "random"],
        default="k-means++",
        help="seeding (default k-means++)",
    )
    parser.add_argument(
        "--n-init",
        type=int,
        default=1,
        help="seedings + fits; the best objective is kept (default 1)",
    )
    parser.add_argument(
        "--backend",
        choices=["auto", "faiss", "torch", "torch-bf16", "torch-fp32", "numpy"],
        default="auto",
        help="E-step backend (default auto: the fastest measured for this machine)",
    )
    parser.add_argument("--batch-size", type=int, default=65536, help="rows per assignment block")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace clusters made with other settings"
    )
    parser.add_argument(
        "--engine", choices=["local", "ray"], default="local", help="where the assignment runs"
    )
    ray = parser.add_argument_group("Ray engine (--engine ray)")
    ray.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster address (default: start or join a local one)",
    )
    ray.add_argument("--num-workers", type=int, default=None, help="assignment actors")
    ray.add_argument("--num-gpus-per-worker", type=float, default=None, help="GPUs per actor")


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``engine_options`` the Ray flags stand for (empty for the local engine)."""
    from clusterclip.errors import ClusterClipError

    options = {
        "address": args.ray_address,
        "num_workers": args.num_workers,
        "num_gpus_per_worker": args.num_gpus_per_worker,
    }
    options = {key: value for key, value in options.items() if value is not None}
    if options and args.engine != "ray":
        raise ClusterClipError(
            "--ray-address, --num-workers and --num-gpus-per-worker apply to the Ray engine only. "
            "Add --engine ray or drop them."
        )
    return options


def format_summary(summary: dict[str, Any], workdir: str) -> str:
    """The one-screen summary printed at the end."""
    sizes = summary["sizes"]
    seconds = summary.get("seconds", {})
    init = summary.get("init", {})
    lines = [
        f"clustered {summary['clustered_documents']:,} of {summary['documents']:,} documents "
        f"into {summary['n_clusters']:,} clusters ({summary['excluded_documents']:,} excluded, not ok)",
        f"  sizes          min {sizes['min']:,}  median {sizes['median']:,.1f}  max {sizes['max']:,}",
        f"  balance        Gini {summary['gini']:.3f}  imbalance factor {summary['imbalance_factor']:.3f}"
        f"  empty clusters {summary['empty_clusters']}",
        f"  objective      {summary['objective']:.4f} mean cosine on the fit sample "
        f"({summary['mean_score']:.4f} over all documents)",
        f"  fit            sample {summary['sample_size']:,} documents, {summary['n_iter']} iterations, "
        f"init {init.get('init')} (pool {init.get('pool_size', 0):,}), backend {summary['backend']}",
        f"  time           fit {seconds.get('fit', 0):.1f} s, assign {seconds.get('assign', 0):.1f} s, "
        f"total {seconds.get('total', 0):.1f} s",
        f"  wrote          {workdir}/centroids.npy, {workdir}/clusters.parquet",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from clusterclip.cluster.stage import cluster
    from clusterclip.progress import progress_enabled

    result = cluster(
        args.workdir,
        n_clusters=args.n_clusters,
        seed=args.seed,
        n_iter=args.n_iter,
        max_points_per_centroid=args.max_points_per_centroid,
        init=args.init,
        n_init=args.n_init,
        backend=args.backend,
        batch_size=args.batch_size,
        overwrite=args.overwrite,
        engine=args.engine,
        engine_options=engine_options(args),
        progress=progress_enabled(),
    )
    if result.skipped:
        print(
            f"cluster: {args.workdir} already holds this result (same settings and inputs); skipped."
        )
    print(format_summary(result.summary, args.workdir))
    return 0
