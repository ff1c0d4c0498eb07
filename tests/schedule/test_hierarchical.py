"""``policy="hierarchical"``: uniform per level down a cluster tree, clipped as clusterclip."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError
from clusterclip.schedule import build_schedule, iter_schedule
from clusterclip.schedule.hierarchy import ActiveTree, validate_levels
from clusterclip.schedule.policy import POLICIES, SchedulePolicy

from .oracle import oracle_schedule


def _quiet_build(labels, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return build_schedule(labels, **kwargs)


def _tree_corpus(seed, *, n_top=3, children=(1, 4), sizes=(1, 6), sparse=False, excluded=2):
    """Labels and levels (N, 2) of a random 3-level tree: top -> middle -> leaf."""
    rng = np.random.default_rng(seed)
    labels, rows = [], []
    leaf = middle = 0
    for top in range(n_top):
        for _ in range(int(rng.integers(*children, endpoint=True))):
            for _ in range(int(rng.integers(*children, endpoint=True))):
                size = int(rng.integers(*sizes, endpoint=True))
                leaf_id = leaf * 37 + 5 if sparse else leaf
                labels += [leaf_id] * size
                rows += [[top * 1000 + 3 if sparse else top, middle]] * size
                leaf += 1
            middle += 1
    labels += [-1] * excluded
    rows += [[int(rng.integers(-1, 9)), int(rng.integers(-1, 9))] for _ in range(excluded)]
    order = rng.permutation(len(labels))
    return np.asarray(labels)[order], np.asarray(rows, dtype=np.int64)[order]


def _compare(labels, levels, **kwargs):
    kwargs = {"policy": "hierarchical", "schedule_version": 1, **kwargs}
    fast = _quiet_build(labels, levels=levels, **kwargs)
    expected, clips, exhausted_at = oracle_schedule(labels, levels=levels, **kwargs)
    assert fast.indices.tolist() == expected
    ids, steps = fast.stats.cluster_ids, fast.stats.clip_step
    got = {int(ids[k]): int(s) for k, s in enumerate(steps) if s >= 0}
    assert got == clips
    assert fast.stats.exhausted_at == exhausted_at
    drawn = labels[fast.indices]  # the engine's counts are what the labels count
    assert fast.stats.draws_per_cluster.tolist() == [int((drawn == k).sum()) for k in ids.tolist()]
    repeats = np.bincount(fast.indices, minlength=labels.size)
    assert fast.stats.max_repeats_per_document == repeats.max(initial=0)
    assert fast.stats.n_distinct_documents == np.count_nonzero(repeats)
    return fast


# --------------------------------------------------------------------------- the rule


@st.composite
def tree_cases(draw):
    labels, levels = _tree_corpus(
        draw(st.integers(0, 10**6)),
        n_top=draw(st.integers(1, 4)),
        children=(1, draw(st.integers(1, 4))),
        sizes=(1, draw(st.integers(1, 7))),
        sparse=draw(st.booleans()),
        excluded=draw(st.integers(0, 3)),
    )
    depth = draw(st.sampled_from([1, 2]))  # top + leaf, or top + middle + leaf
    levels = levels[:, :1] if depth == 1 else levels
    kwargs = {
        "max_repeats": draw(st.sampled_from([1, 2, 3, None])),
        "num_samples": draw(st.integers(1, 150)),
        "on_exhausted": draw(st.sampled_from(["stop", "random"])),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "schedule_version": draw(st.sampled_from([1, 4])),  # the two rules that draw trees
    }
    return labels, levels, kwargs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree_cases())
def test_engine_equals_the_one_step_oracle(case):
    labels, levels, kwargs = case
    _compare(labels, levels, **kwargs)


@pytest.mark.parametrize("version", [1, 4])
def test_oracle_across_choice_blocks_with_many_clips(version):
    # 3 choice blocks (version 1) or windows (version 4), leaves from 1 to 3000
    # documents: clips inside and across blocks, top nodes emptying, node lists
    # compacted (version 4), then the fallback passes.
    labels, levels = _tree_corpus(11, n_top=5, children=(1, 6), sizes=(1, 3000), excluded=5)
    capped = 2 * int((labels >= 0).sum())
    fast = _compare(
        labels, levels, max_repeats=2, num_samples=min(capped + 5000, 3 * 65536),
        on_exhausted="random", seed=3, schedule_version=version,
    )  # fmt: skip
    assert (fast.stats.clip_step >= 0).sum() > 10


@pytest.mark.parametrize("version", [1, 4])
def test_token_budget_matches_the_oracle(version):
    labels, levels = _tree_corpus(4, n_top=3, children=(1, 3), sizes=(1, 20))
    lengths = np.random.default_rng(1).integers(0, 50, labels.size)
    kwargs = {"max_repeats": 2, "num_tokens": 4000, "lengths": lengths, "seed": 9}
    _compare(labels, levels, on_exhausted="random", schedule_version=version, **kwargs)


@pytest.mark.parametrize("seed", [0, 1, 2**40])
def test_without_levels_it_is_clusterclip(skewed_labels, seed):
    kwargs = {"max_repeats": 2, "num_samples": 5000, "on_exhausted": "random", "seed": seed}
    flat = _quiet_build(skewed_labels, **kwargs).indices
    assert np.array_equal(
        _quiet_build(skewed_labels, policy="hierarchical", **kwargs).indices, flat
    )
    # Degenerate trees walk the tree code and still give the flat rule exactly:
    # one root (u * 1 leaves u unchanged) and one chain per leaf.
    one_root = np.zeros((skewed_labels.size, 1), dtype=np.int64)
    chains = np.column_stack((skewed_labels, skewed_labels))
    for levels in (one_root, chains, np.zeros((skewed_labels.size, 0), dtype=np.int64)):
        got = _quiet_build(skewed_labels, policy="hierarchical", levels=levels, **kwargs)
        assert np.array_equal(got.indices, flat)


def test_each_level_gets_a_uniform_share_before_any_clip():
    # Top nodes with 1, 3 and 12 leaves of very different sizes: each top node gets
    # a third of the draws, each child an equal part of its parent's.
    sizes = {0: [5000], 1: [200, 3000, 400], 2: [700] * 12}
    labels, levels, leaf = [], [], 0
    for top, leaves in sizes.items():
        for size in leaves:
            labels += [leaf] * size
            levels += [[top]] * size
            leaf += 1
    labels, levels = np.array(labels), np.array(levels)
    n = 20000  # below every clip: leaf 1 (200 documents) expects 20000 / 9 of its 4000 draws
    schedule = build_schedule(
        labels, policy="hierarchical", levels=levels, max_repeats=20, num_samples=n, seed=5
    )
    assert (schedule.stats.clip_step < 0).all()
    drawn = labels[schedule.indices]
    top_share = np.bincount(levels[schedule.indices, 0], minlength=3) / n
    assert np.allclose(top_share, 1 / 3, atol=0.02)
    leaf_share = np.bincount(drawn, minlength=leaf) / n
    assert np.allclose(leaf_share[1:4], 1 / 9, atol=0.015)
    assert np.allclose(leaf_share[4:], 1 / 36, atol=0.008)


@pytest.mark.parametrize("max_repeats", [1, 3])
def test_no_document_beyond_the_clip(max_repeats):
    labels, levels = _tree_corpus(2, n_top=4, children=(1, 5), sizes=(1, 40))
    schedule = _quiet_build(
        labels, policy="hierarchical", levels=levels, max_repeats=max_repeats,
        num_samples=10**6, seed=0,
    )  # fmt: skip
    usable = int((labels >= 0).sum())
    assert schedule.indices.size == max_repeats * usable  # stops once every leaf is clipped
    assert np.bincount(schedule.indices).max() == max_repeats
    assert (labels[schedule.indices] >= 0).all()


def test_a_top_node_empties_when_its_last_leaf_is_clipped():
    # Top 0 holds one leaf of 1 document; top 1 a big leaf. Half the draws go to top 0
    # until its leaf's R passes are done, then every draw goes to top 1.
    labels = np.array([0] + [1] * 1000)
    levels = np.array([[0]] + [[1]] * 1000)
    schedule = build_schedule(
        labels, policy="hierarchical", levels=levels, max_repeats=3, num_samples=200, seed=1
    )
    clip = int(schedule.stats.clip_step[0])
    assert 0 <= clip < 30
    assert (schedule.indices[clip + 1 :] != 0).all()


# --------------------------------------------------------------------------- resume, ranks


def test_resume_at_random_positions_equals_the_uninterrupted_order():
    labels, levels = _tree_corpus(6, n_top=4, children=(1, 5), sizes=(1, 400))
    kwargs = {
        "policy": "hierarchical", "levels": levels, "max_repeats": 2,
        "num_samples": 2 * 65536 + 999, "on_exhausted": "random", "seed": 7,
    }  # fmt: skip
    full = _quiet_build(labels, **kwargs).indices
    rng = np.random.default_rng(0)
    for start in [0, 1, 65535, 65536, *rng.integers(0, full.size, 6).tolist()]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            tail = np.concatenate(
                list(iter_schedule(labels, start=start, block_size=777, **kwargs))
            )
        assert np.array_equal(tail, full[start:])


@pytest.mark.parametrize("world_size", [1, 3, 4])
def test_ranks_read_strided_slices_and_resume(world_size):
    labels, levels = _tree_corpus(8, n_top=3, children=(1, 4), sizes=(1, 30))
    kwargs = {
        "policy": "hierarchical", "levels": levels, "max_repeats": 3, "num_samples": 1000,
        "on_exhausted": "random",
        "seed": 2,
    }  # fmt: skip
    full = _quiet_build(labels, **kwargs).indices
    usable = full.size - full.size % world_size
    for rank in range(world_size):
        sampler = ClusterClipSampler(labels, rank=rank, world_size=world_size, **kwargs)
        got = list(sampler)
        assert got == full[rank:usable:world_size].tolist()
        state = sampler.state_dict()
        state["consumed_samples"] = 120 * world_size
        resumed = ClusterClipSampler(labels, rank=rank, world_size=world_size, **kwargs)
        resumed.load_state_dict(state)
        assert list(resumed) == got[120:]


def test_a_checkpoint_refuses_a_changed_tree():
    labels, levels = _tree_corpus(3, n_top=3, children=(2, 3), sizes=(1, 5))
    kwargs = {"policy": "hierarchical", "max_repeats": 2, "num_samples": 50, "seed": 1}
    state = ClusterClipSampler(labels, levels=levels, **kwargs).state_dict()
    regrouped = levels.copy()
    regrouped[:, 0] = np.where(labels >= 0, (levels[:, 0] + 1) % 3, -1)
    other = ClusterClipSampler(labels, levels=regrouped, **kwargs)
    with pytest.raises(ClusterClipError, match="levels_fingerprint"):
        other.load_state_dict(state)
    # The excluded documents' rows are not part of the tree.
    noisy = levels.copy()
    noisy[labels < 0] = 99
    ClusterClipSampler(labels, levels=noisy, **kwargs).load_state_dict(state)


def test_config_records_the_tree_only_when_given(skewed_labels):
    flat = SchedulePolicy(num_samples=10, seed=0).config_for(skewed_labels)
    assert "levels_fingerprint" not in flat.to_dict()
    tree = SchedulePolicy(policy="hierarchical", num_samples=10, seed=0).config_for(
        skewed_labels, levels=(skewed_labels // 4)[:, None]
    )
    assert tree.to_dict()["levels_fingerprint"] == tree.levels_fingerprint is not None


# --------------------------------------------------------------------------- inputs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree_cases())
def test_the_quick_check_of_levels_gives_the_sorted_checks_tree(case):
    """Valid levels over dense ids skip the sort; the tree is the same either way."""
    from clusterclip.schedule import hierarchy

    labels, levels, _ = case
    quick = validate_levels(levels, labels)
    checked = hierarchy._checked_tree(np.asarray(levels, dtype=np.int64), labels)
    assert quick.leaf_ids.tolist() == checked.leaf_ids.tolist()
    assert quick.paths.tolist() == checked.paths.tolist()


def test_a_leaf_with_two_parents_is_named_with_its_rows():
    labels = np.array([0, 1, 1, 2, 1])
    levels = np.array([[0, 0], [0, 1], [0, 1], [1, 2], [0, 2]])
    with pytest.raises(
        ClusterClipError,
        match=r"`levels` must be one ancestor path per leaf cluster; got 'leaf 1 under 1 at "
        r"level 1 in row 1 and under 2 in row 4'",
    ):
        build_schedule(labels, policy="hierarchical", levels=levels, num_samples=5, seed=0)


def test_a_node_with_two_parents_is_refused():
    labels = np.array([0, 1, 2])
    levels = np.array([[0, 5], [1, 5], [1, 6]])  # node 5 of level 1 under 0 and under 1
    with pytest.raises(ClusterClipError, match=r"one parent per node.*node 5 at level 1"):
        validate_levels(levels, labels)


@pytest.mark.parametrize(
    ("levels", "match"),
    [
        (np.array([0, 0, 1]), r"a 2-D integer array of shape \(3, L - 1\)"),
        (np.zeros((2, 1), dtype=np.int64), r"shape \(3, L - 1\)"),
        (np.zeros((3, 1)), r"integer array"),
        (np.array([[0], [-1], [1]]), r"non-negative for every document.*row 1"),
    ],
)
def test_bad_levels_are_refused(levels, match):
    with pytest.raises(ClusterClipError, match=match):
        validate_levels(levels, np.array([0, 1, 2]))


def test_excluded_documents_are_ignored_and_sparse_ids_kept():
    labels = np.array([10**9, -1, 7, 10**9, -5, 7])
    levels = np.array([[3], [-1], [8], [3], [42], [8]])
    hierarchy = validate_levels(levels, labels)
    assert hierarchy.leaf_ids.tolist() == [7, 10**9]
    assert hierarchy.paths.tolist() == [[8], [3]]
    schedule = build_schedule(
        labels, policy="hierarchical", levels=levels, max_repeats=2, num_samples=8, seed=0
    )
    assert sorted(schedule.indices.tolist()) == [0, 0, 2, 2, 3, 3, 5, 5]


def test_near_duplicate_units_draw_down_the_tree():
    # Documents 0-2 are copies (one unit in leaf 0); the unit's members take turns and
    # together appear at most R times, while the tree still splits draws per top node.
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    levels = np.array([[0], [0], [0], [0], [0], [1], [1], [1], [1]])
    duplicate_of = np.array([0, 0, 0, 3, 4, 5, 6, 7, 8])
    kwargs = {"policy": "hierarchical", "levels": levels, "max_repeats": 3, "seed": 4}
    schedule = _quiet_build(labels, num_samples=100, duplicate_of=duplicate_of, **kwargs)
    counts = np.bincount(schedule.indices, minlength=9)
    assert counts[:3].sum() == 3 and counts[3:].max() == 3
    assert schedule.indices.size == 3 * 7  # 7 units, R passes each


def test_settings_that_do_not_combine_are_refused():
    labels = np.array([0, 1])
    with pytest.raises(
        ClusterClipError, match=r"order='planned' does not support policy='hierarchical'"
    ):
        SchedulePolicy(policy="hierarchical", order="planned", num_samples=4, seed=0)
    with pytest.raises(ClusterClipError, match=r"`schedule_version` must be the default rule"):
        SchedulePolicy(policy="hierarchical", schedule_version=3, num_samples=4, seed=0)
    with pytest.raises(ClusterClipError, match=r"`cluster_weights` must be None unless"):
        SchedulePolicy(policy="hierarchical", cluster_weights=[1, 2], num_samples=4, seed=0)
    with pytest.raises(ClusterClipError, match=r"`alpha` must be None unless"):
        SchedulePolicy(policy="hierarchical", alpha=0.5, num_samples=4, seed=0)
    with pytest.raises(ClusterClipError, match=r"`levels` must be None unless policy='hierarch"):
        build_schedule(labels, levels=np.zeros((2, 1), int), num_samples=4, seed=0)


def test_the_policy_is_registered_and_clips():
    policy = POLICIES["hierarchical"]
    assert policy.uses_levels and policy.clips and not policy.accepts_weights
    assert SchedulePolicy(policy="hierarchical", num_samples=1, seed=0).max_repeats == 4


def test_active_tree_prunes_up_the_path():
    # Leaves (groups) 0..3 with paths top/middle: 0:(0,0) 1:(0,0) 2:(0,1) 3:(1,2).
    tree = ActiveTree(np.array([[0, 0], [0, 0], [0, 1], [1, 2]]), np.array([4, 5, 6, 7]))
    u = np.array([0.0, 0.2, 0.3, 0.45, 0.7, 0.99])
    assert tree.walk(u).tolist() == [0, 1, 2, 2, 3, 3]
    tree.deactivate(2)  # middle 1 empties; top 0 keeps middle 0
    assert tree.walk(u).tolist() == [0, 0, 1, 1, 3, 3]
    tree.deactivate(3)  # top 1 empties: everything goes to top 0, middle 0
    assert tree.walk(u).tolist() == [0, 0, 0, 0, 1, 1]


# --------------------------------------------------------------------------- the stage and CLI


def _kjv_run(root, *options):
    """`clusterclip run` over every 60th KJV verse (tfidf) in ``root / "w"``, with ``options``."""
    import json

    from clusterclip.cli import main
    from tests.product_support import kjv_records

    corpus = root / "corpus.jsonl"
    records = kjv_records(step=60)
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    work = root / "w"
    args = ["run", str(corpus), "--workdir", str(work), "--encoder", "tfidf"]
    assert main([*args, "--duplicates", "off", "--no-report", *options]) == 0
    return work


@pytest.fixture(scope="module")
def flat_workdir(tmp_path_factory):
    """A work directory clustered flat (8 clusters of KJV verses), no schedule options used."""
    return _kjv_run(tmp_path_factory.mktemp("hierarchical"), "--n-clusters", "8")


@pytest.fixture(scope="module")
def tree_workdir(tmp_path_factory):
    """The same verses clustered in levels (3 top nodes, 12 leaves) by the real cluster stage."""
    return _kjv_run(tmp_path_factory.mktemp("hierarchical-tree"), "--n-clusters", "12",
                    "--levels", "3", "--policy", "hierarchical", "--max-repeats", "2",
                    "--num-samples", "500", "--seed", "3")  # fmt: skip


def test_run_draws_down_the_tree_the_cluster_stage_wrote(tree_workdir):
    from clusterclip.io import WorkDir

    work = WorkDir(tree_workdir)
    levels, labels = work.levels(), work.labels()
    assert levels is not None and levels.shape == (labels.size, 1)
    kept = labels >= 0
    assert set(np.unique(levels[kept]).tolist()) <= {0, 1, 2}
    saved = work.schedule()
    expected = _quiet_build(
        labels, policy="hierarchical", levels=levels, max_repeats=2, num_samples=500, seed=3
    )
    assert np.array_equal(np.asarray(saved.indices), expected.indices)
    assert saved.config["levels_fingerprint"] == expected.config.levels_fingerprint is not None
    # the flat rule over the same leaves is another order: the tree was used
    flat = _quiet_build(labels, policy="clusterclip", max_repeats=2, num_samples=500, seed=3)
    assert not np.array_equal(flat.indices, expected.indices)


def test_a_flat_work_directory_has_no_levels_and_is_refused(flat_workdir, capsys):
    from clusterclip.cli import main
    from clusterclip.io import WorkDir

    assert WorkDir(flat_workdir).levels() is None
    args = ["schedule", "--workdir", str(flat_workdir), "--policy", "hierarchical",
            "--num-samples", "50", "--duplicates", "off"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "has no cluster tree" in err and "--levels ...` first" in err


def test_the_cli_refuses_hierarchical_over_a_labels_file(tmp_path, capsys):
    from clusterclip.cli import main

    np.save(tmp_path / "labels.npy", np.array([0, 1, 1]))
    args = ["schedule", "--labels", str(tmp_path / "labels.npy"), "--out", str(tmp_path / "s.npy"),
            "--policy", "hierarchical", "--num-samples", "5"]  # fmt: skip
    assert main(args) == 2
    assert "--policy hierarchical needs the cluster tree" in capsys.readouterr().err


def test_the_cli_refuses_planned_hierarchical(tmp_path, capsys):
    from clusterclip.cli import main

    np.save(tmp_path / "labels.npy", np.array([0, 1, 1]))
    args = ["schedule", "--labels", str(tmp_path / "labels.npy"), "--out", str(tmp_path / "s.npy"),
            "--policy", "hierarchical", "--order", "planned", "--num-samples", "5"]  # fmt: skip
    assert main(args) == 2
    assert "--order planned does not support --policy hierarchical" in capsys.readouterr().err
