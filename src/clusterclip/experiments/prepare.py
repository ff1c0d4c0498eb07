"""Preparation of the LM experiment: the product's stages, then one stage of its own.

:func:`prepare` runs the embed and cluster stages through the one runner
(:func:`clusterclip.runner.run_stage`, ``on_change="redo"``), in the plan of stages
:func:`clusterclip.plan.plan_stages` derives from their inputs exactly as
``clusterclip run`` does, then :class:`SplitStage`: hold out a fraction of every
cluster, flag held-out near-duplicates of training documents, train a BPE on the
training split and tokenise. The runner decides freshness for all three from
their options and their inputs' fingerprints, so a second regime or seed reuses
everything and a changed corpus, encoder or ``n_clusters`` redoes exactly what
depends on it. The work directory is read only through :class:`clusterclip.io.WorkDir`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, invalid
from clusterclip.experiments import data, evaluate
from clusterclip.io import WorkDir, atomic_path, fingerprint_file, register_artifacts
from clusterclip.runner import StageOutput

__all__ = ["Prepared", "SplitOptions", "SplitStage", "prepare"]

_ARRAYS, _TOKENIZER = "prepared.npz", "tokenizer.json"
#: The experiment's files in the work directory: its folder (split, tokenizer, tokens) and
#: the corpus it embeds. Owned here; the work directory knows them only by key.
EXPERIMENT_FILES = {"experiment": "lm", "experiment_corpus": "corpus.jsonl"}
register_artifacts(EXPERIMENT_FILES)
_ARRAY_NAMES = ("labels", "train", "heldout", "near_dup", "flat", "offsets", "sizes", "rare",
                "train_tokens", "independent", "independent_rare")  # fmt: skip
#: The encoder of the independent clustering for each encoder of the experiment's own.
_INDEPENDENT = {"tfidf": "sentence-transformers", "sentence-transformers": "tfidf",
                "static": "tfidf"}  # fmt: skip


@dataclass
class Prepared:
    """Corpus-level state shared by every run of one work directory."""

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
    independent: np.ndarray  # (N,) cluster of an independent clustering (-1 = not in it)
    independent_rare: np.ndarray  # ids of its rarest 25% of clusters (by training documents)
    tokenizer_path: Path
    summary: dict

    @property
    def eos_id(self) -> int:
        return 0


@dataclass(frozen=True)
class SplitOptions:
    """Configuration of the experiment's own stage (split, near-duplicates, tokeniser).

    The corpus fields are here because they also choose the category labels;
    the encoder and ``n_clusters`` reach this stage through its inputs (the
    fingerprints of the embed and cluster outputs).
    """

    corpus: str = "kjv"
    text_field: str = "text"
    label_field: str | None = None
    max_docs: int | None = None
    data_seed: int = 0
    tail_docs: int | None = None
    tail_span: float = 150.0
    heldout_per_cluster: int = 12
    heldout_fraction: float = 0.1
    near_duplicate: float = 0.95
    vocab_size: int = 1024
    max_doc_tokens: int = 256
    independent_encoder: str = "auto"
    independent_clusters: int | None = None
    kmeans_backend: str = "auto"  # also the independent clustering's: the same on every machine

    def __post_init__(self) -> None:
        if self.independent_encoder not in ("auto", *_INDEPENDENT):
            raise invalid(
                "independent_encoder", f"auto or one of {', '.join(_INDEPENDENT)}",
                self.independent_encoder,
            )  # fmt: skip
        if self.independent_clusters is not None and self.independent_clusters < 2:
            raise invalid("independent_clusters", "an int in [2, inf) or None",
                          self.independent_clusters)  # fmt: skip

    @classmethod
    def of(cls, cfg: Any) -> SplitOptions:
        """The fields of an :class:`~clusterclip.experiments.options.ExperimentConfig` this stage uses."""
        return cls(**{name: getattr(cfg, name) for name in cls.__dataclass_fields__})


class SplitStage:
    """Held-out split, near-duplicate flags and tokenisation, in the runner's contract.

    Writes ``prepared.npz`` and ``tokenizer.json`` inside the work directory's
    ``experiment`` folder; ``corpus`` (a loaded
    :class:`~clusterclip.experiments.corpora.Corpus`) supplies texts and categories.
    """

    name = "experiment"
    artifacts = ("experiment",)

    def __init__(self, corpus: Any) -> None:
        self.corpus = corpus

    def inputs(self, work: WorkDir, options: SplitOptions) -> dict[str, Any]:
        """The labels, document index and embeddings this stage reads."""
        work.require("cluster")
        keys = ("embed.documents", "embed.embeddings", "cluster.clusters")
        return {key: work.output(key) for key in keys}

    def load(self, work: WorkDir, entry: Mapping[str, Any]) -> Prepared:
        """The stored split and tokens (nothing recomputed)."""
        folder = work.path_of("experiment")
        if not (folder / _ARRAYS).exists():
            raise ClusterClipError(
                f"{folder / _ARRAYS} is missing although the manifest records the experiment "
                "stage as complete. Delete the folder and rerun: it is rebuilt."
            )
        with np.load(folder / _ARRAYS) as arrays:
            loaded = {name: arrays[name] for name in _ARRAY_NAMES}
        return Prepared(
            **loaded,
            categories=self.corpus.categories,
            tokenizer_path=folder / _TOKENIZER,
            summary=dict(entry.get("summary", {})),
        )

    def run(self, work: WorkDir, options: SplitOptions, *, resume: bool) -> StageOutput:
        """Split, flag near-duplicates, train the tokeniser and tokenise every document."""
        started = time.time()
        labels = work.labels().astype(np.int64)
        if len(labels) != len(self.corpus):
            raise ClusterClipError(
                f"the clusters of {work.path} cover {len(labels)} documents but the corpus has "
                f"{len(self.corpus)}. Use a fresh --workdir for this corpus."
            )
        natural_sizes = np.bincount(labels[labels >= 0])
        train, heldout = _split(labels, options)
        embeddings = work.embeddings()
        is_dup, _ = data.near_duplicate_mask(
            embeddings[heldout], embeddings[train], threshold=options.near_duplicate
        )
        folder = work.path_of("experiment")
        folder.mkdir(parents=True, exist_ok=True)
        tokenizer = data.train_tokenizer(
            [self.corpus.texts[i] for i in train],
            vocab_size=options.vocab_size,
            path=folder / _TOKENIZER,
        )
        flat, offsets = data.encode_documents(
            tokenizer, self.corpus.texts, max_doc_tokens=options.max_doc_tokens
        )
        arrays = _arrays(labels, train, heldout, is_dup, flat, offsets)
        independent = independent_clustering(
            self.corpus.texts, labels, train, encoder=_independent_encoder(work, options),
            n_clusters=options.independent_clusters or int(labels.max()) + 1,
            seed=options.data_seed + 1, folder=folder, backend=options.kmeans_backend,
        )  # fmt: skip
        arrays["independent"] = independent
        arrays["independent_rare"] = evaluate.rare_clusters(
            np.bincount(independent[train], minlength=int(independent.max()) + 1)
        )
        with atomic_path(folder / _ARRAYS) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, **arrays)
        encoder = work.require("embed")["config"]["encoder"]
        summary = _summary(self.corpus, encoder, arrays, natural_sizes, is_dup, tokenizer)
        summary["prepare_seconds"] = round(time.time() - started, 1)
        return StageOutput(
            outputs={"arrays": fingerprint_file(folder / _ARRAYS)},
            summary=summary,
            result=lambda: self.load(work, {"summary": summary}),
        )


def _independent_encoder(work: WorkDir, options: SplitOptions) -> str:
    if options.independent_encoder != "auto":
        return options.independent_encoder
    return _INDEPENDENT[work.require("embed")["config"]["encoder"]]


def independent_clustering(
    texts: list[str],
    labels: np.ndarray,
    train: np.ndarray,
    *,
    encoder: str,
    n_clusters: int,
    seed: int,
    folder: Path,
    backend: str = "auto",
) -> np.ndarray:
    """Cluster of every document in an independent clustering (-1 = excluded document).

    Another encoder and another seed than the sampler's clusters: k-means is fitted
    on the training documents and every document with ``labels >= 0`` is assigned,
    so metrics over these clusters are ones the sampler never saw.
    """
    from clusterclip.cluster import KMeans
    from clusterclip.embed.encoders import EncoderSpec, fit_tfidf, get_encoder

    members = np.flatnonzero(labels >= 0)
    chosen = [texts[i] for i in members]
    state = folder / "independent"
    if encoder == "tfidf":
        state.mkdir(exist_ok=True)
        from clusterclip.embed.encoders import TFIDF_STATE

        fit_tfidf([texts[i] for i in train], path=state / TFIDF_STATE, seed=seed)
    spec = EncoderSpec(encoder=encoder, state_dir=str(state), seed=seed)
    vectors = np.asarray(get_encoder(spec).encode(chosen), dtype=np.float32)
    get_encoder.cache_clear()  # the tfidf fit of another work directory must not be reused
    in_train = np.isin(members, train)
    k = min(n_clusters, int(in_train.sum()))
    model = KMeans(k, seed=seed, backend=backend).fit(vectors[in_train])
    out = np.full(len(labels), -1, dtype=np.int64)
    out[members] = model.predict(vectors)
    return out


def _split(labels: np.ndarray, options: SplitOptions) -> tuple[np.ndarray, np.ndarray]:
    """``(train, heldout)`` document indices; with a tail, documents in neither get label -1."""
    if options.tail_docs is None:
        return data.stratified_split(
            labels, heldout_fraction=options.heldout_fraction, seed=options.data_seed
        )
    keep = data.long_tail_subset(
        labels,
        n_docs=options.tail_docs,
        span=options.tail_span,
        seed=options.data_seed,
        min_size=1,
    )  # fmt: skip  (one training document is enough: held-out text comes from the rest)
    train = np.flatnonzero(keep)
    heldout = data.heldout_from_rest(
        labels, keep, per_cluster=options.heldout_per_cluster, seed=options.data_seed
    )
    labels[~np.isin(np.arange(len(labels)), np.concatenate([train, heldout]))] = -1
    return train, heldout


def _arrays(labels, train, heldout, is_dup, flat, offsets) -> dict[str, np.ndarray]:
    n_clusters = int(labels.max()) + 1
    sizes = np.bincount(labels[train], minlength=n_clusters)  # training documents per cluster
    doc_tokens = np.diff(offsets)
    return {
        "labels": labels,
        "train": train,
        "heldout": heldout[~is_dup],
        "near_dup": heldout[is_dup],
        "flat": flat,
        "offsets": offsets,
        "sizes": sizes,
        "rare": evaluate.rare_clusters(sizes),
        "train_tokens": np.bincount(labels[train], weights=doc_tokens[train], minlength=n_clusters),
    }


def _summary(corpus, encoder, arrays, natural_sizes, is_dup, tokenizer) -> dict[str, Any]:
    labels, sizes, rare = arrays["labels"], arrays["sizes"], arrays["rare"]
    doc_tokens = np.diff(arrays["offsets"])
    return {
        "corpus": corpus.name,
        "documents": len(corpus),
        "excluded": int((labels < 0).sum()),
        "natural_cluster_size_min": int(natural_sizes[natural_sizes > 0].min()),
        "natural_cluster_size_max": int(natural_sizes.max()),
        "encoder": encoder,
        "n_clusters": len(sizes),
        "cluster_size_min": int(sizes[sizes > 0].min()),
        "cluster_size_max": int(sizes.max()),
        "cluster_size_span": float(sizes.max() / max(sizes[sizes > 0].min(), 1)),
        "rare_clusters": len(rare),
        "rare_cluster_size_max": int(sizes[rare].max()),
        "train_documents": len(arrays["train"]),
        "train_tokens": int(doc_tokens[arrays["train"]].sum()),
        "heldout_documents": int((~is_dup).sum()),
        "heldout_tokens": int(doc_tokens[arrays["heldout"]].sum()),
        "near_duplicate_heldout": int(is_dup.sum()),
        "vocab_size": tokenizer.get_vocab_size(),
    }


def prepare(cfg: Any, *, log: Callable[[str], None] = print) -> Prepared:
    """Embed, cluster, split and tokenise for one experiment (every step through the runner).

    Parameters
    ----------
    cfg : ExperimentConfig
        Its corpus, encoder, ``n_clusters`` and split fields are used.
    log : callable
        Receives one line per stage decision (ran / skipped and why).

    Examples
    --------
    >>> from clusterclip.experiments.lm import ExperimentConfig
    >>> prep = prepare(ExperimentConfig(corpus="kjv", max_docs=300, encoder="tfidf",
    ...                                 n_clusters=6, workdir="w"))  # doctest: +SKIP
    >>> prep.summary["train_documents"]  # doctest: +SKIP
    270
    """
    work = WorkDir(cfg.workdir)
    with work.lock(log=log):  # claimed before the corpus is written into it
        return _prepare(work, cfg, log)


def _prepare(work: WorkDir, cfg: Any, log: Callable[[str], None]) -> Prepared:
    from clusterclip.cluster import ClusterStage
    from clusterclip.config import ClusterOptions, EmbedOptions
    from clusterclip.embed import EmbedStage
    from clusterclip.experiments.corpora import load_corpus
    from clusterclip.plan import plan_stages

    corpus = load_corpus(
        cfg.corpus, text_field=cfg.text_field, label_field=cfg.label_field, pin=cfg.corpus_pin
    )
    corpus = corpus.subset(cfg.max_docs, seed=cfg.data_seed)
    fingerprint = corpus.sha256()
    source = work.path_of("experiment_corpus")
    corpus.write_jsonl(source)  # same content, same fingerprint: the embed stage stays fresh

    def say(line: str) -> None:
        log(f"[prepare] {line}")

    embed_options = EmbedOptions(encoder=cfg.encoder, text_field="text", precision=cfg.precision)
    cluster_options = ClusterOptions(
        n_clusters=cfg.n_clusters, seed=cfg.data_seed, backend=cfg.kmeans_backend
    )
    plan = plan_stages(
        [
            (EmbedStage([str(source)]), embed_options),
            (ClusterStage(), cluster_options),
            (SplitStage(corpus), SplitOptions.of(cfg)),
        ],
        ["experiment"],
    )
    outcome = plan.run(work, log=say)["experiment"]
    # The bytes the runs trained on (the fortunes files differ between Debian releases).
    outcome.result.summary["corpus_sha256"] = fingerprint
    if corpus.source is not None:  # a package's files: its version, pinned or not
        outcome.result.summary["corpus_source"] = corpus.source
    if outcome.action != "skipped":
        log(f"[prepare] {json.dumps(outcome.result.summary)}")
    return outcome.result
