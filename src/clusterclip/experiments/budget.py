"""The training budget of one experiment: steps, tokens, parameters and their ratio.

Every run of the harness trains ``steps`` optimiser steps of ``batch_size x context`` tokens
(:func:`training_budget`), so its tokens are known before anything is prepared, and so are the
model's parameters (:func:`count_parameters`, the count of
``sum(p.numel() for p in model.parameters())`` for the harness's GPT-2, embeddings included,
the input and output embeddings tied). The harness prints both at start; with
``--min-tokens-per-parameter`` it refuses, before any embedding or training, a budget that
trains fewer tokens per parameter than asked (the GPU sizes of ``experiments/grid.sh`` ask
for 20, the compute-optimal ratio of Hoffmann et al., 2022).

>>> from clusterclip.experiments.model import ModelConfig
>>> count_parameters(ModelConfig(n_layer=2, n_head=4, n_embd=64, context=256), vocab_size=2048)
247552
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterclip.errors import invalid, spell

__all__ = ["TrainingBudget", "count_parameters", "training_budget"]


def count_parameters(model: Any, *, vocab_size: int) -> int:
    """Parameters of the harness's GPT-2 (:func:`~clusterclip.experiments.model.build_model`).

    Token embeddings (tied with the output layer, so counted once), position embeddings,
    ``n_layer`` blocks of ``12 d^2 + 13 d`` (attention and MLP weights and biases, two layer
    norms) and the final layer norm, for ``d = n_embd``.

    Parameters
    ----------
    model : ModelConfig
    vocab_size : int
        The tokenizer's vocabulary (at most ``--vocab-size``).
    """
    width = model.n_embd
    block = 12 * width * width + 13 * width
    return vocab_size * width + model.context * width + model.n_layer * block + 2 * width


@dataclass(frozen=True)
class TrainingBudget:
    """What one run trains: ``steps`` of ``batch_size`` sequences of ``context`` tokens."""

    steps: int
    batch_size: int
    context: int
    parameters: int

    @property
    def tokens(self) -> int:
        """Training tokens (every target token once)."""
        return self.steps * self.batch_size * self.context

    @property
    def tokens_per_parameter(self) -> float:
        return self.tokens / self.parameters

    def describe(self) -> str:
        """One line for the log.

        >>> print(TrainingBudget(10, 4, 32, 640).describe())
        640 parameters, 1,280 training tokens (10 steps of 4 x 32): 2.0 tokens per parameter
        """
        return (
            f"{self.parameters:,} parameters, {self.tokens:,} training tokens ({self.steps:,} "
            f"steps of {self.batch_size} x {self.context}): "
            f"{self.tokens_per_parameter:.1f} tokens per parameter"
        )

    def check(self, minimum: float) -> None:
        """Raise unless the budget trains at least ``minimum`` tokens per parameter.

        >>> TrainingBudget(10, 4, 32, 640).check(20)
        Traceback (most recent call last):
        ...
        clusterclip.errors.ClusterClipError: `tokens` must be at least 20 per parameter (12,800 for 640 parameters); got 1280. It buys 2.0 per parameter: raise tokens or shrink the model (n_layer, n_embd, vocab_size), or lower min_tokens_per_parameter.
        """
        if self.tokens_per_parameter >= minimum:
            return
        needed = int(minimum * self.parameters + 0.5)
        raise invalid(
            "tokens",
            f"at least {minimum:g} per parameter ({needed:,} for {self.parameters:,} parameters)",
            self.tokens,
            f"It buys {self.tokens_per_parameter:.1f} per parameter: raise {spell('tokens')} or "
            f"shrink the model ({', '.join(spell(n) for n in ('n_layer', 'n_embd', 'vocab_size'))}"
            f"), or lower {spell('min_tokens_per_parameter')}.",
        )


def training_budget(cfg: Any, *, vocab_size: int | None = None) -> TrainingBudget:
    """The budget of an :class:`~clusterclip.experiments.options.ExperimentConfig`.

    ``steps = max(1, tokens // (batch_size x context))``; the parameters are counted for
    ``vocab_size`` (default: ``cfg.vocab_size``, the most the tokenizer can give, so the
    ratio before preparation is never above the one trained).

    >>> from clusterclip.experiments.options import ExperimentConfig
    >>> training_budget(ExperimentConfig(tokens=10_000, batch_size=4)).steps
    39
    """
    steps = max(1, cfg.tokens // (cfg.batch_size * cfg.model.context))
    vocabulary = cfg.vocab_size if vocab_size is None else vocab_size
    return TrainingBudget(
        steps=steps,
        batch_size=cfg.batch_size,
        context=cfg.model.context,
        parameters=count_parameters(cfg.model, vocab_size=vocabulary),
    )
