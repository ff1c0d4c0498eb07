"""The static encoder's one pass: token counts and model2vec's vectors from one tokenisation.

A model2vec vector is the mean of the model's table rows over a text's tokens,
so tokenising is most of the work, and ``n_tokens`` needs every token of a text
anyway. :class:`OnePass` tokenises a batch with one ``encode_batch_fast`` call
(on the tokenizer's threads, :func:`clusterclip.threads.tokenizer_threads`),
pools it with one gather (``embedding_bag`` over the flat ids and their
offsets), and tokenises the next batch on the helper thread meanwhile
(:func:`clusterclip.threads.prefetched`).

The vectors are model2vec's (``StaticModel.encode``, then unit rows), as
:meth:`~clusterclip.embed.static.StaticEncoder.encode` gives them:

- a text longer than ``max_length * median_token_length`` characters is cut
  there before tokenising, its first ``max_length`` tokens are pooled, and
  unknown tokens are dropped after that truncation;
- sums are float32 in token order, their means rounded to the table's dtype
  (as numpy's mean of the gathered rows); the rows model2vec truncates also get
  its normalisation rounded to the table's dtype (the stage's vectors of the
  other rows never had it: they stay byte for byte what they were).

A cut text is tokenised twice (the cut for its vector, the whole for its
count) unless the tokenizer splits at spaces (BERT's normaliser and
pre-tokeniser with WordPiece, :func:`splits_at_spaces`): then its count is the
cut's tokens up to the last space before the cut, plus the tokens from that
space to the end.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterclip.errors import require_extra
from clusterclip.threads import prefetched, tokenizer_threads

__all__ = ["OnePass", "TokenBatch", "splits_at_spaces"]

#: Normalisers, pre-tokenisers and models that never join text across an ASCII space.
_SPACE_SAFE = {
    "normalizer": {None, "BertNormalizer", "Lowercase"},
    "pre_tokenizer": {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"},
    "model": {"WordPiece"},
}


def splits_at_spaces(tokenizer_json: str) -> bool:
    """True when this tokenizer gives ``tokens(a + " " + b) == tokens(a) + tokens(" " + b)``.

    Read from the tokenizer's JSON (``Tokenizer.to_str()``): a BERT-style
    normaliser (or none), a pre-tokeniser that splits at whitespace, WordPiece,
    and no added token containing a space. Anything else (byte-level BPE,
    Metaspace, ...) is answered ``False``, and a cut text is tokenised twice.

    >>> bert = {"normalizer": {"type": "BertNormalizer"}, "added_tokens": [],
    ...         "pre_tokenizer": {"type": "BertPreTokenizer"}, "model": {"type": "WordPiece"}}
    >>> splits_at_spaces(json.dumps(bert))
    True
    >>> splits_at_spaces(json.dumps({**bert, "pre_tokenizer": {"type": "ByteLevel"}}))
    False
    """
    config = json.loads(tokenizer_json)
    for part, allowed in _SPACE_SAFE.items():
        if (config.get(part) or {}).get("type") not in allowed:
            return False
    return not any(" " in token.get("content", "") for token in config.get("added_tokens") or [])


@dataclass(frozen=True)
class TokenBatch:
    """One batch of texts, tokenised.

    Attributes
    ----------
    ids : numpy.ndarray
        int64 ``(sum(known),)``: the tokens each text's vector pools, text after text.
    known : numpy.ndarray
        int64 ``(n,)``: tokens pooled per text (after truncation, unknown ones dropped).
    counts : numpy.ndarray
        int64 ``(n,)``: untruncated tokens per text (``n_tokens``).
    truncated : numpy.ndarray
        bool ``(n,)``: texts model2vec truncates (by characters or by tokens).
    """

    ids: np.ndarray
    known: np.ndarray
    counts: np.ndarray
    truncated: np.ndarray


class OnePass:
    """Vectors and token counts of a model2vec model's texts from one tokenisation.

    For plain embedding tables only (no token mapping, no weights, a float
    dtype); the encoder checks at load time that it equals model2vec's own
    ``encode`` and falls back to it otherwise.

    Parameters
    ----------
    model : model2vec.StaticModel
        The loaded model (its tokenizer, table, ``max_length``, ``normalize``).

    Examples
    --------
    >>> from clusterclip.embed.encoders import EncoderSpec
    >>> encoder = EncoderSpec(encoder="static").build()  # doctest: +SKIP
    >>> vectors, counts = OnePass(encoder.model)(["In the beginning", ""], batch_size=1024)  # doctest: +SKIP
    >>> vectors.shape, counts.tolist()  # doctest: +SKIP
    ((2, 256), [3, 0])
    """

    def __init__(self, model: Any) -> None:
        tokenizers = require_extra("tokenizers", "static")
        self._torch = require_extra("torch", "static")
        tokenizer_threads()  # before the tokenizer's first batch sizes its thread pool
        self.tokenizer = tokenizers.Tokenizer.from_str(model.tokenizer.to_str())
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.max_length = model.max_length
        self.max_chars = (
            None if model.max_length is None else model.max_length * int(model.median_token_length)
        )
        self.unknown = model.unk_token_id
        self.split_at_spaces = splits_at_spaces(self.tokenizer.to_str())
        self.dtype = model.embedding.dtype
        self.normalize = bool(model.normalize)
        # one float32 copy of the table, made once: embedding_bag sums in its dtype
        self._table = self._torch.from_numpy(np.asarray(model.embedding, dtype=np.float32))

    def __call__(self, texts: list[str], *, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """float32 ``(n, dim)`` rows as model2vec's ``encode`` gives them (not yet unit
        rows: see :meth:`pool`) and int64 ``(n,)`` untruncated token counts, batch by batch."""
        rows = np.zeros((len(texts), self._table.shape[1]), dtype=np.float32)
        counts = np.zeros(len(texts), dtype=np.int64)

        def tokenise(start: int) -> TokenBatch:
            return self.tokenise(texts[start : start + batch_size])

        for start, batch in prefetched(tokenise, range(0, len(texts), batch_size)):
            stop = start + len(batch.counts)
            rows[start:stop] = self.pool(batch)
            counts[start:stop] = batch.counts
        return rows, counts

    def tokenise(self, texts: list[str]) -> TokenBatch:
        """One ``encode_batch_fast`` call for ``texts`` (plus the cut ones' extra pieces)."""
        n = len(texts)
        pieces, long_rows, split = self._cut(texts)
        encodings = self.tokenizer.encode_batch_fast(pieces, add_special_tokens=False)
        ids = [encoding.ids for encoding in encodings[:n]]
        heads = np.fromiter(map(len, ids), dtype=np.int64, count=n)
        counts = heads.copy()
        if len(long_rows):
            sizes = np.fromiter(map(len, encodings[n:]), dtype=np.int64, count=len(pieces) - n)
            partial, rest = sizes[0::2], sizes[1::2]
            counts[long_rows] = np.where(split, heads[long_rows] - partial + rest, rest)
        truncated = np.zeros(n, dtype=bool)
        truncated[long_rows] = True
        if self.max_length is not None:
            truncated |= heads > self.max_length
        flat, known = self._pooled_ids(ids, heads)
        return TokenBatch(ids=flat, known=known, counts=counts, truncated=truncated)

    def _cut(self, texts: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The texts to tokenise: ``texts`` with the long ones cut, then two pieces per
        cut text that give its full count; the cut rows; whether each one split at a space.

        A text split at its last space ``s`` at or before the cut ``c`` adds
        ``text[s:c]`` and ``text[s:]``: its count is ``tokens(text[:c]) -
        tokens(text[s:c]) + tokens(text[s:])``. Any other cut text adds ``""`` and
        the whole text.
        """
        cut = self.max_chars
        if cut is None:
            return list(texts), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        long_rows = np.flatnonzero(lengths > cut)
        pieces, extra = list(texts), []
        split = np.zeros(len(long_rows), dtype=bool)
        for number, row in enumerate(long_rows.tolist()):
            text = texts[row]
            pieces[row] = text[:cut]  # what model2vec tokenises
            space = text.rfind(" ", 0, cut + 1) if self.split_at_spaces else -1
            split[number] = space >= 0
            extra += [text[space:cut], text[space:]] if space >= 0 else ["", text]
        return pieces + extra, long_rows, split

    def _pooled_ids(self, ids: list[list[int]], heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The flat ids each text's vector pools (its first ``max_length``, then unknown
        ones dropped, in model2vec's order), and how many per text."""
        limit = self.max_length
        kept = heads
        if limit is not None and (heads > limit).any():
            kept = np.minimum(heads, limit)
            ids = [row if len(row) <= limit else row[:limit] for row in ids]
        flat = np.fromiter(
            itertools.chain.from_iterable(ids), dtype=np.int64, count=int(kept.sum())
        )
        if self.unknown is None:
            return flat, kept
        unknown = np.flatnonzero(flat == self.unknown)
        if not len(unknown):
            return flat, kept
        owners = np.searchsorted(np.cumsum(kept), unknown, side="right")
        return np.delete(flat, unknown), kept - np.bincount(owners, minlength=len(kept))

    def pool(self, batch: TokenBatch) -> np.ndarray:
        """float32 ``(n, dim)``: each text's mean token row, rounded to the table's dtype;
        the truncated texts' rows also normalised and rounded again, as model2vec does."""
        torch = self._torch
        n = len(batch.known)
        offsets = np.zeros(n, dtype=np.int64)
        np.cumsum(batch.known[:-1], out=offsets[1:])
        # sums in float32, each text's tokens in order: what numpy's mean of the
        # gathered rows sums (tested equal)
        sums = torch.nn.functional.embedding_bag(
            torch.from_numpy(batch.ids), self._table, torch.from_numpy(offsets), mode="sum"
        ).numpy()
        out = np.zeros((n, sums.shape[1]), dtype=np.float32)
        present = batch.known > 0
        means = sums[present] / batch.known[present, None].astype(np.float32)
        out[present] = means.astype(self.dtype)
        rows = np.flatnonzero(batch.truncated)
        if self.normalize and len(rows):
            # model2vec's encode normalises in float32 and rounds to the table's dtype;
            # the stage took these rows from it, and keeps them byte for byte
            part = out[rows]
            norms = np.linalg.norm(part, axis=1, keepdims=True) + 1e-32
            out[rows] = (part / norms).astype(self.dtype)
        return out
