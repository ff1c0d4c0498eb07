"""Hierarchical k-means: tree invariants, coarse-to-fine vs exact assignment, the stage, the CLI.

The tolerance of the greedy descent (``beam = 1``) is measured on real
embeddings: the BBC News subset embedded by the default encoder (the
``bbc_workdir`` fixture shared with ``test_bbc.py``).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterclip.cluster import HierarchicalKMeans, cluster
from clusterclip.cluster.hierarchical import (
    Tree,
    _node_seed,
    children_counts,
    dissolve_small_leaves,
)
from clusterclip.cluster.options import ClusterOptions
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir, read_stage
from clusterclip.options import from_mapping
from tests.abuse.test_cli_abuse import call, refused
from tests.cluster.helpers import make_workdir

#: Measured on the BBC subset, levels (4, 12) -> 40 leaves, seeds 0-3: 97.5-99.0 % of
#: the documents on their exact nearest leaf, mean cosine gap 0.0001-0.0012.
SAME_LEAF_AT_BEAM_1 = 0.95
MEAN_GAP_AT_BEAM_1 = 0.005


@pytest.fixture(scope="module")
def fitted(mixture) -> HierarchicalKMeans:
    X, _ = mixture
    return HierarchicalKMeans(60, levels=(3, 12), seed=0, backend="numpy").fit(X)


@pytest.fixture(scope="module")
def bbc_embeddings(bbc_workdir) -> np.ndarray:
    return np.asarray(WorkDir(bbc_workdir).embeddings()[:], dtype=np.float32)


def exact(X: np.ndarray, leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    similarity = unit @ leaves.T
    return similarity.argmax(axis=1), similarity.max(axis=1)


# ------------------------------------------------------------------ children per parent


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 500), min_size=1, max_size=40),
    extra=st.integers(0, 10_000),
)
def test_children_counts_exact_total_within_bounds(sizes, extra):
    sizes = np.array(sizes)
    cap = np.maximum(sizes, 1)
    total = len(sizes) + extra % (int(cap.sum()) - len(sizes) + 1)
    counts = children_counts(sizes, total)
    assert counts.sum() == total
    assert (counts >= 1).all() and (counts <= cap).all()
    # Proportional: a bigger parent never gets fewer children...
    order = np.argsort(sizes, kind="stable")
    assert (np.diff(counts[order])[np.diff(sizes[order]) > 0] >= 0).all()
    # ... and where no bound binds, each is within one child of its quota.
    quota = total * sizes / max(sizes.sum(), 1)
    if ((quota >= 1) & (quota <= cap - 1)).all():
        assert (np.abs(counts - quota) < 1).all()


def test_children_counts_golden_and_refusal():
    assert children_counts(np.array([50, 30, 20]), 10).tolist() == [5, 3, 2]
    assert children_counts(np.array([1, 1, 98]), 10).tolist() == [1, 1, 8]
    assert children_counts(np.array([2, 0, 9]), 11).tolist() == [2, 1, 8]
    with pytest.raises(ClusterClipError, match=r"cannot split 3 nodes holding 11 fit rows"):
        children_counts(np.array([2, 0, 9]), 13)


# ------------------------------------------------------------------ the tree


def test_levels_exact_totals_contiguous_children_consistent_labels(fitted, mixture):
    X, _ = mixture
    assert [len(c) for c in fitted.level_centroids_] == [3, 12, 60]
    assert fitted.centroids_ is fitted.level_centroids_[-1]
    for level, parents in enumerate(fitted.parents_):
        assert parents.dtype == np.int32 and len(parents) == len(fitted.level_centroids_[level + 1])
        assert (np.diff(parents) >= 0).all()  # children contiguous, blocks in parent order
        assert set(parents.tolist()) == set(range(len(fitted.level_centroids_[level])))
    for centroids in fitted.level_centroids_:
        np.testing.assert_allclose(np.linalg.norm(centroids, axis=1), 1, atol=1e-5)
    # Per-level labels of the fit rows: the leaf's parent chain.
    assert len(fitted.labels_) == 3 and fitted.sample_size_ == len(X)
    for level in range(2):
        np.testing.assert_array_equal(
            fitted.labels_[level], fitted.parents_[level][fitted.labels_[level + 1]]
        )
    np.testing.assert_array_equal(
        fitted.tree_.ancestors(fitted.labels_[-1]), np.stack(fitted.labels_[:-1], axis=1)
    )
    # Every node is used by the rows it was fitted on.
    for level, labels in enumerate(fitted.labels_):
        assert len(np.unique(labels)) == len(fitted.level_centroids_[level])


def test_same_seed_same_tree_other_seed_other_tree(fitted, mixture):
    X, _ = mixture
    again = HierarchicalKMeans(60, levels=(3, 12), seed=0, backend="numpy").fit(X)
    for a, b in zip(fitted.level_centroids_, again.level_centroids_, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(fitted.parents_, again.parents_, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fitted.predict(X), again.predict(X))
    other = HierarchicalKMeans(60, levels=(3, 12), seed=1, backend="numpy").fit(X)
    assert not np.array_equal(fitted.centroids_, other.centroids_)


def test_predict_is_the_greedy_descent_of_the_fit(fitted, mixture):
    X, _ = mixture
    labels, scores = fitted.assign(X)
    assert labels.dtype == np.int32 and scores.dtype == np.float32
    # The splits were fitted on the same greedy descent (numpy backend: same products).
    assert np.mean(labels == fitted.labels_[-1]) > 0.99
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(
        scores, np.einsum("ij,ij->i", unit, fitted.centroids_[labels]), atol=1e-5
    )
    # Blocks do not matter, zero rows get -1.
    fitted.batch_size = 700
    np.testing.assert_array_equal(fitted.predict(X), labels)
    fitted.batch_size = 65536
    block = np.concatenate([X[:3], np.zeros((1, X.shape[1]))])
    assert fitted.predict(block).tolist()[-1] == -1


def test_beam_covering_every_level_is_exact(fitted, mixture):
    X, _ = mixture
    fitted.beam = max(fitted.levels)
    try:
        labels, scores = fitted.assign(X)
    finally:
        fitted.beam = 1
    exact_labels, exact_scores = exact(X, fitted.centroids_)
    differ = labels != exact_labels
    # Only fp32 rounding ties may differ (the products are blocked differently).
    assert (np.abs(exact_scores - scores)[differ] < 1e-5).all()
    assert differ.mean() < 0.001


def test_flat_tree_is_kmeans(mixture):
    from clusterclip.cluster import KMeans

    X, _ = mixture
    tree = HierarchicalKMeans(5, levels=(), seed=0, backend="numpy").fit(X)
    flat = KMeans(5, seed=0, backend="numpy").fit(X)
    # The same k-means; the tree fits on its gathered (normalised again) sample.
    np.testing.assert_allclose(tree.centroids_, flat.cluster_centers_, atol=1e-6)
    np.testing.assert_array_equal(tree.predict(X), flat.predict(X))
    assert tree.parents_ == [] and tree.tree_.ancestors(tree.predict(X)).shape == (len(X), 0)


def test_splits_run_on_numpy_where_level_0_ran_on_torch(mixture):
    # torch's oneDNN kernels keep a primitive per product shape, and every node has its own
    # shape: 1.5 GB at 10^5 leaves (docs/scaling.md). The splits therefore run on numpy.
    X, _ = mixture
    on_torch = HierarchicalKMeans(60, levels=(3, 12), seed=0, backend="torch-bf16").fit(X)
    assert (on_torch.backend_, on_torch.split_backend_) == ("torch-bf16", "numpy")
    # Node 0's split is a numpy k-means on its members, seeded by the node.
    unit = (
        X[on_torch.sample_indices_] / np.linalg.norm(X[on_torch.sample_indices_], axis=1)[:, None]
    )
    members = unit[on_torch.labels_[0] == 0].astype(np.float32)
    children = int((on_torch.parents_[0] == 0).sum())
    split = on_torch._kmeans(children, _node_seed(0, 1, 0), "numpy").fit(members)
    np.testing.assert_allclose(
        on_torch.level_centroids_[1][:children], split.cluster_centers_, atol=1e-6
    )


def test_bad_parameters_name_the_rule(mixture):
    X, _ = mixture
    for levels in [(12, 3), (3, 60), (0, 5), (3, 3), (5.0,)]:
        with pytest.raises(
            ClusterClipError, match=r"`levels` must be increasing ints in \[1, 60\)"
        ):
            HierarchicalKMeans(60, levels=levels, seed=0).fit(X)
    with pytest.raises(ClusterClipError, match=r"`beam` must be an int in \[1, inf\)"):
        HierarchicalKMeans(60, levels=(3,), seed=0, beam=0).fit(X)
    with pytest.raises(ClusterClipError, match=r"no more leaves than usable rows"):
        HierarchicalKMeans(60, levels=(3,), seed=0).fit(X[:50])
    with pytest.raises(ClusterClipError, match=r"not fitted yet"):
        HierarchicalKMeans(60, levels=(3,), seed=0).predict(X)


# ------------------------------------------------------------------ real embeddings


@pytest.mark.slow
def test_coarse_to_fine_on_real_embeddings_within_tolerance(bbc_embeddings):
    X = bbc_embeddings
    model = HierarchicalKMeans(40, levels=(4, 12), seed=0, backend="numpy").fit(X)
    exact_labels, exact_scores = exact(X, model.centroids_)
    labels, scores = model.assign(X)
    same = float(np.mean(labels == exact_labels))
    gap = float(np.mean(exact_scores - scores))
    assert same >= SAME_LEAF_AT_BEAM_1, same
    assert 0 <= gap <= MEAN_GAP_AT_BEAM_1, gap
    model.beam = 12  # = max(levels): every leaf is scored
    labels, scores = model.assign(X)
    differ = labels != exact_labels
    assert (np.abs(exact_scores - scores)[differ] < 1e-5).all()


# ------------------------------------------------------------------ small leaves


def test_dissolving_small_leaves_keeps_the_tree_consistent(fitted, mixture):
    X, _ = mixture
    labels, scores = fitted.assign(X)
    sizes = np.bincount(labels, minlength=60)
    min_size = int(np.sort(sizes)[5]) + 1  # at least 6 leaves go
    new_labels, new_scores, tree, record = dissolve_small_leaves(
        labels, scores, fitted.tree_, lambda rows: X[rows], min_size=min_size
    )
    small = sizes < min_size
    assert len(tree.centroids[-1]) == 60 - small.sum() == len(record["kept"])
    assert (np.diff(tree.parents[-1]) >= 0).all()
    assert (np.bincount(new_labels, minlength=len(tree.centroids[-1])) >= min_size).all()
    kept = ~small[labels]
    # Kept documents keep their leaf (renumbered) and score.
    np.testing.assert_array_equal(np.array(record["kept"])[new_labels[kept]], labels[kept])
    np.testing.assert_array_equal(new_scores[kept], scores[kept])
    # Moved ones go where the descent sends them in the pruned tree.
    moved = ~kept
    np.testing.assert_array_equal(new_labels[moved], tree.assign(X[moved])[0])
    assert sum(d["size"] for d in record["dissolved"]) == moved.sum()


def test_descent_skips_nodes_left_without_leaves():
    C0 = np.eye(2, dtype=np.float32)
    C1 = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    tree = Tree((C0, C1), (np.array([0, 1], dtype=np.int32),)).without_leaves(
        np.array([False, True])
    )
    labels, _ = tree.assign(np.array([[0.1, 1.0]]))  # nearest top node has no leaf left
    assert labels.tolist() == [0]


# ------------------------------------------------------------------ the stage


@pytest.fixture()
def real_workdir(tmp_path, bbc_embeddings):
    status = ["ok"] * len(bbc_embeddings)
    for row in (3, 200):
        status[row] = "empty"
    return make_workdir(tmp_path / "w", bbc_embeddings, status, shard_rows=150)


@pytest.mark.slow
def test_stage_writes_level_columns_and_workdir_levels(real_workdir):
    result = cluster(
        real_workdir, n_clusters=40, levels=[4, 12], seed=0, backend="numpy",
        assign_batch_size=100, min_cluster_size=1,
    )  # fmt: skip
    table = pq.read_table(real_workdir / "clusters.parquet")
    assert table.schema.names == ["index", "cluster", "score", "level_0", "level_1"]
    assert [str(t) for t in table.schema.types] == ["int64", "int32", "float", "int32", "int32"]
    levels = WorkDir(real_workdir).levels()
    assert levels.dtype == np.int32 and levels.shape == (len(result.labels), 2)
    np.testing.assert_array_equal(levels, result.levels)
    assert levels[[3, 200]].tolist() == [[-1, -1], [-1, -1]]
    ok = result.labels >= 0
    assert (levels[ok] >= 0).all() and ok.sum() == len(ok) - 2
    centroids, parents = WorkDir(real_workdir).level_centroids()
    assert [len(c) for c in centroids] == [4, 12, 40]
    np.testing.assert_array_equal(centroids[-1], WorkDir(real_workdir).centroids())
    np.testing.assert_array_equal(levels[ok, 1], parents[1][result.labels[ok]])
    np.testing.assert_array_equal(levels[ok, 0], parents[0][levels[ok, 1]])
    # The stored labels are the coarse-to-fine assignment of the stored float16 rows.
    X16 = np.asarray(WorkDir(real_workdir).embeddings()[:])
    tree = Tree(tuple(centroids), tuple(parents))
    np.testing.assert_array_equal(tree.assign(X16[ok])[0], result.labels[ok])
    entry = read_stage(real_workdir, "cluster")
    assert entry["config"]["levels"] == [4, 12] and entry["config"]["beam"] == 1
    assert "level_centroids" in entry["outputs"]
    summary = entry["summary"]
    assert summary["levels"]["requested"] == [4, 12, 40]
    assert summary["levels"]["n_clusters"] == [4, 12, 40]
    assert summary["stability"] is None
    again = cluster(real_workdir, n_clusters=40, levels=(4, 12), seed=0, backend="numpy",
                    assign_batch_size=100, min_cluster_size=1)  # fmt: skip
    assert again.skipped
    np.testing.assert_array_equal(again.levels, levels)


def test_stage_dissolves_small_leaves_within_the_tree(tmp_path, mixture):
    X, _ = mixture
    work = make_workdir(tmp_path / "w", X)
    result = cluster(work, n_clusters=300, levels=(3, 30), seed=0, backend="numpy",
                     min_cluster_size=5, stability_sample=0)  # fmt: skip
    summary = result.summary
    assert summary["dissolved_clusters"] > 0
    assert summary["n_clusters"] == 300 - summary["dissolved_clusters"]
    assert np.bincount(result.labels).min() >= summary["min_cluster_size"]
    centroids, parents = WorkDir(work).level_centroids()
    assert len(centroids[-1]) == summary["n_clusters"] and (np.diff(parents[-1]) >= 0).all()
    np.testing.assert_array_equal(result.levels[:, 1], parents[1][result.labels])


def test_flat_stage_unchanged_and_levels_none(tmp_path, mixture):
    X, _ = mixture
    work = make_workdir(tmp_path / "w", X)
    cluster(work, n_clusters=8, levels=(2,), seed=0, backend="numpy", stability_sample=0)
    assert (work / "level_centroids.npz").exists()
    flat = cluster(work, n_clusters=8, seed=0, backend="numpy", overwrite=True)
    assert pq.read_table(work / "clusters.parquet").schema.names == ["index", "cluster", "score"]
    assert not (work / "level_centroids.npz").exists()
    assert WorkDir(work).levels() is None and WorkDir(work).level_centroids() is None
    assert flat.levels is None and "levels" not in flat.summary
    assert read_stage(work, "cluster")["config"]["levels"] == []


def test_levels_need_a_single_init(tmp_path, mixture):
    work = make_workdir(tmp_path / "w", mixture[0][:500])
    with pytest.raises(ClusterClipError, match=r"`n_init` must be 1 when levels are given"):
        cluster(work, n_clusters=20, levels=(4,), n_init=2, backend="numpy")


def test_levels_in_toml_and_options():
    options = from_mapping(ClusterOptions, {"n_clusters": 100, "levels": [5, 20]})
    assert options.levels == (5, 20)
    assert ClusterOptions(n_clusters=100).levels == ()
    with pytest.raises(ClusterClipError, match=r"\[cluster\]: `levels` must be increasing ints"):
        from_mapping(ClusterOptions, {"n_clusters": 10, "levels": [20]}, section="cluster")
    with pytest.raises(ClusterClipError, match=r"`levels` must be a list of ints in \[1, inf\)"):
        ClusterOptions(n_clusters=10, levels=[0, 3])


# ------------------------------------------------------------------ the real CLI


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("20", "`--levels` must be increasing ints in [1, 10)"),
        ("5,3", "got (5, 3)"),
        ("10", "got (10,)"),
        ("0,3", "`--levels` must be a list of ints in [1, inf)"),
        ("3,x", "argument --levels: expected comma-separated ints such as 100,3000"),
    ],
)
def test_cli_bad_levels_exit_2_without_traceback(capsys, tmp_path, mixture, value, needle):
    work = make_workdir(tmp_path / "w", mixture[0][:300])
    code, _, err = call(
        capsys, "cluster", "--workdir", str(work), "--n-clusters", "10", "--levels", value
    )
    refused(code, err, needle, "--levels")
    assert read_stage(work, "cluster") is None


def test_cli_cluster_with_levels_prints_them(capsys, tmp_path, mixture):
    work = make_workdir(tmp_path / "w", mixture[0][:600])
    code, out, err = call(capsys, "cluster", "--workdir", str(work), "--n-clusters", "24",
                          "--levels", "3,8", "--backend", "numpy", "--min-cluster-size", "1")  # fmt: skip
    assert code == 0, err
    assert "levels         3 > 8 > 24 clusters" in out
    assert "stability      not measured for hierarchical k-means" in out
    manifest = json.loads((work / "manifest.json").read_text("utf-8"))
    assert manifest["stages"]["cluster"]["config"]["levels"] == [3, 8]


def test_level_centroids_file_is_byte_identical_across_writes(tmp_path, fitted):
    import time

    work = WorkDir(tmp_path)
    first = work.write_level_centroids(fitted.level_centroids_, fitted.parents_)
    data = (tmp_path / "level_centroids.npz").read_bytes()
    time.sleep(2.1)  # zip timestamps have a 2-second resolution
    assert work.write_level_centroids(fitted.level_centroids_, fitted.parents_) == first
    assert (tmp_path / "level_centroids.npz").read_bytes() == data
    with np.load(tmp_path / "level_centroids.npz") as stored:
        np.testing.assert_array_equal(stored["centroids_2"], fitted.centroids_)
        np.testing.assert_array_equal(stored["parents_1"], fitted.parents_[0])
