"""What each random draw is keyed by (DESIGN.md section 2, schedule/engine.py).

* The cluster choice at global position ``t`` uses the uniform ``t % B`` of
  ``default_rng(SeedSequence([seed, PURPOSE_CHOICE, t // B]))``, ``B = CHOICE_BLOCK``
  (seeds from ``2**32`` on use the wide word layout, so no seed aliases another):
  every block has its own draws, fixed by (seed, block) alone.
* The permutation of pass ``p`` of cluster ``k`` is regenerated from
  ``(seed, k, p)``: the order in which a cluster's documents come depends on
  the cluster's *id* and members, not on which other clusters exist.

The expected values here are computed from the documented ``SeedSequence``
words, not from the engine's helpers, so a change in those helpers fails too.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule import build_schedule

from .conftest import quiet

B = 65_536  # CHOICE_BLOCK, part of SCHEDULE_VERSION (test_golden pins it)
PURPOSE_CHOICE = 1


def documented_words(seed: int, block: int) -> list[int]:
    """The documented entropy words (docs/sampler.md): narrow below 2**32, wide above."""
    if seed < 2**32 and block < 2**32:
        return [seed, PURPOSE_CHOICE, block]
    return [seed % 2**32, 0xFFFFFFFF, seed // 2**32, PURPOSE_CHOICE, block % 2**32, block // 2**32]


def documented_uniforms(seed: int, block: int) -> np.ndarray:
    return np.random.default_rng(np.random.SeedSequence(documented_words(seed, block))).random(B)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**40), n_clusters=st.integers(2, 7))
def test_each_position_block_draws_its_own_uniforms(seed, n_clusters):
    # Equal weights and no clip: position t goes to cluster floor(u_t * K) (clusters by id).
    labels = np.repeat(np.arange(n_clusters), 50)
    total = 2 * B + 4321  # three blocks
    version = 1 if seed < 2**32 else 2  # the block rule of versions 1 and 2
    indices = build_schedule(
        labels,
        policy="uniform",
        num_samples=total,
        seed=seed,
        order="online",
        schedule_version=version,
    ).indices
    uniforms = np.concatenate([documented_uniforms(seed, b) for b in range(3)])[:total]
    expected = np.minimum((uniforms * n_clusters).astype(np.int64), n_clusters - 1)
    np.testing.assert_array_equal(labels[indices], expected)
    # so the blocks' choices differ from each other (block b does not reuse block 0's draws)
    first, second = labels[indices[:4321]], labels[indices[B : B + 4321]]
    assert not np.array_equal(first, second)


def test_block_draws_depend_on_seed_and_block_only():
    labels = np.repeat(np.arange(3), 40)
    kwargs = dict(policy="uniform", num_samples=B + 600, order="online")
    base = labels[build_schedule(labels, seed=1, **kwargs).indices]
    other_seed = labels[build_schedule(labels, seed=2, **kwargs).indices]
    assert not np.array_equal(base[B:], other_seed[B:])
    # the choices of block 1 do not depend on how long the schedule is
    longer = labels[build_schedule(labels, seed=1, **dict(kwargs, num_samples=B + 900)).indices]
    np.testing.assert_array_equal(longer[: B + 600], base)


def cluster_order(labels: np.ndarray, indices: np.ndarray, cluster: int) -> np.ndarray:
    """Documents of one cluster, in schedule order."""
    return indices[labels[indices] == cluster]


def assert_prefix_related(a: np.ndarray, b: np.ndarray) -> None:
    n = min(a.size, b.size)
    np.testing.assert_array_equal(a[:n], b[:n])


@st.composite
def clusterings(draw):
    n_clusters = draw(st.integers(2, 6))
    sizes = draw(st.lists(st.integers(1, 12), min_size=n_clusters, max_size=n_clusters))
    labels = np.repeat(np.arange(n_clusters), sizes)
    labels = labels[np.random.default_rng(draw(st.integers(0, 99))).permutation(labels.size)]
    removed = draw(st.integers(0, n_clusters - 1))
    kwargs = {
        "policy": draw(st.sampled_from(["clusterclip", "uniform", "temperature"])),
        "max_repeats": draw(st.integers(1, 5)),
        "num_samples": draw(st.integers(1, 300)),
        "order": draw(st.sampled_from(["online", "planned"])),
        "on_exhausted": "stop",
        "seed": draw(st.integers(0, 2**32)),
    }
    if kwargs["policy"] == "temperature":
        kwargs["alpha"] = 0.5
    return labels, removed, kwargs


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusterings())
def test_a_clusters_order_does_not_depend_on_the_other_clusters(problem):
    labels, removed, kwargs = problem
    without = labels.copy()
    without[without == removed] = -1  # another cluster leaves: ids of the others unchanged
    if (without < 0).all():
        return
    full = quiet(build_schedule, labels, **kwargs).indices
    fewer = quiet(build_schedule, without, **kwargs).indices
    for k in np.unique(without[without >= 0]):
        # both schedules draw cluster k's documents from the same passes, keyed by k
        assert_prefix_related(cluster_order(labels, full, k), cluster_order(labels, fewer, k))


@pytest.mark.parametrize("order", ["online", "planned"])
def test_removing_the_lowest_cluster_keeps_the_others_orders(order):
    # The case that tells a key by cluster id from a key by position among the clusters:
    # every cluster after the removed one moves down one place.
    sizes = [3, 50, 80, 120]
    labels = np.repeat(np.arange(len(sizes)), sizes)
    labels = labels[np.random.default_rng(4).permutation(labels.size)]
    without = np.where(labels == 0, -1, labels)
    kwargs = dict(max_repeats=3, num_samples=600, order=order, seed=12)
    full = build_schedule(labels, **kwargs).indices
    fewer = build_schedule(without, **kwargs).indices
    for k in (1, 2, 3):
        a, b = cluster_order(labels, full, k), cluster_order(labels, fewer, k)
        assert min(a.size, b.size) >= sizes[k]  # at least one whole pass to compare
        assert_prefix_related(a, b)


# -- version 3: windows and pass bijections --------------------------------------------


def test_v3_windows_draw_from_their_own_generator():
    """Equal weights, no clip: window w's positions are cluster ``integers(K)`` of
    ``Generator(PCG64(SeedSequence([seed, PURPOSE_CHOICE_V3, w])))``, nothing dropped."""
    from clusterclip.schedule.groups import PURPOSE_CHOICE_V3
    from clusterclip.schedule.windows import WINDOW

    labels = np.repeat(np.arange(5), 30)
    total = 2 * WINDOW + 777  # three windows
    indices = build_schedule(
        labels, policy="uniform", num_samples=total, seed=9, schedule_version=3
    ).indices
    expected = np.concatenate(
        [
            np.random.Generator(
                np.random.PCG64(np.random.SeedSequence([9, PURPOSE_CHOICE_V3, w]))
            ).integers(5, size=WINDOW)
            for w in range(3)
        ]
    )[:total]
    np.testing.assert_array_equal(labels[indices], expected)


def test_v3_passes_are_keyed_by_cluster_id_and_pass():
    """The same cluster under another group index draws the same passes; passes differ."""
    from clusterclip.schedule.feistel import FeistelGroups

    members = np.arange(40)
    one = FeistelGroups(members, np.array([40]), np.array([17]), seed=3, purpose=2)
    two = FeistelGroups(np.arange(45), np.array([5, 40]), np.array([2, 17]), seed=3, purpose=2)
    draws = np.arange(160)
    first = one.lookup(np.zeros(160, np.int64), draws)
    second = two.lookup(np.ones(160, np.int64), draws) - 5
    np.testing.assert_array_equal(first, second)
    passes = first.reshape(4, 40)
    assert all(sorted(p.tolist()) == list(range(40)) for p in passes)
    assert len({tuple(p) for p in passes.tolist()}) == 4  # each pass its own order
    other = FeistelGroups(members, np.array([40]), np.array([18]), seed=3, purpose=2)
    assert not np.array_equal(other.lookup(np.zeros(40, np.int64), draws[:40]), first[:40])
