"""Held-out evaluation and result tables for the LM experiment.

Metrics (all in nats per token). The first four are ones the sampler never saw:

``natural``
    loss over every held-out token (the corpus's natural mix);
``category``
    mean over real categories of each category's held-out loss (when labels exist);
``independent_macro`` / ``independent_rare``
    mean over the clusters of an *independent* clustering (another encoder and
    seed, :func:`clusterclip.experiments.prepare.independent_clustering`) of each
    cluster's held-out loss, and the loss over its rarest 25% of clusters;
``macro`` / ``rare`` (tables: ``own macro`` / ``own rare``)
    the same over the sampler's own clusters, which a cluster-balanced sampler
    favours by construction: shown, but never the basis of a claim;
``rare_train`` / ``rare_gap``
    loss on training documents of the own rare clusters, and held-out minus
    train on those clusters (the overfitting gap; larger = more memorisation);
``near_dup``
    loss on held-out documents that are near-duplicates (cosine > threshold)
    of a training document: reported apart, never mixed into the metrics above.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from clusterclip.errors import require_extra

__all__ = [
    "document_losses",
    "format_dynamics",
    "format_tables",
    "loss_metrics",
    "rare_clusters",
]

METRICS = ("natural", "category", "independent_macro", "independent_rare", "macro", "rare",
           "rare_train", "rare_gap", "near_dup")  # fmt: skip
#: Column titles of the tables (the sampler's own clusters are labelled as such).
TITLES = {"independent_macro": "independent macro", "independent_rare": "independent rare",
          "macro": "own macro", "rare": "own rare", "category": "category macro",
          "rare_train": "own rare (train)", "rare_gap": "own rare gap"}  # fmt: skip


def rare_clusters(sizes: np.ndarray, *, quantile: float = 0.25) -> np.ndarray:
    """Ids of the smallest ``quantile`` of clusters (at least one), ties by id.

    >>> rare_clusters(np.array([50, 3, 9, 700])).tolist()
    [1]
    """
    count = max(1, int(round(quantile * len(sizes))))
    return np.sort(np.argsort(sizes, kind="stable")[:count])


def document_losses(
    model,
    docs: np.ndarray,
    flat: np.ndarray,
    offsets: np.ndarray,
    *,
    eos_id: int,
    context: int,
    batch_size: int = 64,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Summed next-token loss and token count of every document in ``docs``.

    Each document is read as ``EOS doc`` (as in training, where EOS separates
    documents) and cut into windows of ``context + 1`` tokens; every document
    token is predicted once.

    Returns
    -------
    loss_sum : numpy.ndarray of float64, shape (len(docs),)
    n_tokens : numpy.ndarray of int64, shape (len(docs),)
    """
    torch = require_extra("torch", "experiments")
    windows, owners = [], []
    for position, doc in enumerate(docs):
        tokens = np.concatenate([[eos_id], flat[offsets[doc] : offsets[doc + 1]]])
        for start in range(0, len(tokens) - 1, context):
            windows.append(tokens[start : start + context + 1])
            owners.append(position)
    loss_sum = np.zeros(len(docs), dtype=np.float64)
    n_tokens = np.zeros(len(docs), dtype=np.int64)
    model.eval()
    with torch.no_grad():
        for start in range(0, len(windows), batch_size):
            chunk = windows[start : start + batch_size]
            width = max(len(w) for w in chunk)
            ids = np.full((len(chunk), width), eos_id, dtype=np.int64)
            mask = np.zeros((len(chunk), width - 1), dtype=bool)
            for row, window in enumerate(chunk):
                ids[row, : len(window)] = window
                mask[row, : len(window) - 1] = True
            inputs = torch.from_numpy(ids).to(device)
            with _autocast(torch, device):
                logits = model(input_ids=inputs[:, :-1]).logits
            losses = torch.nn.functional.cross_entropy(
                logits.float().transpose(1, 2), inputs[:, 1:], reduction="none"
            )
            losses = (losses.cpu().numpy() * mask).sum(axis=1)
            rows = np.asarray(owners[start : start + batch_size])
            np.add.at(loss_sum, rows, losses)
            np.add.at(n_tokens, rows, mask.sum(axis=1))
    model.train()
    return loss_sum, n_tokens


def _autocast(torch, device: str):
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    import contextlib

    return contextlib.nullcontext()


def loss_metrics(
    loss_sum: np.ndarray,
    n_tokens: np.ndarray,
    clusters: np.ndarray,
    *,
    rare: np.ndarray,
    categories: Sequence[str] | None = None,
    natural_weights: np.ndarray | None = None,
) -> dict[str, float]:
    """Aggregate per-document losses into natural / macro / rare / category losses.

    ``rare`` is absent when no document of the ``rare`` clusters is among these.

    ``natural_weights`` (one per cluster id, e.g. the training tokens of each
    cluster) turn ``natural`` into the per-cluster losses weighted by the
    training mix, for held-out sets sampled evenly per cluster; without it,
    ``natural`` is the loss over all held-out tokens.

    >>> loss_metrics(np.array([2.0, 4.0, 9.0]), np.array([1, 1, 3]), np.array([0, 0, 1]), rare=np.array([1]))
    {'natural': 3.0, 'macro': 3.0, 'rare': 3.0}
    >>> loss_metrics(np.array([2.0]), np.array([1]), np.array([0]), rare=np.array([5]))
    {'natural': 2.0, 'macro': 2.0}
    """
    total = n_tokens.sum()
    present = [c for c in np.unique(clusters) if n_tokens[clusters == c].sum() > 0]
    per_cluster = np.array(
        [loss_sum[clusters == c].sum() / n_tokens[clusters == c].sum() for c in present]
    )
    if natural_weights is None:
        metrics = {"natural": float(loss_sum.sum() / max(total, 1))}
    else:
        weights = np.asarray(natural_weights, dtype=float)[present]
        metrics = {"natural": float((per_cluster * weights).sum() / weights.sum())}
    metrics["macro"] = float(np.mean(per_cluster))
    in_rare = np.isin(clusters, rare)
    if n_tokens[in_rare].sum() > 0:  # no tokens there: no rare loss (not a loss of 0)
        metrics["rare"] = float(loss_sum[in_rare].sum() / n_tokens[in_rare].sum())
    if categories is not None:
        by_category: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for loss, count, category in zip(loss_sum, n_tokens, categories, strict=True):
            by_category[category][0] += loss
            by_category[category][1] += count
        metrics["category"] = float(np.mean([s / n for s, n in by_category.values() if n > 0]))
    return metrics


def _mean_std(values: Sequence[float]) -> str:
    values = np.asarray(values, dtype=float)
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{values.mean():.3f} ± {values.std(ddof=1):.3f}"


def format_tables(records: Sequence[dict], *, baseline: str = "random") -> str:
    """Markdown tables: mean ± std over seeds, and paired differences vs ``baseline``.

    ``records`` are the result lines written by :mod:`clusterclip.experiments.lm`
    (keys ``regime``, ``policy``, ``seed``, ``metrics``).
    """
    lines = []
    by_regime: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_regime[record["regime"]].append(record)
    for regime, group in by_regime.items():
        metrics = [m for m in METRICS if any(m in r["metrics"] for r in group)]
        policies = list(dict.fromkeys(r["policy"] for r in group))
        epochs = group[0].get("epochs")
        lines.append(f"\n#### {regime} ({epochs:.2f} epochs over the training pool)\n")
        titles = [TITLES.get(m, m) for m in metrics]
        lines.append("| policy | seeds | " + " | ".join(titles) + " |")
        lines.append("|---" * (len(metrics) + 2) + "|")
        for policy in policies:
            runs = [r for r in group if r["policy"] == policy]
            cells = [
                _mean_std([r["metrics"][m] for r in runs if m in r["metrics"]]) for m in metrics
            ]
            lines.append(f"| {policy} | {len(runs)} | " + " | ".join(cells) + " |")
        base = {r["seed"]: r for r in group if r["policy"] == baseline}
        if not base:
            continue
        lines.append(
            f"\nPaired difference vs {baseline} (same seed: same init; negative = better), "
            "mean ± std over seeds, and the per-seed values:\n"
        )
        lines.append("| policy | " + " | ".join(titles) + " |")
        lines.append("|---" * (len(metrics) + 1) + "|")
        for policy in policies:
            if policy == baseline:
                continue
            runs = [r for r in group if r["policy"] == policy and r["seed"] in base]
            cells = []
            for m in metrics:
                diffs = [r["metrics"][m] - base[r["seed"]]["metrics"][m] for r in runs]
                if not diffs:
                    cells.append("")
                    continue
                shown = ", ".join(f"{d:+.3f}" for d in diffs)
                cells.append(f"{_signed(diffs)} ({shown})" if len(diffs) > 1 else shown)
            lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_dynamics(records: Sequence[dict]) -> str:
    """Markdown table: share of trained tokens from the rarest 25% of clusters per tenth
    of training (seed 0 where present), with repeats and coverage of the training pool.
    """
    lines = []
    by_regime: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_regime[record["regime"]].append(record)
    for regime, group in by_regime.items():
        seed = min(r["seed"] for r in group)
        runs = [r for r in group if r["seed"] == seed]
        natural = runs[0]["dynamics"]["rare_share_natural"]
        lines.append(
            f"\n#### {regime}: rare-cluster token share per tenth of training (seed {seed}; "
            f"natural share {natural:.1%})\n"
        )
        lines.append(
            "| policy | "
            + " | ".join(f"{i + 1}" for i in range(10))
            + " | max repeats | docs seen |"
        )
        lines.append("|---" * 13 + "|")
        for record in runs:
            shares = record["dynamics"]["rare_share_by_slice"]
            seen = record["dynamics"]["unique_documents_seen"] / record["pool_documents"]
            lines.append(
                f"| {record['policy']} | "
                + " | ".join(f"{100 * x:.1f}%" for x in shares)
                + f" | {record['dynamics']['max_repeats_seen']} | {seen:.0%} |"
            )
    return "\n".join(lines) + "\n"


def _signed(diffs: Sequence[float]) -> str:
    values = np.asarray(diffs, dtype=float)
    return f"{values.mean():+.3f} ± {values.std(ddof=1):.3f}"
