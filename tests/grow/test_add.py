"""`clusterclip add`: a corpus that grows, on real KJV verses with the static encoder.

A work directory made by `clusterclip run a.jsonl` gets `b.jsonl` added; it is
compared with one made from scratch by `clusterclip run a.jsonl b.jsonl`.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import DocumentsArtifact, EmbeddingsArtifact
from tests.product_support import kjv_records

pytest.importorskip("model2vec")

#: 500 verses in a.jsonl (3 parts of shard size 200, the last short), 278 in b.jsonl.
N_OLD = 500
N_NEW = 278
FLAGS = ["--encoder", "static", "--shard-size", "200", "--n-clusters", "6", "--epochs", "1"]
FLAGS += ["--no-report", "--policy", "random", "--duplicates", "off"]


def _cli(*argv: str) -> str:
    """Run the command in the current directory; its stdout (it must succeed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(list(argv)) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """``root`` with a.jsonl, b.jsonl, ``old`` (run over a) and ``scratch`` (run over a and b)."""
    root = tmp_path_factory.mktemp("grow")
    records = kjv_records(step=40)
    for name, part in (("a.jsonl", records[:N_OLD]), ("b.jsonl", records[N_OLD:])):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    with contextlib.chdir(root):
        _cli("run", "a.jsonl", "--workdir", "old", *FLAGS)
        _cli("run", "a.jsonl", "b.jsonl", "--workdir", "scratch", *FLAGS)
    return root


@pytest.fixture
def root(made, tmp_path) -> Path:
    """A copy of ``made`` to change, as the current directory."""
    copy = tmp_path / "root"
    shutil.copytree(made, copy)
    with contextlib.chdir(copy):
        yield copy


def _parts(workdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in EmbeddingsArtifact(WorkDir(workdir)).part_paths()}


def test_add_embeds_only_the_new_file_and_assigns_it_to_the_existing_centroids(root):
    from clusterclip.cluster import assign

    old_parts = _parts(root / "old")
    old = WorkDir(root / "old")
    old_labels, centroids = old.labels(), old.centroids()
    backend = old.require("cluster")["summary"]["backend"]

    printed = _cli("add", "b.jsonl", "--workdir", "old")

    work = WorkDir(root / "old")
    n = work.n_documents()
    assert f"embedded: {N_NEW} documents" in printed and f"indices {N_OLD} to {n - 1}" in printed
    assert n == N_OLD + N_NEW
    parts = _parts(root / "old")
    assert {name: parts[name] for name in old_parts} == old_parts  # untouched
    assert sorted(set(parts) - set(old_parts)) == ["part-00003.npy", "part-00004.npy"]
    documents = work.documents(["index", "source"])
    assert documents.column("index").to_pylist() == list(range(n))
    sources = documents.column("source").to_pylist()
    assert sources == ["a.jsonl"] * N_OLD + ["b.jsonl"] * (n - N_OLD)

    labels = work.labels()  # fresh: the cluster entry names the union's embeddings
    np.testing.assert_array_equal(labels[:N_OLD], old_labels)
    np.testing.assert_array_equal(work.centroids(), centroids)
    rows = work.embeddings()[N_OLD:].astype(np.float32)
    expected, _ = assign(rows, centroids, backend=backend)
    np.testing.assert_array_equal(labels[N_OLD:], expected)
    cosines = rows @ centroids.T / np.linalg.norm(rows, axis=1, keepdims=True)
    chosen = cosines[np.arange(len(rows)), labels[N_OLD:]]
    assert (chosen >= cosines.max(axis=1) - 1e-2).all()  # the nearest, up to bf16 rounding
    assert (labels[N_OLD:] >= 0).all()

    additions = work.require("embed")["additions"]
    assert len(additions) == 1
    assert additions[0]["sources"] == ["b.jsonl"] and additions[0]["documents"] == N_NEW
    assert additions[0]["first_index"] == N_OLD and additions[0]["clusters"] == "assigned"
    assert "time" in additions[0]


def test_the_union_is_embedded_as_from_scratch(root):
    import clusterclip

    added = clusterclip.add("b.jsonl", workdir=root / "old")
    assert added["embedded_docs"] == N_NEW and added["clusters"] == "assigned"

    grown, scratch = WorkDir(root / "old"), WorkDir(root / "scratch")
    a, b = grown.embeddings(), scratch.embeddings()
    assert a.shape == b.shape
    assert a[:].tobytes() == b[:].tobytes()  # byte-identical rows
    assert grown.documents().to_pylist() == scratch.documents().to_pylist()
    rejects = DocumentsArtifact(grown).rejects_path.read_bytes()
    assert rejects == DocumentsArtifact(scratch).rejects_path.read_bytes()
    assert grown.require("embed")["inputs"] == scratch.require("embed")["inputs"]
    outputs = grown.require("embed")["outputs"]  # the parts hashed by the engine's tasks
    assert outputs["embeddings"] == EmbeddingsArtifact(grown).fingerprint()
    assert outputs["documents"] == DocumentsArtifact(grown).fingerprint()


def test_run_over_the_union_after_add_embeds_nothing_and_schedules_the_union(root):
    from clusterclip.schedule import Schedule

    _cli("add", "b.jsonl", "--workdir", "old")
    printed = _cli("run", "a.jsonl", "b.jsonl", "--workdir", "old", *FLAGS)
    assert "embed skipped, cluster skipped, schedule ran" in printed
    schedule = Schedule.load(root / "old" / "schedule.npy")
    n = N_OLD + N_NEW
    # one epoch of the random policy: every document of the union exactly once
    np.testing.assert_array_equal(np.sort(schedule.indices), np.arange(n))


def test_refit_gives_the_labels_and_schedule_of_a_run_from_scratch(root):
    printed = _cli("add", "b.jsonl", "--workdir", "old", "--refit")
    assert "k-means refit over the union" in printed
    grown, scratch = WorkDir(root / "old"), WorkDir(root / "scratch")
    np.testing.assert_array_equal(grown.labels(), scratch.labels())
    np.testing.assert_array_equal(grown.centroids(), scratch.centroids())
    assert grown.require("embed")["additions"][0]["clusters"] == "refit"
    printed = _cli("run", "a.jsonl", "b.jsonl", "--workdir", "old", *FLAGS)
    assert "embed skipped, cluster skipped" in printed
    assert (root / "old" / "schedule.npy").read_bytes() == (
        root / "scratch" / "schedule.npy"
    ).read_bytes()


def test_add_to_a_directory_without_a_finished_embed_stage_is_refused(root):
    import clusterclip.grow

    (root / "empty").mkdir()
    with pytest.raises(ClusterClipError, match="has no finished embed stage"):
        clusterclip.grow.add("b.jsonl", workdir=root / "empty")


@pytest.mark.parametrize("given", ["a.jsonl", "copy-of-a.jsonl"])
def test_a_file_already_in_the_corpus_is_refused(root, given):
    import clusterclip.grow

    shutil.copyfile(root / "a.jsonl", root / "copy-of-a.jsonl")
    manifest = (root / "old" / "manifest.json").read_bytes()
    with pytest.raises(ClusterClipError, match=rf"{given} is already part of the corpus"):
        clusterclip.grow.add(["b.jsonl", given], workdir=root / "old")
    assert (root / "old" / "manifest.json").read_bytes() == manifest  # nothing written


def test_a_corpus_file_changed_since_embedded_is_refused(root):
    import clusterclip.grow

    with open(root / "a.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"text": "a verse added after the embedding"}) + "\n")
    manifest = (root / "old" / "manifest.json").read_bytes()
    with pytest.raises(ClusterClipError, match=r"corpus file a\.jsonl changed size"):
        clusterclip.grow.add("b.jsonl", workdir=root / "old")
    assert (root / "old" / "manifest.json").read_bytes() == manifest


def test_the_cli_refusal_names_the_file(root, capsys):
    assert main(["add", "a.jsonl", "--workdir", "old"]) == 2
    assert "a.jsonl is already part of the corpus" in capsys.readouterr().err


def test_dedup_reruns_over_the_union_after_add(root):
    _cli("add", "b.jsonl", "--workdir", "old")
    grouped = [flag for flag in FLAGS if flag not in ("--duplicates", "off")]
    printed = _cli("run", "a.jsonl", "b.jsonl", "--workdir", "old", *grouped)
    assert "embed skipped, cluster skipped, dedup ran, schedule ran" in printed
    assert len(WorkDir(root / "old").duplicate_of()) == N_OLD + N_NEW


def test_hierarchical_clusters_assign_the_new_documents_down_the_tree(root):
    _cli("run", "a.jsonl", "--workdir", "tree", *FLAGS, "--levels", "2")
    _cli("add", "b.jsonl", "--workdir", "tree")
    work = WorkDir(root / "tree")
    labels, levels, tree = work.labels(), work.levels(), work.cluster_tree()
    assert levels.shape == (N_OLD + N_NEW, 1)
    np.testing.assert_array_equal(levels, tree.ancestors(labels))
    from clusterclip.cluster.hierarchical import Tree

    rows = work.embeddings()[N_OLD:].astype(np.float32)
    descent = Tree(tree.centroids, tree.parents)
    expected, _ = descent.assign(rows, beam=work.require("cluster")["config"]["beam"])
    np.testing.assert_array_equal(labels[N_OLD:], expected)


def test_an_add_stopped_half_way_is_refused_and_run_re_embeds_the_union(root, monkeypatch):
    import clusterclip.grow
    from clusterclip.io.artifacts import DocumentsArtifact as Documents

    def stop(self, first_task, n_tasks):
        raise KeyboardInterrupt  # as Ctrl-C after the new shards were written

    with monkeypatch.context() as patch:
        patch.setattr(Documents, "extend", stop)
        with pytest.raises(KeyboardInterrupt):
            clusterclip.grow.add("b.jsonl", workdir=root / "old")
    with pytest.raises(ClusterClipError, match="an earlier `clusterclip add` of b.jsonl"):
        clusterclip.grow.add("b.jsonl", workdir=root / "old")
    printed = _cli("run", "a.jsonl", "b.jsonl", "--workdir", "old", *FLAGS)
    assert "embed ran" in printed
    grown, scratch = WorkDir(root / "old"), WorkDir(root / "scratch")
    assert grown.embeddings()[:].tobytes() == scratch.embeddings()[:].tobytes()
    assert _parts(root / "old") == _parts(root / "scratch")
    np.testing.assert_array_equal(grown.labels(), scratch.labels())


def test_two_additions_in_turn_are_recorded_and_continue_the_index(root):
    import clusterclip.grow

    lines = (root / "b.jsonl").read_text("utf-8").splitlines(keepends=True)
    (root / "b1.jsonl").write_text("".join(lines[:150]), "utf-8")
    (root / "b2.jsonl").write_text("".join(lines[150:]), "utf-8")
    first = clusterclip.grow.add("b1.jsonl", workdir=root / "old")
    second = clusterclip.grow.add("b2.jsonl", workdir=root / "old")
    assert (first["first_index"], second["first_index"]) == (N_OLD, N_OLD + 150)
    grown, scratch = WorkDir(root / "old"), WorkDir(root / "scratch")
    assert grown.embeddings()[:].tobytes() == scratch.embeddings()[:].tobytes()
    assert grown.documents(["index"]).column("index").to_pylist() == list(range(N_OLD + N_NEW))
    entry = grown.require("embed")
    assert [a["sources"] for a in entry["additions"]] == [["b1.jsonl"], ["b2.jsonl"]]
    assert entry["sources"] == ["a.jsonl", "b1.jsonl", "b2.jsonl"]
    assert len(grown.labels()) == N_OLD + N_NEW and (grown.labels() >= 0).all()
    printed = _cli("run", "a.jsonl", "b1.jsonl", "b2.jsonl", "--workdir", "old", *FLAGS)
    assert "embed skipped, cluster skipped" in printed


def test_a_file_added_from_another_directory_is_recorded_by_its_absolute_path(root):
    (root / "elsewhere").mkdir()
    with contextlib.chdir(root / "elsewhere"):
        _cli("add", "../b.jsonl", "--workdir", "../old")
    entry = WorkDir(root / "old").require("embed")
    assert entry["sources"] == ["a.jsonl", str((root / "b.jsonl").resolve())]
    grouped = [flag for flag in FLAGS if flag not in ("--duplicates", "off")]
    printed = _cli("run", "a.jsonl", "b.jsonl", "--workdir", "old", *grouped)
    assert "embed skipped, cluster skipped, dedup ran" in printed  # dedup re-reads b.jsonl
