"""Token ids of the scheduled documents: the tokenizer the user names, each document once.

Token exports (:mod:`clusterclip.adapters.flat`, :mod:`clusterclip.adapters.megatron`)
share two steps:

1. :func:`load_tokenizer` loads the tokenizer the user names (a Hugging Face
   name or directory, or a ``tokenizer.json`` file) and records what a reader
   must know about it: the name or path, the vocabulary size, the end-of-document
   token and its id, and a fingerprint of its ``tokenizer.json``.
2. :func:`tokenize_scheduled` reads the embedded corpus once, in read tasks on
   the engine (:mod:`clusterclip.adapters.tokenizing`; a corpus changed since it
   was embedded is refused first) and writes the token ids of every document the schedule uses,
   **each distinct document once**, back to back, into one binary file. It
   returns the ``(N, 2)`` start / stop token offsets of each document in that
   file (``-1`` for documents the schedule never uses): a repeated document is
   then a second reference to the same tokens.

Memory stays ``O(N)`` (the offsets and one bool per document) plus one batch
of texts, whatever the corpus and schedule size; the schedule is read in blocks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, hint, invalid, require_extra, spell
from clusterclip.io import WorkDir, fingerprint_file
from clusterclip.progress import progress_bar

__all__ = [
    "DocumentTokenizer",
    "TokenizerInfo",
    "iter_schedule_blocks",
    "load_tokenizer",
    "scheduled_mask",
    "token_dtype",
    "tokenize_scheduled",
]

#: Schedule positions read per block (memory only).
SCHEDULE_BLOCK = 1 << 16


@dataclass(frozen=True)
class TokenizerInfo:
    """What a reader of exported tokens must know about the tokenizer (recorded in sidecars).

    Attributes
    ----------
    name_or_path : str
        As the user named it (a Hugging Face name, a directory or a ``tokenizer.json``).
    resolved_path : str or None
        The absolute local path it was loaded from, when it is one.
    library : str
        ``"transformers"`` (``AutoTokenizer``) or ``"tokenizers"`` (a ``tokenizer.json`` file).
    vocab_size : int
        Number of token ids, added tokens included; every id is below it.
    eos_token, eos_id : str or None, int or None
        The token appended after every document (None when ``append_eos`` is False).
    append_eos : bool
        Whether every document ends with ``eos_id``.
    fingerprint : str or None
        Content hash of the ``tokenizer.json`` it was loaded from, when there is one.
    """

    name_or_path: str
    resolved_path: str | None
    library: str
    vocab_size: int
    eos_token: str | None
    eos_id: int | None
    append_eos: bool
    fingerprint: str | None

    def to_dict(self) -> dict[str, Any]:
        """The info as a JSON-ready dict (the ``tokenizer`` entry of a sidecar)."""
        return asdict(self)


class DocumentTokenizer:
    """A loaded tokenizer: ``encode(texts) -> list of int lists``, plus its :class:`TokenizerInfo`.

    Built by :func:`load_tokenizer`. No special tokens are added except the
    end-of-document token, once, after each document (when ``append_eos``).
    """

    def __init__(self, info: TokenizerInfo, encode: Callable[[list[str]], list[list[int]]]) -> None:
        self.info = info
        self._encode = encode

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, with ``eos_id`` appended when ``append_eos``.

        >>> tokenizer = load_tokenizer("bert-base-uncased")  # doctest: +SKIP
        >>> tokenizer.encode(["In the beginning"])  # doctest: +SKIP
        [[1999, 1996, 2927, 102]]
        """
        encoded = self._encode(texts)
        if self.info.append_eos:
            eos = self.info.eos_id
            return [[*ids, eos] for ids in encoded]
        return [list(ids) for ids in encoded]


def _whole_documents(backend: Any) -> None:
    """Turn off the padding and truncation a ``tokenizer.json`` may carry (e.g. 128 for
    sentence encoders): a document's tokens are all of it, and nothing else."""
    backend.no_padding()
    backend.no_truncation()


def _hf_tokenizer(name_or_path: str) -> tuple[Any, Callable[[list[str]], list[list[int]]], int]:
    transformers = require_extra("transformers", "tokens")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as error:
        raise ClusterClipError(
            f"cannot load the tokenizer {name_or_path!r} ({error}). Name a local directory "
            "holding a Hugging Face tokenizer, a tokenizer.json file, or a hub name that is "
            "already in your Hugging Face cache (clusterclip downloads nothing itself)."
        ) from None
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # the Rust tokenizer: batched, and no max-length warnings
        _whole_documents(backend)

        def encode(texts: list[str]) -> list[list[int]]:
            return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]

    else:  # a slow (Python) tokenizer

        def encode(texts: list[str]) -> list[list[int]]:
            return tokenizer(texts, add_special_tokens=False)["input_ids"]

    return tokenizer, encode, len(tokenizer)


def _no_eos() -> str:
    """``--no-eos`` under the CLI, ``append_eos=False`` under Python."""
    flag = spell("append_eos")
    return flag if flag.startswith("--") else "append_eos=False"


def load_tokenizer(
    name_or_path: str | os.PathLike[str],
    *,
    eos_token: str | None = None,
    append_eos: bool = True,
) -> DocumentTokenizer:
    """Load the tokenizer the user names and resolve its end-of-document token.

    Parameters
    ----------
    name_or_path : str or path
        A ``tokenizer.json`` file (loaded with the ``tokenizers`` library), or a
        directory or Hugging Face name (``transformers.AutoTokenizer``; a name
        must already be in the local Hugging Face cache when ``HF_HUB_OFFLINE=1``).
    eos_token : str, optional
        The token appended after each document. Default: the tokenizer's own
        end-of-sequence token (required for a ``tokenizer.json`` file, which
        names none, and for tokenizers without one, e.g. BERT's: pass ``"[SEP]"``).
    append_eos : bool
        False: documents are written without a separator (the document offsets
        still mark them).

    Returns
    -------
    DocumentTokenizer

    Raises
    ------
    ClusterClipError
        The tokenizer cannot be loaded, or the end-of-document token is missing
        or not in its vocabulary.

    Examples
    --------
    >>> tokenizer = load_tokenizer("gpt2")  # doctest: +SKIP
    >>> tokenizer.info.vocab_size, tokenizer.info.eos_token, tokenizer.info.eos_id  # doctest: +SKIP
    (50257, '<|endoftext|>', 50256)
    """
    name = os.fspath(name_or_path)
    if not isinstance(name, str) or not name:
        raise invalid("tokenizer", "a tokenizer name, directory or tokenizer.json", name_or_path)
    path = Path(name).expanduser()
    resolved = str(path.resolve()) if path.exists() else None
    json_file = path if path.is_file() else path / "tokenizer.json"
    fingerprint = fingerprint_file(json_file) if json_file.is_file() else None
    if path.is_file():
        if path.suffix != ".json":
            raise invalid(
                "tokenizer",
                "a tokenizer.json file, a tokenizer directory or a Hugging Face name",
                name,
            )
        tokenizers = require_extra("tokenizers", "tokens")
        try:
            backend = tokenizers.Tokenizer.from_file(str(path))
        except Exception as error:  # the Rust library raises a bare Exception on a bad file
            raise ClusterClipError(
                f"{path}: not a tokenizer.json the tokenizers library can load ({error}). "
                "Pass the tokenizer.json saved with the model (tokenizer.save(...)), or the "
                "model's directory."
            ) from None
        _whole_documents(backend)
        library, vocab_size, own_eos = "tokenizers", backend.get_vocab_size(True), None
        to_id = backend.token_to_id

        def encode(texts: list[str]) -> list[list[int]]:
            return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]

    else:
        tokenizer, encode, vocab_size = _hf_tokenizer(name)
        library, own_eos = "transformers", tokenizer.eos_token

        def to_id(token: str) -> int | None:
            found = tokenizer.convert_tokens_to_ids(token)
            return None if found is None or found == tokenizer.unk_token_id else int(found)

    eos_id = None
    if append_eos:
        eos_token = eos_token if eos_token is not None else own_eos
        if eos_token is None:
            raise invalid(
                "eos_token",
                "the token to append after each document",
                None,
                f"The tokenizer {name!r} names no end-of-sequence token: pass one of its tokens "
                f"(e.g. {hint('eos_token', '[SEP]')} for BERT tokenizers), or {_no_eos()}.",
            )
        eos_id = to_id(eos_token)
        if eos_id is None:
            raise invalid(
                "eos_token",
                f"a token of the vocabulary of {name!r}",
                eos_token,
                "Pass a token the tokenizer knows (e.g. '</s>', '<|endoftext|>', '[SEP]').",
            )
    info = TokenizerInfo(
        name_or_path=name,
        resolved_path=resolved,
        library=library,
        vocab_size=int(vocab_size),
        eos_token=eos_token if append_eos else None,
        eos_id=None if eos_id is None else int(eos_id),
        append_eos=bool(append_eos),
        fingerprint=fingerprint,
    )
    return DocumentTokenizer(info, encode)


def token_dtype(vocab_size: int, *, signed: bool = False) -> np.dtype:
    """The smallest dtype that holds every token id below ``vocab_size``.

    ``uint16`` up to 65,536 ids, else ``uint32`` (``int32`` with ``signed=True``,
    for Megatron's indexed dataset, which has no uint32 code).

    >>> token_dtype(50257), token_dtype(128256), token_dtype(128256, signed=True)
    (dtype('uint16'), dtype('uint32'), dtype('int32'))
    """
    if vocab_size <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.int32 if signed else np.uint32)


def iter_schedule_blocks(indices: np.ndarray, start: int = 0) -> Iterator[np.ndarray]:
    """The schedule (memory-mapped) as int64 blocks of :data:`SCHEDULE_BLOCK` positions."""
    for begin in range(start, int(indices.shape[0]), SCHEDULE_BLOCK):
        yield np.asarray(indices[begin : begin + SCHEDULE_BLOCK], dtype=np.int64)


def scheduled_mask(indices: np.ndarray, n_documents: int) -> np.ndarray:
    """bool ``(N,)``: the documents the schedule ``indices`` draws (refusing ids outside ``[0, N)``)."""
    mask = np.zeros(n_documents, dtype=bool)
    for block in iter_schedule_blocks(indices):
        if block.size and (int(block.min()) < 0 or int(block.max()) >= n_documents):
            raise ClusterClipError(
                f"the schedule refers to documents outside [0, {n_documents}) (the embedded "
                "ones). Rebuild it with `clusterclip run`."
            )
        mask[block] = True
    return mask


def tokenize_scheduled(
    work: WorkDir,
    tokenizer: DocumentTokenizer,
    out: str | os.PathLike[str],
    *,
    dtype: np.dtype | None = None,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """Write the tokens of every scheduled document once, in index order, to ``out``.

    Parameters
    ----------
    work : WorkDir
        A work directory with a schedule; its corpus must be unchanged since it
        was embedded (checked before anything is written).
    tokenizer : DocumentTokenizer
        From :func:`load_tokenizer`.
    out : path
        The binary file to write: raw token ids, dtype
        ``token_dtype(tokenizer.info.vocab_size)``, documents back to back in
        index order (the caller makes it atomic).
    dtype : numpy.dtype, optional
        Token dtype; default ``token_dtype(tokenizer.info.vocab_size)``.
    engine : {"local", "ray"}
        Where the documents are read and tokenised: read tasks, each writing its
        own part (:mod:`clusterclip.adapters.tokenizing`); the same bytes on every engine.
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    numpy.ndarray of int64, shape (N, 2)
        Start and stop (in tokens) of document ``i`` inside ``out``; ``(-1, -1)``
        for documents the schedule never uses.

    Examples
    --------
    >>> offsets = tokenize_scheduled(WorkDir("work"), load_tokenizer("gpt2"), "cache.bin")  # doctest: +SKIP
    """
    from clusterclip.adapters.tokenizing import tokenize_in_tasks
    from clusterclip.engines import resolve_options

    dtype = np.dtype(dtype) if dtype is not None else token_dtype(tokenizer.info.vocab_size)
    from clusterclip.io.readplan import corpus_plan

    ray_options = resolve_options(engine, engine_options)  # checked before any work
    mask = scheduled_mask(work.schedule().indices, work.n_documents())
    # every corpus file is checked now, before anything is written or shown
    plan, read_options = corpus_plan(work, engine=engine, options=ray_options)
    with progress_bar(total=int(mask.sum()), desc="tokenize", unit="doc") as bar:
        return tokenize_in_tasks(
            plan, read_options, tokenizer, mask, out, dtype, engine=engine,
            options=ray_options, progress=bar.update,
        )  # fmt: skip
