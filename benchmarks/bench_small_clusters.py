"""Measurement: how many tiny clusters k-means makes, and what share of draws they take.

For a work directory with a completed embed stage, fit the cluster stage's
k-means (same sample, seeding and backend as ``clusterclip cluster``) under
four settings:

- ``plain``: greedy k-means++ as before issue 13, no dissolving (``min_cluster_size=1``);
- ``seeding``: k-means++ that passes over isolated candidates, no dissolving;
- ``dissolve``: plain seeding, then clusters below the threshold dissolved;
- ``both``: the default (seeding filter + dissolving).

For each: the objective (mean cosine of the fit sample), the number of clusters
smaller than 2 / 5 / 10 documents, and the share of draws that the documents of
the ``plain`` run's tiny clusters (size < threshold) take:

- ``early``: uniform over clusters before any clip (``1/K`` per cluster);
- ``schedule``: in a real ``clusterclip`` schedule (``--max-repeats``, ``--epochs``),
  counted from :func:`clusterclip.build_schedule`;
- ``natural``: their share of the corpus (what random sampling gives them).

Run::

    PYTHONPATH=src python benchmarks/bench_small_clusters.py WORKDIR --n-clusters 100 \
        --max-repeats 2 --epochs 1.5 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _fit(work, k: int, seed: int, *, seeding: bool, dissolve: bool, threshold: int, backend: str):
    from clusterclip.cluster.kmeans import KMeans, assign_matrix
    from clusterclip.cluster.small import dissolve_small_clusters, effective_min_size

    ok = work.ok_mask()
    embeddings = work.embeddings()
    usable = np.flatnonzero(ok)
    X = np.asarray(embeddings[usable], dtype=np.float32)
    started = time.perf_counter()
    model = KMeans(k, seed=seed, min_cluster_size=threshold if seeding else 1, backend=backend).fit(
        X
    )
    labels, scores = assign_matrix(X, model.cluster_centers_, backend=backend)
    record = {"dissolved": []}
    if dissolve:
        labels, scores, _, record = dissolve_small_clusters(
            labels, scores, model.cluster_centers_, lambda rows: X[rows],
            min_size=effective_min_size(threshold, len(X), k),
        )  # fmt: skip
    seconds = time.perf_counter() - started
    return model.objective_, labels, float(np.mean(scores)), seconds, model.init_


def backend_name(backend: str) -> str:
    from clusterclip.cluster.backends import get_backend

    return get_backend(backend).name


def _draw_shares(labels: np.ndarray, docs: np.ndarray, args: argparse.Namespace, seed: int):
    from clusterclip import build_schedule

    n_clusters = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=n_clusters)
    early = float(np.sum(1.0 / (n_clusters * sizes[labels[docs]])))
    schedule = build_schedule(
        labels,
        max_repeats=args.max_repeats,
        num_samples=int(args.epochs * len(labels)),
        seed=seed,
    )
    drawn = np.isin(schedule.indices, docs).sum()
    return early, float(drawn / len(schedule.indices))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--n-clusters", type=int, default=100)
    parser.add_argument("--threshold", type=int, default=5, help="min_cluster_size")
    parser.add_argument("--max-repeats", type=int, default=2)
    parser.add_argument("--epochs", type=float, default=1.5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    from clusterclip.io import WorkDir

    work = WorkDir(args.workdir)
    n = int(work.ok_mask().sum())
    print(f"{args.workdir}: {n:,} usable documents, K = {args.n_clusters}, "
          f"min_cluster_size {args.threshold}")  # fmt: skip
    variants = {"plain": (False, False), "seeding": (True, False),
                "dissolve": (False, True), "both": (True, True)}  # fmt: skip
    rows = []
    for seed in args.seeds:
        tiny_docs = None
        for name, (seeding, dissolve) in variants.items():
            objective, labels, mean_score, seconds, init = _fit(
                work, args.n_clusters, seed, seeding=seeding, dissolve=dissolve,
                threshold=args.threshold, backend=args.backend,
            )  # fmt: skip
            sizes = np.bincount(labels)
            sizes = sizes[sizes > 0]
            if tiny_docs is None:  # the plain run's tiny clusters are what we follow
                small = np.flatnonzero(np.bincount(labels) < args.threshold)
                tiny_docs = np.flatnonzero(np.isin(labels, small))
            early, drawn = _draw_shares(labels, tiny_docs, args, seed)
            row = {
                "seed": seed,
                "variant": name,
                "clusters": len(sizes),
                "objective": round(objective, 5),
                "mean_score_all": round(mean_score, 5),
                "lt2": int((sizes < 2).sum()),
                "lt5": int((sizes < 5).sum()),
                "lt10": int((sizes < 10).sum()),
                "min": int(sizes.min()),
                "tiny_docs": len(tiny_docs),
                "share_early": round(early, 5),
                "share_schedule": round(drawn, 5),
                "share_natural": round(len(tiny_docs) / n, 5),
                "seconds": round(seconds, 2),
                "min_cell": init.get("min_cell", 1),
                "backend": backend_name(args.backend),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
