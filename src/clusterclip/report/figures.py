"""The report's figures (matplotlib, Agg backend, no display needed).

Each function takes the dict of :func:`clusterclip.report.data.compute_report_data`
and writes one PNG. Figures are drawn with the object-oriented API on their own
``Figure`` so nothing touches pyplot's global state.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import require_extra

__all__ = ["ALT_TEXTS", "FIGURES", "alt_texts", "write_figures"]

_DPI = 110
_COLORS = {"random": "#7f7f7f", "uniform": "#1f77b4", "policy": "#d62728", "rare50": "#2ca02c"}


def _figure(width: float = 7.5, height: float = 3.6) -> Any:
    require_extra("matplotlib", "report")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _rank_axis(ax: Any, n: int) -> np.ndarray:
    ranks = np.arange(1, n + 1)
    if n > 200:
        ax.set_xscale("log")
    ax.set_xlabel("cluster rank by size (1 = largest)")
    return ranks


def sizes_figure(data: dict[str, Any], path: Path) -> None:
    sizes = np.asarray(data["sizes_by_rank"], dtype=float)
    small = data.get("small_clusters") or {}
    figure = _figure()
    ax = figure.add_subplot()
    before = np.asarray(small.get("sizes_before_by_rank", []), dtype=float)
    if small.get("dissolved"):
        ranks_before = _rank_axis(ax, len(before))
        ax.plot(
            ranks_before,
            np.maximum(before, 0.8),
            color=_COLORS["random"],
            linestyle="--",
            label=f"before dissolving ({len(before)} clusters)",
        )
    ranks = _rank_axis(ax, max(len(sizes), len(before)))[: len(sizes)]
    ax.plot(
        ranks,
        np.maximum(sizes, 0.8),
        marker="o" if len(sizes) <= 100 else None,
        markersize=3,
        color=_COLORS["policy"],
        label=f"sampled clusters ({len(sizes)})",
    )
    if small.get("dissolved"):
        ax.axhline(
            small["min_cluster_size"] - 0.5,
            color="black",
            linestyle=":",
            label=f"min_cluster_size = {small['min_cluster_size']}",
        )
        ax.legend(fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("documents in cluster (log)")
    summary = data["summary"]
    ax.set_title(
        f"Cluster sizes: {summary['n_clusters']} clusters, {summary['n_usable']:,} documents, "
        f"90th/10th percentile = {summary['imbalance_p90_p10']:.1f}x"
    )
    ax.grid(True, which="both", alpha=0.3)
    figure.savefig(path, format="png")


def shares_figure(data: dict[str, Any], path: Path) -> None:
    shares = data["shares_by_size_rank"]
    summary = data["summary"]
    figure = _figure()
    ax = figure.add_subplot()
    ranks = _rank_axis(ax, len(shares["policy"]))
    floor = 0.5 / max(summary["schedule_length"], 1)
    ax.plot(ranks, shares["random"], color=_COLORS["random"], label="random (expected)")
    ax.plot(
        ranks,
        shares["uniform"],
        color=_COLORS["uniform"],
        linestyle="--",
        label="uniform over clusters (expected)",
    )
    ax.plot(
        ranks,
        np.maximum(np.asarray(shares["policy"]), floor),
        color=_COLORS["policy"],
        marker="o" if len(ranks) <= 100 else None,
        markersize=3,
        label=f"{summary['policy']} (this schedule)",
    )
    ax.set_yscale("log")
    ax.set_ylabel("share of draws (log)")
    ax.set_title(f"Share of the {summary['schedule_length']:,} draws per cluster")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    figure.savefig(path, format="png")


def _share_top(values: list[float]) -> float:
    """Top of a share axis: 15% above the highest value, rounded up to 0.05, at most 1."""
    highest = max([v for v in values if np.isfinite(v)], default=0.0)
    return float(min(1.0, max(0.05, np.ceil(highest * 1.15 / 0.05) * 0.05)))


def dynamics_figure(data: dict[str, Any], path: Path) -> None:
    dynamics = data["dynamics"]
    summary = data["summary"]
    total = max(summary["schedule_length"], 1)
    starts = np.asarray(dynamics["slice_start"], dtype=float)
    stops = np.asarray(dynamics["slice_stop"], dtype=float)
    centers = (starts + stops) / 2 / total
    figure = _figure(height=4.2)
    ax = figure.add_subplot()
    lines = [
        ax.plot(
            centers, dynamics["share_rarest_10pct"], color=_COLORS["policy"],
            label="rarest 10% of clusters",
        )[0],
        ax.plot(
            centers, dynamics["share_rarest_50pct"], color=_COLORS["rare50"],
            label="rarest 50% of clusters",
        )[0],
        ax.axhline(
            dynamics["random_share_rarest_10pct"], color=_COLORS["policy"], linestyle=":",
            label="rarest 10% under random",
        ),
        ax.axhline(
            dynamics["random_share_rarest_50pct"], color=_COLORS["rare50"], linestyle=":",
            label="rarest 50% under random",
        ),
    ]  # fmt: skip
    top = _share_top(
        list(dynamics["share_rarest_10pct"])
        + list(dynamics["share_rarest_50pct"])
        + [dynamics["random_share_rarest_10pct"], dynamics["random_share_rarest_50pct"]]
    )
    ax.set_ylim(0, top)
    # A small margin left of 0 keeps a clip at the very first draws off the y axis.
    ax.set_xlim(-0.015, 1.0)
    clips = np.asarray([e["position"] for e in data["clip_events"]], dtype=float) / total
    if len(clips):
        # Clip events as a rug along the top edge (axes coordinates in y), drawn above the
        # spines so the earliest one is never hidden under an axis.
        lines.append(
            ax.vlines(
                clips, 0.94, 1.0, transform=ax.get_xaxis_transform(), color="black",
                linewidth=1.0, zorder=4, label=f"clip events ({len(clips)})",
            )
        )  # fmt: skip
        twin = ax.twinx()
        lines.append(
            twin.step(
                np.concatenate([[0.0], np.sort(clips), [1.0]]),
                np.concatenate([[0], np.arange(1, len(clips) + 1), [len(clips)]]),
                where="post", color="black", alpha=0.35, label="clusters clipped so far (right axis)",
            )[0]
        )  # fmt: skip
        # Both axes start at 0 on the same baseline; the right one ends at the cluster count.
        twin.set_ylim(0, max(summary["n_clusters"], len(clips)))
        twin.set_ylabel("clusters clipped so far", color="#555555")
        from matplotlib.ticker import MaxNLocator

        twin.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training progress (fraction of the schedule)")
    ax.set_ylabel("share of draws in the slice")
    ax.set_title("Sampling dynamics: where the draws go as training proceeds")
    figure.legend(handles=lines, fontsize=8, loc="outside lower center", ncols=3, framealpha=0.9)
    ax.grid(True, alpha=0.3)
    figure.savefig(path, format="png")


def repetitions_figure(data: dict[str, Any], path: Path) -> None:
    reps = data["repetitions"]
    times = np.asarray(reps["times_seen"])
    counts = np.asarray(reps["documents"], dtype=float)
    figure = _figure()
    ax = figure.add_subplot()
    ax.bar(times, counts, color=[_COLORS["random"] if t == 0 else _COLORS["policy"] for t in times])
    if counts.max(initial=0) > 0 and counts[counts > 0].min() * 50 < counts.max():
        ax.set_yscale("log")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("times a document occurs in the schedule (0 = never seen)")
    ax.set_ylabel("documents")
    cap = data["summary"]["max_repeats"]
    title = "Repetitions per document"
    if cap is not None:
        ax.axvline(cap + 0.5, color="black", linestyle="--", label=f"max_repeats = {cap}")
        ax.legend(fontsize=8)
        title += f" (cap {cap})"
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    figure.savefig(path, format="png")


def never_seen_figure(data: dict[str, Any], path: Path) -> None:
    sizes = np.asarray(data["sizes_by_rank"], dtype=float)
    never = np.asarray(data["never_seen_by_size_rank"], dtype=float)
    fraction = np.divide(never, sizes, out=np.zeros_like(never), where=sizes > 0)
    summary = data["summary"]
    figure = _figure()
    ax = figure.add_subplot()
    ranks = _rank_axis(ax, len(sizes))
    if len(ranks) <= 200:
        ax.bar(ranks, fraction, color=_COLORS["random"], width=0.9)
    else:
        ax.plot(ranks, fraction, color=_COLORS["random"])
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction of the cluster never seen")
    ax.set_title(
        f"Documents never seen: {summary['never_seen']:,} of {summary['n_usable']:,} "
        f"({summary['never_seen_fraction']:.1%})"
    )
    ax.grid(True, axis="y", alpha=0.3)
    figure.savefig(path, format="png")


#: File name -> (function, caption), in report order.
FIGURES: dict[str, tuple[Callable[[dict[str, Any], Path], None], str]] = {
    "sizes.png": (
        sizes_figure,
        "Cluster sizes, largest first (log scale). A steep curve means random sampling "
        "would spend most draws on a few large clusters.",
    ),
    "shares.png": (
        shares_figure,
        "Share of draws per cluster, clusters sorted by size: random sampling (expected, "
        "proportional to size), uniform over clusters (expected, 1/K each) and this schedule.",
    ),
    "dynamics.png": (
        dynamics_figure,
        "Share of each slice of training that goes to the rarest 10% and 50% of clusters "
        "(dotted: the same under random sampling). Ticks and the grey step line mark clip "
        "events: a cluster that used up its max_repeats passes leaves the pool.",
    ),
    "repetitions.png": (
        repetitions_figure,
        "How many times each usable document occurs in the schedule.",
    ),
    "never_seen.png": (
        never_seen_figure,
        "Fraction of each cluster (sorted by size) that the schedule never shows.",
    ),
}


def _alt_sizes(data: dict[str, Any]) -> str:
    sizes, summary = data["sizes_by_rank"], data["summary"]
    text = (
        f"Line chart, log scale: sizes of the {len(sizes)} sampled clusters from largest "
        f"({sizes[0] if sizes else 0:,} documents) to smallest ({sizes[-1] if sizes else 0:,}); "
        f"90th/10th percentile ratio {summary['imbalance_p90_p10']:.1f}."
    )
    small = data.get("small_clusters") or {}
    if small.get("dissolved"):
        text += (
            f" A dashed line shows the {small['requested_clusters']} clusters before the "
            f"{len(small['dissolved'])} with fewer than {small['min_cluster_size']} documents "
            "were dissolved."
        )
    return text


def _alt_shares(data: dict[str, Any]) -> str:
    policy = data["shares_by_size_rank"]["policy"]
    random = data["shares_by_size_rank"]["random"]
    if not policy:
        return "Line chart of the share of draws per cluster (no clusters)."
    return (
        f"Line chart, log scale: share of draws per cluster, largest cluster first. The largest "
        f"cluster gets {policy[0]:.2%} of this schedule's draws ({random[0]:.2%} under random "
        f"sampling); the smallest gets {policy[-1]:.2%} ({random[-1]:.2%} under random)."
    )


def _alt_dynamics(data: dict[str, Any]) -> str:
    dynamics, summary = data["dynamics"], data["summary"]
    first = dynamics["share_rarest_10pct"][:1] or [0.0]
    last = dynamics["share_rarest_10pct"][-1:] or [0.0]
    return (
        f"Line chart over training progress: the rarest 10% of clusters get {first[0]:.1%} of "
        f"the first slice and {last[0]:.1%} of the last "
        f"({dynamics['random_share_rarest_10pct']:.1%} under random sampling); "
        f"{summary['n_clipped_clusters']} clusters are clipped, the first at draw "
        f"{summary['first_clip_position'] or '-'}."
    )


def _alt_repetitions(data: dict[str, Any]) -> str:
    summary = data["summary"]
    return (
        f"Bar chart: documents by times seen; {summary['never_seen']:,} never seen, at most "
        f"{summary['max_repeats_observed']} repeats of one document"
        + (f" (cap {summary['max_repeats']})." if summary["max_repeats"] is not None else ".")
    )


def _alt_never_seen(data: dict[str, Any]) -> str:
    summary = data["summary"]
    return (
        f"Bar chart: fraction of each cluster never seen, clusters sorted by size; "
        f"{summary['never_seen']:,} of {summary['n_usable']:,} documents "
        f"({summary['never_seen_fraction']:.1%}) overall."
    )


#: File name -> function of the report data giving the image's alt text (what it shows).
ALT_TEXTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "sizes.png": _alt_sizes,
    "shares.png": _alt_shares,
    "dynamics.png": _alt_dynamics,
    "repetitions.png": _alt_repetitions,
    "never_seen.png": _alt_never_seen,
}


def alt_texts(data: dict[str, Any]) -> dict[str, str]:
    """Alt text of every figure: what it shows, with its headline numbers."""
    return {name: describe(data) for name, describe in ALT_TEXTS.items()}


def write_figures(data: dict[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every figure of :data:`FIGURES` into ``out_dir``; return name -> path.

    >>> write_figures(compute_report_data("work"), "work")  # doctest: +SKIP
    {'sizes.png': PosixPath('work/sizes.png'), ...}
    """
    from clusterclip.io import atomic_path

    out = Path(out_dir)
    written = {}
    for name, (draw, _caption) in FIGURES.items():
        with atomic_path(out / name) as tmp:
            draw(data, tmp)
        written[name] = out / name
    return written
