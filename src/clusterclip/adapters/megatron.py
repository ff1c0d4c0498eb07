"""Megatron-Core: an indexed dataset (``.bin`` / ``.idx``) whose sequences are the schedule.

:func:`export_megatron` writes ``<out>/text_document.bin`` and ``.idx`` in the
format that ``megatron.core.datasets.indexed_dataset.IndexedDataset`` reads
(the ``MMIDIDX`` index, version 1), plus a ``text_document.json`` sidecar:

- sequence ``j`` of the indexed dataset is the document at schedule position
  ``j`` (token ids from the tokenizer the user names, each document followed by
  its end-of-document token, as ``tools/preprocess_data.py --append-eod`` does);
- the ``.idx`` stores one byte pointer per sequence, so a repeated document
  points at the same bytes: the ``.bin`` holds every *distinct* scheduled
  document once, and repeats cost 12 bytes of index each (a length and a pointer);
- token dtype ``uint16`` for vocabularies of at most 65,536 ids, else ``int32``
  (the codes Megatron-Core knows).

Megatron's ``GPTDataset`` shuffles twice (the document order of each epoch and
the packed samples) and no setting of ``GPTDatasetConfig`` turns that off.
:class:`ScheduledGPTDataset` is ``GPTDataset`` with the two shuffles replaced
by the identity: the documents in file order (the schedule) packed into
samples by Megatron's own ``build_sample_idx``. Use it wherever ``GPTDataset``
is used (``BlendedMegatronDatasetBuilder(ScheduledGPTDataset, ...)``), with the
whole file as the training split (``split="100,0,0"``) and a sequential sampler
(Megatron-LM's ``--dataloader-type single``, the default). Megatron resumes by
``consumed_samples``; sample ``k`` of this dataset is the same in every run,
so a resumed run continues exactly.

Readers must index sequences one at a time (``dataset[i]``, ``dataset.get(i, ...)``,
which is what every Megatron-Core dataset does). A slice ``dataset[a:b]`` reads
contiguous bytes and is wrong on this file, and so is merging it with
``tools/merge_datasets.py`` (it recomputes pointers from lengths).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.adapters.tokens import (
    SCHEDULE_BLOCK,
    iter_schedule_blocks,
    load_tokenizer,
    token_dtype,
    tokenize_scheduled,
)
from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io import WorkDir, atomic_path, atomic_write_json, fingerprint_file

__all__ = [  # noqa: F822 (ScheduledGPTDataset is built on first use, see __getattr__)
    "PREFIX",
    "ScheduledGPTDataset",
    "export_megatron",
    "recorded_tokenizer",
]

#: File prefix inside the output directory (``--data-path <out>/text_document``).
PREFIX = "text_document"
_HEADER = b"MMIDIDX\x00\x00"
#: Megatron-Core's ``DType`` codes for the token dtypes written here.
_DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}


def export_megatron(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str],
    eos_token: str | None = None,
    append_eos: bool = True,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the schedule as a Megatron-Core indexed dataset (``.bin`` / ``.idx``).

    Parameters
    ----------
    workdir : path
        Work directory with a schedule; its corpus files must be unchanged since
        they were embedded (checked before anything is written).
    out : path
        Output directory, new or empty; receives ``text_document.bin``, ``.idx``
        and ``.json``, all at once (nothing when the export fails). Megatron's
        data path is ``<out>/text_document``.
    tokenizer : str or path
        The tokenizer, named by the user: a ``tokenizer.json`` file, a Hugging
        Face tokenizer directory, or a hub name already in the local cache.
        Train with the same tokenizer (Megatron-LM: ``--tokenizer-type
        HuggingFaceTokenizer --tokenizer-model <it>``).
    eos_token : str, optional
        Token appended after every document (default: the tokenizer's own); it
        must be the tokenizer's ``eod`` in Megatron.
    append_eos : bool
        False: documents are not separated by a token.
    engine : {"local", "ray"}
        Where the documents are read and tokenised (read tasks, each writing its
        own part; :func:`clusterclip.adapters.tokens.tokenize_scheduled`). The
        files are the same on every engine.
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    dict
        ``prefix``, ``n_sequences`` (schedule positions), ``n_distinct``
        (documents stored), ``n_tokens`` (tokens training reads, repeats
        included), ``bin_bytes`` and ``idx_bytes``. Deterministic.

    Examples
    --------
    >>> export_megatron("work", "megatron/", tokenizer="gpt2")  # doctest: +SKIP
    {'prefix': 'megatron/text_document', 'n_sequences': 15000, ...}
    >>> from megatron.core.datasets.indexed_dataset import IndexedDataset  # doctest: +SKIP
    >>> IndexedDataset("megatron/text_document")[0]  # doctest: +SKIP
    """
    work, out = WorkDir(workdir), check_export_folder(out)
    loaded = load_tokenizer(tokenizer, eos_token=eos_token, append_eos=append_eos)
    dtype = token_dtype(loaded.info.vocab_size, signed=True)
    schedule = work.schedule()
    indices = schedule.indices
    n_sequences = int(indices.shape[0])
    if n_sequences == 0:
        raise ClusterClipError(
            f"the schedule of {work.path} is empty; Megatron cannot read an empty indexed "
            "dataset. Rebuild it with a budget: `clusterclip run ... --epochs 1`."
        )
    with export_folder(out) as folder:
        prefix = folder / PREFIX
        with atomic_path(prefix.with_suffix(".bin")) as tmp:
            spans = tokenize_scheduled(
                work, loaded, tmp, dtype=dtype, engine=engine, engine_options=engine_options
            )
        with atomic_path(prefix.with_suffix(".idx")) as tmp:
            n_tokens = _write_index(tmp, indices, spans, dtype)
        summary = {
            "prefix": str(out / PREFIX),
            "n_sequences": n_sequences,
            "n_distinct": int((spans[:, 0] >= 0).sum()),
            "n_tokens": n_tokens,
            "bin_bytes": prefix.with_suffix(".bin").stat().st_size,
            "idx_bytes": prefix.with_suffix(".idx").stat().st_size,
        }
        atomic_write_json(
            prefix.with_suffix(".json"),
            {
                "format": "megatron-indexed-dataset",
                "prefix": PREFIX,
                "dtype": dtype.name,
                **{k: v for k, v in summary.items() if k != "prefix"},
                "tokenizer": loaded.info.to_dict(),
                "meaning": "sequence j = the document at schedule position j; repeated documents "
                "share their bytes in the .bin (one pointer per sequence in the .idx)",
                "schedule": fingerprint_file(schedule.path),
                "workdir": str(work.path),
            },
        )
    return summary


def _write_index(path: Path, indices: np.ndarray, spans: np.ndarray, dtype: np.dtype) -> int:
    """Write the ``.idx``: header, lengths, pointers, document indices (schedule streamed)."""
    n = int(indices.shape[0])
    total = 0
    with open(path, "wb", buffering=1 << 20) as handle:
        handle.write(_HEADER)
        handle.write(struct.pack("<Q", 1))
        handle.write(struct.pack("<B", _DTYPE_CODES[dtype]))
        handle.write(struct.pack("<Q", n))
        handle.write(struct.pack("<Q", n + 1))
        for block in iter_schedule_blocks(indices):  # int32 lengths
            lengths = spans[block, 1] - spans[block, 0]
            total += int(lengths.sum())
            handle.write(lengths.astype("<i4").tobytes())
        for block in iter_schedule_blocks(indices):  # int64 byte pointers (shared by repeats)
            handle.write((spans[block, 0] * dtype.itemsize).astype("<i8").tobytes())
        for begin in range(0, n + 1, SCHEDULE_BLOCK):  # one sequence per document
            handle.write(
                np.arange(begin, min(begin + SCHEDULE_BLOCK, n + 1), dtype="<i8").tobytes()
            )
    return total


# --------------------------------------------------------------------------- reading


class _RecordedTokenizer:
    """The parts of a Megatron tokenizer that Megatron-Core datasets use, from the sidecar."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.vocab_size = int(info["vocab_size"])
        self.eod = -1 if info.get("eos_id") is None else int(info["eos_id"])
        self.unique_identifiers = {
            "class": "clusterclip.recorded_tokenizer",
            "name_or_path": info.get("name_or_path"),
            "fingerprint": info.get("fingerprint"),
        }


def recorded_tokenizer(prefix: str | os.PathLike[str]) -> Any:
    """A stand-in Megatron tokenizer (``eod``, ``vocab_size``) built from an export's sidecar.

    Megatron-LM builds its tokenizer from its own flags; this is for using
    :class:`ScheduledGPTDataset` outside Megatron-LM (tests, inspection,
    custom loops), where ``GPTDatasetConfig`` still needs a tokenizer.

    >>> tokenizer = recorded_tokenizer("megatron/text_document")  # doctest: +SKIP
    >>> tokenizer.eod, tokenizer.vocab_size  # doctest: +SKIP
    (102, 30522)
    """
    return _RecordedTokenizer(_sidecar(str(prefix))["tokenizer"])


def _sidecar(prefix: str) -> dict[str, Any]:
    path = Path(f"{prefix}.json")
    if not path.is_file():
        raise ClusterClipError(
            f"{path} not found: {prefix} is not a complete clusterclip Megatron export. "
            "Write one with `clusterclip export --format megatron --tokenizer NAME --out DIR`."
        )
    return json.loads(path.read_text("utf-8"))


def _check_tokenizer(prefix: str, tokenizer: Any) -> None:
    if not Path(f"{prefix}.json").is_file():
        return  # not a clusterclip export (e.g. preprocess_data.py on an ordered-jsonl export)
    recorded = _sidecar(prefix)["tokenizer"]
    eod = getattr(tokenizer, "eod", None)
    if recorded.get("eos_id") is not None and eod is not None and int(eod) != recorded["eos_id"]:
        raise ClusterClipError(
            f"{prefix} was tokenized with {recorded['name_or_path']!r}, whose documents end with "
            f"token {recorded['eos_id']} ({recorded['eos_token']!r}), but the training "
            f"tokenizer's eod is {eod}. Train with the tokenizer the export names, or export "
            "again with the training tokenizer."
        )


def _ordered_indices(dataset: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Document, sample and shuffle indices of a GPTDataset without either shuffle."""
    utils = require_extra("megatron.core.datasets.utils", "megatron")
    config = dataset.config
    if config.defer_npy_index_mmap or config.fast_cache_load:
        raise ClusterClipError(
            "ScheduledGPTDataset builds its indices at start-up (no cache is read); turn off "
            "--dataloader-defer-npy-index-mmap / --dataloader-fast-cache-load for this data path."
        )
    _check_tokenizer(dataset.dataset.path_prefix, config.tokenizer)
    indices = np.asarray(dataset.indices)
    n_sequences = len(dataset.dataset)
    whole = len(indices) == n_sequences and (
        n_sequences == 0 or (indices[0] == 0 and indices[-1] == n_sequences - 1)
    )
    if dataset.index_split != utils.Split.train or not whole:
        raise ClusterClipError(
            f"{dataset.dataset.path_prefix} is a schedule: the whole file is the training "
            f"split in order, but Megatron asked for the {dataset.index_split.name} split of "
            f"sequences {int(indices[0]) if len(indices) else 0}..{int(indices[-1]) + 1 if len(indices) else 0} "
            f"of {n_sequences}. Use split='100,0,0' (--split 100,0,0) and give validation data "
            "its own path (--valid-data-path)."
        )
    num_tokens = dataset._get_num_tokens_per_epoch()
    if dataset._get_num_epochs(num_tokens) > 1:
        length = config.sequence_length
        available = (num_tokens - config.add_extra_token_to_sequence) // length
        raise ClusterClipError(
            f"Megatron asks for {dataset.num_samples:,} samples of {length} tokens, but the "
            f"schedule in {dataset.dataset.path_prefix} holds {num_tokens:,} tokens "
            f"({available:,} samples); going round it again would repeat the schedule and "
            f"break its repetition cap. Train for at most {available:,} samples "
            "(--train-samples), or rebuild the schedule with a larger budget."
        )
    helpers = require_extra("megatron.core.datasets.helpers", "megatron")
    document_index = indices.astype(np.int32)  # the file order is the schedule
    sample_index = helpers.build_sample_idx(
        np.array(dataset.dataset.sequence_lengths, dtype=np.int32),
        document_index,
        config.sequence_length,
        1,
        num_tokens,
        True,
        config.add_extra_token_to_sequence,
    )
    n_samples = sample_index.shape[0] - 1
    shuffle_index = np.arange(n_samples, dtype=np.uint32 if n_samples < 2**32 - 1 else np.int64)
    return document_index, sample_index, shuffle_index


_DOC = """Megatron-Core's ``GPTDataset`` reading an exported schedule in order.

Built like ``GPTDataset`` (usually by ``BlendedMegatronDatasetBuilder(ScheduledGPTDataset,
sizes, is_built_on_rank, config).build()``) over a prefix written by
:func:`export_megatron`. The documents are packed into samples of
``config.sequence_length`` tokens by Megatron's own ``build_sample_idx``, in file
order (= schedule order), and samples are not shuffled: sample ``k`` holds the
tokens that follow sample ``k - 1`` in the schedule (with ``add_extra_token_to_sequence``,
consecutive samples share one boundary token, as in ``GPTDataset``).

Refused, with the fix in the message: a split other than the whole file as
``train`` (``split="100,0,0"``); more samples than the schedule holds (it would
be repeated); a training tokenizer whose ``eod`` differs from the export's
end-of-document token; the index-cache fast paths.

Resuming: Megatron's ``consumed_samples`` (saved in its checkpoints) is the
position to continue from; the sampler must read samples in order
(Megatron-LM ``--dataloader-type single``), as ``MegatronPretrainingSampler`` does.

Examples
--------
>>> from megatron.core.datasets.blended_megatron_dataset_builder import (  # doctest: +SKIP
...     BlendedMegatronDatasetBuilder)
>>> train, _, _ = BlendedMegatronDatasetBuilder(  # doctest: +SKIP
...     ScheduledGPTDataset, [None, None, None], lambda: True, config).build()
"""

_CLASS_CACHE: dict[str, type] = {}


def _scheduled_gpt_dataset() -> type:
    cls = _CLASS_CACHE.get("ScheduledGPTDataset")
    if cls is None:
        gpt = require_extra("megatron.core.datasets.gpt_dataset", "megatron")
        cls = type(
            "ScheduledGPTDataset",
            (gpt.GPTDataset,),
            {
                "__module__": __name__,
                "__qualname__": "ScheduledGPTDataset",
                "__doc__": _DOC,
                "_build_document_sample_shuffle_indices": _ordered_indices,
            },
        )
        _CLASS_CACHE["ScheduledGPTDataset"] = cls
    return cls


def __getattr__(name: str) -> Any:
    # ScheduledGPTDataset subclasses Megatron-Core's GPTDataset, but importing this
    # module (for the export) must not import Megatron or torch: build it on demand.
    if name == "ScheduledGPTDataset":
        return _scheduled_gpt_dataset()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
