"""CI miniature of the LM experiment: every policy trains with finite, decreasing loss.

Real pipeline on a tiny KJV subset: the cheapest encoder (hashed TF-IDF), the
real k-means and schedule core, a one-layer GPT-2; a few seconds on 2 cores.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from clusterclip import build_schedule  # noqa: E402
from clusterclip.errors import ClusterClipError  # noqa: E402
from clusterclip.experiments import data, evaluate, lm  # noqa: E402
from clusterclip.experiments.corpora import _split_at_headings, load_corpus  # noqa: E402
from clusterclip.io import WorkDir  # noqa: E402

POLICIES = "random,uniform,clusterclip-r2,planned-r2,temperature-a0.5,temperature-a0.5-r2"


#: The miniature's settings (data and split part; the model flags are in the argv).
MINI = {
    "corpus": "kjv",
    "max_docs": 240,
    "encoder": "tfidf",
    "n_clusters": 6,
    "heldout_fraction": 0.15,
    "vocab_size": 300,
    "max_doc_tokens": 48,
}


@pytest.fixture(scope="module")
def mini_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    argv = [f"--{name.replace('_', '-')}={value}" for name, value in MINI.items()] + [
        f"--workdir={root / 'work'}",
        f"--out={root / 'out'}",
        "--n-layer=1",
        "--n-head=2",
        "--n-embd=32",
        "--context=32",
        "--batch-size=4",
        "--lr=1e-2",
        "--tokens=3072",
        "--epochs=1",
        "--eval-points=2",
        f"--policies={POLICIES}",
        "--seeds=0",
    ]
    assert lm.main(argv) == 0
    records = lm.read_results(root / "out")
    return root, records


def test_every_policy_trains_with_finite_decreasing_loss(mini_results):
    _, records = mini_results
    assert sorted(r["policy"] for r in records) == sorted(POLICIES.split(","))
    for record in records:
        assert all(math.isfinite(v) for v in record["metrics"].values()), record["policy"]
        curve = [point["natural"] for point in record["curve"]]
        assert curve[-1] < curve[0], (record["policy"], curve)
        train = [point["train"] for point in record["train_curve"]]
        assert train[-1] < train[0], (record["policy"], train)
        assert record["budget_tokens"] == 3072  # equal budget for every policy


def test_rerun_skips_finished_runs_and_writes_the_report(mini_results):
    root, records = mini_results
    assert lm.main([f"--out={root / 'out'}", "--report-only"]) == 0
    tables = (root / "out" / "results.md").read_text()
    assert "Paired difference vs random" in tables
    assert list(root.joinpath("out").glob("curves-*.png"))
    assert list(root.joinpath("out").glob("rare-share-*.png"))
    lines = (root / "out" / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["policy"] for line in lines] == [r["policy"] for r in records]


def test_clip_bounds_repeats_in_the_mini_runs(mini_results):
    _, records = mini_results
    by_policy = {r["policy"]: r for r in records}
    # one epoch of budget, capacity of two: the clip is never exceeded
    assert by_policy["planned-r2"]["dynamics"]["max_repeats_seen"] <= 2
    assert by_policy["clusterclip-r2"]["dynamics"]["max_repeats_seen"] <= 2
    assert by_policy["temperature-a0.5-r2"]["dynamics"]["max_repeats_seen"] <= 2


def test_training_order_is_the_product_schedule(mini_results):
    root, _ = mini_results
    cfg = lm.ExperimentConfig(**{**MINI, "workdir": str(root / "work"), "out": str(root / "out")})
    prep = lm.prepare(cfg, log=lambda line: None)
    policy = lm.parse_policy("clusterclip-r2")
    pool, order = lm.schedule_order(prep, cfg, policy, 3, budget=1024)
    lengths = np.diff(prep.offsets)[pool] + 1
    _, pool_labels = np.unique(prep.labels[pool], return_inverse=True)
    schedule = build_schedule(
        pool_labels, num_tokens=1024 + cfg.max_doc_tokens + 2, lengths=lengths,
        on_exhausted="random", seed=3, max_repeats=2, schedule_version=cfg.schedule_version,
    )  # fmt: skip
    assert np.array_equal(order, pool[schedule.indices])
    assert np.bincount(order).max() <= 2


def test_preparation_goes_through_the_runner(mini_results):
    # runs after the other tests of the fixture: it leaves the work directory at k=5
    root, _ = mini_results
    work = WorkDir(root / "work")
    stages = work.manifest()["stages"]
    assert [stages[name]["complete"] for name in ("embed", "cluster", "experiment")] == [True] * 3
    cfg = lm.ExperimentConfig(**{**MINI, "workdir": str(root / "work"), "out": str(root / "out")})
    lines: list[str] = []
    again = lm.prepare(cfg, log=lines.append)
    assert [line.split()[1:3] for line in lines] == [["embed", "skipped"], ["cluster", "skipped"],
                                                     ["experiment", "skipped"]]  # fmt: skip
    # a changed cluster count redoes the clusters and the split, not the embeddings
    lines.clear()
    other = lm.prepare(dataclasses.replace(cfg, n_clusters=5), log=lines.append)
    actions = {line.split()[1]: line.split()[2] for line in lines if "{" not in line}
    assert actions == {"embed": "skipped", "cluster": "ran", "experiment": "ran"}
    assert len(np.unique(other.labels[other.labels >= 0])) == 5
    assert np.array_equal(work.labels(), other.labels)
    # every one of the 240 documents is in the training split or held out (the split's
    # sizes follow the clusters, which follow the k-means backend `auto` picks here)
    summary = again.summary
    assert (
        summary["train_documents"]
        + summary["heldout_documents"]
        + summary["near_duplicate_heldout"]
        == 240 - summary["excluded"]
    )


def test_pack_sequences_golden():
    flat = np.arange(1, 7, dtype=np.int32)
    offsets = np.array([0, 3, 6])
    packed = data.pack_sequences(
        np.array([1, 0]), flat, offsets, eos_id=0, n_sequences=2, context=3
    )
    assert packed.tolist() == [[0, 4, 5, 6], [6, 0, 1, 2]]
    with pytest.raises(ClusterClipError, match="`schedule` must be at least 10 tokens"):
        data.pack_sequences(np.array([1]), flat, offsets, eos_id=0, n_sequences=3, context=3)


def test_stratified_split_gives_every_cluster_heldout_text():
    labels = np.array([0] * 50 + [1] * 3 + [2] * 2 + [3] + [-1] * 4)
    train, heldout = data.stratified_split(labels, heldout_fraction=0.1, seed=0)
    assert set(labels[heldout]) == {0, 1, 2}  # the singleton stays in training
    assert np.intersect1d(train, heldout).size == 0
    assert not np.isin(np.flatnonzero(labels < 0), np.concatenate([train, heldout])).any()
    again = data.stratified_split(labels, heldout_fraction=0.1, seed=0)
    assert np.array_equal(again[1], heldout)


def test_long_tail_subset_spans_the_requested_ratio():
    labels = np.repeat(np.arange(12), 400)
    keep = data.long_tail_subset(labels, n_docs=600, span=150, seed=0)
    sizes = np.bincount(labels[keep])
    assert abs(int(keep.sum()) - 600) <= 12
    assert sizes.max() / sizes.min() >= 100
    heldout = data.heldout_from_rest(labels, keep, per_cluster=5, seed=0)
    assert np.bincount(labels[heldout]).tolist() == [5] * 12
    assert not keep[heldout].any()


def test_near_duplicates_are_flagged():
    references = np.eye(4, dtype=np.float32)
    queries = np.array([[1, 0, 0, 0], [0.6, 0.8, 0, 0]], dtype=np.float32)
    mask, best = data.near_duplicate_mask(queries, references, threshold=0.95)
    assert mask.tolist() == [True, False]
    assert best[1] == pytest.approx(0.8)


def test_metrics_macro_rare_and_natural_weights():
    loss_sum = np.array([2.0, 4.0, 9.0])
    n_tokens = np.array([1, 1, 3])
    clusters = np.array([0, 0, 1])
    metrics = evaluate.loss_metrics(
        loss_sum, n_tokens, clusters, rare=np.array([1]), categories=["a", "b", "b"]
    )
    assert metrics == {"natural": 3.0, "macro": 3.0, "rare": 3.0, "category": 2.625}
    weighted = evaluate.loss_metrics(
        loss_sum, n_tokens, clusters, rare=np.array([1]), natural_weights=np.array([3.0, 1.0])
    )
    assert weighted["natural"] == pytest.approx(3.0)


def test_policy_specs_and_errors():
    assert lm.parse_policy("planned-r4").order == "planned"
    assert lm.parse_policy("temperature-a0.5").alpha == 0.5
    assert lm.parse_policy("random").max_repeats is None
    with pytest.raises(ClusterClipError, match="`policies` must be random, uniform"):
        lm.parse_policy("clusterclip")
    with pytest.raises(ClusterClipError, match="`corpus` must be one of kjv"):
        load_corpus("no-such-corpus.jsonl")


def test_rst_sections_split_at_headings():
    lines = ["Title", "=====", "intro", "", "Part", "----", "body"]
    assert _split_at_headings(lines) == [["Title", "intro", ""], ["Part", "body"]]
