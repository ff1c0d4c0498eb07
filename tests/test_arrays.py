"""``clusterclip.arrays.distinct``: ``np.unique``'s values, by one sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from clusterclip.arrays import distinct

DTYPES = st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.uint64, np.bool_])


@settings(max_examples=300, deadline=None)
@given(data=st.data(), dtype=DTYPES)
def test_distinct_is_np_unique_for_integers(data, dtype):
    values = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=2, min_side=0)))
    found, expected = distinct(values), np.unique(values)
    assert found.dtype == expected.dtype
    assert found.tolist() == expected.tolist()


def test_other_dtypes_are_np_uniques():
    floats = np.array([2.0, np.nan, 1.0, np.nan, 2.0])
    assert np.array_equal(distinct(floats), np.unique(floats), equal_nan=True)
    words = np.array(["b", "a", "b"])
    assert distinct(words).tolist() == ["a", "b"]


def test_many_distinct_values():
    values = np.random.default_rng(0).integers(0, 10**12, 200_000)
    assert np.array_equal(distinct(values), np.unique(values))
