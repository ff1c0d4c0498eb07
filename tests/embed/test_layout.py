"""A document's embedding depends on the document alone: never on the shard size, the
batch size or the texts encoded with it (issue 13, item 3), for every encoder."""

from __future__ import annotations

import numpy as np
import pytest
from embed_helpers import write_jsonl
from tests.product_support import require_module

from clusterclip.embed import open_embeddings
from clusterclip.embed.encoders import EncoderSpec, bucket_length, plan_micro_batches


def test_a_texts_micro_batch_shape_ignores_its_neighbours():
    lengths = np.array([3, 13, 37, 70, 130, 250, 256, 17, 17, 17])
    alone = {
        i: plan_micro_batches(lengths[i : i + 1], limit=256, budget=1024)[0][:2] for i in range(10)
    }
    plan = plan_micro_batches(lengths, limit=256, budget=1024)
    for length, n_rows, members in plan:
        for i in members:
            assert alone[i] == (length, n_rows)
    assert all(bucket_length(n, 256) >= min(n, 256) for n in range(1, 600))
    # the padding adds at most 1/8 of a text's tokens above 32 tokens
    assert all(bucket_length(n, 4096) <= n * 1.125 for n in range(32, 4096))


def _kjv(verses, count=300):
    step = len(verses) // count
    return [{"id": v["id"], "text": v["text"]} for v in verses[::step][:count]]


@pytest.mark.slow
def test_transformer_vectors_ignore_neighbours_fp32(verses):
    require_module("sentence_transformers", "embed")
    texts = [v["text"] for v in _kjv(verses, 40)]
    encoder = EncoderSpec(device="cpu", precision="float32").build()
    together = encoder.encode(texts)
    order = np.random.default_rng(0).permutation(len(texts))
    shuffled = np.empty_like(together)
    shuffled[order] = encoder.encode([texts[i] for i in order])
    alone = np.concatenate([encoder.encode([text]) for text in texts[:6]])
    assert together.tobytes() == shuffled.tobytes()
    assert together[:6].tobytes() == alone.tobytes()


@pytest.mark.slow
def test_transformer_vectors_ignore_neighbours_bfloat16(verses):
    require_module("sentence_transformers", "embed")
    # on CPUs without native bf16 torch emulates it (slow): a handful of texts
    texts = [v["text"] for v in _kjv(verses, 300)][:5]
    encoder = EncoderSpec(device="cpu", precision="bfloat16").build()
    together = encoder.encode(texts)
    alone = np.concatenate([encoder.encode([text]) for text in texts[:2]])
    assert together[:2].tobytes() == alone.tobytes()


def _run(root, corpus, *, encoder, shard_size, batch_size=None, cli=False):
    import clusterclip
    from clusterclip.cli import main

    work = root / f"w-{encoder}-{shard_size}-{batch_size}"
    if cli:
        args = ["embed", str(corpus), "--workdir", str(work), "--encoder", encoder]
        args += ["--shard-size", str(shard_size)]
        args += ["--batch-size", str(batch_size)] if batch_size else []
        assert main(args) == 0
    else:
        clusterclip.embed(
            corpus, workdir=work, encoder=encoder, shard_size=shard_size, batch_size=batch_size
        )
    result = clusterclip.cluster(work, n_clusters=8, seed=0)
    matrix = np.asarray(open_embeddings(work)[:])
    return matrix, result.labels


@pytest.mark.slow
def test_transformer_embeddings_and_labels_identical_across_shard_and_batch_size(
    tmp_path, verses, monkeypatch
):
    require_module("sentence_transformers", "embed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    corpus = write_jsonl(tmp_path / "kjv.jsonl", _kjv(verses))
    runs = [
        _run(tmp_path, corpus, encoder="sentence-transformers", shard_size=1000),
        _run(tmp_path, corpus, encoder="sentence-transformers", shard_size=50, batch_size=7,
             cli=True),
        _run(tmp_path, corpus, encoder="sentence-transformers", shard_size=1000, batch_size=64),
    ]  # fmt: skip
    (first, labels), *others = runs
    assert first.shape == (300, 384)
    for matrix, other_labels in others:
        assert matrix.tobytes() == first.tobytes()
        assert other_labels.tobytes() == labels.tobytes()


@pytest.mark.parametrize("encoder", ["static", "tfidf"])
def test_static_and_tfidf_identical_across_shard_and_batch_size(tmp_path, verses, encoder):
    require_module("model2vec" if encoder == "static" else "sklearn", encoder)
    corpus = write_jsonl(tmp_path / "kjv.jsonl", _kjv(verses))
    first, labels = _run(tmp_path, corpus, encoder=encoder, shard_size=1000)
    for shard_size, batch_size in ((50, 7), (1000, 64)):
        matrix, other = _run(
            tmp_path, corpus, encoder=encoder, shard_size=shard_size, batch_size=batch_size
        )
        assert matrix.tobytes() == first.tobytes()
        assert other.tobytes() == labels.tobytes()
