from __future__ import annotations

import warnings

import numpy as np
import pytest


@pytest.fixture(scope="session")
def skewed_labels() -> np.ndarray:
    """1,500 documents in 12 clusters of very different sizes, plus excluded ones."""
    sizes = [1, 2, 3, 5, 8, 20, 50, 90, 150, 250, 400, 511]
    labels = np.concatenate([np.repeat(np.arange(len(sizes)), sizes), np.full(9, -1)])
    return labels[np.random.default_rng(7).permutation(labels.size)]


def quiet(func, *args, **kwargs):
    """Call ``func`` with clusterclip's exhaustion UserWarning silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return func(*args, **kwargs)
