"""The artifact handles of clusterclip.io.artifacts: schema, writer, readers, freshness.

Real files on disk, written by the handles and read back through them and
through ``WorkDir``'s accessors; the schedule's one loader is checked against the
adapters that use it.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import clusterclip
from clusterclip.errors import ClusterClipError
from clusterclip.io import ARTIFACTS, WorkDir, fingerprint_file, register_artifacts
from clusterclip.io.artifacts import (
    CLUSTER_COLUMNS,
    DOCUMENT_COLUMNS,
    DUPLICATE_COLUMNS,
    LEVEL_PREFIX,
    ClustersArtifact,
    DocumentsArtifact,
    DuplicatesArtifact,
    EmbeddingsArtifact,
    KeywordState,
    ReportArtifact,
    ScheduleArtifact,
    level_column,
)
from tests.product_support import make_workdir

pq = pytest.importorskip("pyarrow.parquet")

SRC = Path(clusterclip.__file__).parent
#: How pyarrow prints a type -> the name the schemas use (``pyarrow.<name>()``).
ARROW_NAMES = {"int64": "int64", "int32": "int32", "float": "float32", "string": "string"}


def task_rows(first: int, count: int, *, bad: int | None = None) -> dict[str, list]:
    """The index rows of one embed task: documents ``first .. first+count-1``."""
    indices = list(range(first, first + count))
    status = ["ok" if i != bad else "empty" for i in indices]
    return {
        "index": indices,
        "source": ["corpus.jsonl"] * count,
        "line": [i + 1 for i in indices],
        "id": [f"doc-{i}" for i in indices],
        "n_chars": [0 if s != "ok" else 10 + i for i, s in zip(indices, status, strict=True)],
        "n_tokens": [0 if s != "ok" else 3 for s in status],
        "status": status,
        "reason": [None if s == "ok" else "no text" for s in status],
    }


def test_fragments_written_in_any_order_merge_into_the_same_index(tmp_path):
    # Tasks finishing out of order (parallel workers) give the same files as in order.
    merged = {}
    for name, order in (("in-order", [0, 1, 2]), ("reversed", [2, 0, 1])):
        documents = DocumentsArtifact(tmp_path / name)
        for task in order:
            documents.write_fragment(task, task_rows(task * 4, 4, bad=5))
        assert [p.name for p in documents.fragment_paths()] == [
            "index-00000.parquet", "index-00001.parquet", "index-00002.parquet",
        ]  # fmt: skip
        counts = documents.merge(3)
        assert counts == {"ok": 11, "empty": 1}
        merged[name] = (documents.path.read_bytes(), documents.rejects_path.read_bytes())
    assert merged["in-order"] == merged["reversed"]
    rejects = [json.loads(line) for line in merged["in-order"][1].decode().splitlines()]
    assert rejects == [
        {"index": 5, "source": "corpus.jsonl", "line": 6, "status": "empty", "reason": "no text"}
    ]


def test_documents_schema_and_readers(tmp_path):
    documents = DocumentsArtifact(tmp_path)
    fingerprint = documents.write(task_rows(0, 6, bad=2))
    assert fingerprint == fingerprint_file(tmp_path / "documents.parquet")
    schema = pq.read_schema(documents.path)
    assert [(f.name, ARROW_NAMES[str(f.type)]) for f in schema] == list(DOCUMENT_COLUMNS)
    assert not (tmp_path / ".embed-state").exists()  # the one fragment is gone
    work = WorkDir(tmp_path)
    assert work.ok_mask().tolist() == [True, True, False, True, True, True]
    assert work.n_tokens().tolist() == [3, 3, 0, 3, 3, 3]
    assert work.status_counts() == {"empty": 1, "ok": 5}
    assert documents.n_rows() == 6
    assert documents.read(["id"]).column_names == ["id"]


def test_embedding_parts_by_task(tmp_path):
    parts = EmbeddingsArtifact(tmp_path)
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((7, 4)).astype(np.float16)
    parts.write_part(1, rows[4:])
    parts.write_part(0, rows[:4])
    assert parts.part_rows(0) == 4 and parts.part_rows(1) == 3 and parts.part_rows(2) is None
    assert parts.fingerprint() == parts.fingerprint(2) != parts.fingerprint(1)
    WorkDir(tmp_path).record("embed", {"complete": True, "counts": {"ok": 7}, "outputs": {}})
    np.testing.assert_array_equal(parts.read()[:], rows)
    with pytest.raises(ClusterClipError, match=r"must be a 2-D float16 array; got float32"):
        parts.write_part(2, rows.astype(np.float32))
    (tmp_path / "embeddings" / "part-00001.npy").write_bytes(b"\x93NUMPY")
    assert "part-00001.npy" in parts.damaged()
    with pytest.raises(ClusterClipError, match=r"part-00001.npy .*Redo the embed stage"):
        parts.read()


def test_assignment_parts_by_task(tmp_path):
    """Parts written in any order (a retried task overwriting its own) read back in row
    order; a missing or short part is refused by name; clearing removes only the parts."""
    clusters = ClustersArtifact(tmp_path)
    labels = np.array([4, 0, -1, 2, 2, 1, 3], dtype=np.int64)
    scores = np.linspace(0, 1, 7)
    blocks = [(0, 3), (3, 2), (5, 2)]
    for first, rows in reversed(blocks):
        clusters.write_part(first, np.zeros(rows), np.zeros(rows))  # a first, lost attempt
        clusters.write_part(first, labels[first : first + rows], scores[first : first + rows])
    got_labels, got_scores = clusters.read_parts(blocks)
    assert got_labels.dtype == np.int32 and got_labels.tolist() == labels.tolist()
    np.testing.assert_array_equal(got_scores, scores.astype(np.float32))
    with pytest.raises(
        ClusterClipError, match=r"assigned-000000000007.npz \(rows 7..8\) is missing"
    ):
        clusters.read_parts([*blocks, (7, 2)])
    with pytest.raises(ClusterClipError, match=r"holds 2 rows where 3 were planned"):
        clusters.read_parts([(0, 3), (3, 3)])
    with pytest.raises(ClusterClipError, match=r"one length; got shapes \(2,\) and \(3,\)"):
        clusters.write_part(9, np.zeros(2), np.zeros(3))
    (clusters.parts_folder / "notes.txt").write_text("not ours")
    clusters.clear_parts()
    assert sorted(p.name for p in clusters.parts_folder.iterdir()) == ["notes.txt"]
    (clusters.parts_folder / "notes.txt").unlink()
    clusters.write_part(0, labels, scores)
    clusters.clear_parts()
    assert not clusters.parts_folder.exists()


def test_keyword_state_of_two_descriptions_at_once(tmp_path, monkeypatch):
    """Each description has its own folder; clearing one leaves the other; the last one
    removes ``.keyword-state``. A work directory this process may not write to gets a
    temporary folder on the local engine only."""
    work = WorkDir(tmp_path)
    first, second = KeywordState.of(work), KeywordState.of(work)
    assert first.root == second.root == tmp_path / ".keyword-state" and first.run != second.run
    first.write_labels(np.array([3, -1, 0]))
    second.write_labels(np.array([1]))
    first.write_part(65536, {"counts": np.arange(4), "words": np.array("a\nb")})
    assert first.labels().dtype == np.int32 and first.labels().tolist() == [3, -1, 0]
    part = first.read_part(65536)
    assert part["counts"].tolist() == [0, 1, 2, 3] and str(part["words"]) == "a\nb"
    with pytest.raises(ClusterClipError, match=r"words-000000000000.npz is missing"):
        first.read_part(0)
    first.clear()
    assert second.labels().tolist() == [1] and not first.folder.exists()
    second.clear()
    assert not (tmp_path / ".keyword-state").exists()
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # a read-only work directory
    local = KeywordState.of(work, local=True)
    assert KeywordState.of(work).root == tmp_path / ".keyword-state"  # Ray: must be shared
    assert not local.root.is_relative_to(tmp_path)
    local.write_labels(np.zeros(2))
    local.clear()
    assert not local.root.exists()


def _record_cluster(work: WorkDir, fingerprint: str) -> None:
    work.record("cluster", {"complete": True, "inputs": {}, "outputs": {"clusters": fingerprint}})


def test_clusters_with_levels_round_trip(tmp_path):
    work = WorkDir(tmp_path)
    labels = np.array([3, 0, -1, 2, 1], dtype=np.int64)
    levels = np.array([[1, 0], [0, 0], [-1, -1], [1, 1], [0, 1]], dtype=np.int64)
    clusters = ClustersArtifact(work)
    _record_cluster(work, clusters.write(labels, np.linspace(0, 1, 5), levels=levels))
    schema = pq.read_schema(clusters.path)
    expected = [*CLUSTER_COLUMNS, (level_column(0), "int32"), (level_column(1), "int32")]
    assert [(f.name, ARROW_NAMES[str(f.type)]) for f in schema] == expected
    assert str(schema.field("level_1").type) == "int32"
    assert work.labels().dtype == np.int32 and work.labels().tolist() == labels.tolist()
    assert work.levels().tolist() == levels.tolist() and work.levels().dtype == np.int32
    flat = ClustersArtifact(tmp_path / "flat")
    _record_cluster(flat.work, flat.write(labels, np.ones(5)))
    assert flat.level_names() == [] and flat.work.levels() is None


def test_clusters_as_written_are_read_by_fingerprint_only(tmp_path):
    """``read_written`` reads the file the manifest recorded, stale stage or not, and
    refuses another file."""
    work = WorkDir(tmp_path)
    clusters = ClustersArtifact(work)
    levels = np.array([[1], [0], [-1]])
    written = clusters.write(np.array([2, 0, -1]), np.array([0.5, 1.0, 0.0]), levels=levels)
    labels, scores, got_levels = clusters.read_written(written)  # no manifest entry at all
    assert labels.dtype == np.int32 and labels.tolist() == [2, 0, -1]
    assert scores.dtype == np.float32 and got_levels.tolist() == levels.tolist()
    clusters.write(np.array([2, 1, -1]), np.array([0.5, 1.0, 0.0]))
    with pytest.raises(ClusterClipError, match=r"clusters.parquet is missing or changed"):
        clusters.read_written(written)


def test_clusters_are_refused_when_the_stage_is_stale(tmp_path):
    work = WorkDir(tmp_path)
    clusters = ClustersArtifact(work)
    clusters.write(np.zeros(3), np.ones(3))
    with pytest.raises(ClusterClipError, match=r"no completed `cluster` stage"):
        clusters.labels()
    work.record("embed", {"complete": True, "outputs": {"documents": "a"}})
    work.record("cluster", {"complete": True, "inputs": {"embed.documents": "b"}, "outputs": {}})
    with pytest.raises(ClusterClipError, match=r"cluster outputs in .* are stale"):
        clusters.labels()


def test_duplicates_round_trip(tmp_path):
    work = WorkDir(tmp_path)
    work.record("dedup", {"complete": True, "inputs": {}, "outputs": {}})
    groups = DuplicatesArtifact(work)
    groups.write(
        np.array([0, 0, 2, 0]), similarity=np.array([1, 0.95, 1, 0.93]),
        exact=np.array([True, False, True, False]), min_similarity=np.array([0.93, 1, 1, 1]),
    )  # fmt: skip
    schema = pq.read_schema(groups.path)
    assert schema.names == [name for name, _ in DUPLICATE_COLUMNS]
    assert str(schema.field("exact").type) == "bool"
    assert work.duplicate_of().tolist() == [0, 0, 2, 0]
    assert work.duplicates().column("similarity").to_numpy().dtype == np.float32


def test_report_round_trip(tmp_path):
    report = ReportArtifact(tmp_path)
    page = report.write({"schedule": {"length": 3}}, "<html></html>")
    assert page == tmp_path / "report.html" and page.read_text() == "<html></html>"
    assert WorkDir(tmp_path).report() == {"schedule": {"length": 3}}


# --------------------------------------------------------------------------- the one loader


@pytest.fixture
def made(tmp_path):
    return make_workdir(tmp_path, step=300)


def _loader_errors(workdir: Path) -> list[str]:
    """The message of every reader of the schedule of ``workdir`` (they must agree)."""
    from clusterclip.adapters.hf import ScheduledIterableDataset, schedule_indices
    from clusterclip.adapters.torch import ClusterClipSampler

    readers = [
        lambda: WorkDir(workdir).schedule(),
        lambda: ScheduleArtifact(workdir).read(),
        lambda: schedule_indices(workdir),
        lambda: ScheduledIterableDataset.from_workdir(list(range(10**4)), workdir),
        lambda: ClusterClipSampler.from_workdir(workdir),
    ]
    messages = []
    for read in readers:
        with pytest.raises(ClusterClipError) as caught:
            read()
        messages.append(str(caught.value))
    return messages


def test_every_reader_refuses_tampered_indices_alike(made):
    pytest.importorskip("torch")
    path = made["workdir"] / "schedule.npy"
    indices = np.load(path)
    indices[[0, 1]] = indices[[1, 0]]
    np.save(path, indices)
    messages = _loader_errors(made["workdir"])
    assert len(set(messages)) == 1, messages
    assert "indices do not match the fingerprint recorded in its sidecar" in messages[0]


def test_every_reader_refuses_changed_labels_alike(made):
    pytest.importorskip("torch")
    labels = made["labels"].copy()
    labels[labels == 0] = 1  # the clusters changed; nothing told the manifest
    ClustersArtifact(made["workdir"]).write(labels, np.ones(labels.size, np.float32))
    messages = _loader_errors(made["workdir"])
    assert len(set(messages)) == 1, messages
    assert "was built from other cluster labels" in messages[0]


def test_every_reader_refuses_a_stale_schedule_stage_alike(made):
    pytest.importorskip("torch")
    manifest_path = made["workdir"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["stages"]["cluster"]["outputs"]["clusters"] = "0" * 32
    manifest_path.write_text(json.dumps(manifest))
    messages = _loader_errors(made["workdir"])
    assert len(set(messages)) == 1, messages
    assert "schedule outputs in" in messages[0] and "are stale" in messages[0]


def test_loader_reads_the_written_schedule(made):
    saved = WorkDir(made["workdir"]).schedule()
    np.testing.assert_array_equal(saved.indices, made["indices"])
    assert isinstance(saved.indices, np.memmap)
    assert saved.config["max_repeats"] == made["max_repeats"]


# --------------------------------------------------------------------------- ownership


def test_the_experiments_files_are_registered_by_the_experiments():
    assert "lm" not in ARTIFACTS.values() and "corpus.jsonl" not in ARTIFACTS.values()
    from clusterclip.experiments.prepare import EXPERIMENT_FILES

    assert WorkDir("w").path_of("experiment").name == EXPERIMENT_FILES["experiment"]
    register_artifacts(EXPERIMENT_FILES)  # the same names again: fine
    with pytest.raises(ClusterClipError, match=r"'experiment' -> 'other' clashes"):
        register_artifacts({"experiment": "other"})
    with pytest.raises(ClusterClipError, match=r"'mine' -> 'clusters.parquet' clashes"):
        register_artifacts({"mine": "clusters.parquet"})


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text("utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_the_level_prefix_is_spelled_once():
    owner = SRC / "io" / "artifacts" / "clusters.py"
    spelled = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path != owner
        for line, value in _string_constants(path)
        if value == LEVEL_PREFIX or re.fullmatch(rf"{LEVEL_PREFIX}\d+", value)
    ]
    assert spelled == []


def test_table_artifacts_are_written_only_by_their_handles():
    # Parquet files of a work directory are written by io/artifacts alone.
    allowed = {SRC / "io" / "artifacts"}
    writers = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        if not any(folder in path.parents for folder in allowed)
        and "write_table(" in path.read_text("utf-8")
    ]
    assert writers == []
