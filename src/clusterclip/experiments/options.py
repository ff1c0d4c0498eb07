"""The LM harness's settings, declared once with :func:`clusterclip.options.option`.

:class:`ExperimentConfig` (with the model's :class:`~clusterclip.experiments.model.ModelConfig`)
is what one experiment depends on; its fields give the flags of
``python -m clusterclip.experiments.lm`` and ``clusterclip experiment lm``
(:func:`add_arguments`), their ``--help`` and the spelling of their errors, as the
stages' options do for ``clusterclip run``. The corpus and split fields take their
defaults from :class:`~clusterclip.experiments.prepare.SplitOptions`, the stage
that uses them.

>>> parser = argparse.ArgumentParser()
>>> add_arguments(parser)
>>> config_from_args(parser.parse_args(["--n-clusters=20", "--n-layer=1"])).model.n_layer
1
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from clusterclip.errors import spelled_as_flags
from clusterclip.experiments.model import ModelConfig
from clusterclip.experiments.prepare import SplitOptions
from clusterclip.options import add_flags, check_fields, flag_names, from_args, option

__all__ = ["DEFAULT_POLICIES", "ExperimentConfig", "add_arguments", "config_from_args"]

DEFAULT_POLICIES = "random,uniform,clusterclip-r2,clusterclip-r4,temperature-a0.5,planned-r4"

_EMBED = "of the embed stage"


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """Everything one experiment depends on (recorded with every result line).

    >>> ExperimentConfig(tokens=1000).tokens
    1000
    >>> ExperimentConfig(tokens=0)
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `tokens` must be an int in (0, inf); got 0. Default: 200000.
    """

    corpus: str = option(
        SplitOptions.corpus, "kjv, fortunes, bbc, pydocs, linux-doc, or a jsonl/parquet path"
    )
    corpus_pin: str = option(
        "check",
        "a pinned corpus (linux-doc): refuse files that differ from its pin (check), or read "
        "them as installed (off: another experiment, recorded with their own hash)",
        choices=("check", "off"),
    )
    text_field: str = option(SplitOptions.text_field, "text field of a file corpus")
    label_field: str | None = option(
        SplitOptions.label_field, "category field of a file corpus (optional)"
    )
    workdir: str = option("runs/kjv", "work directory (embeddings, clusters, cache)")
    out: str = option("results/kjv", "results directory (results.jsonl, results.md, *.png)")
    max_docs: int | None = option(
        SplitOptions.max_docs, "random subset of the corpus (seeded)", kind="int", minimum=1
    )
    data_seed: int = option(
        SplitOptions.data_seed, "seed of subset, clusters and split", kind="seed"
    )
    encoder: str = option("sentence-transformers", f"encoder {_EMBED}")
    precision: str = option(
        "auto",
        f"transformer precision {_EMBED} (auto: bfloat16 on CPUs that have it; "
        "float32 gave the same clusters on the two CPU families tried)",
        choices=("auto", "float32", "bfloat16", "float16"),
    )
    kmeans_backend: str = option(
        SplitOptions.kmeans_backend,
        "k-means backend of the cluster stage and the independent clustering (auto: "
        "by the CPU's bf16 support and the installed libraries, which may differ between "
        "machines; name one to get the same clusters everywhere)",
    )
    n_clusters: int = option(100, "clusters of the cluster stage", kind="int", minimum=1)
    tail_docs: int | None = option(
        SplitOptions.tail_docs, "keep a long-tailed subset of N docs", kind="int", minimum=1
    )
    tail_span: float = option(
        SplitOptions.tail_span, "largest/smallest cluster kept", kind="float", above=0
    )
    heldout_per_cluster: int = option(
        SplitOptions.heldout_per_cluster, "held-out documents per cluster (with --tail-docs)",
        kind="int", minimum=0,
    )  # fmt: skip
    heldout_fraction: float = option(
        SplitOptions.heldout_fraction, "held-out share of every cluster", kind="float", above=0
    )
    near_duplicate: float = option(
        SplitOptions.near_duplicate, "cosine threshold of a held-out near-duplicate",
        kind="float",
    )  # fmt: skip
    vocab_size: int = option(SplitOptions.vocab_size, "BPE vocabulary", kind="int", minimum=1)
    max_doc_tokens: int = option(
        SplitOptions.max_doc_tokens, "truncate documents", kind="int", minimum=1
    )
    independent_encoder: str = option(
        SplitOptions.independent_encoder,
        "encoder of the independent clustering behind the independent metrics "
        "(auto: tfidf, or sentence-transformers when --encoder is tfidf)",
    )
    independent_clusters: int | None = option(
        SplitOptions.independent_clusters, "its k (default: --n-clusters)", kind="int", minimum=2
    )
    tokens: int = option(200_000, "training budget in tokens (every policy)", kind="int", above=0)
    min_tokens_per_parameter: float = option(
        0.0,
        "refuse to start when the budget trains fewer tokens per model parameter (the GPU "
        "sizes of experiments/grid.sh: 20)",
        kind="float",
        minimum=0,
    )
    epochs: float = option(1.0, "passes over the pool the budget buys", kind="float", above=0)
    regime: str | None = option(None, "name of the regime in the tables (default: N-epoch)")
    policies: str = option(DEFAULT_POLICIES, "comma list of sampling policies")
    seeds: str = option("0", "comma list of seeds (schedule + model init)")
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    batch_size: int = option(16, "sequences per training step", kind="int", minimum=1)
    lr: float = option(3e-3, "peak learning rate", kind="float", above=0)
    warmup_fraction: float = option(
        0.05, "share of the steps spent warming up", kind="float", minimum=0, cli=False
    )
    lr_floor: float = option(0.1, "final lr / peak lr (1 = constant)", kind="float", minimum=0)
    weight_decay: float = option(
        0.1, "AdamW weight decay of the matrices", kind="float", minimum=0, cli=False
    )
    eval_points: int = option(8, "held-out evals per run", kind="int", minimum=1)
    device: str = option("auto", "auto, cpu, cuda")
    threads: int = option(2, "torch CPU threads", kind="int", minimum=1)
    #: The sampler's draw rule, pinned so that a grid run over several releases stays one
    #: experiment (a new default rule would otherwise change the schedules mid-grid).
    schedule_version: int = option(
        1, "the sampler's draw rule, pinned for the whole grid", kind="int", minimum=1
    )

    def __post_init__(self) -> None:
        check_fields(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``python -m clusterclip.experiments.lm`` and ``clusterclip experiment lm``.

    One per command-line field of :class:`ExperimentConfig` and of its model's
    :class:`~clusterclip.experiments.model.ModelConfig`, plus ``--report-only``.
    """
    add_flags(parser, ExperimentConfig)
    add_flags(parser.add_argument_group("model"), ModelConfig)
    parser.add_argument(
        "--report-only", action="store_true", help="only rebuild tables and plots from --out"
    )


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    """The :class:`ExperimentConfig` of the flags given; errors name the flags."""
    with spelled_as_flags(flag_names(ExperimentConfig, ModelConfig)):
        model = ModelConfig(**from_args(args, ModelConfig))
        return ExperimentConfig(model=model, **from_args(args, ExperimentConfig))
