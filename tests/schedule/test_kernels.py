"""The compiled loops (clusterclip.schedule.kernels) give the numpy code's bytes.

The numpy code is the reference: every result of the C extension is compared
with the same computation under :func:`numpy_only`, on fresh state each way.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule import build_schedule, grouping, hierarchy, kernels, planned
from clusterclip.schedule.passes import SMALL_PASS, PassTable
from clusterclip.schedule.slabs import SlabOrder
from clusterclip.schedule.sorting import radix_passes
from clusterclip.schedule.treewindows import NodeLevel, TreeWindows, alive_bits
from clusterclip.schedule.windows import cdf_guide, listed_cdf
from tests.product_support import in_ci

from .conftest import quiet

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _built() -> None:
    """Every test here needs the extension: fail under CI without it, else skip."""
    if kernels.compiled():
        return
    reason = "clusterclip.schedule.ckernels is not built (pip install . with a C compiler)"
    if in_ci():
        pytest.fail(f"CI=true requires the compiled loops: {reason}", pytrace=False)
    pytest.skip(reason)


def test_switches_off_by_environment_and_context(monkeypatch):
    assert kernels.compiled()
    with kernels.numpy_only():
        assert not kernels.compiled()
    for value, expected in (("numpy", False), (" NumPy ", False), ("c", True), ("auto", True)):
        monkeypatch.setenv(kernels.ENV, value)
        assert kernels.compiled() is expected, value
    monkeypatch.setenv(kernels.ENV, "off")
    with pytest.raises(ValueError, match=r"CLUSTERCLIP_KERNELS='off' is not one of auto, c, numpy"):
        kernels.compiled()


def test_asking_for_c_where_it_was_not_built_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(kernels, "_built", None)  # as installed without a C compiler
    assert not kernels.compiled()
    monkeypatch.setenv(kernels.ENV, "c")
    with pytest.raises(RuntimeError, match="was not built .* install gcc or clang"):
        kernels.compiled()


def _table(sizes: np.ndarray, wide: bool) -> PassTable:
    n = int(sizes.sum())
    members = np.random.default_rng(n).permutation(n).astype(np.int64 if wide else np.int32)
    keys = np.arange(sizes.size, dtype=np.int64) * 3 + 1
    return PassTable(members, sizes, keys, seed=5, purpose=2)


@st.composite
def tables(draw):
    """Group sizes from the small table's to the radix sort's, and segments of draws."""
    kinds = draw(st.lists(st.sampled_from(["small", "mid", "large"]), min_size=1, max_size=12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    bounds = {"small": (1, SMALL_PASS), "mid": (SMALL_PASS + 1, 300), "large": (1024, 3000)}
    sizes = np.array([rng.integers(*bounds[k], endpoint=True) for k in kinds], dtype=np.int64)
    segments = []
    drawn = np.zeros(sizes.size, dtype=np.int64)
    for _ in range(draw(st.integers(1, 6))):  # draws in order per group, as a stream asks
        group = rng.integers(0, sizes.size, draw(st.integers(0, 4000)))
        rank = np.zeros(group.size, dtype=np.int64)
        for g in np.unique(group):
            at = np.flatnonzero(group == g)
            rank[at] = drawn[g] + np.arange(at.size) * rng.integers(1, 3)
            drawn[g] = rank[at[-1]] + 1 if at.size else drawn[g]
        segments.append((group, rank))
    # then draws of earlier passes (a token count's prefix): not the cached ones
    group = rng.integers(0, sizes.size, 200)
    segments.append((group, rng.integers(0, np.maximum(drawn[group], 1))))
    return sizes, segments, draw(st.booleans())


@SETTINGS
@given(tables())
def test_lookups_are_the_numpy_lookups(case):
    sizes, segments, wide = case
    compiled, reference = _table(sizes, wide), _table(sizes, wide)
    for group, draw in segments:
        got = compiled.lookup(group, draw)
        with kernels.numpy_only():
            expected = reference.lookup(group, draw)
        assert got.dtype == np.int64
        assert np.array_equal(got, expected)


def test_lookups_make_room_when_the_cache_is_full():
    """Every group draws a whole pass per round: the cache fills and is compacted between draws."""
    sizes = np.array([40, 700, 1500, 33, 5], dtype=np.int64)
    compiled, reference = _table(sizes, False), _table(sizes, False)
    capacity = compiled._cache.size
    rng = np.random.default_rng(0)
    for round_ in range(12):
        group = rng.permutation(np.repeat(np.arange(sizes.size), sizes))
        by_group = np.argsort(group, kind="stable")  # each group's draws in order of position
        rank = np.empty(group.size, dtype=np.int64)
        rank[by_group] = np.arange(group.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        draw = round_ * sizes[group] + rank
        got = compiled.lookup(group, draw)
        with kernels.numpy_only():
            assert np.array_equal(got, reference.lookup(group, draw))
    assert compiled._cache.size == capacity  # compacted, not grown


def test_lookup_refuses_bad_input():
    table = _table(np.array([40, 3]), False)
    with pytest.raises(ValueError, match=r"draw 0 of group 2 \(position 1\) is not in the table"):
        table.lookup(np.array([0, 2]), np.array([0, 0]))
    with pytest.raises(ValueError, match="draw -1 of group 0"):
        table.lookup(np.array([0]), np.array([-1]))


@st.composite
def trees(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_groups = draw(st.integers(2, 3000))
    depth = draw(st.integers(1, 3))
    paths = np.zeros((n_groups, depth), dtype=np.int64)
    width = n_groups
    for level in range(depth - 1, -1, -1):  # each level's nodes have one parent above
        width = max(1, width // draw(st.integers(2, 20)))
        below = paths[:, level + 1] if level + 1 < depth else np.arange(n_groups)
        parent = rng.integers(0, width, int(below.max()) + 1)
        paths[:, level] = parent[below]
    caps = rng.integers(1, draw(st.integers(2, 12)), n_groups).astype(np.int64)
    return draw(st.integers(0, 2**40)), caps, paths


def _same_descents(seed, caps, paths, weights=None) -> None:
    """Every chunk of a tree's (or flat) windows, compiled and in numpy, from fresh state each."""
    weights = np.ones(caps.size) if weights is None else weights
    compiled = TreeWindows(seed, weights, caps.copy(), paths)
    with kernels.numpy_only():
        reference = TreeWindows(seed, weights, caps.copy(), paths)
    while True:
        got = compiled.next()
        with kernels.numpy_only():
            expected = reference.next()
        if got is None or expected is None:
            assert got is None and expected is None
            break
        assert (got.start, got.size) == (expected.start, expected.size)
        for field in ("groups", "draws", "clips"):
            assert np.array_equal(getattr(got, field), getattr(expected, field))
        _alive_bits_hold(compiled)
    assert np.array_equal(compiled.counts, reference.counts)


def _alive_bits_hold(windows: TreeWindows) -> None:
    """The bits the compiled descent keeps say, at every listed position, what the counts say."""
    if not windows.levels:  # flat: no descent
        return
    states = [level.state for level in windows.levels[1:]] + [windows._leaves]
    for level, state in zip(windows.levels, states, strict=True):
        if level.alive is None:  # no descent at this level yet
            continue
        listed = np.concatenate(
            [np.arange(a, a + n) for a, n in zip(level.start, level.listed, strict=True)]
        ).astype(np.int64)
        kept = np.unpackbits(level.alive, bitorder="little")[listed]
        assert np.array_equal(
            kept, np.unpackbits(alive_bits(level.children, state), bitorder="little")[listed]
        )


@SETTINGS
@given(trees())
def test_tree_descents_are_the_numpy_descents(case):
    _same_descents(*case)


@pytest.mark.parametrize("depth", [1, 2])
def test_tree_descents_over_many_windows(depth):
    """Lists compacted at windows' starts as children run out: the counts that decide it."""
    rng = np.random.default_rng(depth)
    n_groups = 20_000
    mid = rng.integers(0, 400, n_groups)
    paths = (
        rng.integers(0, 30, 400)[mid][:, None]
        if depth == 1
        else np.column_stack((rng.integers(0, 30, 400)[mid], mid))
    )
    caps = rng.integers(1, 30, n_groups).astype(np.int64)
    caps[rng.random(n_groups) < 0.5] = 1  # many children run out early
    caps[rng.random(n_groups) < 0.05] = 0  # and a few have no draws at all
    _same_descents(11, caps, paths)


@pytest.mark.parametrize("groups", [300, 20_000])
@pytest.mark.parametrize("weighted", [False, True])
def test_flat_windows_are_the_numpy_windows(groups, weighted):
    """Flat policies: a window's candidates kept in order until their groups' caps."""
    rng = np.random.default_rng(groups)
    caps = rng.integers(1, 40, groups).astype(np.int64)
    weights = rng.random(groups) + 0.1 if weighted else None
    _same_descents(3, caps, None, weights)


@SETTINGS
@given(st.integers(1, 3000), st.integers(0, 2**32 - 1), st.booleans())
def test_weighted_candidates_are_searchsorted(groups, seed, skewed):
    """The first cumulative weight above each u, from the guide: searchsorted's answer."""
    rng = np.random.default_rng(seed)
    weights = rng.pareto(0.5, groups) + 1e-12 if skewed else rng.random(groups) + 0.01
    cdf = listed_cdf(weights, np.arange(groups))
    u = rng.random(5000)
    u[:100] = np.minimum(cdf[rng.integers(0, groups, 100)], np.nextafter(1.0, 0.0))  # on a step
    guide = cdf_guide(cdf)
    slices = np.arange(groups, dtype=np.float64) / groups
    assert np.array_equal(guide, np.searchsorted(cdf, slices, side="right"))  # the merge's
    expected = np.searchsorted(cdf, u, side="right")
    assert np.array_equal(kernels.inverse_cdf(cdf, u, guide), expected)
    assert np.array_equal(kernels.inverse_cdf(cdf, u, guide.astype(np.int64)), expected)
    # The guide only speeds the search: wrong entries, in range or not, change nothing.
    if skewed:  # int64 entries
        wild = rng.integers(-(2**40), 2**40, groups)
    else:  # int32 entries, as the guides made here
        wild = rng.integers(-3, groups + 3, groups).astype(np.int32)
    assert np.array_equal(kernels.inverse_cdf(cdf, u, wild), expected)


def test_guides_of_steps_on_the_slice_edges():
    """Cumulative weights exactly on b / L, repeated, and 1.0 from early on."""
    for cdf in (np.array([0.25, 0.5, 0.5, 1.0]), np.array([0.0, 0.0, 1.0, 1.0]), np.ones(5)):
        slices = np.arange(cdf.size, dtype=np.float64) / cdf.size
        assert np.array_equal(cdf_guide(cdf), np.searchsorted(cdf, slices, side="right"))


def test_take_refuses_a_candidate_outside_the_state():
    with pytest.raises(ValueError, match="candidate 1 is not an entry"):
        kernels.take(np.array([0, 3]), np.zeros((3, 2), dtype=np.int64))


def test_descent_refuses_a_node_outside_the_level():
    windows = TreeWindows(1, np.ones(6), np.full(6, 2), np.array([[0], [0], [1], [1], [2], [2]]))
    level = windows.levels[0]
    state = windows._leaves
    alive = alive_bits(level.children, state)
    with pytest.raises(ValueError, match="not in the level"):
        kernels.descend(np.array([7]), level.keys, level.start, level.listed, level.children,
                        windows.next_n[0], level.dead, state, 0, alive)  # fmt: skip
    with pytest.raises(TypeError, match="int64"):
        kernels.descend(np.array([0], np.int32), level.keys, level.start, level.listed,
                        level.children, windows.next_n[0], level.dead, state, 0, alive)  # fmt: skip
    with pytest.raises(ValueError, match="alive holds 0 bits for 6 listed positions"):
        kernels.descend(np.array([0]), level.keys, level.start, level.listed, level.children,
                        windows.next_n[0], level.dead, state, 0, alive[:0])  # fmt: skip


def test_descent_stops_on_alive_bits_out_of_step():
    """Bits that say no child is active: an error after a while, not an endless loop."""
    caps = np.full(600, 1000, dtype=np.int64)  # more draws than a window's
    windows = TreeWindows(5, np.ones(600), caps, np.repeat(np.arange(3), 200)[:, None])
    assert windows.next() is not None
    windows.levels[0].alive[:] = 0
    with pytest.raises(RuntimeError, match="alive bits are out of step"):
        windows.next()


def _same_slabs(plan: np.ndarray, phases: np.ndarray) -> None:
    """Every slab of a planned order, compiled and in numpy, from fresh state each."""
    compiled = SlabOrder(plan, phases)
    with kernels.numpy_only():
        reference = SlabOrder(plan, phases)
    for i in range(compiled.n_slabs):
        got = compiled.slab_with_lasts(i)
        with kernels.numpy_only():
            expected = reference.slab_with_lasts(i)
        for a, b in zip(got, expected, strict=True):
            assert np.array_equal(a, b)


@SETTINGS
@given(st.integers(1, 4000), st.integers(1, 80), st.integers(0, 2**32 - 1))
def test_planned_slabs_are_the_numpy_slabs(clusters, most, seed):
    """Every slab of a planned order (several once the plan passes 2**16 draws)."""
    rng = np.random.default_rng(seed)
    plan = rng.integers(0, most, clusters)
    plan[rng.integers(0, clusters)] += rng.integers(0, 3 * 2**16)  # one large cluster
    phases = rng.random(clusters)
    _same_slabs(plan, phases)


@pytest.mark.parametrize("clusters", [3, 5000])
def test_planned_slabs_with_bunched_times(clusters):
    """Equal plans and phases: every cluster's draws at the same times, ties in cluster order."""
    plan = np.full(clusters, max(2, 3 * 2**16 // clusters))
    phases = np.full(clusters, 0.25)
    _same_slabs(plan, phases)


def test_slab_with_group_ids_too_wide_to_pack():
    """Ids too wide to share a word with the draw number: the same slab, by the other path."""
    rng = np.random.default_rng(5)
    plan = rng.integers(1, 40, 3000)
    low = np.zeros_like(plan)
    phases = rng.random(plan.size)
    narrow = kernels.slab(plan, low, phases, plan, np.arange(plan.size, dtype=np.int64), 0)
    wide = kernels.slab(plan, low, phases, plan, np.arange(plan.size, dtype=np.int64) + 2**61, 0)
    assert np.array_equal(wide[0], narrow[0] + 2**61)
    assert np.array_equal(wide[1], narrow[1]) and np.array_equal(wide[2], narrow[2])
    with kernels.numpy_only():  # and the narrow one is the numpy slab (one slab: T < 2**16)
        groups, draws, lasts = SlabOrder(plan, phases).slab_with_lasts(0)
    assert np.array_equal(narrow[0], groups) and np.array_equal(narrow[1], draws)
    assert np.array_equal(np.flatnonzero(narrow[2]), lasts)


def test_a_slab_is_sorted_in_the_buffer_of_its_outputs():
    """The sort's pairs land in one buffer of 2 n words, the groups' then the draw
    numbers': the loop refuses outputs that are not one such buffer."""
    plan = np.arange(1, 50, dtype=np.int64)
    phases = np.random.default_rng(2).random(plan.size)
    groups, draws, last = kernels.slab(plan, np.zeros_like(plan), phases, plan, plan - 1, 0)
    assert groups.base is draws.base and draws.ctypes.data == groups.ctypes.data + 8 * groups.size
    from clusterclip.schedule import ckernels

    apart = np.empty(groups.size, dtype=np.int64), np.empty(groups.size, dtype=np.int64)
    with pytest.raises(ValueError, match="draw numbers must follow the groups"):
        ckernels.slab(plan, np.zeros_like(plan), phases, plan, plan - 1, *apart, last, 0)


def test_slab_refuses_draws_past_a_plan():
    one = np.ones(1, dtype=np.int64)
    with pytest.raises(ValueError, match="past a cluster's plan"):
        kernels.slab(2 * one, one, np.full(1, 0.5), 2 * one, 0 * one, 0)


def _schedules(labels, **options):
    got = quiet(build_schedule, labels, **options)
    with kernels.numpy_only():
        expected = quiet(build_schedule, labels, **options)
    return got, expected


@pytest.mark.parametrize(
    "options",
    [
        {"max_repeats": 3},
        {"max_repeats": None, "order": "planned"},
        {"policy": "random", "max_repeats": 2},  # one corpus group: the radix sort
        {"policy": "temperature", "alpha": 0.5, "max_repeats": 1, "on_exhausted": "random"},
        {"policy": "hierarchical", "max_repeats": 2, "on_exhausted": "random"},
    ],
)
def test_whole_schedules_are_the_numpy_schedules(options):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 400, 60_000)
    labels[::50] = -1
    if options.get("policy") == "hierarchical":
        options = dict(options, levels=(np.maximum(labels, 0) // 9)[:, None])
    got, expected = _schedules(labels, num_samples=150_000, seed=9, **options)
    assert np.array_equal(got.indices, expected.indices)
    for field in dataclasses.fields(got.stats):
        a, b = getattr(got.stats, field.name), getattr(expected.stats, field.name)
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, field.name


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize(("top", "excluded"), [(0, 0.0), (40, 0.3), (70_000, 0.0), (300_000, 0.5)])
def test_documents_grouped_by_label_are_the_numpy_groups(monkeypatch, dtype, top, excluded):
    """The counting sort's placement, in parts on threads, with labels left out (negative)."""
    monkeypatch.setattr(grouping, "_PART_DOCUMENTS", 1000)  # parts on every CPU
    rng = np.random.default_rng(top)
    labels = rng.integers(0, top + 1, 200_003).astype(dtype)
    labels[rng.random(labels.size) < excluded] = -rng.integers(1, 2**31, 1)
    labels[7] = top
    got = grouping.grouped_by_label(labels, top)
    with kernels.numpy_only(), radix_passes(True):  # the numpy counting sort
        expected = grouping.grouped_by_label(labels, top)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_place_refuses_labels_past_the_counts_and_overfull_clusters():
    members = np.full(3, -1, dtype=np.int32)
    with pytest.raises(ValueError, match="document 12 has a label past the counts"):
        kernels.place(np.array([0, 5], np.int64), 11, np.array([0, 0, 1]), members)
    assert members.tolist() == [11, -1, -1]  # document 11 was placed, nothing from 12 on
    with pytest.raises(ValueError, match="document 2 .* already full"):
        kernels.place(np.array([0, 0, 0]), 0, np.array([0, 1]), members)
    assert not kernels.place(np.array([0], np.uint8), 0, np.array([0, 0]), members)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=64)
        | st.sampled_from([1.0, -1.0, 2.0**-53, -(2.0**-53), 1e308, -1e308, 5e-324, 0.1]),
        max_size=60,
    )
)
def test_exact_sums_are_fsum(values):
    """fsum's float for any finite values: cancellation, ties to even, huge and tiny ones."""
    array = np.array(values, dtype=np.float64)
    try:
        expected = math.fsum(values)
    except OverflowError:  # an intermediate overflow: the C loop leaves it to fsum
        assert kernels.exact_sum(array) is None
        with pytest.raises(OverflowError):
            planned.exact_sum(array)
        return
    got = kernels.exact_sum(array)
    assert got is None or got == expected and math.copysign(1, got) == math.copysign(1, expected)
    assert planned.exact_sum(array) == expected


def test_exact_sums_of_weights_and_of_what_is_not_finite():
    """A million weights as the water-filling sums them; inf and nan go to fsum."""
    weights = np.random.default_rng(0).pareto(1.0, 10**6) + 0.1
    assert kernels.exact_sum(weights) == math.fsum(weights.tolist())
    assert kernels.exact_sum(np.array([1.0, math.inf])) is None
    assert kernels.exact_sum(np.array([math.nan])) is None
    assert kernels.exact_sum(np.zeros(0)) == 0.0
    with pytest.raises(TypeError, match="float64"):
        kernels.exact_sum(np.ones(3, np.float32))


def test_count_refuses_labels_past_the_counts():
    counts = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match="label at position 2 is past the counts"):
        kernels.count(np.array([1, -4, 2, 0], np.int32), counts)
    assert counts.tolist() == [1, 0, 1]  # the two before it counted, nothing from it on
    assert not kernels.count(np.array([0], np.uint16), counts)


@SETTINGS
@given(st.integers(1, 300), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_relisted_nodes_are_the_numpy_lists(n_nodes, most, seed):
    """Nodes with more and fewer exhausted children than a quarter, relisted both ways."""
    rng = np.random.default_rng(seed)
    parent = rng.integers(0, n_nodes, n_nodes * rng.integers(1, most + 1))
    parent[:n_nodes] = np.arange(n_nodes)
    caps = rng.integers(1, 4, parent.size)
    state = np.stack([np.minimum(caps, rng.integers(0, 5, parent.size)), caps], axis=1)
    levels = [NodeLevel(parent, np.zeros(n_nodes, np.uint64), np.ones(n_nodes, np.int64))]
    with kernels.numpy_only():  # the lists by a numpy sort
        levels.append(NodeLevel(parent, np.zeros(n_nodes, np.uint64), np.ones(n_nodes, np.int64)))
    assert np.array_equal(levels[0].children, levels[1].children)
    levels[0].dead = rng.integers(0, most + 1, n_nodes)
    levels[1].dead = levels[0].dead.copy()
    levels[0].compact(state)
    with kernels.numpy_only():
        levels[1].compact(state)
    for name in ("start", "listed", "dead", "children"):
        assert np.array_equal(getattr(levels[0], name), getattr(levels[1], name)), name


def test_compact_refuses_a_child_outside_the_level_below():
    state = np.array([[0, 1], [1, 1]])
    with pytest.raises(ValueError, match="node 0 lists a child outside the level below"):
        kernels.compact(np.array([0]), np.array([2]), np.array([1]), np.array([1, 5]), state)


@pytest.mark.parametrize("n_levels", [1, 3])
@pytest.mark.parametrize("excluded", [0.0, 0.3])
def test_dense_trees_are_the_numpy_trees(n_levels, excluded):
    """Each level's ancestors of dense leaves, read in place from a (N, L - 1) array."""
    rng = np.random.default_rng(n_levels)
    leaves = 5000
    finest = rng.integers(0, 1000, leaves)  # node v's parent is v // 4, a level up
    paths = np.stack([finest // 4 ** (n_levels - 1 - level) for level in range(n_levels)], 1)
    labels = rng.integers(0, leaves, 100_000)
    labels[rng.random(labels.size) < excluded] = -1
    levels = paths[np.maximum(labels, 0)]
    levels[labels < 0] = -7  # ignored
    got = hierarchy.validate_levels(levels, labels)
    with kernels.numpy_only():
        expected = hierarchy.validate_levels(levels, labels)
    assert np.array_equal(got.leaf_ids, expected.leaf_ids)
    assert np.array_equal(got.paths, expected.paths)
    levels[int(np.flatnonzero(labels == labels[0])[-1]), -1] += 1  # a leaf with two ancestors
    assert kernels.tree_column(labels, levels, n_levels - 1, leaves) is None
