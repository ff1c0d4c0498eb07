"""The cluster stage's settings, declared once (flags, TOML keys and docs come from here)."""

from __future__ import annotations

from dataclasses import dataclass

from clusterclip.options import check_fields, option

__all__ = ["BACKENDS", "INITS", "ClusterOptions"]

INITS = ("k-means++", "k-means++-rounds", "afk-mc2", "random")
BACKENDS = ("auto", "fastest", "faiss", "torch", "torch-bf16", "torch-fp32", "numpy")


@dataclass(frozen=True, kw_only=True)
class ClusterOptions:
    """Settings of the cluster stage (:func:`clusterclip.cluster`).

    >>> ClusterOptions(n_clusters=100).init
    'k-means++'
    """

    n_clusters: int | None = option(
        None,
        "Number of k-means clusters K (required; a few hundred documents per cluster is typical).",
        kind="int",
        minimum=1,
    )
    seed: int = option(0, "Seed of the fit sample, the seeding and the splits.", kind="seed")
    n_iter: int = option(20, "Lloyd iterations.", kind="int", minimum=1)
    max_points_per_centroid: int = option(
        256, "Fit on at most this many documents per cluster.", kind="int", minimum=1
    )
    init: str = option(
        "k-means++",
        "Centroid seeding (k-means++: greedy D^2 sampling, one centre at a time; "
        "k-means++-rounds: in about 64 rounds, cheaper and slightly worse at large K).",
        choices=INITS,
    )
    n_init: int = option(1, "Seedings + fits; the best objective is kept.", kind="int", minimum=1)
    backend: str = option(
        "auto",
        "E-step backend (auto: a CUDA device if torch sees one, else fixed by the CPU's bf16 "
        "support and the installed libraries, "
        "never by a timing, so reruns give the same labels; fastest: the fastest measured "
        "on this machine, whose pick, and labels at near-ties, may change between probes).",
        choices=BACKENDS,
    )
    min_cluster_size: int = option(
        5,
        "Clusters with fewer documents are dissolved into the nearest sizeable one, so no "
        "outlier gets a balanced share (capped at a quarter of N/K; 1 = off). k-means++ "
        "seeding also avoids isolated points.",
        kind="int",
        minimum=1,
    )
    stability_sample: int = option(
        20_000,
        "Documents on which a second k-means with another seed is compared with this one "
        "(ARI in the summary and the report: how much of the balance is chance; 0 = off).",
        kind="int",
        minimum=0,
    )
    assign_batch_size: int = option(
        65_536, "Rows per assignment block (memory, not results).", kind="int", minimum=1
    )
    levels: tuple[int, ...] = option(
        (),
        "Hierarchical k-means: cluster counts of the levels above the n_clusters leaves, coarse "
        "to fine, increasing (e.g. 100,3000); each document is assigned coarse to fine and "
        "clusters.parquet gains level_0, level_1, ... columns. Empty: flat k-means.",
        kind="list_int",
        minimum=1,
    )
    beam: int = option(
        1,
        "With levels: nodes kept per level by the coarse-to-fine assignment (1: greedy; more "
        "is closer to the exact nearest leaf and costs proportionally more).",
        kind="int",
        minimum=1,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.levels and self.n_clusters is not None:
            from clusterclip.cluster.hierarchical import check_levels

            check_levels(self.levels, self.n_clusters)
