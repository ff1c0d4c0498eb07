"""The cluster stage on a hand-made work directory: outputs, manifest, reruns, errors, CLI."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import clusterclip
from clusterclip.cli import main
from clusterclip.cluster import KMeans, cluster
from clusterclip.errors import ClusterClipError
from clusterclip.io import fingerprint_file, read_stage
from tests.cluster.helpers import make_workdir


@pytest.fixture()
def workdir(tmp_path, mixture):
    X, _ = mixture
    status = ["ok"] * len(X)
    for row in (5, 17, 2999):
        status[row] = "empty"
    return make_workdir(tmp_path / "w", X, status, shard_rows=700)


def test_stage_writes_outputs_and_manifest(workdir, mixture):
    result = cluster(workdir, n_clusters=12, seed=0, backend="numpy", assign_batch_size=500)
    table = pq.read_table(workdir / "clusters.parquet")
    assert table.schema.names == ["index", "cluster", "score"]
    assert [str(t) for t in table.schema.types] == ["int64", "int32", "float"]
    labels = table.column("cluster").to_numpy()
    np.testing.assert_array_equal(labels, result.labels)
    assert labels[[5, 17, 2999]].tolist() == [-1, -1, -1]
    assert (labels[np.r_[0:5, 6:17, 18:2999]] >= 0).all()
    centroids = np.load(workdir / "centroids.npy")
    assert centroids.dtype == np.float32 and centroids.shape == (12, 32)
    np.testing.assert_allclose(np.linalg.norm(centroids, axis=1), 1, atol=1e-5)
    entry = read_stage(workdir, "cluster")
    assert entry["inputs"].keys() == {"embed.documents", "embed.embeddings"}
    assert entry["outputs"]["clusters"] == fingerprint_file(workdir / "clusters.parquet")
    assert entry["outputs"]["centroids"] == fingerprint_file(workdir / "centroids.npy")
    summary = entry["summary"]
    assert summary["excluded_documents"] == 3 and summary["clustered_documents"] == 2997
    assert summary["sample_size"] == 2997 and summary["empty_clusters"] == 0
    assert sum(np.bincount(labels[labels >= 0])) == 2997
    # Labels are the nearest centroids of the stored float16 embeddings.
    X16 = mixture[0].astype(np.float16)
    ok = labels >= 0
    expected = KMeans(12, seed=0, backend="numpy").fit(X16[ok])
    np.testing.assert_array_equal(expected.cluster_centers_, centroids)
    np.testing.assert_array_equal(expected.predict(X16[ok]), labels[ok])


def test_same_seed_same_labels_and_rerun_skips(workdir, tmp_path, mixture):
    first = cluster(workdir, n_clusters=12, seed=1, backend="numpy")
    stamp = (workdir / "clusters.parquet").stat().st_mtime_ns
    again = cluster(workdir, n_clusters=12, seed=1, backend="numpy")
    assert again.skipped and (workdir / "clusters.parquet").stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(first.labels, again.labels)
    other = make_workdir(tmp_path / "other", mixture[0], shard_rows=3000)
    fresh = cluster(other, n_clusters=12, seed=1, backend="numpy")
    ok = first.labels >= 0
    np.testing.assert_array_equal(
        np.unique(fresh.labels[ok]), np.unique(first.labels[ok])
    )  # same K used; shard layout and exclusions do not break anything


def test_changed_settings_or_inputs_refuse_unless_overwrite(workdir, mixture):
    cluster(workdir, n_clusters=12, seed=0, backend="numpy")
    with pytest.raises(
        ClusterClipError, match=r"different settings or inputs \(n_clusters: 12 -> 6\).*--overwrite"
    ):
        cluster(workdir, n_clusters=6, seed=0, backend="numpy")
    # Re-embed (different vectors): the embed fingerprints change.
    make_workdir(workdir, mixture[0][::-1].copy(), shard_rows=700)
    with pytest.raises(ClusterClipError, match=r"input embed\.embeddings changed"):
        cluster(workdir, n_clusters=12, seed=0, backend="numpy")
    result = cluster(workdir, n_clusters=12, seed=0, backend="numpy", overwrite=True)
    assert not result.skipped and (result.labels >= 0).all()


def test_stage_is_reachable_as_clusterclip_cluster(workdir):
    _ = clusterclip.KMeans  # imports the sub-package first
    result = clusterclip.cluster(workdir, n_clusters=3, seed=0, backend="numpy")
    assert result.centroids.shape == (3, 32)


def test_error_without_embed_stage(tmp_path):
    with pytest.raises(
        ClusterClipError,
        match=r"no completed `embed` stage\. Run `clusterclip embed INPUT\.\.\. --workdir W` first",
    ):
        cluster(tmp_path, n_clusters=2)


def test_error_more_clusters_than_ok_documents(tmp_path):
    X = np.eye(4, 8, dtype=np.float32)
    workdir = make_workdir(tmp_path / "w", X, ["ok", "ok", "ok", "malformed"])
    with pytest.raises(
        ClusterClipError,
        match=r"`n_clusters` must be an int in \[1, 3\] \(no more clusters than usable documents: 3 of 4 documents are ok\); got 4\. Pass n_clusters=3 or fewer",
    ):
        cluster(workdir, n_clusters=4)


def test_error_nan_embeddings_named_by_document_index(tmp_path):
    X = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    X[[7, 30]] = np.nan
    workdir = make_workdir(tmp_path / "w", X, ["empty"] + ["ok"] * 49)
    with pytest.raises(ClusterClipError, match=r"non-finite values in rows \[7, 30\]"):
        cluster(workdir, n_clusters=2, backend="numpy")


def test_error_zero_embedding_of_ok_document(tmp_path):
    X = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    X[12] = 0
    workdir = make_workdir(tmp_path / "w", X)
    with pytest.raises(ClusterClipError, match=r"all-zero rows \[12\]"):
        cluster(workdir, n_clusters=2, backend="numpy")


def test_error_engine_and_options(workdir):
    with pytest.raises(ClusterClipError, match=r"`engine` must be one of \['local', 'ray'\]"):
        cluster(workdir, n_clusters=2, engine="spark")
    with pytest.raises(
        ClusterClipError, match=r"`engine_options` must be empty for engine='local'"
    ):
        cluster(workdir, n_clusters=2, backend="numpy", engine_options={"num_workers": 2})


def test_cli_cluster_prints_summary(workdir, capsys):
    code = main(["cluster", "--workdir", str(workdir), "--n-clusters", "4", "--backend", "numpy"])
    out = capsys.readouterr().out
    assert code == 0
    for text in (
        "sizes",
        "min",
        "median",
        "Gini",
        "imbalance factor",
        "empty clusters",
        "objective",
        "sample 1,024",
    ):
        assert text in out
    assert (
        main(["cluster", "--workdir", str(workdir), "--n-clusters", "4", "--backend", "numpy"]) == 0
    )
    assert "skipped" in capsys.readouterr().out
    manifest = json.loads((workdir / "manifest.json").read_text())
    assert manifest["stages"]["cluster"]["config"]["n_clusters"] == 4


def test_cli_errors_exit_2_with_fix(tmp_path, capsys):
    assert main(["cluster", "--workdir", str(tmp_path), "--n-clusters", "3"]) == 2
    assert "Run `clusterclip embed" in capsys.readouterr().err
    assert (
        main(["cluster", "--workdir", str(tmp_path), "--n-clusters", "3", "--num-workers", "2"])
        == 2
    )
    assert "--engine ray" in capsys.readouterr().err


def test_cli_help_has_examples(capsys):
    for command in ("cluster", "inspect", "export"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert f"clusterclip {command} --workdir" in capsys.readouterr().out
