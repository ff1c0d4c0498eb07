"""Version 4's parts against their definitions, and its speed knobs against the bytes.

The oracle (``tests/schedule/oracle.py``) checks whole schedules one draw at a
time; here each part is checked on its own, on inputs too large for the oracle:

* a larger group's pass is its members sorted by ``(mix64(P + (i + 1) GAMMA) >> 32, i)``,
  every pass a permutation, whatever order the draws are asked in;
* the planned order is every draw sorted by ``(floor(tau * 2**40), cluster, draw)``;
* chunks, slabs and pieces are speed knobs only: any setting gives the same bytes;
* so is the helper thread (lookups overlapped with choosing, slabs made ahead).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clusterclip.schedule.slabs as slabs
import clusterclip.schedule.treewindows as treewindows
from clusterclip.schedule import build_schedule, iter_schedule
from clusterclip.schedule.api import open_stream
from clusterclip.schedule.passes import SMALL_PASS, PassTable, pass_orders
from clusterclip.schedule.planned import planned_phases

from .helper_thread import CountingHelper, FixedWays
from .oracle import key_of, step_key

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return func(*args, **kwargs)


# --------------------------------------------------------------------------- passes


@SETTINGS
@given(
    st.lists(st.integers(1, 3000), min_size=1, max_size=6),
    st.lists(st.integers(0, 2**64 - 1), min_size=6, max_size=6),
)
def test_pass_orders_sort_members_by_their_keys(sizes, keys):
    keys = np.array(keys[: len(sizes)], dtype=np.uint64)
    got = pass_orders(keys, np.array(sizes))
    start = 0
    for key, size in zip(keys.tolist(), sizes, strict=True):
        expected = sorted(range(size), key=lambda i, key=key: (step_key(key, i) >> 32, i))
        assert got[start : start + size].tolist() == expected
        start += size


def test_a_pass_longer_than_a_sort_batch_and_one_past_the_key_bits(monkeypatch):
    import clusterclip.schedule.passes as passes

    key = np.array([12345], dtype=np.uint64)
    expected = pass_orders(key, np.array([5000]))
    monkeypatch.setattr(passes, "_BATCH", 7)  # batches of one pass at a time
    assert np.array_equal(pass_orders(key, np.array([5000])), expected)
    monkeypatch.setattr(passes, "KEY_BITS", 55)  # positions no longer fit: the lexsort path
    assert np.array_equal(np.sort(pass_orders(key, np.array([5000]))), np.arange(5000))


def _table(sizes, seed=4):
    members = np.random.default_rng(seed).permutation(int(np.sum(sizes)))
    keys = np.arange(len(sizes)) * 7 + 3
    return PassTable(members, np.array(sizes), keys, seed=seed, purpose=2), members


@pytest.mark.parametrize("sizes", [[1, 5, 32], [33, 40, 1000], [2, 300, 7, 5000]])
def test_every_pass_is_a_permutation_of_the_group(sizes):
    table, members = _table(sizes)
    start = 0
    for g, size in enumerate(sizes):
        own = np.sort(members[start : start + size])
        for p in range(3):
            draws = np.arange(p * size, (p + 1) * size)
            docs = table.lookup(np.full(size, g), draws)
            assert np.array_equal(np.sort(docs), own)
        start += size


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lookups_do_not_depend_on_the_order_they_come_in(seed):
    """The cache holds one pass per group: any order of draws gives the same documents."""
    sizes = [3, 33, 64, 700, 4100]
    rng = np.random.default_rng(seed)
    group = rng.integers(0, len(sizes), 6000)
    draw = rng.integers(0, 5 * np.array(sizes)[group])
    fresh, _ = _table(sizes)
    expected = np.array(
        [fresh.lookup(np.array([g]), np.array([d]))[0] for g, d in zip(group, draw, strict=True)]
    )
    for _ in range(3):
        table, _ = _table(sizes)
        order = rng.permutation(group.size)
        got = np.empty(group.size, dtype=np.int64)
        for part in np.array_split(order, 7):
            got[part] = table.lookup(group[part], draw[part])
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("kernels", ["auto", "numpy"])
def test_a_lookup_into_out_writes_the_same_documents_there(monkeypatch, kernels):
    """``out``: the documents land in the caller's array (a view of a schedule), unchanged."""
    monkeypatch.setenv("CLUSTERCLIP_KERNELS", kernels)
    sizes = [3, 33, 64, 700, 4100]
    rng = np.random.default_rng(7)
    group = rng.integers(0, len(sizes), 5000)
    draw = rng.integers(0, 3 * np.array(sizes)[group])
    expected = _table(sizes)[0].lookup(group, draw)
    schedule = np.full(group.size + 10, -1, dtype=np.int64)
    into = schedule[5 : 5 + group.size]
    got = _table(sizes)[0].lookup(group, draw, out=into)
    assert got is into
    assert np.array_equal(into, expected)
    assert (schedule[:5] == -1).all() and (schedule[-5:] == -1).all()


def test_the_cache_makes_room_past_many_small_groups():
    """Emptying a full cache keeps only larger groups' passes (CI found small ones counted).

    The small groups' members outnumber the cache of the one larger group, so
    counting them as cached overflowed it.
    """
    sizes = [SMALL_PASS] * 4 + [SMALL_PASS + 2]
    large = len(sizes) - 1
    table, members = _table(sizes, seed=1)
    own = np.sort(members[-sizes[large] :])
    for p in range(8):  # each pass fills half the cache: it is emptied every other pass
        table.lookup(np.arange(large), np.full(large, p))  # the small groups, too
        draws = np.arange(p * sizes[large], (p + 1) * sizes[large])
        docs = table.lookup(np.full(sizes[large], large), draws)
        fresh, _ = _table(sizes, seed=1)
        assert np.array_equal(docs, fresh.lookup(np.full(sizes[large], large), draws))
        assert np.array_equal(np.sort(docs), own)


def test_a_larger_groups_pass_is_its_sorted_keys():
    sizes = [SMALL_PASS + 1, 200]
    table, members = _table(sizes, seed=9)
    offsets = np.cumsum(sizes) - sizes
    for g, size in enumerate(sizes):
        for p in (0, 5):
            pass_key = step_key(key_of(9, 2, g * 7 + 3), p)
            order = sorted(range(size), key=lambda i, k=pass_key: (step_key(k, i) >> 32, i))
            docs = table.lookup(np.full(size, g), np.arange(p * size, (p + 1) * size))
            assert docs.tolist() == members[offsets[g] + np.array(order)].tolist()


@SETTINGS
@given(st.lists(st.integers(0, 5000), min_size=4, max_size=4), st.integers(0, 100))
def test_tokens_of_first_counts_the_drawn_documents(counts, seed):
    sizes = [1, 9, 40, 333]
    table, _ = _table(sizes, seed=seed)
    lengths = np.random.default_rng(seed).integers(0, 100, int(np.sum(sizes)))
    expected = 0
    for g, count in enumerate(counts):
        expected += int(lengths[table.lookup(np.full(count, g), np.arange(count))].sum())
    fresh, _ = _table(sizes, seed=seed)
    assert fresh.tokens_of_first(np.array(counts), lengths) == expected


# --------------------------------------------------------------------------- planned order


@SETTINGS
@given(st.lists(st.integers(0, 400), min_size=1, max_size=30), st.integers(0, 2**32))
def test_the_planned_order_is_every_draw_sorted_on_the_time_grid(plan, seed):
    plan = np.array(plan)
    phases = planned_phases(seed, plan.size)
    draws = sorted(
        (int(np.floor((j + phases[k]) / plan[k] * 2**40)), k, j)
        for k in range(plan.size)
        for j in range(plan[k])
    )
    order = slabs.SlabOrder(plan, phases)
    groups, numbers = [], []
    for i in range(order.n_slabs):
        g, d = order.slab(i)
        groups += g.tolist()
        numbers += d.tolist()
    assert groups == [k for _, k, _ in draws]
    assert numbers == [j for _, _, j in draws]
    for t in (0, 1, len(draws) // 3, len(draws)):
        before = np.bincount(np.array(groups[:t], dtype=np.int64), minlength=plan.size)
        assert order.counts_before(t).tolist() == before.tolist()


# --------------------------------------------------------------------------- speed knobs


def _corpus(n_clusters, seed=0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 50, n_clusters)
    labels = np.repeat(np.arange(n_clusters), sizes)
    return labels[rng.permutation(labels.size)]


CASES = {
    "online": dict(max_repeats=2, num_samples=150_000, on_exhausted="random"),
    "temperature": dict(policy="temperature", alpha=0.7, max_repeats=3, num_samples=150_000),
    "planned": dict(max_repeats=2, num_samples=150_000, order="planned", on_exhausted="random"),
    "hierarchical": dict(policy="hierarchical", max_repeats=2, num_samples=150_000),
    "uniform": dict(policy="uniform", num_samples=150_000),
}


def _run(name, labels, **extra):
    kwargs = dict(CASES[name], seed=5, **extra)
    if name == "hierarchical":
        kwargs["levels"] = (labels % 37)[:, None]
    return _quiet(build_schedule, labels, **kwargs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_chunks_slabs_and_pieces_change_no_byte(monkeypatch, name):
    labels = _corpus(3000)
    whole = _run(name, labels)
    monkeypatch.setattr(treewindows, "FEW_ENTRIES", 0)  # every window in chunks ...
    monkeypatch.setattr(treewindows, "CHUNK", 1021)  # ... of a prime length
    monkeypatch.setattr(slabs, "SLAB_POSITIONS", 1)  # slabs of about 4 K positions
    monkeypatch.setattr(slabs, "PIECE", 333)
    cut = _run(name, labels)
    assert np.array_equal(cut.indices, whole.indices)
    assert cut.stats.to_dict() == whole.stats.to_dict()
    resumed = _quiet(
        lambda: np.concatenate(
            list(
                iter_schedule(
                    labels,
                    start=70_001,
                    seed=5,
                    **CASES[name],
                    **({"levels": (labels % 37)[:, None]} if name == "hierarchical" else {}),
                )
            )
        )
    )
    assert np.array_equal(resumed, whole.indices[70_001:])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_helper_thread_changes_no_byte(monkeypatch, name):
    """Lookups overlapped with choosing, slabs made ahead and the input hashed on the
    helper thread, or none of it (one CPU): the same schedule, statistics, config, token
    budget and resumed stream, in segments and slabs of many sizes."""
    import clusterclip.schedule.api as api

    labels = _corpus(3000)
    lengths = np.random.default_rng(3).integers(1, 40, labels.size)
    monkeypatch.setattr(treewindows, "LOOKUP_POSITIONS", 5000)  # many segments
    monkeypatch.setattr(slabs, "SLAB_POSITIONS", 1)  # slabs of about 4 K positions
    monkeypatch.setattr(slabs, "PIECE", 777)
    extra = {"levels": (labels % 37)[:, None]} if name == "hierarchical" else {}
    runs = []
    for ways in ("none", "helper", "alternate"):
        worker = None if ways == "none" else CountingHelper()
        for module in (treewindows, slabs, api):
            monkeypatch.setattr(module, "helper", lambda worker=worker: worker)
        monkeypatch.setattr(treewindows, "FasterWay", lambda ways=ways: FixedWays(ways))
        whole = _run(name, labels)
        budget = {k: v for k, v in CASES[name].items() if k != "num_samples"}
        by_tokens = _quiet(
            build_schedule, labels, lengths=lengths, num_tokens=1_000_003, seed=5, **budget, **extra
        )
        resumed = _quiet(
            lambda: np.concatenate(
                list(iter_schedule(labels, start=70_001, seed=5, **CASES[name], **extra))
            )
        )
        runs.append((whole, by_tokens, resumed))
        if worker is not None:
            assert worker.tasks > 0  # the helper did some of the work
            worker.shutdown()
    first = runs[0]
    for other in runs[1:]:
        for mine, theirs in zip(first[:2], other[:2], strict=True):
            assert np.array_equal(mine.indices, theirs.indices)
            assert mine.stats.to_dict() == theirs.stats.to_dict()
            assert mine.config == theirs.config
        assert np.array_equal(first[2], other[2])
    assert np.array_equal(first[2], first[0].indices[70_001:])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_sources_write_the_schedule_in_place(monkeypatch, name):
    """collect() hands each segment its place in the schedule: no block is copied again,
    and the schedule is what the blocks of a stream give."""
    import clusterclip.schedule.stream as stream_module

    labels = _corpus(3000)
    extra = {"levels": (labels % 37)[:, None]} if name == "hierarchical" else {}
    stream = _quiet(open_stream, labels, seed=5, **CASES[name], **extra)
    blocks = np.concatenate(list(stream.blocks(0)))
    copied, arrays = [], []
    real = stream_module._concatenated

    def watched(blocks, out):
        arrays.append(out)

        def watch():
            for block in blocks:
                at = (block.ctypes.data - out.ctypes.data) // 8
                copied.append(not 0 <= at < out.size or block.size == 0)
                yield block

        return real(watch(), out)

    monkeypatch.setattr(stream_module, "_concatenated", watched)
    schedule = stream.collect()
    assert schedule.indices is arrays[0]
    assert np.array_equal(schedule.indices, blocks)
    assert copied and not any(copied)  # every block was written where it belongs


def test_a_lone_top_node_over_every_cluster_is_the_flat_rule():
    labels = _corpus(500)
    kwargs = dict(max_repeats=2, num_samples=30_000, seed=1)
    flat = _quiet(build_schedule, labels, **kwargs).indices
    levels = np.column_stack([np.zeros(labels.size, np.int64), labels % 5])
    tree = _quiet(build_schedule, labels, policy="hierarchical", levels=levels, **kwargs).indices
    middle = _quiet(
        build_schedule, labels, policy="hierarchical", levels=levels[:, 1:], **kwargs
    ).indices
    assert np.array_equal(tree, middle)  # the lone top node is left out
    assert not np.array_equal(tree, flat)  # the middle level still balances
    single = np.zeros((labels.size, 1), dtype=np.int64)
    lone = _quiet(build_schedule, labels, policy="hierarchical", levels=single, **kwargs).indices
    assert np.array_equal(lone, flat)


@SETTINGS
@given(
    st.lists(st.floats(1e-6, 1e6), min_size=1, max_size=300),
    st.integers(0, 2**32),
    st.booleans(),
)
def test_the_guided_inverse_cdf_is_a_binary_search(weights, seed, edges):
    """Version 4 maps a window's uniforms through the weights with a guide table:
    exactly ``np.searchsorted(cdf, u, side="right")``, slice edges and ties included."""
    from clusterclip.schedule.windows import _inverse_cdf, cdf_guide

    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    u = np.random.default_rng(seed).random(2000)
    if edges:  # on and just below every cumulative weight and slice edge
        u[: cdf.size] = np.nextafter(cdf, 0)
        u[cdf.size : 2 * cdf.size] = np.arange(cdf.size) / cdf.size
        u = np.clip(u, 0.0, np.nextafter(1.0, 0))
    expected = np.searchsorted(cdf, u, side="right")
    assert np.array_equal(_inverse_cdf(cdf, u, cdf_guide(cdf)), expected)
    assert np.array_equal(_inverse_cdf(cdf, u, None), expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=50), st.integers(1, 300))
def test_node_numbers_are_the_ranks_np_unique_gives(pool, n):
    """Dense ids (ranked by a count) and sparse ones (by np.unique): the same ranks."""
    rng = np.random.default_rng(n)
    for ids in (rng.choice(np.array(pool), n), rng.integers(0, max(1, n // 2), n)):
        expected = np.unique(ids, return_inverse=True)[1]
        assert np.array_equal(treewindows._node_numbers(ids), expected)
