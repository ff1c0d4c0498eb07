"""A small GPT-2 built from a config (Hugging Face ``transformers``; nothing downloaded)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterclip.errors import require_extra
from clusterclip.options import check_fields, option

__all__ = ["ModelConfig", "build_model"]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Architecture of the experiment's GPT-2 (no dropout: runs are short).

    Its fields are the harness's model flags (``--n-layer``, ...; see
    :mod:`clusterclip.experiments.options`).
    """

    n_layer: int = option(2, "transformer blocks", kind="int", minimum=1)
    n_head: int = option(4, "attention heads per block", kind="int", minimum=1)
    n_embd: int = option(96, "width of the residual stream", kind="int", minimum=1)
    context: int = option(64, "tokens per training sequence", kind="int", minimum=1)

    def __post_init__(self) -> None:
        check_fields(self)


def build_model(config: ModelConfig, *, vocab_size: int, seed: int):
    """A freshly initialised ``GPT2LMHeadModel``; same ``seed`` -> same weights.

    The initial weights depend on ``seed`` only (not on the sampling policy),
    so runs of different policies with one seed start from the same model and
    their differences are paired.

    >>> model = build_model(ModelConfig(), vocab_size=512, seed=0)  # doctest: +SKIP
    >>> sum(p.numel() for p in model.parameters())  # doctest: +SKIP
    284160
    """
    torch = require_extra("torch", "experiments")
    transformers = require_extra("transformers", "experiments")
    gpt2 = transformers.GPT2Config(
        vocab_size=vocab_size,
        n_positions=config.context,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    init_seed = int(np.random.SeedSequence([seed, 0x6E7]).generate_state(1)[0])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)
        model = transformers.GPT2LMHeadModel(gpt2)
    return model
