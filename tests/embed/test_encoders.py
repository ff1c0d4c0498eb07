"""Each encoder: unit rows of the right shape, in input order, and meaningful similarity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusterclip.embed.encoders import (
    CPU_BATCH_TOKENS,
    EncoderSpec,
    bucket_length,
    cpu_supports_bfloat16,
    fit_tfidf,
    micro_batch_rows,
)
from clusterclip.errors import ClusterClipError


@pytest.fixture(scope="module")
def labelled(book_verses):
    texts = [text for verses in book_verses.values() for text in verses]
    labels = np.repeat(np.arange(len(book_verses)), [len(v) for v in book_verses.values()])
    return texts, labels


def check_vectors(vectors: np.ndarray, labels: np.ndarray, dim: int) -> None:
    assert vectors.dtype == np.float32 and vectors.shape == (len(labels), dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similarity = vectors @ vectors.T
    same = labels[:, None] == labels[None, :]
    np.fill_diagonal(same, False)
    different = labels[:, None] != labels[None, :]
    # verses of one book are closer to each other than to other books' verses
    assert similarity[same].mean() > similarity[different].mean() + 0.02
    for book in np.unique(labels):
        rows = labels == book
        inside = similarity[np.ix_(rows, rows)].mean()
        assert inside > similarity[np.ix_(rows, ~rows)].mean(), book


def check_order(encoder, texts: list[str], vectors: np.ndarray) -> None:
    """Row i is the vector of text i, whatever the length-sorted batching did."""
    for i in (0, 7, len(texts) - 1):
        alone = encoder.encode([texts[i]])[0]
        assert float(alone @ vectors[i]) > 0.99


def test_tfidf_encoder(tmp_path, labelled, verses):
    texts, labels = labelled
    fit_tfidf([v["text"] for v in verses[::40]], path=tmp_path / "embed-tfidf.npz", seed=0)
    encoder = EncoderSpec(encoder="tfidf", state_dir=str(tmp_path)).build()
    vectors = encoder.encode(texts)
    check_vectors(vectors, labels, encoder.dim)
    check_order(encoder, texts, vectors)
    assert encoder.describe()["fitted_on"] == len(verses[::40])
    tokens = encoder.count_tokens(["In the beginning", "a b c d e"])
    assert tokens.dtype == np.int64 and list(tokens) == [3, 5]


def test_tfidf_needs_its_fit(tmp_path):
    with pytest.raises(ClusterClipError, match="must be fitted first"):
        EncoderSpec(encoder="tfidf", state_dir=str(tmp_path)).build()


def test_static_encoder(labelled, bbc_articles):
    pytest.importorskip("model2vec")
    texts, labels = labelled
    encoder = EncoderSpec(encoder="static").build()  # distilled once, then cached
    vectors = encoder.encode(texts)
    check_vectors(vectors, labels, encoder.dim)
    check_order(encoder, texts, vectors)
    assert encoder.describe()["model"].startswith("model2vec distilled from")
    # long documents (~500 tokens): BBC articles of one topic are closer than across topics
    articles = [a for topic in bbc_articles.values() for a in topic]
    topics = np.repeat(np.arange(len(bbc_articles)), [len(t) for t in bbc_articles.values()])
    check_vectors(encoder.encode(articles), topics, encoder.dim)
    assert encoder.count_tokens([articles[0]])[0] > 200  # untruncated count


def test_static_one_tokenisation_equals_encode_and_count(labelled, bbc_articles):
    pytest.importorskip("model2vec")
    encoder = EncoderSpec(encoder="static").build()
    assert encoder._one_pass  # the load-time check accepted the distilled model
    articles = [a for topic in bbc_articles.values() for a in topic][:20]
    # verses, articles, nothing, no known token, and one text model2vec truncates
    texts = labelled[0] + articles + ["", "\u2603\u2603", "In the beginning " * 600]
    vectors, counts = encoder.encode_with_counts(texts)
    assert counts.tolist() == encoder.count_tokens(texts).tolist()
    assert counts[-1] > encoder.model.max_length  # counted in full, embedded truncated
    # equal up to the float16 rounding of model2vec's own output
    np.testing.assert_allclose(vectors, encoder.encode(texts), rtol=0, atol=5e-4)


def test_static_pooling_equals_numpy_mean_of_gathered_rows(labelled):
    """One gather per batch gives model2vec's gather-and-mean exactly (float16 table)."""
    pytest.importorskip("model2vec")
    encoder = EncoderSpec(encoder="static").build()
    one_pass = encoder._one_pass
    table, unknown = encoder.model.embedding, encoder.model.unk_token_id
    texts = labelled[0] + ["", "\u2603 In \u2603 beginning"]
    ids = [e.ids for e in one_pass.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
    assert any(unknown in row for row in ids)  # the unknown-token path is exercised
    got = one_pass.pool(one_pass.tokenise(texts))
    for i, row in enumerate(ids):
        known = [t for t in row if t != unknown]
        want = table[known].mean(axis=0).astype(np.float32) if known else 0.0
        np.testing.assert_array_equal(got[i], want)


def test_sentence_transformer_encoder(labelled):
    pytest.importorskip("sentence_transformers")
    texts, labels = labelled
    texts, labels = texts[::4], labels[::4]  # 40 verses keep this test quick on CPU
    encoder = EncoderSpec(encoder="sentence-transformers", device="cpu").build()
    assert encoder.dim == 384
    vectors = encoder.encode(texts)
    check_vectors(vectors, labels, 384)
    check_order(encoder, texts, vectors)
    described = encoder.describe()
    assert described["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert described["precision"] == ("bfloat16" if cpu_supports_bfloat16() else "float32")
    assert list(encoder.count_tokens(["In the beginning God created"])) == [5]


def test_cpu_micro_batches_have_fixed_shapes(labelled):
    pytest.importorskip("sentence_transformers")
    texts = labelled[0][::3]
    encoder = EncoderSpec(device="cpu").build()
    assert encoder.batch_tokens == CPU_BATCH_TOKENS
    plan = encoder.micro_batches(texts)
    rows = np.concatenate([members for _, _, members in plan])
    assert sorted(rows.tolist()) == list(range(len(texts)))  # every text exactly once
    _, lengths = encoder._features(texts)
    for length, n_rows, members in plan:
        # the shape is a function of each member's own length only
        assert all(
            bucket_length(n, encoder.model.max_seq_length) == length for n in lengths[members]
        )
        assert n_rows == micro_batch_rows(length, CPU_BATCH_TOKENS) >= len(members)
        assert length * n_rows <= CPU_BATCH_TOKENS or n_rows == 1
    assert [length for length, _, _ in plan] == sorted((p[0] for p in plan), reverse=True)


@pytest.mark.skipif(not cpu_supports_bfloat16(), reason="CPU has no native bfloat16")
def test_bfloat16_matches_float32(labelled):
    pytest.importorskip("sentence_transformers")
    texts = labelled[0][::8]
    fast = EncoderSpec(device="cpu", precision="auto").build().encode(texts)
    exact = EncoderSpec(device="cpu", precision="float32").build().encode(texts)
    cosine = (fast * exact).sum(axis=1)
    assert cosine.min() >= 0.995


def test_cpu_bfloat16_detection_follows_cpuinfo():
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    assert cpu_supports_bfloat16() == ("avx512_bf16" in flags or "amx_bf16" in flags)


def test_spec_validation():
    with pytest.raises(ClusterClipError, match=r"`encoder` must be one of"):
        EncoderSpec(encoder="word2vec")
    with pytest.raises(ClusterClipError, match=r"`batch_size` must be an int in \[1, inf\)"):
        EncoderSpec(batch_size=0)
