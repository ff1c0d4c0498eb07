"""Train a tiny GPT-2 with ``ClusterClipTrainer`` in schedule order; stop at step 5, resume.

The train dataset is the embedded corpus itself (row i = document i), tokenized
with ``Dataset.map``; the Trainer's sampler is the work directory's schedule.
To check the order, the trainer records the document index of every example
it computes a loss on; at the end the interrupted and the resumed run together
must have seen exactly the schedule.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from datasets import load_dataset

from clusterclip.adapters.transformers import ClusterClipTrainer
from clusterclip.io import WorkDir

STOP = 5


class RecordingTrainer(ClusterClipTrainer):
    """ClusterClipTrainer that notes which documents each loss was computed on."""

    seen: list[int] = []

    def compute_loss(self, model, inputs, *args, **kwargs):
        self.seen.extend(inputs.pop("document").tolist())
        return super().compute_loss(model, inputs, *args, **kwargs)


class StopAt(transformers.TrainerCallback):
    """Simulates an interruption: stop after `step` optimizer steps (a checkpoint is saved)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = state.global_step == self.step
        return control


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--tokenizer", required=True, help="tokenizer name or path")
    parser.add_argument("--output-dir", type=Path, required=True)
    args = parser.parse_args()

    # The corpus the work directory embedded, in the same order: row i = document i.
    work = WorkDir(args.workdir)
    corpus = [str(path) for path in work.corpus_files()]
    dataset = load_dataset("json", data_files=corpus, split="train")
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.tokenizer)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    dataset = dataset.map(
        lambda batch, index: {
            **tokenizer(batch["text"], truncation=True, max_length=32),
            "document": index,
        },
        batched=True,
        with_indices=True,
        remove_columns=dataset.column_names,
    )
    pad = transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False)

    def collate(features):
        documents = torch.tensor([f.pop("document") for f in features])
        return {**pad(features), "document": documents}

    def trainer(save_strategy: str = "steps") -> RecordingTrainer:
        torch.manual_seed(0)
        config = transformers.GPT2Config(
            vocab_size=len(tokenizer), n_positions=32, n_embd=32, n_layer=2, n_head=2
        )
        training = transformers.TrainingArguments(
            output_dir=str(args.output_dir),
            per_device_train_batch_size=8,
            gradient_accumulation_steps=2,
            num_train_epochs=1,  # one pass over the schedule is the whole run
            learning_rate=3e-3,
            save_steps=STOP,
            logging_steps=10,
            report_to=[],
            disable_tqdm=True,
            remove_unused_columns=False,  # keeps `document` for the check
            use_cpu=True,
            save_strategy=save_strategy,
        )
        return RecordingTrainer(
            model=transformers.GPT2LMHeadModel(config),
            args=training,
            train_dataset=dataset,
            data_collator=collate,
            schedule=args.workdir,  # the work directory of `clusterclip run`
        )

    first = trainer()
    first.add_callback(StopAt(STOP))
    first.seen = []
    first.train()
    print(f"interrupted after step {first.state.global_step}: {len(first.seen)} documents")

    resumed = trainer(save_strategy="no")  # (a real run keeps saving checkpoints)
    resumed.seen = []
    resumed.train(resume_from_checkpoint=str(args.output_dir / f"checkpoint-{STOP}"))
    print(f"resumed to step {resumed.state.global_step}: {len(resumed.seen)} more documents")

    schedule = np.asarray(work.schedule().indices).tolist()
    if first.seen + resumed.seen != schedule:
        print("FAILED: the documents trained on are not the schedule", file=sys.stderr)
        return 1
    print(f"ok: Trainer read all {len(schedule)} schedule positions in order across the resume")
    return 0


if __name__ == "__main__":
    sys.exit(main())
