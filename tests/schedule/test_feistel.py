"""Version 3's pass permutations: a bijection for every size, random-looking passes."""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.schedule.feistel import (
    SMALL_GROUP,
    FeistelGroups,
    bit_lengths,
    group_keys,
    pass_keys,
    permute,
)

SIZES = [1, 2, 3, 5, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 257, 1023, 1025, 4097, 70_001]


@pytest.mark.parametrize("size", SIZES)
def test_the_network_is_a_permutation_for_every_size(size):
    keys = group_keys(5, 2, np.arange(3))
    for key in keys:
        for p in range(3):
            image = permute(
                np.arange(size),
                np.full(size, size),
                pass_keys(np.full(size, key), np.full(size, p)),
            )
            assert np.array_equal(np.sort(image), np.arange(size))


@pytest.mark.parametrize("size", SIZES)
def test_every_pass_of_a_group_is_a_permutation(size):
    groups = FeistelGroups(np.arange(size) * 3, np.array([size]), np.array([11]), seed=1, purpose=2)
    docs = groups.lookup(np.zeros(3 * size, np.int64), np.arange(3 * size)).reshape(3, size)
    for row in docs:
        assert np.array_equal(np.sort(row), np.arange(size) * 3)
    if size > 3:
        assert not np.array_equal(docs[0], docs[1])  # consecutive passes differ


@pytest.mark.parametrize("size", [5, 10, 17, SMALL_GROUP + 8, 100])
def test_positions_are_uniform_over_keys(size):
    """Where member 0 and member 1 land, over many (cluster, pass) keys: near uniform."""
    n = 40_000
    groups = FeistelGroups(np.arange(size * n), np.full(n, size), np.arange(n), seed=4, purpose=2)
    group = np.arange(n)
    for cursor in (0, 1):
        place = groups.lookup(group, np.full(n, cursor)) - group * size
        counts = np.bincount(place, minlength=size)
        expected = n / size
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 3 * size + 30, (cursor, chi2)


def test_bit_lengths():
    assert bit_lengths(np.array([1, 2, 3, 4, 5, 8, 9, 2**40 + 1])).tolist() == [
        0, 1, 2, 2, 3, 3, 4, 41,
    ]  # fmt: skip


def test_tokens_of_first_are_the_tokens_of_the_looked_up_draws():
    """The token count a token budget resumes from: the very documents drawn (both paths)."""
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 3 * SMALL_GROUP, 50)
    members = rng.permutation(int(sizes.sum()))
    lengths = rng.integers(0, 100, int(sizes.sum()))
    groups = FeistelGroups(members, sizes, np.arange(50) * 3, seed=5, purpose=2)
    counts = rng.integers(0, 200, 50)
    drawn = [
        int(lengths[groups.lookup(np.full(c, k), np.arange(c))].sum())
        for k, c in enumerate(counts.tolist())
    ]
    assert groups.tokens_of_first(counts, lengths) == sum(drawn)


def test_large_groups_draw_each_pass_from_a_generator_whatever_the_cache(monkeypatch):
    import clusterclip.schedule.feistel as feistel
    from clusterclip.schedule.groups import chunk_permutations

    sizes = np.array([40, feistel.LARGE_GROUP, 3 * feistel.LARGE_GROUP])
    keys = np.array([2, 5, 9])

    def positions(cache: int) -> np.ndarray:
        monkeypatch.setattr(feistel, "ROW_CACHE", cache)
        groups = feistel.FeistelGroups(np.arange(sizes.sum()), sizes, keys, seed=3, purpose=2)
        rng = np.random.default_rng(0)
        group = rng.integers(0, 3, 4000)
        return group, groups.positions(group, rng.integers(0, 10**5, 4000))

    group, cached = positions(2**24)
    _, thrashing = positions(1)  # evicts all but the last row: the same positions
    np.testing.assert_array_equal(cached, thrashing)
    groups = feistel.FeistelGroups(np.arange(sizes.sum()), sizes, keys, seed=3, purpose=2)
    for g in (1, 2):
        size = int(sizes[g])
        for p in (0, 7):
            got = groups.positions(np.full(size, g), p * size + np.arange(size))
            want = chunk_permutations(3, 2, int(keys[g]), p, size, rows=1)[0]
            np.testing.assert_array_equal(got, want)
