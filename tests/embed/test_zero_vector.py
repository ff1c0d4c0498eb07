"""Documents whose embedding has a zero norm (issue 32): recorded as ``zero_vector``,
counted and listed like the reader's rejects, and left out by the cluster stage, which
used to refuse the whole run over one such row."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from embed_helpers import write_jsonl

import clusterclip
from clusterclip.cli.embed import format_summary
from clusterclip.embed.base import zero_norm_rows
from clusterclip.embed.encoders import EncoderSpec
from clusterclip.embed.worker import ZERO_VECTOR, ShardWorker, embed_shard
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.io.readplan import plan_reads

#: The fortunes document (zippy:361) whose tfidf projection was 1e-27 on a 1,000-document
#: sample: its words occur nowhere else, so its direction is not among the 256 kept.
ZIPPY = "Nipples, dimples, knuckles, NICKLES, wrinkles, pimples!!"
NO_WORD = "!!! ... ??? -- ***"  # no token of the tfidf token pattern at all
UNKNOWN = "\u2603\u2603 \u2603"  # snowmen: no token the static model knows


class FixedRows:
    """An encoder that returns the rows it was given (what a user model might return)."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows, self.dim = rows, rows.shape[1]

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.rows[: len(texts)]

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        return np.full(len(texts), 3, dtype=np.int64)


def test_zero_norm_rows_flags_zero_and_underflowing_rows():
    rows = np.array(
        [[0.6, 0.8, 0.0], [1e-27, 1e-27, -1e-27], [0.0, 0.0, 0.0], [1e-20, 0.0, 0.0]],
        dtype=np.float32,
    )
    assert np.linalg.norm(rows[1].astype(np.float64)) > 0  # not zero, but its squares underflow
    assert zero_norm_rows(rows).tolist() == [False, True, True, False]
    assert zero_norm_rows(rows.astype(np.float16)).tolist() == [False, True, True, True]
    assert zero_norm_rows(np.zeros((0, 3), dtype=np.float16)).tolist() == []


def test_embed_shard_zeroes_rows_without_a_direction_in_float32_or_float16():
    unit = np.full(4, 0.5, dtype=np.float32)
    rows = np.stack([unit, unit * 1e-27, unit * 1e-10, np.zeros(4, np.float32), unit * 1e-3])
    vectors, tokens = embed_shard(FixedRows(rows), ["a", "b", "c", "d", "e"])
    assert vectors.dtype == np.float16 and tokens.tolist() == [3] * 5
    # 1e-10 has a float32 norm but none left in float16; 5e-4 survives the cast
    assert zero_norm_rows(vectors).tolist() == [False, True, True, True, False]
    assert not vectors[1:4].any() and vectors[4].any()
    np.testing.assert_array_equal(vectors[0], unit.astype(np.float16))


@pytest.fixture(scope="module")
def tfidf_run(tmp_path_factory, verses):
    """1,000 real verses, the fortunes document the SVD drops, and one without a word.

    Among these verses zippy's projection is rounding residue of about 1e-15 (no underflow):
    the tfidf encoder zeroes it (``TFIDF_RESIDUE``) instead of scaling it to unit length.
    """
    root = tmp_path_factory.mktemp("zero")
    records = [{"id": v["id"], "text": v["text"]} for v in verses[:1000]]
    records.insert(400, {"id": "zippy:361", "text": ZIPPY})
    records.insert(700, {"id": "no-word", "text": NO_WORD})
    corpus = write_jsonl(root / "corpus.jsonl", records)
    workdir = root / "w"
    result = clusterclip.embed(corpus, workdir=workdir, encoder="tfidf", shard_size=128)
    return corpus, workdir, result


def test_tfidf_documents_without_a_direction_are_zero_vector_and_counted(tfidf_run):
    corpus, workdir, result = tfidf_run
    documents = result.documents.to_pydict()
    status = np.array(documents["status"])
    assert np.flatnonzero(status != "ok").tolist() == [400, 700]
    assert status[[400, 700]].tolist() == [ZERO_VECTOR, ZERO_VECTOR]
    assert result.summary["counts"] == {
        "ok": 1000, "empty": 0, "malformed": 0, "missing_field": 0, "not_text": 0,
        "zero_vector": 2,
    }  # fmt: skip
    assert documents["n_tokens"][400] == documents["n_chars"][400] == 0  # 0 unless ok
    assert not np.asarray(result.embeddings[[400, 700]]).any()
    rejects = [json.loads(line) for line in (workdir / "rejects.jsonl").read_text().splitlines()]
    assert [(r["index"], r["line"], r["status"]) for r in rejects] == [
        (400, 401, ZERO_VECTOR), (700, 701, ZERO_VECTOR),
    ]  # fmt: skip
    assert rejects[0]["reason"].startswith("the tfidf encoder gave its text (")
    assert "zero norm" in rejects[0]["reason"]
    assert WorkDir(workdir).status_counts() == {"ok": 1000, ZERO_VECTOR: 2}
    summary = format_summary(str(workdir), result.summary)
    assert "not_text 0, zero_vector 2" in summary
    assert "2 document(s) with text got an all-zero embedding (zero_vector)" in summary


def test_cluster_stage_leaves_zero_vector_documents_out(tfidf_run):
    _, workdir, _ = tfidf_run
    clustered = clusterclip.cluster(workdir, n_clusters=8, seed=0, backend="numpy")
    assert clustered.labels[[400, 700]].tolist() == [-1, -1]
    assert (np.delete(clustered.labels, [400, 700]) >= 0).all()
    assert clustered.summary["excluded_documents"] == 2


def test_tfidf_zeroes_a_residue_projection_and_keeps_the_rest_unit_rows(tfidf_run):
    """The residue rule touches only the projections that are rounding noise."""
    _, workdir, result = tfidf_run
    encoder = EncoderSpec(encoder="tfidf", state_dir=str(workdir)).build()
    rows = encoder.encode([ZIPPY, NO_WORD, "In the beginning God created the heaven."])
    assert np.linalg.norm(rows, axis=1).round(5).tolist() == [0.0, 0.0, 1.0]
    ok = np.asarray(result.embeddings[:400], dtype=np.float32)
    np.testing.assert_allclose(np.linalg.norm(ok, axis=1), 1.0, atol=2e-3)


def test_a_finished_shard_read_again_counts_its_zero_vectors(tfidf_run):
    """A resumed run reads finished shards only for the statistics: the same counts."""
    corpus, workdir, _ = tfidf_run
    read_options = {"text_field": None, "id_field": None, "strict": False}
    spec = EncoderSpec(encoder="tfidf", state_dir=str(workdir))
    worker = ShardWorker(spec, str(workdir), read_options)
    task = list(plan_reads([corpus]).shards(128))[3]  # documents 384..511: zippy's
    written, _ = worker(task)
    again, _ = worker(dataclasses.replace(task, write=False))
    assert written.counts == again.counts == {"ok": 127, ZERO_VECTOR: 1}
    assert written.examples == again.examples
    assert again.examples[ZERO_VECTOR].startswith(f"{corpus}:401: the tfidf encoder")


@pytest.fixture(scope="module")
def static_encoder():
    pytest.importorskip("model2vec")
    return EncoderSpec(encoder="static").build()  # distilled once, then cached


def test_static_text_of_unknown_tokens_is_zero_vector(tmp_path, verses, static_encoder):
    records = [{"text": v["text"]} for v in verses[:20]] + [{"text": UNKNOWN}]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", records)
    result = clusterclip.embed(corpus, workdir=tmp_path / "w", encoder="static")
    assert result.documents.column("status").to_pylist()[-1] == ZERO_VECTOR
    assert result.summary["counts"]["ok"] == 20 and result.summary["counts"][ZERO_VECTOR] == 1
    clustered = clusterclip.cluster(tmp_path / "w", n_clusters=2, seed=0, backend="numpy")
    assert clustered.labels[-1] == -1 and (clustered.labels[:-1] >= 0).all()


def test_a_corpus_of_zero_vectors_only_is_an_error_that_accounts_for_them(tmp_path, static_encoder):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"text": UNKNOWN}] * 3)
    with pytest.raises(
        ClusterClipError,
        match=r"no usable document in .*: 3 records: 0 ok, 3 zero_vector \(first: "
        r".*corpus.jsonl:1: the static encoder gave its text .*\)\. The encoder gave every "
        r"text an all-zero embedding",
    ):
        clusterclip.embed(corpus, workdir=tmp_path / "w", encoder="static")
    assert (tmp_path / "w" / "rejects.jsonl").read_text().count(f'"status": "{ZERO_VECTOR}"') == 3


def test_strict_stops_at_a_zero_vector_with_its_line(tmp_path, verses):
    records = [{"text": v["text"]} for v in verses[:10]] + [{"text": NO_WORD}]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", records)
    with pytest.raises(
        ClusterClipError,
        match=r"corpus.jsonl:11: zero_vector: the tfidf encoder gave its text \(\d+ tokens\) "
        r"an embedding with a zero norm .*run without --strict to record it in rejects.jsonl",
    ):
        clusterclip.embed(corpus, workdir=tmp_path / "w", encoder="tfidf", strict=True)
