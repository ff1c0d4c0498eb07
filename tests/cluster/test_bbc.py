"""End to end on real text: BBC News (5 topics) with the default encoder and K = 5.

Also inspection (keywords, nearest documents) and the cluster-folders export,
which re-read the corpus.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.adapters.folders import export_cluster_folders
from clusterclip.cli import main
from clusterclip.cluster import cluster, inspect_clusters
from clusterclip.errors import ClusterClipError

pytest.importorskip("clusterclip.io.readers")


@pytest.fixture(scope="module")
def clustered(bbc_workdir):
    # n_init=4: on 400 documents a single k-means++ seeding sometimes lands in a
    # worse local optimum; the best objective of 4 is the one that finds the topics.
    return cluster(bbc_workdir, n_clusters=5, seed=0, n_init=4)


def test_bbc_topics_recovered(clustered, bbc_corpus):
    from sklearn.metrics import normalized_mutual_info_score

    _, topics = bbc_corpus
    assert (clustered.labels >= 0).all()
    assert normalized_mutual_info_score(topics, clustered.labels) >= 0.80


def test_inspect_reports_keywords_and_nearest_documents(clustered, bbc_workdir, bbc_corpus):
    corpus, topics = bbc_corpus
    records = [json.loads(line) for line in corpus.read_text("utf-8").splitlines()]
    report = inspect_clusters(bbc_workdir, n_keywords=8)
    assert [entry["cluster"] for entry in report] == list(range(5))
    assert sum(entry["size"] for entry in report) == len(records)
    sport = np.bincount(clustered.labels[topics == 3], minlength=5).argmax()
    sport_words = {
        "match",
        "game",
        "cup",
        "win",
        "players",
        "team",
        "england",
        "season",
        "champion",
        "coach",
        "final",
    }
    assert sport_words & set(report[sport]["keywords"])
    for entry in report:
        assert len(entry["keywords"]) == 8 and len(entry["examples"]) == 3
        scores = [example["score"] for example in entry["examples"]]
        assert scores == sorted(scores, reverse=True)
        members = np.flatnonzero(clustered.labels == entry["cluster"])
        assert scores[0] == pytest.approx(clustered.scores[members].max())
        for example in entry["examples"]:
            assert example["text"] == records[example["index"]]["text"]
            assert example["id"] == records[example["index"]]["id"]
    only = inspect_clusters(bbc_workdir, clusters=[sport], n_keywords=8, n_examples=1)
    assert only[0]["keywords"] == report[sport]["keywords"] and len(only[0]["examples"]) == 1
    with pytest.raises(
        ClusterClipError, match=r"`clusters` must be cluster ids in \[0, 4\]; got \[7\]"
    ):
        inspect_clusters(bbc_workdir, clusters=[7])


def test_keywords_from_a_spread_sample_per_cluster(clustered, bbc_workdir, bbc_corpus):
    """max_documents counts every ceil(size/cap)-th member; the topic words survive."""
    from clusterclip.describe.keywords import KeywordCounter

    corpus, topics = bbc_corpus
    texts = [json.loads(line)["text"] for line in corpus.read_text("utf-8").splitlines()]
    full = inspect_clusters(bbc_workdir, n_keywords=8, n_examples=0)
    assert inspect_clusters(bbc_workdir, n_keywords=8, n_examples=0, max_documents=10_000) == full
    sampled = inspect_clusters(bbc_workdir, n_keywords=8, n_examples=0, max_documents=20)
    counter = KeywordCounter()
    for cluster_id in range(5):
        members = np.flatnonzero(clustered.labels == cluster_id)
        stride = -(-members.size // 20)
        for index in members[::stride]:
            counter.add(cluster_id, texts[index])
    expected = counter.top_all(8, range(5))
    assert [e["keywords"] for e in sampled] == [[w for w, _ in expected[c]] for c in range(5)]
    assert [e["size"] for e in sampled] == [e["size"] for e in full]  # sizes stay whole
    sport = np.bincount(clustered.labels[topics == 3], minlength=5).argmax()
    assert len(set(sampled[sport]["keywords"]) & set(full[sport]["keywords"])) >= 3


def test_export_cluster_folders(clustered, bbc_workdir, bbc_corpus, tmp_path):
    corpus, _ = bbc_corpus
    records = [json.loads(line) for line in corpus.read_text("utf-8").splitlines()]
    summary = export_cluster_folders(
        bbc_workdir, tmp_path / "out", shard_size=50, buffer_bytes=10_000
    )
    assert summary["documents"] == len(records) and summary["clusters"] == 5
    seen = []
    for k in range(5):
        members = np.flatnonzero(clustered.labels == k)
        files = sorted(
            (tmp_path / "out" / f"cluster_{k}").glob("data_*.jsonl"), key=lambda p: int(p.stem[5:])
        )
        assert len(files) == -(-len(members) // 50)
        rows = [json.loads(line) for f in files for line in f.read_text("utf-8").splitlines()]
        assert [row["id"] for row in rows] == [records[i]["id"] for i in members]
        for row, index in zip(rows, members, strict=True):
            assert row["label"] == k and row["score"] == pytest.approx(
                clustered.scores[index], abs=1e-6
            )
            assert {key: row[key] for key in records[index]} == records[index]
        seen.extend(members)
    assert sorted(seen) == list(range(len(records)))
    # Deterministic, whatever the buffer size.
    export_cluster_folders(bbc_workdir, tmp_path / "again", shard_size=50)
    for path in (tmp_path / "out").rglob("*.jsonl"):
        assert (
            path.read_bytes()
            == (tmp_path / "again" / path.relative_to(tmp_path / "out")).read_bytes()
        )
    with pytest.raises(
        ClusterClipError, match=r"already exists and is not empty\. Remove it or pass another --out"
    ):
        export_cluster_folders(bbc_workdir, tmp_path / "out")


def test_cli_inspect_and_export(clustered, bbc_workdir, tmp_path, capsys):
    assert main(["inspect", "--workdir", str(bbc_workdir), "--cluster", "1", "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "cluster 1  size" in out and "keywords" in out and "1 cluster shown" in out
    assert main(["inspect", "--workdir", str(bbc_workdir), "--json", "--examples", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5
    out_dir = tmp_path / "folders"
    assert (
        main(
            [
                "export",
                "--workdir",
                str(bbc_workdir),
                "--format",
                "cluster-folders",
                "--out",
                str(out_dir),
            ]
        )
        == 0
    )
    assert "documents 400" in capsys.readouterr().out
    assert sorted(p.name for p in out_dir.iterdir()) == [f"cluster_{k}" for k in range(5)]


def test_inspect_refuses_stale_clusters(tmp_path, mixture):
    from tests.cluster.helpers import make_workdir

    workdir = make_workdir(tmp_path / "w", mixture[0][:100])
    with pytest.raises(
        ClusterClipError, match=r"no completed `cluster` stage\. Run `clusterclip cluster"
    ):
        inspect_clusters(workdir)
    cluster(workdir, n_clusters=2, backend="numpy")
    make_workdir(workdir, mixture[0][100:200])
    with pytest.raises(
        ClusterClipError,
        match=r"cluster outputs in .* are stale: embed\.(documents|embeddings) changed.*"
        r"Rerun `clusterclip run",
    ):
        inspect_clusters(workdir)


def test_keywords_of_kept_clusters_equal_those_of_a_counter_per_cluster(clustered, bbc_corpus):
    """A counter kept for two clusters only: their keywords are unchanged, the rest not held."""
    from clusterclip.describe.keywords import KeywordCounter

    corpus, _ = bbc_corpus
    texts = [json.loads(line)["text"] for line in corpus.read_text("utf-8").splitlines()]
    every, kept = KeywordCounter(), KeywordCounter(clusters=[1, 3])
    for index, label in enumerate(clustered.labels):
        if label >= 0:
            every.add(int(label), texts[index])
            kept.add(int(label), texts[index])
    assert sorted(kept.counts) == [1, 3] and sorted(every.counts) == [0, 1, 2, 3, 4]
    assert kept.top_all(8, [1, 3]) == every.top_all(8, [1, 3])
    assert kept.top_all(8) == every.top_all(8, [1, 3])  # default: the kept clusters
    assert kept.top_all(8, [0]) == {0: []}  # counted, not kept: no words
