"""Does ClusterClip help a small language model?  Train one per sampling policy and compare.

Small enough to read in one sitting (in the spirit of nanoGPT)::

    python -m clusterclip.experiments.lm --corpus=kjv --workdir=runs/kjv --out=results/kjv \\
        --n-clusters=100 --tokens=200000 --epochs=1 --seeds=0,1,2 \\
        --policies=random,uniform,clusterclip-r4,planned-r4

Steps (each cached in ``--workdir``, so a second regime or seed reuses them):

1. load the corpus (a name from ``shared/CORPORA.md`` or a jsonl/parquet file),
   then embed and cluster it with the product's own stages through the one
   runner (:func:`clusterclip.runner.run_stage`, as ``clusterclip run`` does);
2. hold out a fraction of every cluster (stratified), flag held-out documents
   that are near-duplicates of a training document (cosine > 0.95) and report
   them apart; train a byte-level BPE on the training split only (the
   experiment's own stage, :mod:`clusterclip.experiments.prepare`);
3. the training *pool* is the training split, or a stratified subsample of it
   sized so that the token budget is ``--epochs`` passes (multi-epoch regime);
4. for every seed and policy: take the order a :class:`~clusterclip.ClusterClipSampler`
   yields over the pool (equal token budget), pack documents into
   fixed-length sequences in that order, train a fresh GPT-2 (same init
   for every policy of one seed) and evaluate held-out loss; one JSON line per
   run is appended to ``--out/results.jsonl`` as soon as it finishes (a rerun
   skips finished runs);
5. print and write the tables (``results.md``) and the plots.

Policies: ``random``, ``uniform``, ``clusterclip-rR`` (online clip at R
passes), ``planned-rR`` (``policy="clusterclip", order="planned"``),
``temperature-aA[-rR]`` (cluster weights ``size**A``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from clusterclip.errors import ClusterClipError, invalid, require_extra, spelled_as_flags
from clusterclip.experiments import data, evaluate
from clusterclip.experiments.budget import training_budget
from clusterclip.experiments.model import ModelConfig, build_model
from clusterclip.experiments.options import (
    DEFAULT_POLICIES,
    ExperimentConfig,
    add_arguments,
    config_from_args,
)
from clusterclip.experiments.prepare import Prepared, prepare
from clusterclip.options import flag_names
from clusterclip.schedule.policy import SchedulePolicy

__all__ = [
    "DEFAULT_POLICIES",
    "ExperimentConfig",
    "Policy",
    "Prepared",
    "add_arguments",
    "config_from_args",
    "main",
    "parse_policy",
    "prepare",
    "schedule_order",
    "train_run",
]


@dataclass(frozen=True)
class Policy:
    """One sampling policy of the grid: a name and the schedule settings it stands for."""

    name: str
    policy: str
    max_repeats: int | None = None
    alpha: float | None = None
    order: str = "online"

    def schedule_policy(
        self, *, num_tokens: int, seed: int, schedule_version: int
    ) -> SchedulePolicy:
        """The :class:`~clusterclip.SchedulePolicy` of one run: these settings, its budget and seed.

        ``max_repeats=None`` is kept (random passes and temperature unclipped), and
        the harness always falls back to random passes past the clip.

        >>> parse_policy("planned-r4").schedule_policy(num_tokens=100, seed=0, schedule_version=1).order
        'planned'
        """
        return SchedulePolicy(
            policy=self.policy, max_repeats=self.max_repeats, alpha=self.alpha, order=self.order,
            num_tokens=num_tokens, on_exhausted="random", seed=seed,
            schedule_version=schedule_version,
        )  # fmt: skip


def parse_policy(spec: str) -> Policy:
    """Parse ``random``, ``uniform``, ``clusterclip-r4``, ``planned-r4``, ``temperature-a0.5[-r4]``.

    >>> parse_policy("planned-r4")
    Policy(name='planned-r4', policy='clusterclip', max_repeats=4, alpha=None, order='planned')
    """
    name, *options = spec.strip().split("-")
    values = {}
    for option in options:
        if option[:1] not in ("r", "a") or not option[1:]:
            raise invalid("policies", "items like clusterclip-r4 or temperature-a0.5", spec)
        values[option[0]] = option[1:]
    try:
        repeats = int(values["r"]) if "r" in values else None
        alpha = float(values["a"]) if "a" in values else None
    except ValueError as error:
        raise invalid("policies", "items like clusterclip-r4 or temperature-a0.5", spec) from error
    if name in ("random", "uniform") and not values:
        return Policy(spec, name)
    if name == "clusterclip" and repeats is not None and alpha is None:
        return Policy(spec, "clusterclip", max_repeats=repeats)
    if name == "planned" and repeats is not None and alpha is None:
        return Policy(spec, "clusterclip", max_repeats=repeats, order="planned")
    if name == "temperature" and alpha is not None:
        return Policy(spec, "temperature", max_repeats=repeats, alpha=alpha)
    raise invalid(
        "policies",
        "random, uniform, clusterclip-rR, planned-rR or temperature-aA[-rR]",
        spec,
        "Example: --policies=random,uniform,clusterclip-r4,planned-r4,temperature-a0.5",
    )


# --------------------------------------------------------------------------- one run


def _resolve_device(name: str) -> str:
    if name != "auto":
        return name
    torch = require_extra("torch", "experiments")
    return "cuda" if torch.cuda.is_available() else "cpu"


def training_pool(prep: Prepared, cfg: ExperimentConfig) -> np.ndarray:
    """Training documents of this regime: the pool whose tokens x ``epochs`` = budget."""
    doc_tokens = np.diff(prep.offsets) + 1  # + the EOS separator
    train_tokens = doc_tokens[prep.train].sum()
    fraction = min(1.0, cfg.tokens / (cfg.epochs * train_tokens))
    return data.stratified_subsample(prep.train, prep.labels, fraction=fraction, seed=cfg.data_seed)


def rare_share_by_slice(
    order: np.ndarray, doc_tokens: np.ndarray, is_rare: np.ndarray, *, budget: int, slices: int = 10
) -> list[float]:
    """Share of trained tokens that come from rare clusters in each tenth of the budget.

    >>> rare_share_by_slice(np.array([0, 1]), np.array([5, 5]), np.array([True, False]), budget=10, slices=2)
    [1.0, 0.0]
    """
    ends = np.cumsum(doc_tokens[order])
    starts = ends - doc_tokens[order]
    edges = np.linspace(0, budget, slices + 1)
    shares = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        overlap = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None)
        total = overlap.sum()
        shares.append(float(overlap[is_rare[order]].sum() / total) if total else 0.0)
    return shares


def schedule_order(
    prep: Prepared, cfg: ExperimentConfig, policy: Policy, seed: int, *, budget: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(pool, order)``: the regime's training pool and the documents a run trains on.

    The order is what :class:`~clusterclip.ClusterClipSampler` yields over the
    pool's clusters (the trainer-side product, one rank), for a token budget of
    ``budget`` plus one document's worth so the last sequence is full.
    """
    from clusterclip.adapters.torch import ClusterClipSampler

    pool = training_pool(prep, cfg)
    doc_tokens = np.diff(prep.offsets) + 1  # + the EOS separator
    _, pool_labels = np.unique(prep.labels[pool], return_inverse=True)
    settings = policy.schedule_policy(
        num_tokens=budget + cfg.max_doc_tokens + 2, seed=seed, schedule_version=cfg.schedule_version
    )
    sampler = ClusterClipSampler(pool_labels.astype(np.int64), settings, lengths=doc_tokens[pool])
    positions = np.fromiter(sampler, dtype=np.int64, count=len(sampler))
    return pool, pool[positions]


def _dynamics(prep: Prepared, pool: np.ndarray, order: np.ndarray, budget: int) -> dict:
    doc_tokens = np.diff(prep.offsets) + 1
    is_rare_doc = np.isin(prep.labels, prep.rare)
    pool_tokens = int(doc_tokens[pool].sum())
    return {
        "rare_share_by_slice": rare_share_by_slice(order, doc_tokens, is_rare_doc, budget=budget),
        "rare_share_natural": float(doc_tokens[pool][is_rare_doc[pool]].sum() / pool_tokens),
        "max_repeats_seen": int(np.bincount(order).max()),
        "unique_documents_seen": int(np.unique(order).size),
    }


def _optimizer(torch, model, cfg: ExperimentConfig):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0},
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )


def learning_rate(cfg: ExperimentConfig, step: int, steps: int) -> float:
    """Linear warm-up, then cosine decay to ``lr * lr_floor``.

    >>> cfg = ExperimentConfig(lr=1.0, warmup_fraction=0.1, lr_floor=0.1)
    >>> [round(learning_rate(cfg, s, 100), 3) for s in (0, 9, 10, 99)]
    [0.1, 1.0, 1.0, 0.1]
    """
    warmup = max(1, int(cfg.warmup_fraction * steps))
    if step < warmup:
        return cfg.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.lr * (cfg.lr_floor + (1 - cfg.lr_floor) * cosine)


class _Heldout:
    """Held-out loss metrics of a model (natural, macro, rare, category).

    :meth:`point` also keeps every held-out document's summed loss at each evaluation
    point (``loss_sums``), stored with the run so that re-analysis needs no retraining.
    """

    def __init__(self, prep: Prepared, cfg: ExperimentConfig, device: str) -> None:
        self.prep, self.cfg, self.device = prep, cfg, device
        self.loss_sums: list[np.ndarray] = []
        self.n_tokens: np.ndarray | None = None

    def point(self, model) -> dict:
        """The held-out metrics now, keeping the per-document losses behind them."""
        docs = self.prep.heldout
        loss_sum, n_tok = self.losses(model, docs)
        self.loss_sums.append(loss_sum.astype(np.float32))
        self.n_tokens = n_tok
        return self.metrics(model, docs, losses=(loss_sum, n_tok))

    def losses(self, model, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        prep = self.prep
        return evaluate.document_losses(
            model, docs, prep.flat, prep.offsets, eos_id=prep.eos_id,
            context=self.cfg.model.context, device=self.device,
        )  # fmt: skip

    def metrics(self, model, docs: np.ndarray, *, losses=None) -> dict:
        prep = self.prep
        loss_sum, n_tok = losses if losses is not None else self.losses(model, docs)
        categories = None if prep.categories is None else [prep.categories[d] for d in docs]
        metrics = evaluate.loss_metrics(
            loss_sum, n_tok, prep.labels[docs], rare=prep.rare, categories=categories,
            natural_weights=prep.train_tokens if self.cfg.tail_docs is not None else None,
        )  # fmt: skip
        independent = evaluate.loss_metrics(
            loss_sum, n_tok, prep.independent[docs], rare=prep.independent_rare
        )
        metrics["independent_macro"] = independent["macro"]
        if "rare" in independent:  # none of the held-out documents in those clusters: no metric
            metrics["independent_rare"] = independent["rare"]
        return metrics


def _train(torch, model, sequences, heldout: _Heldout, cfg, *, steps, device, label, log):
    """Train on ``sequences`` in order; return the held-out and training curves."""
    optimizer = _optimizer(torch, model, cfg)
    batch, context = cfg.batch_size, cfg.model.context
    curve = [{"tokens": 0, **heldout.point(model)}]
    train_curve, window = [], []
    eval_steps = {max(1, round(steps * (i + 1) / cfg.eval_points)) for i in range(cfg.eval_points)}
    inputs_all = torch.from_numpy(sequences)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(cfg, step, steps)
        chunk = inputs_all[step * batch : (step + 1) * batch].to(device)
        with evaluate._autocast(torch, device):
            logits = model(input_ids=chunk[:, :-1]).logits
        # Targets are the inputs shifted by one; windows overlap by one token, so every
        # token of the stream is a target exactly once.
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1)
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        window.append(float(loss.detach()))
        if not math.isfinite(window[-1]):
            raise ClusterClipError(f"training loss became {window[-1]} at step {step}.")
        if (step + 1) in eval_steps:
            metrics = heldout.point(model)
            tokens_seen = (step + 1) * batch * context
            curve.append({"tokens": tokens_seen, **metrics})
            train_curve.append({"tokens": tokens_seen, "train": float(np.mean(window))})
            window = []
            log(
                f"  [{label}] step {step + 1}/{steps} train {train_curve[-1]['train']:.3f} "
                f"held-out natural {metrics['natural']:.3f} "
                f"independent macro {metrics['independent_macro']:.3f} "
                f"own macro {metrics['macro']:.3f}"
            )
    return curve, train_curve


def _final_metrics(model, heldout: _Heldout, curve: list[dict], pool: np.ndarray) -> dict:
    """Last held-out point, plus the rare clusters' training loss and the near-duplicate loss."""
    prep = heldout.prep
    metrics = dict(curve[-1])
    metrics.pop("tokens")
    rare_pool = pool[np.isin(prep.labels, prep.rare)[pool]]
    if rare_pool.size and "rare" in metrics:
        train_sum, train_tok = heldout.losses(model, rare_pool)
        metrics["rare_train"] = float(train_sum.sum() / train_tok.sum())
        metrics["rare_gap"] = metrics["rare"] - metrics["rare_train"]
    if prep.near_dup.size:
        metrics["near_dup"] = heldout.metrics(model, prep.near_dup)["natural"]
    return metrics


def machine_description(torch, threads: int) -> str:
    """CPU model, cores and torch threads (and the GPU when one is used); no host name."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            names = [
                line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")
            ]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} cores, torch threads={threads}"
    if torch.cuda.is_available():
        text += f", {torch.cuda.get_device_name(0)}"
    return text


def portable_path(value: str | None) -> str | None:
    """A path as results files may record it: relative to the current directory, or its name.

    >>> portable_path("/nowhere/else/corpus.jsonl")
    'corpus.jsonl'
    >>> portable_path("runs/kjv")
    'runs/kjv'
    """
    if value is None or not os.path.isabs(value):
        return value
    path = Path(value)
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.name


def portable_config(cfg: ExperimentConfig) -> dict:
    """``asdict(cfg)`` with machine paths made relative (results files travel)."""
    values = asdict(cfg)
    for name in ("workdir", "out", "corpus"):
        values[name] = portable_path(values[name])
    return values


def losses_file(record: dict) -> str:
    """Where a run's per-document held-out losses go, relative to ``--out``.

    >>> losses_file({"regime": "1-epoch", "policy": "clusterclip-r4", "seed": 3})
    'losses/1-epoch_clusterclip-r4_s3.npz'
    """
    return f"losses/{record['regime']}_{record['policy']}_s{record['seed']}.npz"


def save_losses(out: str | Path, record: dict, heldout: _Heldout) -> None:
    """Write the run's per-document held-out losses (compressed ``.npz``) under ``out``.

    Arrays: ``documents`` (held-out document indices, int64), ``n_tokens`` (tokens scored
    per document), ``tokens`` (training tokens at each evaluation point) and ``loss_sum``
    (float32, evaluation points x documents: summed next-token loss, nats).
    """
    import io as _io

    from clusterclip.io import atomic_write_bytes

    buffer = _io.BytesIO()
    np.savez_compressed(
        buffer,
        documents=heldout.prep.heldout.astype(np.int64),
        n_tokens=heldout.n_tokens.astype(np.int32),
        tokens=np.array([point["tokens"] for point in record["curve"]], dtype=np.int64),
        loss_sum=np.stack(heldout.loss_sums),
    )
    atomic_write_bytes(Path(out) / record["losses_file"], buffer.getvalue())


def clustering_agreement(prep: Prepared) -> dict:
    """How the sampler's clusters relate to the independent clustering the claims rest on.

    ``ari``: adjusted Rand index between the two over the documents both cluster;
    ``independent_rare_in_own_rare``: the share of held-out tokens of the independent
    clustering's rarest quarter that fall in the sampler's own rarest quarter.
    """
    from sklearn.metrics import adjusted_rand_score

    both = (prep.labels >= 0) & (prep.independent >= 0)
    tokens = np.diff(prep.offsets)[prep.heldout]
    ind_rare = np.isin(prep.independent[prep.heldout], prep.independent_rare)
    own_rare = np.isin(prep.labels[prep.heldout], prep.rare)
    rare_tokens = tokens[ind_rare].sum()
    return {
        "ari": float(adjusted_rand_score(prep.labels[both], prep.independent[both])),
        "independent_rare_in_own_rare": (
            float(tokens[ind_rare & own_rare].sum() / rare_tokens) if rare_tokens else None
        ),
    }


def train_run(prep: Prepared, cfg: ExperimentConfig, policy: Policy, seed: int, *, log=print):
    """Train one model under one policy and seed; return the result record (a dict).

    The per-document held-out losses are written to ``cfg.out`` at ``record["losses_file"]``.
    """
    torch = require_extra("torch", "experiments")
    torch.set_num_threads(cfg.threads)
    device = _resolve_device(cfg.device)
    started = time.time()
    context, batch = cfg.model.context, cfg.batch_size
    steps = training_budget(cfg).steps
    budget = steps * batch * context
    pool, order = schedule_order(prep, cfg, policy, seed, budget=budget)
    pool_tokens = int((np.diff(prep.offsets) + 1)[pool].sum())
    sequences = data.pack_sequences(
        order, prep.flat, prep.offsets, eos_id=prep.eos_id, n_sequences=steps * batch,
        context=context,
    )  # fmt: skip
    model = build_model(cfg.model, vocab_size=prep.summary["vocab_size"], seed=seed).to(device)
    heldout = _Heldout(prep, cfg, device)
    curve, train_curve = _train(
        torch, model, sequences, heldout, cfg, steps=steps, device=device,
        label=f"{policy.name} seed={seed}", log=log,
    )  # fmt: skip
    record = {
        "corpus": portable_path(prep.summary["corpus"]),
        "corpus_sha256": prep.summary.get("corpus_sha256"),
        "corpus_documents": prep.summary.get("documents"),
        "corpus_source": prep.summary.get("corpus_source"),
        "regime": cfg.regime or f"{cfg.epochs:g}-epoch",
        "policy": policy.name,
        "seed": seed,
        "data_seed": cfg.data_seed,
        "epochs": budget / pool_tokens,
        "budget_tokens": budget,
        "steps": steps,
        "pool_documents": int(pool.size),
        "pool_tokens": pool_tokens,
        "metrics": _final_metrics(model, heldout, curve, pool),
        "curve": curve,
        "train_curve": train_curve,
        "dynamics": _dynamics(prep, pool, order, budget),
        "clustering": clustering_agreement(prep),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "wall_seconds": round(time.time() - started, 1),
        "device": device,
        "machine": machine_description(torch, cfg.threads),
        "config": {**portable_config(cfg), "policy_spec": asdict(policy)},
    }
    record["losses_file"] = losses_file(record)
    save_losses(cfg.out, record, heldout)
    return record


# --------------------------------------------------------------------------- command line


def read_results(out: str | Path) -> list[dict]:
    path = Path(out) / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_report(out: str | Path) -> str:
    """Rebuild ``results.md`` and the plots from ``results.jsonl``; return the tables."""
    from clusterclip.io import atomic_write_bytes

    records = read_results(out)
    if not records:
        return "no results yet\n"
    tables = evaluate.format_tables(records) + evaluate.format_dynamics(records)
    atomic_write_bytes(Path(out) / "results.md", tables.encode())
    try:
        from clusterclip.experiments import plots

        plots.plot_all(records, Path(out))
    except ImportError:
        pass
    return tables


def check_same_corpus(records: list[dict], summary: dict, out: str | Path) -> None:
    """Refuse to add runs on other corpus bytes to a results file (e.g. another Debian release).

    >>> check_same_corpus([{"corpus_sha256": "ab"}], {"corpus_sha256": "ab"}, "out")
    >>> check_same_corpus([{"corpus_sha256": "ab"}], {"corpus_sha256": "cd", "documents": 9}, "out")
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: out/results.jsonl holds runs on corpus sha256 ab..., but the corpus read now (9 documents) has sha256 cd...: the corpus files changed (another package version?). Write these runs to another --out.
    """
    seen = {r["corpus_sha256"] for r in records if r.get("corpus_sha256")}
    now = summary.get("corpus_sha256")
    if now and seen and seen != {now}:
        raise ClusterClipError(
            f"{Path(out) / 'results.jsonl'} holds runs on corpus sha256 "
            f"{', '.join(sorted(h[:12] for h in seen))}..., but the corpus read now "
            f"({summary.get('documents')} documents) has sha256 {now[:12]}...: the corpus "
            "files changed (another package version?). Write these runs to another --out."
        )


def run(args: argparse.Namespace) -> int:
    """Run every (seed, policy) not yet in ``--out/results.jsonl``, then print the tables."""
    cfg = config_from_args(args)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        print(write_report(out))
        return 0
    policies = [parse_policy(p) for p in cfg.policies.split(",") if p.strip()]
    seeds = [int(s) for s in cfg.seeds.split(",") if s.strip()]
    budget = training_budget(cfg)  # before any embedding: a budget too small fails fast
    print(f"[budget] {budget.describe()} (vocabulary <= {cfg.vocab_size:,})")
    with spelled_as_flags(flag_names(ExperimentConfig, ModelConfig)):
        budget.check(cfg.min_tokens_per_parameter)
    prep = prepare(cfg)
    regime = cfg.regime or f"{cfg.epochs:g}-epoch"
    previous = read_results(out)
    check_same_corpus(previous, prep.summary, out)
    done = {(r["regime"], r["policy"], r["seed"]) for r in previous}
    print(f"[experiment] {json.dumps(prep.summary)}")
    for seed in seeds:  # seed-major: partial results stay balanced across policies
        for policy in policies:
            if (regime, policy.name, seed) in done:
                continue
            record = train_run(prep, cfg, policy, seed)
            with open(out / "results.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            print(
                f"[done] {regime} {policy.name} seed={seed} epochs={record['epochs']:.2f} "
                f"{record['wall_seconds']}s "
                + " ".join(f"{k}={v:.3f}" for k, v in record["metrics"].items())
            )
            write_report(out)
    print(write_report(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clusterclip.experiments.lm",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ClusterClipError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
