"""KMeans: determinism, out-of-core == in-memory, empty clusters, backends, errors."""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.cluster import KMeans, assign, assign_matrix, k_means
from clusterclip.cluster.backends import BACKENDS, cuda_device, resolve_backend
from clusterclip.errors import ClusterClipError
from clusterclip.io.shards import ShardedMatrix


def nmi(a: np.ndarray, b: np.ndarray) -> float:
    from sklearn.metrics import normalized_mutual_info_score

    return float(normalized_mutual_info_score(a, b))


def test_recovers_mixture_and_reports_stats(mixture):
    X, y = mixture
    km = KMeans(12, seed=0, backend="numpy").fit(X)
    assert nmi(y, km.labels_) > 0.9
    assert km.sample_size_ == len(X) and km.labels_.dtype == np.int32
    assert km.cluster_centers_.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(km.cluster_centers_, axis=1), 1, atol=1e-5)
    assert 1 <= km.n_iter_ <= 20 and len(km.stats_) == km.n_iter_
    assert {"objective", "imbalance_factor", "empty_resplit", "seconds"} <= set(km.stats_[0])
    objectives = [s["objective"] for s in km.stats_]
    assert objectives[-1] >= objectives[0]
    assert km.objective_ == pytest.approx(objectives[-1], abs=1e-3)


def test_same_seed_same_result_other_seed_other_sample(mixture):
    X, _ = mixture
    params = dict(seed=3, max_points_per_centroid=50, backend="numpy")
    a, b = KMeans(12, **params).fit(X), KMeans(12, **params).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.sample_size_ == 600
    c = KMeans(12, seed=4, max_points_per_centroid=50, backend="numpy").fit(X)
    assert not np.array_equal(a.sample_indices_, c.sample_indices_)


def test_out_of_core_equals_in_memory(mixture, tmp_path):
    X16 = mixture[0].astype(np.float16)
    memmap = np.lib.format.open_memmap(
        tmp_path / "x.npy", mode="w+", dtype=np.float16, shape=X16.shape
    )
    memmap[:] = X16
    memmap.flush()
    for i, (start, stop) in enumerate([(0, 1000), (1000, 1001), (1001, 3000)]):
        np.save(tmp_path / f"part-{i:05d}.npy", X16[start:stop])
    sharded = ShardedMatrix.from_directory(tmp_path)
    params = dict(seed=5, max_points_per_centroid=40, backend="numpy", batch_size=97)
    fits = [
        KMeans(12, **params).fit(data)
        for data in (X16, np.load(tmp_path / "x.npy", mmap_mode="r"), sharded)
    ]
    for other in fits[1:]:
        np.testing.assert_array_equal(fits[0].sample_indices_, other.sample_indices_)
        np.testing.assert_array_equal(fits[0].cluster_centers_, other.cluster_centers_)
        np.testing.assert_array_equal(fits[0].labels_, other.labels_)
    np.testing.assert_array_equal(fits[0].predict(X16), fits[2].predict(sharded))


def test_duplicates_force_empty_cluster_resplits():
    # 600 rows but only 3 distinct directions and 8 clusters: every iteration
    # must re-split empty clusters, and the result must stay finite and unit.
    base = np.eye(3, 16, dtype=np.float32)
    X = np.repeat(base, [500, 90, 10], axis=0)
    km = KMeans(8, seed=0, backend="numpy").fit(X)
    assert sum(s["empty_resplit"] for s in km.stats_) > 0
    assert np.isfinite(km.cluster_centers_).all()
    np.testing.assert_allclose(np.linalg.norm(km.cluster_centers_, axis=1), 1, atol=1e-5)
    assert km.objective_ == pytest.approx(1.0, abs=1e-4)
    assert len(np.unique(km.labels_)) == 3
    # Random seeds can all land on the two big directions; splitting along a
    # random direction still separates the third one.
    km = KMeans(8, seed=0, init="random", n_iter=50, backend="numpy").fit(X)
    assert sum(s["empty_resplit"] for s in km.stats_) > 0
    assert km.objective_ == pytest.approx(1.0, abs=1e-4)


def test_resplit_fills_clusters_when_data_allows(mixture):
    # Random init on duplicated-heavy data starts with many seeds on the same
    # point; splits must end with every cluster used.
    X, _ = mixture
    X = np.concatenate([np.repeat(X[:1], 2000, axis=0), X])
    km = KMeans(12, seed=1, init="random", backend="numpy").fit(X)
    assert km.stats_[0]["empty_resplit"] > 0
    assert len(np.unique(km.labels_)) == 12


@pytest.mark.parametrize("init", ["k-means++", "afk-mc2", "random"])
def test_every_init_is_deterministic(mixture, init):
    X, y = mixture
    a = KMeans(12, seed=2, init=init, backend="numpy").fit(X)
    b = KMeans(12, seed=2, init=init, backend="numpy").fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert a.init_["init"] == init
    assert nmi(y, a.labels_) > 0.8


#: Every concrete backend this machine runs (torch-cuda where torch sees a GPU; on a CPU
#: machine its code runs through ``test_the_cuda_code_path_on_the_cpu_gives_the_fp32_answer``).
RUNNABLE = [b for b in BACKENDS if b not in ("auto", "fastest")
            and (b != "torch-cuda" or cuda_device() is not None)]  # fmt: skip


@pytest.mark.parametrize("backend", RUNNABLE)
def test_backends_agree_on_separated_data(mixture, backend):
    X, _ = mixture
    reference = KMeans(12, seed=0, backend="numpy").fit(X)
    km = KMeans(12, seed=0, backend=backend).fit(X)
    assert km.backend_ == resolve_backend(backend)
    # One E-step from the same centroids: fp32 backends agree exactly, bf16 on
    # all but near-ties; whole fits may then drift to another local optimum.
    same_step = assign(X, reference.cluster_centers_, backend=backend)[0]
    agreement = np.mean(same_step == reference.labels_)
    if km.backend_ == "torch-bf16":
        assert agreement > 0.97
        assert km.objective_ == pytest.approx(reference.objective_, rel=0.02)
    else:
        assert agreement == 1.0
        assert km.objective_ == pytest.approx(reference.objective_, rel=1e-5)
        assert nmi(reference.labels_, km.labels_) > 0.99


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("n_centroids", [255, 256, 1000, 2000])
def test_torch_two_level_argmax_and_fused_sums(n_centroids, precision):
    """Many centroids take the blocked two-level arg-max, with padding columns
    (copies of centroid 0) when K is not a multiple of the group width."""
    pytest.importorskip("torch")
    from clusterclip.cluster.backends import get_backend

    rng = np.random.default_rng(n_centroids)
    C = rng.standard_normal((n_centroids, 48)).astype(np.float32)
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    X = rng.standard_normal((3000, 48)).astype(np.float32)
    X[:5] = C[0]  # best centroid 0: the padding copies tie with it and must map back to 0
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    engine = get_backend(f"torch-{precision}")
    labels, scores, sums = engine.assign_and_sum(engine.prepare(X), X, C)
    assert labels.min() >= 0 and labels.max() < n_centroids
    assert (labels[:5] == 0).all()
    exact = X.astype(np.float64) @ C.T.astype(np.float64)
    gap = exact.max(axis=1) - exact[np.arange(len(X)), labels]
    # fp32 picks the true maximum; bf16 may pick a centroid within its resolution
    assert gap.max() <= (1e-5 if precision == "fp32" else 1e-2)
    if precision == "fp32":
        assert np.mean(labels == exact.argmax(axis=1)) > 0.999
    reference = np.zeros((n_centroids, 48))
    np.add.at(reference, labels, X.astype(np.float64))
    np.testing.assert_allclose(sums, reference, atol=1e-4)
    assert np.array_equal(engine.top1(engine.prepare(X), C)[0], labels)  # same without sums


def test_the_cuda_code_path_on_the_cpu_gives_the_fp32_answer(mixture):
    """torch-cuda is torch-fp32 on another device with the sums taken on the host: run
    with device="cpu" and the host sums, it picks the same labels and scores as
    torch-fp32, its sums are the rows' sums, and a whole fit reaches the same objective."""
    from clusterclip.cluster.backends import TorchBackend, get_backend

    X, _ = mixture
    device_path = TorchBackend("fp32", device="cpu", fused=False)
    fused = get_backend("torch-fp32")
    centroids = KMeans(12, seed=0, backend="numpy").fit(X).cluster_centers_
    labels, scores, sums = device_path.assign_and_sum(device_path.prepare(X), X, centroids)
    same_labels, same_scores, _ = fused.assign_and_sum(fused.prepare(X), X, centroids)
    np.testing.assert_array_equal(labels, same_labels)
    np.testing.assert_array_equal(scores, same_scores)
    reference = np.zeros_like(centroids, dtype=np.float64)
    np.add.at(reference, labels, X.astype(np.float64))
    np.testing.assert_allclose(sums, reference, atol=1e-4)


def test_auto_picks_the_gpu_where_torch_sees_one(monkeypatch):
    import clusterclip.cluster.backends as backends

    monkeypatch.setattr(backends, "cuda_device", lambda: "NVIDIA H200")
    assert backends.auto_rule() == ("torch-cuda", "CUDA device NVIDIA H200, torch installed")
    monkeypatch.setattr(backends, "cuda_device", lambda: None)
    assert backends.auto_rule()[0] != "torch-cuda"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # AVX2 without AVX-512 (AMD Zen 2/3): numpy's newer OpenBLAS, whatever is installed
        ({"avx2", "fma", "f16c"}, "numpy"),
        # AVX-512 without bf16 (Ice Lake): faiss on its fixed OpenBLAS kernels
        ({"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}, "faiss"),
        # native bf16 (Sapphire Rapids): bf16 products on torch
        ({"avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_bf16"}, "torch-bf16"),
    ],
)
def test_auto_is_a_rule_of_the_cpu_flags(monkeypatch, flags, expected):
    import clusterclip.cluster.backends as backends
    import clusterclip.cluster.blas as blas

    blas.import_faiss()  # on the real flags: the faked ones must not pick its kernels
    monkeypatch.setattr(backends, "cuda_device", lambda: None)
    monkeypatch.setattr(blas, "cpu_flags", lambda: frozenset(flags))
    backend, why = backends.auto_rule()
    assert backend == expected
    assert ("AVX2 without AVX-512" in why) == (expected == "numpy")
    # the real machine follows the same rule
    monkeypatch.undo()
    real = blas.cpu_flags()
    if {"avx2", "fma"} <= real and not {"avx512f", "avx512_bf16", "amx_bf16"} & real:
        assert backends.auto_rule()[0] in ("numpy", "torch-cuda")


def test_torch_cuda_without_a_gpu_says_what_to_pass_instead():
    from clusterclip.cluster.backends import TorchBackend

    if cuda_device() is not None:  # a GPU machine: the backend is there to use
        assert TorchBackend("fp32", device="cuda").name == "torch-cuda"
        return
    with pytest.raises(ClusterClipError, match="--backend torch-fp32"):
        KMeans(4, seed=0, backend="torch-cuda").fit(np.eye(8, dtype=np.float32))


def test_predict_streams_in_batches_and_matches_assign(mixture):
    X, _ = mixture
    km = KMeans(12, seed=0, backend="numpy", batch_size=128).fit(X)
    labels, scores = assign_matrix(X, km.cluster_centers_, backend="numpy", batch_size=1000)
    np.testing.assert_array_equal(km.predict(X), labels)
    np.testing.assert_array_equal(labels[km.sample_indices_], km.labels_)
    one_labels, one_scores = assign(X, km.cluster_centers_, backend="numpy")
    np.testing.assert_array_equal(one_labels, labels)
    np.testing.assert_allclose(one_scores, scores, atol=1e-6)
    np.testing.assert_allclose(
        scores, np.einsum("ij,ij->i", X, km.cluster_centers_[labels]), atol=1e-5
    )


def test_assign_gives_zero_rows_minus_one():
    C = np.eye(2, dtype=np.float32)
    labels, scores = assign(
        np.array([[0.0, 0.0], [0.0, 5.0]], dtype=np.float16), C, backend="numpy"
    )
    assert labels.tolist() == [-1, 1] and scores.tolist() == [0.0, 1.0]
    assert labels.dtype == np.int32 and scores.dtype == np.float32


def test_function_twin(mixture):
    X, _ = mixture
    centers, labels, objective = k_means(X, 12, seed=0, backend="numpy")
    km = KMeans(12, seed=0, backend="numpy").fit(X)
    np.testing.assert_array_equal(centers, km.cluster_centers_)
    assert labels.shape == (len(X),) and objective == km.objective_


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_the_reported_fit_does_not_depend_on_the_threads_lloyd_ran_on(
    monkeypatch, mixture, backend
):
    """Each fit times its Lloyd loop on all threads and on one and keeps the faster: two
    fits of the same data may choose differently. The final E-step (labels, objective)
    runs on the default threads either way, so what is reported is the same."""
    import clusterclip.cluster.kmeans as kmeans_module

    X, _ = mixture
    fits = []
    for threads in (1, 2):
        monkeypatch.setattr(
            kmeans_module, "lloyd_threads", lambda *a, threads=threads: {"threads": threads}
        )
        fits.append(KMeans(12, seed=0, backend=backend).fit(X))
    one, two = fits
    assert one.init_["lloyd_threads"] == {"threads": 1}
    assert two.init_["lloyd_threads"] == {"threads": 2}
    np.testing.assert_array_equal(one.cluster_centers_, two.cluster_centers_)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    assert one.objective_ == two.objective_


# ---------------------------------------------------------------- errors


def test_error_more_clusters_than_rows():
    with pytest.raises(
        ClusterClipError,
        match=r"`n_clusters` must be an int in \[1, 4\].*got 5\. Pass n_clusters=4 or fewer",
    ):
        KMeans(5, seed=0).fit(np.eye(4, dtype=np.float32))


def test_error_names_nan_and_inf_rows():
    X = np.ones((20, 4), dtype=np.float32)
    X[[3, 7, 8, 9, 11, 12, 15]] = np.nan
    X[1, 2] = np.inf
    with pytest.raises(
        ClusterClipError, match=r"`X` must be finite.*rows \[1, 3, 7, 8, 9\] and 3 more.*Re-embed"
    ):
        KMeans(2, seed=0, backend="numpy").fit(X)
    with pytest.raises(ClusterClipError, match=r"rows \[101\]"):
        assign(X[:2], np.eye(2, 4, dtype=np.float32), backend="numpy", offset=100)


def test_error_zero_rows():
    X = np.ones((10, 4), dtype=np.float32)
    X[[2, 6]] = 0
    with pytest.raises(
        ClusterClipError, match=r"non-zero norm.*all-zero rows \[2, 6\].*Drop those rows"
    ):
        KMeans(2, seed=0, backend="numpy").fit(X)


def test_error_dimension_mismatch():
    with pytest.raises(
        ClusterClipError, match=r"`centroids` must be a \(K, 8\) matrix.*shape \(3, 4\).*same model"
    ):
        assign(np.ones((5, 8)), np.eye(3, 4, dtype=np.float32))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_clusters": 0}, r"`n_clusters` must be an int in \[1, inf\); got 0"),
        ({"n_clusters": 2, "n_iter": 0}, r"`n_iter` must be an int in \[1, inf\); got 0"),
        ({"n_clusters": 2, "init": "kmeans++"}, r"`init` must be one of \['k-means\+\+'"),
        ({"n_clusters": 2, "backend": "gpu"}, r"`backend` must be one of \['auto'"),
        ({"n_clusters": 2, "max_points_per_centroid": 0}, r"`max_points_per_centroid`"),
    ],
)
def test_error_bad_parameters(kwargs, message):
    n_clusters = kwargs.pop("n_clusters")
    with pytest.raises(ClusterClipError, match=message):
        KMeans(n_clusters, seed=0, **kwargs).fit(np.eye(4, dtype=np.float32))


def test_error_not_a_matrix_and_not_fitted():
    with pytest.raises(ClusterClipError, match=r"`X` must be a 2-D matrix"):
        KMeans(2, seed=0).fit(np.ones(5))
    with pytest.raises(ClusterClipError, match="not fitted yet"):
        KMeans(2, seed=0).predict(np.ones((2, 2)))


def test_lloyd_threads_are_measured_and_do_not_change_the_result():
    """The fit times one E-step on all threads and on one and keeps the faster; the
    centroids and labels are the same either way (only the time differs)."""
    import torch

    from clusterclip.cluster.backends import get_backend
    from clusterclip.cluster.kmeans import lloyd_threads
    from clusterclip.cluster.synthetic import vmf_mixture
    from clusterclip.threads import one_thread

    X, _ = vmf_mixture(6000, 64, 40, seed=3)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        record = lloyd_threads(get_backend("torch-bf16"), X, X[:40].copy())
        assert record["threads"] in (1, 2) and set(record["seconds"]) == {"all", "one"}
        assert (record["threads"] == 1) == (record["seconds"]["one"] < record["seconds"]["all"])
        fitted = KMeans(40, seed=0, n_iter=5, backend="torch-bf16").fit(X)
        assert fitted.init_["lloyd_threads"]["threads"] in (1, 2)
        with one_thread():
            assert torch.get_num_threads() == 1
            single = KMeans(40, seed=0, n_iter=5, backend="torch-bf16").fit(X)
        assert single.init_["lloyd_threads"] == {"threads": 1, "seconds": None}
        np.testing.assert_array_equal(fitted.labels_, single.labels_)
        np.testing.assert_array_equal(fitted.cluster_centers_, single.cluster_centers_)
    finally:
        torch.set_num_threads(before)
