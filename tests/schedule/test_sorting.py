"""Radix orders (clusterclip.schedule.sorting) give the bytes of the sorts they replace.

Whether the wide-value radix passes run depends on a timing probe, so one
machine takes one way only; :func:`radix_passes` makes both run here, and every
result is compared with the other way and with numpy's stable argsort.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterclip.schedule import build_schedule, grouping
from clusterclip.schedule.grouping import grouped_by_label
from clusterclip.schedule.groups import sorted_with_order
from clusterclip.schedule.passes import pass_orders
from clusterclip.schedule.sorting import radix_order, radix_passes, stable_order

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def values(draw, max_bits: int = 40):
    n = draw(st.integers(0, 3000))
    bits = draw(st.integers(1, max_bits))
    few = draw(st.booleans())  # many repeats: ties must keep their positions' order
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    top = min(2**bits, 5) if few else 2**bits
    return rng.integers(0, top, n, dtype=np.int64)


@SETTINGS
@given(values(max_bits=32))
def test_radix_order_is_the_stable_argsort(data):
    bits = max(int(data.max()) if data.size else 0, 1).bit_length()
    expected = np.argsort(data, kind="stable")
    assert np.array_equal(radix_order(data, bits), expected)


@pytest.mark.parametrize(("bits", "top"), [(17, 2**17), (32, 2**32), (44, 2**44), (32, 9)])
def test_radix_order_of_many_values_is_the_stable_argsort(bits, top):
    """More than 2**20 values: split by the top 8 bits first, then ordered part by part."""
    data = np.random.default_rng(bits).integers(0, top, 2**20 + 4099, dtype=np.int64)
    data[::7] = data[3]  # ties across the parts' boundaries too
    assert np.array_equal(radix_order(data, bits), np.argsort(data, kind="stable"))


@SETTINGS
@given(values(), st.booleans())
def test_stable_order_and_sorted_with_order_either_way(data, radix):
    expected = np.argsort(data, kind="stable")
    with radix_passes(radix):
        order = stable_order(data)
        ordered, by_sort = sorted_with_order(data)
    if order is not None:
        assert np.array_equal(order, expected)
    assert np.array_equal(by_sort, expected)
    assert np.array_equal(ordered, data[expected])
    assert ordered.dtype == np.int64


def test_stable_order_leaves_wide_values_to_a_sort():
    wide = np.array([2**40, 3, 2**33])
    with radix_passes(True):
        assert np.array_equal(stable_order(wide), [1, 2, 0])  # three passes
        assert stable_order(np.array([2**50, 3])) is None
        assert np.array_equal(stable_order(np.array([2**20, 3, 2**17])), [1, 2, 0])
    with radix_passes(False):
        assert stable_order(np.array([2**20, 3])) is None
        assert np.array_equal(stable_order(np.array([9, 3, 9])), [1, 0, 2])


def reference_groups(labels: np.ndarray):
    kept = np.flatnonzero(labels >= 0)
    order = kept[np.argsort(labels[kept], kind="stable")]
    ids, sizes = np.unique(labels[kept], return_counts=True)
    return ids, sizes, order


@pytest.mark.parametrize("top", [1, 9, 2**16 - 2, 2**16 - 1, 2**16, 70_000, 2**31 - 1])
@pytest.mark.parametrize("excluded", [0.0, 0.3])
def test_grouped_by_label_is_the_same_either_way(top, excluded):
    rng = np.random.default_rng(top)
    n = 300_000  # more than one chunk of the counting path, and dense ids up to 70,000
    labels = rng.integers(0, top + 1, n)
    labels[rng.random(n) < excluded] = -1
    labels[rng.integers(0, n)] = top  # the largest label is present
    ids, sizes, members = reference_groups(labels)
    for radix in (True, False):
        with radix_passes(radix):
            got = grouped_by_label(labels, top)
        assert got is not None
        assert np.array_equal(got[0], ids) and got[0].dtype == np.int64
        assert np.array_equal(got[1], sizes) and got[1].dtype == np.int64
        assert np.array_equal(got[2], members) and got[2].dtype == np.int32


@pytest.mark.parametrize("top", [9, 2**16 - 2, 70_000])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_grouped_by_label_in_parts_is_the_same(monkeypatch, top, parts):
    # The counting path cuts the documents into parts ordered on threads of their
    # own, one per CPU: each part count must give the same members.
    monkeypatch.setattr(grouping, "available_cpus", lambda: parts)
    monkeypatch.setattr(grouping, "_PART_DOCUMENTS", 2**13)
    monkeypatch.setattr(grouping, "_COUNT_CHUNK", 2**12)  # several chunks per part
    rng = np.random.default_rng(top + parts)
    n = 100_001  # dense ids: more documents than the largest label
    labels = rng.integers(0, top + 1, n)
    labels[rng.random(n) < 0.2] = -1
    labels[:100] = 3  # one cluster's documents at the start of the first part only
    ids, sizes, members = reference_groups(labels)
    with radix_passes(True):
        got = grouped_by_label(labels, int(labels.max()))
    assert got is not None
    assert np.array_equal(got[0], ids) and np.array_equal(got[1], sizes)
    assert np.array_equal(got[2], members)


@SETTINGS
@given(
    st.lists(st.integers(1, 70_000), min_size=1, max_size=12),
    st.integers(0, 2**63 - 1),
)
def test_pass_orders_are_the_same_either_way(sizes, key):
    sizes = np.array(sizes, dtype=np.int64)
    keys = (np.arange(sizes.size, dtype=np.uint64) * np.uint64(7919)) + np.uint64(key)
    with radix_passes(False):
        by_sort = pass_orders(keys, sizes)
    with radix_passes(True):
        by_radix = pass_orders(keys, sizes)
    assert np.array_equal(by_sort, by_radix)
    starts = np.cumsum(sizes) - sizes
    for start, size in zip(starts.tolist(), sizes.tolist(), strict=True):
        assert np.array_equal(np.sort(by_radix[start : start + size]), np.arange(size))
    # With offsets, each pass's entries are moved by its own offset, either way.
    offsets = np.arange(sizes.size, dtype=np.int64) * 1_000_003 + 5
    moved = by_radix + np.repeat(offsets, sizes)
    for radix in (False, True):
        with radix_passes(radix):
            assert np.array_equal(pass_orders(keys, sizes, offsets), moved)


@pytest.mark.parametrize("order", ["online", "planned"])
@pytest.mark.parametrize(("n", "k"), [(40_000, 12), (300_000, 80_000)])
def test_schedules_are_the_same_bytes_either_way(order, n, k):
    rng = np.random.default_rng(k)
    labels = rng.integers(0, k, n)
    labels[::97] = -1
    built = []
    for radix in (True, False):
        with radix_passes(radix):
            built.append(build_schedule(labels, max_repeats=2, num_samples=n, order=order, seed=3))
    assert np.array_equal(built[0].indices, built[1].indices)
    for field in dataclasses.fields(built[0].stats):
        mine, theirs = (getattr(b.stats, field.name) for b in built)
        assert np.array_equal(mine, theirs) if isinstance(mine, np.ndarray) else mine == theirs
    assert len(built[0]) == n
