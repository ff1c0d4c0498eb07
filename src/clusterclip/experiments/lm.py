"""Does ClusterClip help a small language model?  Train one per sampling policy and compare.

Small enough to read in one sitting (in the spirit of nanoGPT)::

    python -m clusterclip.experiments.lm --corpus=kjv --workdir=runs/kjv --out=results/kjv \\
        --n-clusters=100 --tokens=200000 --epochs=1 --seeds=0,1,2 \\
        --policies=random,uniform,clusterclip-r4,planned-r4

Steps (each cached in ``--workdir``, so a second regime or seed reuses them):

1. load the corpus (a name from ``shared/CORPORA.md`` or a jsonl/parquet file),
   embed it (``clusterclip.embed``) and cluster it (``clusterclip.cluster``);
2. hold out a fraction of every cluster (stratified), flag held-out documents
   that are near-duplicates of a training document (cosine > 0.95) and report
   them apart; train a byte-level BPE on the training split only;
3. the training *pool* is the training split, or a stratified subsample of it
   sized so that the token budget is ``--epochs`` passes (multi-epoch regime);
4. for every seed and policy: build the schedule with
   ``clusterclip.build_schedule`` (equal token budget), pack documents into
   fixed-length sequences in schedule order, train a fresh GPT-2 (same init
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
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.experiments import data, evaluate
from clusterclip.experiments.model import ModelConfig, build_model

__all__ = ["ExperimentConfig", "Policy", "main", "parse_policy", "prepare", "train_run"]

DEFAULT_POLICIES = "random,uniform,clusterclip-r2,clusterclip-r4,temperature-a0.5,planned-r4"


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything one experiment depends on (recorded with every result line)."""

    corpus: str = "kjv"
    text_field: str = "text"
    label_field: str | None = None
    workdir: str = "runs/kjv"
    out: str = "results/kjv"
    max_docs: int | None = None
    data_seed: int = 0
    encoder: str = "sentence-transformers"
    n_clusters: int = 100
    tail_docs: int | None = None
    tail_span: float = 150.0
    heldout_per_cluster: int = 12
    heldout_fraction: float = 0.1
    near_duplicate: float = 0.95
    vocab_size: int = 1024
    max_doc_tokens: int = 256
    tokens: int = 200_000
    epochs: float = 1.0
    regime: str | None = None
    policies: str = DEFAULT_POLICIES
    seeds: str = "0"
    model: ModelConfig = field(default_factory=ModelConfig)
    batch_size: int = 16
    lr: float = 3e-3
    warmup_fraction: float = 0.05
    lr_floor: float = 0.1
    weight_decay: float = 0.1
    eval_points: int = 8
    device: str = "auto"
    threads: int = 2


@dataclass(frozen=True)
class Policy:
    """One sampling policy: the arguments it passes to ``build_schedule``."""

    name: str
    policy: str
    max_repeats: int | None = None
    alpha: float | None = None
    order: str = "online"

    def schedule_kwargs(self) -> dict:
        # max_repeats=None is passed explicitly: random passes and temperature are unclipped
        kwargs = {"policy": self.policy, "order": self.order, "max_repeats": self.max_repeats}
        if self.alpha is not None:
            kwargs["alpha"] = self.alpha
        return kwargs


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


# --------------------------------------------------------------------------- preparation


@dataclass
class Prepared:
    """Cached corpus-level state shared by every run of one work directory."""

    labels: np.ndarray  # (N,) cluster per document, -1 = excluded
    categories: list[str] | None
    train: np.ndarray  # document indices
    heldout: np.ndarray  # clean held-out documents
    near_dup: np.ndarray  # held-out documents that near-duplicate a training document
    flat: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray  # (K,) training documents per cluster
    rare: np.ndarray  # ids of the rarest 25% of clusters
    train_tokens: np.ndarray  # (K,) training tokens per cluster (natural-mix weights)
    tokenizer_path: Path
    summary: dict

    @property
    def eos_id(self) -> int:
        return 0


def _prep_key(cfg: ExperimentConfig) -> dict:
    keys = [
        "corpus",
        "text_field",
        "label_field",
        "max_docs",
        "data_seed",
        "encoder",
        "n_clusters",
        "tail_docs",
        "tail_span",
        "heldout_per_cluster",
        "heldout_fraction",
        "near_duplicate",
        "vocab_size",
        "max_doc_tokens",
    ]
    return {k: getattr(cfg, k) for k in keys}


def prepare(cfg: ExperimentConfig, *, log=print) -> Prepared:
    """Embed, cluster, split, flag near-duplicates and tokenise (cached in ``cfg.workdir``)."""
    from clusterclip.experiments.corpora import load_corpus
    from clusterclip.io import atomic_path, atomic_write_json, read_stage

    workdir = Path(cfg.workdir)
    cache = workdir / "lm"
    cache.mkdir(parents=True, exist_ok=True)
    key = _prep_key(cfg)
    meta_path, arrays_path = cache / "prepared.json", cache / "prepared.npz"
    corpus = load_corpus(cfg.corpus, text_field=cfg.text_field, label_field=cfg.label_field)
    corpus = corpus.subset(cfg.max_docs, seed=cfg.data_seed)
    if meta_path.exists() and arrays_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta["key"] == key:
            arrays = np.load(arrays_path)
            log(f"[prepare] reusing {cache}")
            return Prepared(
                labels=arrays["labels"],
                categories=corpus.categories,
                train=arrays["train"],
                heldout=arrays["heldout"],
                near_dup=arrays["near_dup"],
                flat=arrays["flat"],
                offsets=arrays["offsets"],
                sizes=arrays["sizes"],
                rare=arrays["rare"],
                train_tokens=arrays["train_tokens"],
                tokenizer_path=cache / "tokenizer.json",
                summary=meta["summary"],
            )
    started = time.time()
    corpus_path = workdir / "corpus.jsonl"
    embed_entry = read_stage(workdir, "embed")
    stale = embed_entry is None or embed_entry.get("config", {}).get("encoder") != cfg.encoder
    if stale or not corpus_path.exists():
        corpus.write_jsonl(corpus_path)
        log(f"[prepare] embedding {len(corpus)} documents with {cfg.encoder}")
        from clusterclip.embed import embed

        embed(
            [str(corpus_path)],
            workdir=workdir,
            encoder=cfg.encoder,
            text_field="text",
            overwrite=embed_entry is not None,
        )
    cluster_entry = read_stage(workdir, "cluster")
    if (
        stale
        or cluster_entry is None
        or cluster_entry.get("config", {}).get("n_clusters") != cfg.n_clusters
    ):
        log(f"[prepare] clustering into k={cfg.n_clusters}")
        from clusterclip.cluster import cluster

        cluster(
            workdir,
            n_clusters=cfg.n_clusters,
            seed=cfg.data_seed,
            overwrite=cluster_entry is not None,
        )
    pq = require_extra("pyarrow.parquet", "io")
    clusters = pq.read_table(workdir / "clusters.parquet").to_pydict()
    labels = np.full(len(corpus), -1, dtype=np.int64)
    labels[np.asarray(clusters["index"])] = np.asarray(clusters["cluster"])
    if len(clusters["index"]) != len(corpus):
        raise ClusterClipError(
            f"{workdir}/clusters.parquet has {len(clusters['index'])} rows but the corpus has "
            f"{len(corpus)} documents. Use a fresh --workdir for this corpus."
        )
    natural_sizes = np.bincount(labels[labels >= 0])
    if cfg.tail_docs is None:
        train, heldout = data.stratified_split(
            labels, heldout_fraction=cfg.heldout_fraction, seed=cfg.data_seed
        )
    else:
        keep = data.long_tail_subset(
            labels, n_docs=cfg.tail_docs, span=cfg.tail_span, seed=cfg.data_seed, min_size=1
        )  # one training document is enough: held-out text comes from the rest
        train = np.flatnonzero(keep)
        heldout = data.heldout_from_rest(
            labels, keep, per_cluster=cfg.heldout_per_cluster, seed=cfg.data_seed
        )
        # documents in neither part take no part in anything
        labels[~np.isin(np.arange(len(labels)), np.concatenate([train, heldout]))] = -1
    from clusterclip.io.shards import ShardedMatrix

    embeddings = ShardedMatrix.from_directory(workdir / "embeddings")
    is_dup, _ = data.near_duplicate_mask(
        embeddings[heldout], embeddings[train], threshold=cfg.near_duplicate
    )
    tokenizer = data.train_tokenizer(
        [corpus.texts[i] for i in train], vocab_size=cfg.vocab_size, path=cache / "tokenizer.json"
    )
    flat, offsets = data.encode_documents(
        tokenizer, corpus.texts, max_doc_tokens=cfg.max_doc_tokens
    )
    n_clusters = int(labels.max()) + 1
    sizes = np.bincount(labels[train], minlength=n_clusters)  # training documents per cluster
    rare = evaluate.rare_clusters(sizes)
    doc_tokens = np.diff(offsets)
    train_tokens = np.bincount(labels[train], weights=doc_tokens[train], minlength=n_clusters)
    summary = {
        "corpus": corpus.name,
        "documents": len(corpus),
        "excluded": int((labels < 0).sum()),
        "natural_cluster_size_min": int(natural_sizes[natural_sizes > 0].min()),
        "natural_cluster_size_max": int(natural_sizes.max()),
        "encoder": cfg.encoder,
        "n_clusters": n_clusters,
        "cluster_size_min": int(sizes[sizes > 0].min()),
        "cluster_size_max": int(sizes.max()),
        "cluster_size_span": float(sizes.max() / max(sizes[sizes > 0].min(), 1)),
        "rare_clusters": len(rare),
        "rare_cluster_size_max": int(sizes[rare].max()),
        "train_documents": len(train),
        "train_tokens": int(doc_tokens[train].sum()),
        "heldout_documents": int((~is_dup).sum()),
        "heldout_tokens": int(doc_tokens[heldout[~is_dup]].sum()),
        "near_duplicate_heldout": int(is_dup.sum()),
        "vocab_size": tokenizer.get_vocab_size(),
        "prepare_seconds": round(time.time() - started, 1),
    }
    with atomic_path(arrays_path) as tmp, open(tmp, "wb") as handle:
        np.savez(
            handle,
            labels=labels,
            train=train,
            heldout=heldout[~is_dup],
            near_dup=heldout[is_dup],
            flat=flat,
            offsets=offsets,
            sizes=sizes,
            rare=rare,
            train_tokens=train_tokens,
        )
    atomic_write_json(meta_path, {"key": key, "summary": summary})
    log(f"[prepare] {json.dumps(summary)}")
    return prepare(cfg, log=lambda *_: None)


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


def train_run(prep: Prepared, cfg: ExperimentConfig, policy: Policy, seed: int, *, log=print):
    """Train one model under one policy and seed; return the result record (a dict)."""
    torch = require_extra("torch", "experiments")
    from clusterclip.schedule import build_schedule

    torch.set_num_threads(cfg.threads)
    device = _resolve_device(cfg.device)
    started = time.time()
    context, batch = cfg.model.context, cfg.batch_size
    steps = max(1, cfg.tokens // (batch * context))
    budget = steps * batch * context
    pool = training_pool(prep, cfg)
    doc_tokens = np.diff(prep.offsets) + 1
    pool_tokens = int(doc_tokens[pool].sum())
    cluster_ids, pool_labels = np.unique(prep.labels[pool], return_inverse=True)
    schedule = build_schedule(
        pool_labels.astype(np.int64),
        num_tokens=budget + cfg.max_doc_tokens + 2,
        lengths=doc_tokens[pool],
        on_exhausted="random",
        seed=seed,
        **policy.schedule_kwargs(),
    )
    order = pool[np.asarray(schedule.indices)]
    sequences = data.pack_sequences(
        order,
        prep.flat,
        prep.offsets,
        eos_id=prep.eos_id,
        n_sequences=steps * batch,
        context=context,
    )
    is_rare_doc = np.isin(prep.labels, prep.rare)
    dynamics = {
        "rare_share_by_slice": rare_share_by_slice(order, doc_tokens, is_rare_doc, budget=budget),
        "rare_share_natural": float(doc_tokens[pool][is_rare_doc[pool]].sum() / pool_tokens),
        "max_repeats_seen": int(np.bincount(order).max()),
        "unique_documents_seen": int(np.unique(order).size),
    }

    model = build_model(cfg.model, vocab_size=prep.summary["vocab_size"], seed=seed).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0},
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    warmup = max(1, int(cfg.warmup_fraction * steps))

    def learning_rate(step: int) -> float:
        if step < warmup:
            return cfg.lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return cfg.lr * (cfg.lr_floor + (1 - cfg.lr_floor) * cosine)

    def heldout_metrics(docs: np.ndarray) -> dict:
        loss_sum, n_tok = evaluate.document_losses(
            model,
            docs,
            prep.flat,
            prep.offsets,
            eos_id=prep.eos_id,
            context=context,
            device=device,
        )
        categories = None if prep.categories is None else [prep.categories[d] for d in docs]
        return evaluate.loss_metrics(
            loss_sum,
            n_tok,
            prep.labels[docs],
            rare=prep.rare,
            categories=categories,
            natural_weights=prep.train_tokens if cfg.tail_docs is not None else None,
        )

    initial = heldout_metrics(prep.heldout)
    curve, train_curve, window = [{"tokens": 0, **initial}], [], []
    eval_steps = {max(1, round(steps * (i + 1) / cfg.eval_points)) for i in range(cfg.eval_points)}
    inputs_all = torch.from_numpy(sequences)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
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
            metrics = heldout_metrics(prep.heldout)
            tokens_seen = (step + 1) * batch * context
            curve.append({"tokens": tokens_seen, **metrics})
            train_curve.append({"tokens": tokens_seen, "train": float(np.mean(window))})
            window = []
            log(
                f"  [{policy.name} seed={seed}] step {step + 1}/{steps} "
                f"train {train_curve[-1]['train']:.3f} held-out natural {metrics['natural']:.3f} "
                f"macro {metrics['macro']:.3f} rare {metrics['rare']:.3f}"
            )
    metrics = dict(curve[-1])
    metrics.pop("tokens")
    rare_pool = pool[is_rare_doc[pool]]
    if rare_pool.size:
        train_sum, train_tok = evaluate.document_losses(
            model,
            rare_pool,
            prep.flat,
            prep.offsets,
            eos_id=prep.eos_id,
            context=context,
            device=device,
        )
        metrics["rare_train"] = float(train_sum.sum() / train_tok.sum())
        metrics["rare_gap"] = metrics["rare"] - metrics["rare_train"]
    if prep.near_dup.size:
        metrics["near_dup"] = heldout_metrics(prep.near_dup)["natural"]
    return {
        "corpus": prep.summary["corpus"],
        "regime": cfg.regime or f"{cfg.epochs:g}-epoch",
        "policy": policy.name,
        "seed": seed,
        "epochs": budget / pool_tokens,
        "budget_tokens": budget,
        "steps": steps,
        "pool_documents": int(pool.size),
        "pool_tokens": pool_tokens,
        "metrics": metrics,
        "curve": curve,
        "train_curve": train_curve,
        "dynamics": dynamics,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "wall_seconds": round(time.time() - started, 1),
        "device": device,
        "machine": f"{platform.machine()} {platform.node()} torch threads={cfg.threads}",
        "config": {**asdict(cfg), "policy_spec": asdict(policy)},
    }


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``python -m clusterclip.experiments.lm`` and ``clusterclip experiment lm``."""
    d = ExperimentConfig()
    m = ModelConfig()
    add = parser.add_argument
    add("--corpus", default=d.corpus, help="kjv, fortunes, bbc, pydocs, or a jsonl/parquet path")
    add("--text-field", default=d.text_field, help="text field of a file corpus")
    add("--label-field", default=None, help="category field of a file corpus (optional)")
    add("--workdir", default=d.workdir, help="work directory (embeddings, clusters, cache)")
    add("--out", default=d.out, help="results directory (results.jsonl, results.md, *.png)")
    add("--max-docs", type=int, default=None, help="random subset of the corpus (seeded)")
    add("--data-seed", type=int, default=d.data_seed, help="seed of subset, clusters and split")
    add("--encoder", default=d.encoder, help="encoder of the embed stage")
    add("--n-clusters", type=int, default=d.n_clusters)
    add("--tail-docs", type=int, default=None, help="keep a long-tailed subset of N docs")
    add("--tail-span", type=float, default=d.tail_span, help="largest/smallest cluster kept")
    add("--heldout-per-cluster", type=int, default=d.heldout_per_cluster, help="with --tail-docs")
    add("--heldout-fraction", type=float, default=d.heldout_fraction)
    add("--near-duplicate", type=float, default=d.near_duplicate, help="cosine threshold")
    add("--vocab-size", type=int, default=d.vocab_size)
    add("--max-doc-tokens", type=int, default=d.max_doc_tokens, help="truncate documents")
    add("--tokens", type=int, default=d.tokens, help="training budget in tokens (every policy)")
    add("--epochs", type=float, default=d.epochs, help="passes over the pool the budget buys")
    add("--regime", default=None, help="name of the regime in the tables (default: N-epoch)")
    add("--policies", default=d.policies, help=f"comma list (default {d.policies})")
    add("--seeds", default=d.seeds, help="comma list of seeds (schedule + model init)")
    add("--n-layer", type=int, default=m.n_layer)
    add("--n-head", type=int, default=m.n_head)
    add("--n-embd", type=int, default=m.n_embd)
    add("--context", type=int, default=m.context)
    add("--batch-size", type=int, default=d.batch_size)
    add("--lr", type=float, default=d.lr)
    add("--lr-floor", type=float, default=d.lr_floor, help="final lr / peak lr (1 = constant)")
    add("--eval-points", type=int, default=d.eval_points, help="held-out evals per run")
    add("--device", default=d.device, help="auto, cpu, cuda")
    add("--threads", type=int, default=d.threads, help="torch CPU threads")
    add("--report-only", action="store_true", help="only rebuild tables and plots from --out")


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    model = ModelConfig(
        n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, context=args.context
    )
    names = [f for f in ExperimentConfig.__dataclass_fields__ if f != "model"]
    values = {n: getattr(args, n) for n in names if hasattr(args, n)}
    for name, value in (("tokens", args.tokens), ("epochs", args.epochs)):
        if value <= 0:
            raise invalid(name, "> 0", value)
    return ExperimentConfig(model=model, **values)


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
    prep = prepare(cfg)
    regime = cfg.regime or f"{cfg.epochs:g}-epoch"
    done = {(r["regime"], r["policy"], r["seed"]) for r in read_results(out)}
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
