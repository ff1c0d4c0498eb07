"""Data preparation for the LM experiment: split, near-duplicates, tokenizer, packing.

All functions are deterministic given their ``seed``: randomness comes from
``numpy.random.Generator`` objects seeded by ``SeedSequence([seed, purpose])``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clusterclip.errors import invalid, require_extra

__all__ = [
    "EOS_TOKEN",
    "encode_documents",
    "heldout_from_rest",
    "long_tail_subset",
    "near_duplicate_mask",
    "pack_sequences",
    "stratified_split",
    "stratified_subsample",
    "train_tokenizer",
]

EOS_TOKEN = "<|endoftext|>"
_SPLIT, _POOL, _TAIL = 0x5B17, 0x9001, 0x7A11  # SeedSequence purposes


def long_tail_subset(
    labels: np.ndarray, *, n_docs: int, span: float, seed: int, min_size: int = 2
) -> np.ndarray:
    """Keep a subset whose cluster sizes decay geometrically over ``span`` (a long tail).

    k-means makes clusters of similar size (a 10-20x range on the corpora here),
    so the tail that ClusterClip is meant for barely exists. This subset keeps
    the clusters and their documents but not their natural sizes: the cluster
    of natural size rank ``r`` (0 = largest) keeps ``t0 * span ** (-r / (K - 1))``
    random members (at most all of them, at least ``min_size``), with ``t0``
    chosen so that about ``n_docs`` documents are kept in total. Sizes then
    span ``span``, log-uniformly; the order of cluster sizes is the natural one.

    Returns
    -------
    numpy.ndarray of bool, shape (N,)
        Which documents are kept. Negative labels are never kept.

    Examples
    --------
    >>> labels = np.repeat(np.arange(4), 100)
    >>> kept = long_tail_subset(labels, n_docs=120, span=20, seed=0)
    >>> np.bincount(labels[kept]).tolist()
    [77, 29, 10, 4]
    """
    if span < 1:
        raise invalid("long_tail", "a size ratio >= 1", span)
    labels = np.asarray(labels)
    clusters, sizes = np.unique(labels[labels >= 0], return_counts=True)
    ranked = clusters[np.argsort(-sizes, kind="stable")]
    natural = dict(zip(clusters.tolist(), sizes.tolist(), strict=True))
    shape = span ** (-np.arange(len(ranked)) / max(len(ranked) - 1, 1))

    def kept_for(t0: float) -> np.ndarray:
        wanted = np.maximum(min_size, np.round(t0 * shape)).astype(np.int64)
        return np.minimum(wanted, [natural[c] for c in ranked.tolist()])

    low, high = 0.0, float(max(sizes)) * span
    for _ in range(60):  # bisection on t0: kept total is monotone in t0
        middle = (low + high) / 2
        low, high = (middle, high) if kept_for(middle).sum() < n_docs else (low, middle)
    keep = np.zeros(len(labels), dtype=bool)
    for cluster, count in zip(ranked.tolist(), kept_for(high).tolist(), strict=True):
        rng = np.random.default_rng(np.random.SeedSequence([seed, _TAIL, int(cluster)]))
        members = np.flatnonzero(labels == cluster)
        keep[rng.choice(members, size=count, replace=False)] = True
    return keep


def stratified_split(
    labels: np.ndarray, *, heldout_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Hold out a fraction of every cluster, so rare clusters have held-out text too.

    A cluster of ``n >= 2`` documents gives ``max(1, round(fraction * n))``
    held-out documents (never all of them); a singleton stays in training.
    Documents with a negative label are in neither part.

    Parameters
    ----------
    labels : numpy.ndarray of int, shape (N,)
    heldout_fraction : float in (0, 0.5]
    seed : int

    Returns
    -------
    train, heldout : numpy.ndarray of int64
        Sorted document indices.

    Examples
    --------
    >>> train, heldout = stratified_split(np.array([0, 0, 0, 0, 1, 1, 2]), heldout_fraction=0.25, seed=0)
    >>> len(train), len(heldout)
    (5, 2)
    """
    if not 0.0 < heldout_fraction <= 0.5:
        raise invalid("heldout_fraction", "a float in (0, 0.5]", heldout_fraction)
    labels = np.asarray(labels)
    heldout = []
    for cluster in np.unique(labels[labels >= 0]):
        members = np.flatnonzero(labels == cluster)
        if len(members) < 2:
            continue
        rng = np.random.default_rng(np.random.SeedSequence([seed, _SPLIT, int(cluster)]))
        count = min(len(members) - 1, max(1, round(heldout_fraction * len(members))))
        heldout.append(rng.choice(members, size=count, replace=False))
    heldout_idx = np.sort(np.concatenate(heldout)) if heldout else np.zeros(0, np.int64)
    train_mask = labels >= 0
    train_mask[heldout_idx] = False
    return np.flatnonzero(train_mask).astype(np.int64), heldout_idx.astype(np.int64)


def heldout_from_rest(
    labels: np.ndarray, train_mask: np.ndarray, *, per_cluster: int, seed: int
) -> np.ndarray:
    """Held-out documents per cluster, drawn from the documents left out of training.

    With a long-tailed training subset (:func:`long_tail_subset`) a rare cluster
    keeps only a handful of training documents, too few to also hold some out.
    Its other members were never trained on, so up to ``per_cluster`` of them
    are drawn as that cluster's held-out text: every cluster that has training
    documents gets about the same amount of held-out text (stratified).

    >>> labels = np.array([0, 0, 0, 0, 1, 1, 1])
    >>> heldout_from_rest(labels, np.array([1, 0, 0, 0, 1, 0, 0], bool), per_cluster=2, seed=0).size
    4
    """
    heldout = []
    for cluster in np.unique(labels[train_mask & (labels >= 0)]):
        rest = np.flatnonzero((labels == cluster) & ~train_mask)
        rng = np.random.default_rng(np.random.SeedSequence([seed, _SPLIT, int(cluster)]))
        heldout.append(rng.choice(rest, size=min(per_cluster, len(rest)), replace=False))
    return np.sort(np.concatenate(heldout)).astype(np.int64) if heldout else np.zeros(0, np.int64)


def stratified_subsample(
    train: np.ndarray, labels: np.ndarray, *, fraction: float, seed: int
) -> np.ndarray:
    """Keep ``max(1, round(fraction * n))`` training documents of every cluster.

    Used to build the small training pool of the multi-epoch regime while
    keeping every cluster (and the long tail of sizes) represented.

    >>> stratified_subsample(np.arange(6), np.array([0, 0, 0, 0, 1, 1]), fraction=0.5, seed=0).size
    3
    """
    if fraction >= 1.0:
        return np.asarray(train, dtype=np.int64)
    keep = []
    train_labels = labels[train]
    for cluster in np.unique(train_labels):
        members = train[train_labels == cluster]
        rng = np.random.default_rng(np.random.SeedSequence([seed, _POOL, int(cluster)]))
        count = max(1, round(fraction * len(members)))
        keep.append(rng.choice(members, size=count, replace=False))
    return np.sort(np.concatenate(keep)).astype(np.int64)


def near_duplicate_mask(
    queries: np.ndarray, references: np.ndarray, *, threshold: float = 0.95, block: int = 2048
) -> tuple[np.ndarray, np.ndarray]:
    """Flag query rows whose cosine similarity to any reference row exceeds ``threshold``.

    Both inputs must be L2-normalised embeddings (as the embed stage writes them).

    Returns
    -------
    mask : numpy.ndarray of bool, shape (len(queries),)
    best : numpy.ndarray of float32
        Highest cosine of each query against the references.

    >>> e = np.eye(3, dtype=np.float32)
    >>> near_duplicate_mask(e[:2], e[1:])[0].tolist()
    [False, True]
    """
    queries = np.asarray(queries, dtype=np.float32)
    references = np.asarray(references, dtype=np.float32)
    best = np.full(len(queries), -1.0, dtype=np.float32)
    for start in range(0, len(references), block):
        sims = queries @ references[start : start + block].T
        if sims.size:
            np.maximum(best, sims.max(axis=1), out=best)
    return best > threshold, best


def train_tokenizer(texts: Sequence[str], *, vocab_size: int, path: str | Path):
    """Train a byte-level BPE tokenizer offline (Hugging Face ``tokenizers``) and save it.

    Only the training split should be passed, so held-out text never shapes the vocabulary.
    ``EOS_TOKEN`` is token 0 and separates documents in packed sequences.

    >>> tok = train_tokenizer(["in the beginning"] * 10, vocab_size=300, path="tok.json")  # doctest: +SKIP
    """
    tokenizers = require_extra("tokenizers", "experiments")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    tokenizer.save(str(path))
    return tokenizer


def encode_documents(
    tokenizer, texts: Sequence[str], *, max_doc_tokens: int
) -> tuple[np.ndarray, np.ndarray]:
    """Encode texts, truncating each to ``max_doc_tokens`` tokens.

    Returns
    -------
    flat : numpy.ndarray of int32
        All tokens, concatenated.
    offsets : numpy.ndarray of int64, shape (len(texts) + 1,)
        Document ``i`` is ``flat[offsets[i]:offsets[i + 1]]``.
    """
    encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    pieces = [np.asarray(e.ids[:max_doc_tokens], dtype=np.int32) for e in encoded]
    offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in pieces])
    flat = np.concatenate(pieces) if pieces else np.zeros(0, np.int32)
    return flat, offsets


def pack_sequences(
    order: np.ndarray,
    flat: np.ndarray,
    offsets: np.ndarray,
    *,
    eos_id: int,
    n_sequences: int,
    context: int,
) -> np.ndarray:
    """Pack documents, in schedule order, into fixed-length training sequences.

    The token stream is ``EOS doc EOS doc ...`` in the order of ``order``; it is
    cut into ``n_sequences`` windows of ``context + 1`` tokens with stride
    ``context`` (inputs are ``window[:-1]``, targets ``window[1:]``), so every
    sequence trains on exactly ``context`` tokens and the budget is exact.

    Returns
    -------
    numpy.ndarray of int64, shape (n_sequences, context + 1)

    Raises
    ------
    ClusterClipError
        If ``order`` holds fewer tokens than the budget needs.

    >>> flat = np.arange(1, 7, dtype=np.int32); offsets = np.array([0, 3, 6])
    >>> pack_sequences(np.array([1, 0]), flat, offsets, eos_id=0, n_sequences=2, context=3).tolist()
    [[0, 4, 5, 6], [6, 0, 1, 2]]
    """
    needed = n_sequences * context + 1
    lengths = offsets[order + 1] - offsets[order] + 1
    cumulative = np.cumsum(lengths)
    if cumulative.size == 0 or cumulative[-1] < needed:
        have = int(cumulative[-1]) if cumulative.size else 0
        raise invalid(
            "schedule",
            f"at least {needed} tokens to fill the budget",
            f"{have} tokens",
            "Use on_exhausted='random' or a smaller budget.",
        )
    used = int(np.searchsorted(cumulative, needed)) + 1
    stream = np.empty(int(cumulative[used - 1]), dtype=np.int64)
    position = 0
    for doc in order[:used]:
        piece = flat[offsets[doc] : offsets[doc + 1]]
        stream[position] = eos_id
        stream[position + 1 : position + 1 + len(piece)] = piece
        position += 1 + len(piece)
    starts = np.arange(n_sequences) * context
    return stream[starts[:, None] + np.arange(context + 1)[None, :]]
