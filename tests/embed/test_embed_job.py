"""The embed job end to end (tfidf encoder: fast), accounting, manifest, rerun rules."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from embed_helpers import write_jsonl

import clusterclip
from clusterclip.embed import open_embeddings
from clusterclip.errors import ClusterClipError, MissingDependencyError
from clusterclip.io import fingerprint_file, read_stage
from clusterclip.io.readers import fingerprint_input

BROKEN = [
    b'{"id": "x1", "text": "unterminated',
    b'{"id": "x2", "body": "no text field"}',
    b'{"id": "x3", "text": 42}',
    b'{"id": "x4", "text": ""}',
    b'{"id": "x5", "text": "caf\xe9 and bad bytes"}',
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, verses):
    """400 real verses in two files, the second with broken records in the middle."""
    root = tmp_path_factory.mktemp("corpus")
    write_jsonl(root / "a.jsonl", verses[:200])
    good = [json.dumps(v).encode() for v in verses[200:400]]
    lines = good[:100] + BROKEN + good[100:]
    (root / "b.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return root


@pytest.fixture(scope="module")
def result(corpus, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("w")
    return workdir, clusterclip.embed(corpus, workdir=workdir, encoder="tfidf", shard_size=64)


def test_index_and_rejects_account_for_every_record(result, corpus, verses):
    workdir, out = result
    documents = out.documents.to_pydict()
    assert out.documents.column_names == [
        "index", "source", "line", "id", "n_chars", "n_tokens", "status"
    ]  # fmt: skip
    assert documents["index"] == list(range(405))
    assert out.summary["counts"] == {
        "ok": 401, "empty": 1, "malformed": 1, "missing_field": 1, "not_text": 1
    }  # fmt: skip
    assert out.summary["replaced_utf8_lines"] == 1
    rejects = [json.loads(line) for line in (workdir / "rejects.jsonl").read_text().splitlines()]
    assert [(r["source"], r["line"], r["status"]) for r in rejects] == [
        (str(corpus / "b.jsonl"), 101, "malformed"),
        (str(corpus / "b.jsonl"), 102, "missing_field"),
        (str(corpus / "b.jsonl"), 103, "not_text"),
        (str(corpus / "b.jsonl"), 104, "empty"),
    ]
    assert all(r["reason"] for r in rejects)
    status = np.array(documents["status"])
    tokens = np.array(documents["n_tokens"])
    assert (tokens[status == "ok"] > 0).all() and (tokens[status != "ok"] == 0).all()
    # counted where the encoder ran, in shards of 64, yet row for row the encoder's count
    from clusterclip.embed.encoders import EncoderSpec

    counter = EncoderSpec(encoder="tfidf", state_dir=str(workdir)).build()
    first = [v["text"] for v in verses[:200]]
    assert tokens[:200].tolist() == counter.count_tokens(first).tolist()
    assert documents["id"][0] == "Genesis 1:1" and documents["line"][200] == 1


def test_embeddings_are_unit_rows_in_index_order_with_zero_rejects(result):
    workdir, out = result
    matrix = out.embeddings
    assert matrix.shape == (405, out.summary["dim"]) and matrix.dtype == np.float16
    assert len(list((workdir / "embeddings").glob("part-*.npy"))) == 7  # ceil(405 / 64)
    norms = np.linalg.norm(matrix[:].astype(np.float32), axis=1)
    ok = np.array(out.documents.column("status").to_pylist()) == "ok"
    np.testing.assert_allclose(norms[ok], 1.0, atol=2e-3)
    assert (norms[~ok] == 0).all()
    assert open_embeddings(workdir).shape == matrix.shape


def test_manifest_records_config_inputs_outputs(result, corpus):
    workdir, out = result
    entry = read_stage(workdir, "embed")
    assert entry["complete"] is True
    config = entry["config"]
    assert entry["sources"] == [str(corpus / "a.jsonl"), str(corpus / "b.jsonl")]
    assert (config["text_field"], config["id_field"], config["encoder"]) == (None, None, "tfidf")
    assert entry["summary"]["text_fields"] == {"text": 401}
    # Inputs are keyed by position, not path (content decides freshness: issue 29).
    assert entry["inputs"] == {
        f"corpus file {i + 1}": fingerprint_input(path) for i, path in enumerate(entry["sources"])
    }
    assert entry["outputs"]["documents"] == fingerprint_file(workdir / "documents.parquet")
    assert entry["counts"]["ok"] == 401 and entry["dim"] == out.summary["dim"]
    assert entry["encoder"]["encoder"] == "tfidf" and "numpy" in entry["versions"]
    assert not (workdir / ".embed-state").exists()


def test_rerun_is_free_and_changes_are_refused(corpus, tmp_path, verses):
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "v.jsonl", verses[:300])
    workdir = tmp_path / "w"
    first = clusterclip.embed(data, workdir=workdir, encoder="tfidf", shard_size=100)
    stamp = (workdir / "embeddings" / "part-00000.npy").stat().st_mtime_ns
    again = clusterclip.embed(data, workdir=workdir, encoder="tfidf", shard_size=100)
    assert again.summary.get("up_to_date") is True
    assert (workdir / "embeddings" / "part-00000.npy").stat().st_mtime_ns == stamp
    with pytest.raises(ClusterClipError, match=r"shard_size: 100 -> 50\).*--overwrite"):
        clusterclip.embed(data, workdir=workdir, encoder="tfidf", shard_size=50)
    write_jsonl(data / "v.jsonl", verses[:301])
    with pytest.raises(ClusterClipError, match=r"input .*v\.jsonl changed"):
        clusterclip.embed(data, workdir=workdir, encoder="tfidf", shard_size=100)
    redone = clusterclip.embed(
        data, workdir=workdir, encoder="tfidf", shard_size=100, overwrite=True
    )
    assert redone.embeddings.shape[0] == 301 == first.embeddings.shape[0] + 1


def test_strict_fails_with_file_and_line_before_writing_embeddings(corpus, tmp_path):
    with pytest.raises(ClusterClipError, match=r"b\.jsonl:101: malformed"):
        clusterclip.embed(corpus, workdir=tmp_path / "w", encoder="tfidf", strict=True)
    assert not (tmp_path / "w" / "documents.parquet").exists()


def test_hugging_face_dataset_input(tmp_path, verses):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_list(verses[:120])
    out = clusterclip.embed(dataset, workdir=tmp_path / "w", encoder="tfidf", shard_size=50)
    assert out.embeddings.shape[0] == 120
    assert set(out.documents.column("source").to_pylist()) == {"<dataset>"}
    assert pq.read_table(tmp_path / "w" / "documents.parquet").num_rows == 120


def test_engines_are_looked_up_in_the_registry(tmp_path, verses):
    write_jsonl(tmp_path / "v.jsonl", verses[:20])
    with pytest.raises(ClusterClipError, match=r"`engine` must be one of \['local', 'ray'\]"):
        clusterclip.embed(tmp_path / "v.jsonl", workdir=tmp_path / "w", engine="spark")
    if importlib.util.find_spec("clusterclip.engines") is None:
        with pytest.raises(MissingDependencyError, match=r"pip install 'clusterclip\[ray\]'"):
            clusterclip.embed(tmp_path / "v.jsonl", workdir=tmp_path / "w", engine="ray")


def test_open_embeddings_without_the_stage_says_what_to_run(tmp_path):
    with pytest.raises(ClusterClipError, match="no completed `embed` stage"):
        open_embeddings(tmp_path)


@pytest.mark.parametrize("progress", ["0", "1"])
def test_truncated_gzip_fails_before_anything_is_embedded(tmp_path, verses, monkeypatch, progress):
    import gzip

    monkeypatch.setenv("CLUSTERCLIP_PROGRESS", progress)
    data = gzip.compress("".join(json.dumps(v) + "\n" for v in verses[:3000]).encode())
    corpus = tmp_path / "cut.jsonl.gz"
    corpus.write_bytes(data[: len(data) // 2])
    with pytest.raises(ClusterClipError, match=r"cut\.jsonl\.gz is truncated or corrupt after"):
        clusterclip.embed(corpus, workdir=tmp_path / "w", encoder="tfidf", shard_size=100)
    assert not list((tmp_path / "w").glob("embeddings/part-*.npy"))
    assert read_stage(tmp_path / "w", "embed") is None
