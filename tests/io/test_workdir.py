"""WorkDir: every accessor in index order, stale stages refused, the corpus re-read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.errors import ClusterClipError
from clusterclip.io import ARTIFACTS, WorkDir
from tests.product_support import make_workdir, run_small_workdir


def _shuffle_parquet(path, seed: int) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    order = np.random.default_rng(seed).permutation(table.num_rows)
    pq.write_table(table.take(order), path)


@pytest.fixture(scope="module")
def shuffled(tmp_path_factory):
    """A hand-made work directory whose documents and clusters tables are in random row order."""
    made = make_workdir(tmp_path_factory.mktemp("workdir"), step=200)
    _shuffle_parquet(made["workdir"] / ARTIFACTS["documents"], seed=1)
    _shuffle_parquet(made["workdir"] / ARTIFACTS["clusters"], seed=2)
    return made


def _manifest(made) -> tuple:
    path = made["workdir"] / ARTIFACTS["manifest"]
    return path, json.loads(path.read_text("utf-8"))


def test_accessors_return_index_order(shuffled):
    work = WorkDir(shuffled["workdir"])
    rows, labels = shuffled["rows"], shuffled["labels"]
    n = len(rows)
    documents = work.documents(["id", "source", "line"])
    assert documents.column_names == ["id", "source", "line"]
    assert documents.column("id").to_pylist() == [(r or {}).get("id") for *_, r in rows]
    assert documents.column("line").to_pylist() == [line for _s, line, _raw, _r in rows]
    assert work.documents(["status"]).column_names == ["status"]
    assert work.documents().column("index").to_pylist() == list(range(n))
    assert work.n_documents() == n
    np.testing.assert_array_equal(work.labels(), labels)
    assert work.labels().dtype == np.int32
    assert work.scores().dtype == np.float32 and len(work.scores()) == n
    np.testing.assert_array_equal(work.ok_mask(), labels >= 0)
    expected_tokens = [len(r["text"].split()) if r and r.get("text") else 0 for *_, r in rows]
    np.testing.assert_array_equal(work.n_tokens(), expected_tokens)
    assert work.status_counts() == {"ok": int((labels >= 0).sum()), "malformed": 1, "empty": 1}
    assert work.n_clusters() == len(shuffled["books"]) == work.centroids().shape[0]
    schedule = work.schedule()
    np.testing.assert_array_equal(schedule.indices, shuffled["indices"])
    assert isinstance(schedule.indices, np.memmap)
    assert schedule.config["policy"] == "clusterclip"


def test_the_corpus_reader_yields_the_embedded_records(shuffled):
    work = WorkDir(shuffled["workdir"])
    records = list(work.corpus())
    assert [r.index for r in records] == list(range(len(shuffled["rows"])))
    assert [r.raw for r in records] == [record for *_, record in shuffled["rows"]]
    assert [r.status for r in records][3] == "malformed"
    assert work.corpus_files() == shuffled["sources"]


def test_the_record_store_holds_each_document_bytes(shuffled):
    records, offsets = WorkDir(shuffled["workdir"]).record_store()
    for index, (source, _line, raw, record) in enumerate(shuffled["rows"]):
        data = bytes(records[offsets[index, 0] : offsets[index, 1]]).decode("utf-8")
        if source.endswith(".parquet"):
            assert json.loads(data) == record
        else:
            assert data == raw


def test_stale_labels_are_refused(tmp_path):
    made = make_workdir(tmp_path, step=400)
    path, manifest = _manifest(made)
    manifest["stages"]["embed"]["outputs"]["documents"] = "0" * 32  # re-embedded since
    path.write_text(json.dumps(manifest))
    work = WorkDir(made["workdir"])
    with pytest.raises(ClusterClipError, match=r"the cluster outputs in .* are stale: embed.doc"):
        work.labels()
    with pytest.raises(ClusterClipError, match=r"the cluster outputs in .* are stale"):
        work.scores()


def test_a_stale_schedule_is_refused(tmp_path):
    made = make_workdir(tmp_path, step=400)
    path, manifest = _manifest(made)
    manifest["stages"]["cluster"]["outputs"]["clusters"] = "0" * 32  # re-clustered since
    path.write_text(json.dumps(manifest))
    with pytest.raises(
        ClusterClipError, match=r"the schedule outputs in .* are stale: cluster.clusters changed"
    ):
        WorkDir(made["workdir"]).schedule()


def test_a_corpus_with_another_record_count_is_refused(tmp_path):
    import pyarrow.parquet as pq

    made = make_workdir(tmp_path, step=400)
    documents = made["workdir"] / ARTIFACTS["documents"]
    table = pq.read_table(documents)
    pq.write_table(table.slice(0, table.num_rows - 1), documents)
    stream = WorkDir(made["workdir"]).corpus()
    with pytest.raises(ClusterClipError, match=r"yields [\d,]+\+ records but [\d,]+ were embedded"):
        list(stream)


def test_an_index_column_that_is_no_permutation_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    made = make_workdir(tmp_path, step=400)
    documents = made["workdir"] / ARTIFACTS["documents"]
    table = pq.read_table(documents)
    index = np.arange(table.num_rows)
    index[-1] = 0
    table = table.set_column(0, "index", pa.array(index, pa.int64()))
    pq.write_table(table, documents)
    with pytest.raises(ClusterClipError, match=r"column 'index' is not a permutation"):
        WorkDir(made["workdir"]).documents()


def test_an_in_memory_corpus_cannot_be_re_read(tmp_path):
    made = make_workdir(tmp_path, step=400)
    path, manifest = _manifest(made)
    manifest["stages"]["embed"]["config"]["inputs"] = ["<dataset>"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(ClusterClipError, match=r"read an in-memory dataset.*apply_schedule"):
        WorkDir(made["workdir"]).corpus()


def test_missing_artifacts_name_the_command(tmp_path):
    work = WorkDir(tmp_path)
    with pytest.raises(ClusterClipError, match=r"documents.parquet not found. Run `clusterclip"):
        work.documents()
    with pytest.raises(ClusterClipError, match=r"no completed `cluster` stage. Run `clusterclip"):
        work.labels()
    with pytest.raises(ClusterClipError, match=r"centroids.npy not found"):
        work.n_clusters()
    with pytest.raises(ClusterClipError, match=r"schedule.npy not found. Build a schedule"):
        work.schedule()
    with pytest.raises(ClusterClipError, match=r"no completed `embed` stage"):
        work.corpus()
    with pytest.raises(ClusterClipError, match=r"unknown work-directory artifact 'labels'"):
        work.path_of("labels")


def test_a_real_pipeline_work_directory(tmp_path):
    made = run_small_workdir(tmp_path / "root", n_lines=120, n_clusters=4)
    work = WorkDir(made["workdir"])
    assert work.embeddings().shape[0] == work.n_documents() == 120
    assert work.embeddings().dtype == np.float16
    texts = [record.text for record in work.corpus()]
    assert texts == [record["text"] for record in made["records"]]
    assert len(work.labels()) == 120 and work.n_clusters() == 4
    assert work.labels().max() < 4
    assert len(work.schedule().indices) > 0
    assert work.report()["summary"]["n_documents"] == 120
