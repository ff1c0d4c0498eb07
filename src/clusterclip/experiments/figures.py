"""Figures of the grid that makes the claims, drawn from ``results.jsonl`` alone.

Drawn by ``python -m clusterclip.experiments.answer ROOT --figures DIR``:

- ``paired-<family>.png``: every row's paired differences (one point per seed) with the
  mean and its 95% interval, one panel per primary metric;
- ``curves-<family>.png``: the paired difference from ``random`` at every evaluation point
  (mean over seeds and its 95% interval), per corpus and regime, per primary metric;
- ``rare-share-<family>.png``: the share of trained tokens from the sampler's rare clusters
  in each tenth of the budget (mean over seeds), per corpus and regime.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clusterclip.errors import require_extra
from clusterclip.experiments import stats
from clusterclip.experiments.answer import PRIMARY, Row, place_name

__all__ = ["draw_all", "draw_curves", "draw_paired", "draw_rare_share"]


def _pyplot():
    matplotlib = require_extra("matplotlib", "experiments")
    matplotlib.use("Agg")
    return require_extra("matplotlib.pyplot", "experiments")


def draw_paired(rows: Sequence[Row], path: Path, *, title: str) -> None:
    """One panel per metric: each row's per-seed differences, its mean and 95% interval."""
    plt = _pyplot()
    labels = list(dict.fromkeys((r.corpus, r.regime, r.contrast) for r in rows if r.in_family))
    figure, axes = plt.subplots(
        1, len(PRIMARY), figsize=(4.2 * len(PRIMARY), 0.32 * len(labels) + 1.6), sharey=True
    )
    for axis, metric in zip(axes, PRIMARY, strict=True):
        for y, label in enumerate(labels):
            row = next((r for r in rows if (r.corpus, r.regime, r.contrast) == label
                        and r.metric == metric and r.in_family), None)  # fmt: skip
            if row is None:
                continue
            axis.scatter(row.values, [y] * len(row.values), s=8, alpha=0.5, color="tab:gray")
            colour = {"lower loss": "tab:green", "higher loss": "tab:red"}.get(
                row.verdict, "tab:blue"
            )
            if np.isfinite(row.test.low):
                axis.plot([row.test.low, row.test.high], [y, y], color=colour, lw=2)
            axis.scatter([row.test.mean], [y], color=colour, s=24, zorder=3)
        axis.axvline(0, color="black", lw=0.8)
        for edge in (-stats.SMALLEST_EFFECT, stats.SMALLEST_EFFECT):
            axis.axvline(edge, color="black", lw=0.5, ls=":")
        axis.set_title(PRIMARY[metric], fontsize=9)
        axis.set_xlabel("paired difference (nats/token)", fontsize=8)
    axes[0].set_yticks(range(len(labels)))
    axes[0].set_yticklabels([" | ".join(label) for label in labels], fontsize=7)
    axes[0].invert_yaxis()
    figure.suptitle(
        title + " (green: lower loss, red: higher, q <= 0.05; dotted: ±0.01)", fontsize=9
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _by_place(records: Sequence[dict]) -> dict[tuple, dict[str, dict[int, dict]]]:
    places: dict = defaultdict(lambda: defaultdict(dict))
    for record in records:
        place = place_name(record["_grid"], record["corpus"])
        places[(place, record["regime"])][record["policy"]][record["seed"]] = record
    return dict(sorted(places.items(), key=lambda kv: (kv[0][0], float(kv[0][1].split("-")[0]))))


def draw_curves(records: Sequence[dict], path: Path, *, title: str) -> None:
    """Paired difference from random at every evaluation point, mean and 95% interval."""
    plt = _pyplot()
    places = _by_place(records)
    figure, axes = plt.subplots(
        len(places), len(PRIMARY), figsize=(4 * len(PRIMARY), 2.6 * len(places)), squeeze=False
    )
    for (corpus, regime), axes_row in zip(places, axes, strict=True):
        runs = places[(corpus, regime)]
        base = runs.get("random", {})
        for axis, metric in zip(axes_row, PRIMARY, strict=True):
            for policy, by_seed in runs.items():
                seeds = sorted(set(by_seed) & set(base))
                if policy == "random" or not seeds:
                    continue
                points = [p["tokens"] for p in by_seed[seeds[0]]["curve"]][1:]
                diffs = np.array([
                    [a[metric] - b[metric] for a, b in
                     zip(by_seed[s]["curve"][1:], base[s]["curve"][1:], strict=True)]
                    for s in seeds if metric in by_seed[s]["curve"][-1]
                ])  # fmt: skip
                if diffs.size == 0:
                    continue
                mean = diffs.mean(axis=0)
                line = axis.plot(points, mean, marker="o", ms=3, label=policy)[0]
                if len(diffs) > 1:
                    bands = np.array([stats.t_interval(column) for column in diffs.T])
                    axis.fill_between(points, bands[:, 0], bands[:, 1], alpha=0.15,
                                      color=line.get_color())  # fmt: skip
            axis.axhline(0, color="black", lw=0.8)
            axis.set_title(f"{corpus} {regime}: {PRIMARY[metric]}", fontsize=8)
            axis.tick_params(labelsize=7)
        axes_row[0].set_ylabel("− random (nats/token)", fontsize=8)
        if axes_row[0].get_legend_handles_labels()[0]:  # a place with no pairs yet has none
            axes_row[0].legend(fontsize=6)
    for axis in axes[-1]:
        axis.set_xlabel("training tokens", fontsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def draw_rare_share(records: Sequence[dict], path: Path, *, title: str) -> None:
    """Share of trained tokens from the sampler's rare clusters over the budget, per policy."""
    plt = _pyplot()
    places = _by_place(records)
    figure, axes = plt.subplots(1, len(places), figsize=(4 * len(places), 3), squeeze=False)
    for axis, (corpus, regime) in zip(axes[0], places, strict=True):
        for policy, by_seed in places[(corpus, regime)].items():
            shares = np.array([r["dynamics"]["rare_share_by_slice"] for r in by_seed.values()])
            axis.plot(np.arange(1, shares.shape[1] + 1) / shares.shape[1], shares.mean(axis=0),
                      marker="o", ms=3, label=policy)  # fmt: skip
        natural = next(iter(next(iter(places[(corpus, regime)].values())).values()))
        axis.axhline(natural["dynamics"]["rare_share_natural"], color="black", lw=0.6, ls=":")
        axis.set_title(f"{corpus} {regime}", fontsize=8)
        axis.set_xlabel("fraction of the budget", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.legend(fontsize=6)  # each panel: the arms differ between regimes (R = 4 or 8)
    axes[0][0].set_ylabel("rare-cluster token share", fontsize=8)
    figure.suptitle(title + " (dotted: the pool's natural share)", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def draw_all(records: Sequence[dict], rows: Sequence[Row], folder: Path) -> list[Path]:
    """Every figure of every family into ``folder``; returns the paths written."""
    from clusterclip.experiments.answer import grid_family

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for family in dict.fromkeys(r.family for r in rows):
        members = [r for r in records if grid_family(r["_grid"]) == family]
        for name, draw, data in (
            ("paired", draw_paired, [r for r in rows if r.family == family]),
            ("curves", draw_curves, members),
            ("rare-share", draw_rare_share, members),
        ):
            path = folder / f"{name}-{family}.png"
            draw(data, path, title=f"{family} grid")
            written.append(path)
    return written
