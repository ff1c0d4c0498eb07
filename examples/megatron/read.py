"""Build Megatron-Core's dataset over the exported schedule and read it the way Megatron-LM does.

Megatron-LM builds its training set with ``BlendedMegatronDatasetBuilder(GPTDataset, ...)``
and reads sample indices ``consumed_samples, consumed_samples + 1, ...`` (its
``MegatronPretrainingSampler``, ``--dataloader-type single``). Here the same
builder makes a ``ScheduledGPTDataset`` (``GPTDataset`` without its two
shuffles), a first run reads ``STOP`` global batches, and a second run rebuilt
from scratch continues from ``consumed_samples``, as after a checkpoint.
In Megatron-LM itself: pass ``ScheduledGPTDataset`` instead of ``GPTDataset`` in
``pretrain_gpt.py``'s ``train_valid_test_datasets_provider`` and train with
``--data-path <out>/text_document --split 100,0,0`` and the same tokenizer.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDatasetConfig
from megatron.core.datasets.indexed_dataset import IndexedDataset

from clusterclip.adapters.megatron import ScheduledGPTDataset, recorded_tokenizer

SEQUENCE_LENGTH, GLOBAL_BATCH, STOP = 64, 8, 5


def build(prefix: str):
    config = GPTDatasetConfig(
        random_seed=1234,  # unused: nothing is shuffled
        sequence_length=SEQUENCE_LENGTH,
        blend=([prefix], None),
        split="100,0,0",  # the whole file is the training split, in order
        tokenizer=recorded_tokenizer(prefix),  # Megatron-LM: the tokenizer from its flags
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
    )
    train, _, _ = BlendedMegatronDatasetBuilder(
        ScheduledGPTDataset, [None, None, None], lambda: True, config
    ).build()
    return train


def read(dataset, consumed_samples: int, n_batches: int) -> list[np.ndarray]:
    """Global batches from ``consumed_samples`` on, like MegatronPretrainingSampler."""
    batches = []
    for first in range(consumed_samples, consumed_samples + n_batches * GLOBAL_BATCH, GLOBAL_BATCH):
        if first + GLOBAL_BATCH > len(dataset):
            break
        batches.append(
            np.stack([dataset[i]["tokens"].numpy() for i in range(first, first + GLOBAL_BATCH)])
        )
    return batches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--data-path", required=True, help="<out>/text_document")
    args = parser.parse_args()

    indexed = IndexedDataset(args.data_path)
    print(f"{args.data_path}: {len(indexed)} sequences (schedule positions), "
          f"token dtype {indexed.index.dtype.__name__}")  # fmt: skip
    train = build(args.data_path)
    print(f"ScheduledGPTDataset: {len(train)} samples of {SEQUENCE_LENGTH} tokens")

    first = read(train, 0, STOP)
    consumed_samples = STOP * GLOBAL_BATCH  # what Megatron-LM saves in its checkpoint
    rest = read(build(args.data_path), consumed_samples, len(train))
    stream = np.concatenate([indexed[j] for j in range(len(indexed))])  # the schedule's tokens
    expected = [
        np.stack(
            [
                stream[i * SEQUENCE_LENGTH : (i + 1) * SEQUENCE_LENGTH]
                for i in range(b, b + GLOBAL_BATCH)
            ]
        )
        for b in range(0, len(first + rest) * GLOBAL_BATCH, GLOBAL_BATCH)
    ]
    if not all(np.array_equal(a, b) for a, b in zip(first + rest, expected, strict=True)):
        print("FAILED: the samples are not the schedule's tokens in order", file=sys.stderr)
        return 1
    print(f"ok: {len(first) + len(rest)} global batches read the schedule in order, "
          f"resumed at consumed_samples={consumed_samples}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
