"""The static encoder's one pass (issue 32): model2vec's vectors and full token counts from
one tokenisation per batch, on real KJV text; and the CPU's native-bfloat16 check."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip import threads
from clusterclip.embed.encoders import EncoderSpec, cpu_supports_bfloat16
from clusterclip.embed.static_pass import OnePass, splits_at_spaces
from clusterclip.threads import cpu_flags, native_bfloat16, prefetched, tokenizer_threads

pytest.importorskip("model2vec")


@pytest.fixture(scope="module")
def encoder():
    return EncoderSpec(encoder="static").build()  # distilled once, then cached


@pytest.fixture(scope="module")
def chapters(verses) -> list[str]:
    """Whole KJV chapters: most are longer than model2vec's cut (512 x 6 characters)."""
    by_chapter: dict[tuple[str, int], list[str]] = {}
    for verse in verses:
        by_chapter.setdefault((verse["book"], verse["chapter"]), []).append(verse["text"])
    return [" ".join(texts) for texts in list(by_chapter.values())[::9]]


@pytest.fixture(scope="module")
def texts(verses, chapters) -> list[str]:
    cut = 512 * 6
    odd = [
        "",
        "   ",
        "\u2603\u2603 \u2603",  # no known token at all
        "Ünïcödé façade, naïve café — «guillemets», 日本語のテキスト, Ελληνικά, emoji 🙂",
        "x" * (cut + 500),  # no space before the cut
        "a" * (cut - 1) + " tail of the text",  # the cut lands on the last space
        "b" * cut + " after the cut",  # the space is just past the cut
        " " * (cut + 10) + "end",  # only spaces before the cut
        "In the beginning " * 600,  # cut, and over 512 tokens within the cut
        "a b " * 750,  # over 512 tokens, not cut
        " ".join(verses[i]["text"] for i in range(40)) + " and" * 400,  # the same
        "\t\n".join(verses[i]["text"] for i in range(300)),  # tabs and newlines between words
        "caf" + "e\u0301 " * 2000,  # combining accents on both sides of the cut
        "\u00a0".join(verses[i]["text"] for i in range(200)),  # no-break spaces only
        "日本語" * 2000,  # CJK across the cut
    ]
    return [v["text"] for v in verses[::13]] + chapters + odd


def test_one_pass_gives_model2vec_vectors_and_full_counts(encoder, texts):
    one_pass = encoder._one_pass
    assert isinstance(one_pass, OnePass) and one_pass.split_at_spaces
    vectors, counts = encoder.encode_with_counts(texts)
    reference = encoder.encode(texts)  # model2vec's own StaticModel.encode, unit rows
    assert counts.tolist() == encoder.count_tokens(texts).tolist()  # untruncated
    truncated = np.concatenate(
        [one_pass.tokenise(texts[i : i + 500]).truncated for i in range(0, len(texts), 500)]
    )
    assert truncated.sum() > 100 and (~truncated).sum() > 1000
    # texts model2vec truncates: its vectors exactly (they used to be normalised twice)
    np.testing.assert_array_equal(vectors[truncated], reference[truncated])
    # the others: model2vec rounds its normalised output to float16 once more
    np.testing.assert_allclose(vectors, reference, rtol=0, atol=5e-4)
    nonzero = np.linalg.norm(reference, axis=1) > 0
    assert ((vectors * reference).sum(axis=1)[nonzero] > 0.99999).all()
    assert not np.linalg.norm(vectors[~nonzero], axis=1).any()  # "" and unknown-only: zero rows


def test_counts_of_cut_texts_are_the_same_without_the_space_split(encoder, texts):
    """Counting a cut text from its cut plus the rest after the last space gives the
    count of tokenising it whole (the slow way, forced here)."""
    one_pass = OnePass(encoder.model)
    fast = one_pass.tokenise(texts)
    one_pass.split_at_spaces = False
    slow = one_pass.tokenise(texts)
    assert fast.truncated.sum() > 100
    assert fast.counts.tolist() == slow.counts.tolist()
    assert np.array_equal(fast.ids, slow.ids) and np.array_equal(fast.known, slow.known)


def test_rows_truncated_by_tokens_are_the_gathered_mean_normalised_as_model2vec_does(
    encoder, texts
):
    """Texts over 512 tokens but within the character cut: the mean of their first 512
    gathered float16 rows, normalised in float32 and rounded to float16, as model2vec
    returns it."""
    one_pass = encoder._one_pass
    table, unknown, limit = encoder.model.embedding, one_pass.unknown, one_pass.max_length
    within = [text for text in texts if len(text) <= one_pass.max_chars]
    encodings = one_pass.tokenizer.encode_batch_fast(within, add_special_tokens=False)
    over = [text for text, e in zip(within, encodings, strict=True) if len(e.ids) > limit]
    assert len(over) >= 2
    rows = one_pass.pool(one_pass.tokenise(over))
    for row, text in zip(rows, over, strict=True):
        ids = one_pass.tokenizer.encode(text, add_special_tokens=False).ids[:limit]
        mean = table[[token for token in ids if token != unknown]].mean(axis=0)
        mean32 = mean.astype(np.float32)
        want = (mean32 / (np.linalg.norm(mean32) + 1e-32)).astype(table.dtype)
        np.testing.assert_array_equal(row, want.astype(np.float32), err_msg=text[:40])


def test_splits_at_spaces_only_for_tokenizers_that_never_join_across_one():
    bert = {
        "normalizer": {"type": "BertNormalizer"},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece"},
        "added_tokens": [{"content": "[UNK]"}],
    }
    assert splits_at_spaces(json.dumps(bert))
    assert splits_at_spaces(json.dumps({**bert, "normalizer": None}))
    for part, kind in (("pre_tokenizer", "ByteLevel"), ("pre_tokenizer", "Metaspace"),
                       ("model", "BPE"), ("normalizer", "Precompiled")):  # fmt: skip
        assert not splits_at_spaces(json.dumps({**bert, part: {"type": kind}})), kind
    assert not splits_at_spaces(json.dumps({**bert, "pre_tokenizer": None}))
    assert not splits_at_spaces(json.dumps({**bert, "added_tokens": [{"content": "new york"}]}))


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}, True),  # Sapphire Rapids
        ({"avx512f", "avx512_bf16", "avx512_vnni"}, True),  # Zen 4 / Zen 5
        ({"amx_bf16"}, True),
        ({"avx512f", "avx512bw", "avx512_vnni"}, False),  # Cascade Lake
        ({"avx2", "fma", "sse4_2"}, False),  # Zen 3
        (set(), False),  # no /proc/cpuinfo
    ],
)
def test_native_bfloat16_from_the_flag_set(flags, native):
    assert native_bfloat16(flags) is native
    assert native_bfloat16(frozenset(flags)) is native
    assert native_bfloat16(sorted(flags)) is native


def test_this_machine_bfloat16_answer_is_the_flag_rule():
    if not cpu_flags():
        pytest.skip("no CPU flags listed by this OS")
    assert cpu_supports_bfloat16() == native_bfloat16() == native_bfloat16(cpu_flags())


def test_prefetched_keeps_order_results_and_errors(monkeypatch):
    def square(n: int) -> int:
        if n == 4:
            raise ValueError("four")
        return n * n

    assert list(prefetched(square, range(4))) == [(0, 0), (1, 1), (2, 4), (3, 9)]
    got = []
    with pytest.raises(ValueError, match="four"):
        for item, result in prefetched(square, range(6)):
            got.append((item, result))
    assert got == [(0, 0), (1, 1), (2, 4), (3, 9)]  # raised where item 4 is reached
    monkeypatch.setattr(threads, "available_cpus", lambda: 1)  # no helper thread: inline
    assert list(prefetched(square, [3, 1])) == [(3, 9), (1, 1)]


def test_tokenizer_threads_follow_the_cpus_given(monkeypatch):
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # as Ray sets it for an actor of 3 CPUs
    assert tokenizer_threads() == 3
    assert threads.os.environ["RAYON_NUM_THREADS"] == "3"
    monkeypatch.setenv("RAYON_NUM_THREADS", "5")  # the user's choice stays
    assert tokenizer_threads() == 5
    monkeypatch.delenv("RAYON_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert tokenizer_threads() == threads.available_cpus()
    assert "RAYON_NUM_THREADS" not in threads.os.environ
