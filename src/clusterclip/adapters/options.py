"""Settings of the token exports (``flat-tokens``, ``megatron``), declared once.

The flags of ``clusterclip export`` (through the token layouts of
:mod:`clusterclip.adapters.exporters`) and the keyword arguments of
:func:`clusterclip.adapters.flat.export_flat_tokens` and
:func:`clusterclip.adapters.megatron.export_megatron` come from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from clusterclip.options import check_fields, option

__all__ = ["TokenOptions"]


@dataclass(frozen=True, kw_only=True)
class TokenOptions:
    """How documents become token ids (recorded in the export's JSON sidecar).

    >>> TokenOptions(tokenizer="gpt2").append_eos
    True
    """

    title: ClassVar[str] = "tokens"  # its flags' group in `clusterclip export --help`
    tokenizer: str | None = option(
        None,
        "Tokenizer of the token formats (flat-tokens, megatron): a tokenizer.json file, a "
        "Hugging Face tokenizer directory, or a hub name already in the local cache.",
    )
    eos_token: str | None = option(
        None,
        "Token appended after every document (default: the tokenizer's end-of-sequence "
        "token; BERT-style tokenizers have none: pass e.g. [SEP]).",
    )
    append_eos: bool = option(
        True,
        "Append the end-of-document token after every document (the offsets mark the "
        "documents either way).",
        kind="bool",
        flag="--no-eos",
        flag_help="Write documents without an end-of-document token (the offsets still mark them).",
    )

    def __post_init__(self) -> None:
        check_fields(self)
