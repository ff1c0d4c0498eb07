"""Plots of the LM experiment: held-out loss curves and sampling dynamics per policy."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clusterclip.errors import require_extra

__all__ = ["plot_all", "plot_curves", "plot_rare_share"]


def _by_regime(records: Sequence[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        groups[record["regime"]].append(record)
    return groups


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def plot_curves(records: Sequence[dict], path: str | Path, *, title: str = "") -> None:
    """Held-out loss (natural, macro over clusters, rarest 25%) vs tokens; mean over seeds."""
    matplotlib = require_extra("matplotlib", "experiments")
    matplotlib.use("Agg")
    plt = require_extra("matplotlib.pyplot", "experiments")
    metrics = ("natural", "macro", "rare")
    figure, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.8))
    policies = list(dict.fromkeys(r["policy"] for r in records))
    for axis, metric in zip(axes, metrics, strict=True):
        for policy in policies:
            runs = [r for r in records if r["policy"] == policy]
            # the untrained point (tokens = 0, loss ~ log vocab) would flatten the plot
            points = [p for p in runs[0]["curve"] if p["tokens"] > 0]
            tokens = np.array([p["tokens"] for p in points])
            values = np.array([[p[metric] for p in r["curve"] if p["tokens"] > 0] for r in runs])
            label = f"{policy} (n={len(runs)})"
            axis.plot(tokens / 1e3, values.mean(axis=0), marker=".", label=label)
        axis.set_xlabel("training tokens (thousands)")
        axis.set_ylabel(f"held-out loss, {metric} (nats/token)")
        axis.set_title(metric)
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_rare_share(records: Sequence[dict], path: str | Path, *, title: str = "") -> None:
    """Share of trained tokens from the rarest 25% of clusters per tenth of training."""
    matplotlib = require_extra("matplotlib", "experiments")
    matplotlib.use("Agg")
    plt = require_extra("matplotlib.pyplot", "experiments")
    figure, axis = plt.subplots(figsize=(6.5, 3.8))
    policies = list(dict.fromkeys(r["policy"] for r in records))
    for policy in policies:
        runs = [r for r in records if r["policy"] == policy]
        shares = np.array([r["dynamics"]["rare_share_by_slice"] for r in runs]).mean(axis=0)
        x = (np.arange(len(shares)) + 0.5) / len(shares)
        axis.plot(x, shares, marker="o", label=policy)
    natural = records[0]["dynamics"]["rare_share_natural"]
    axis.axhline(natural, color="grey", linestyle=":", label="natural share")
    axis.set_xlabel("fraction of the training budget")
    axis.set_ylabel("share of tokens from rarest 25% clusters")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    axis.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_all(records: Sequence[dict], out: str | Path) -> list[Path]:
    """Write ``curves-<regime>.png`` and ``rare-share-<regime>.png`` under ``out``."""
    out = Path(out)
    written = []
    for regime, group in _by_regime(records).items():
        corpus = group[0]["corpus"]
        name = f"{_slug(corpus)}-{_slug(regime)}"
        curves = out / f"curves-{name}.png"
        plot_curves(group, curves, title=f"{corpus}, {regime}: held-out loss")
        share = out / f"rare-share-{name}.png"
        plot_rare_share(group, share, title=f"{corpus}, {regime}: when rare clusters are seen")
        written += [curves, share]
    return written
