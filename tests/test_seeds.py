"""One seed range for every stage: ints in [0, 2**63-1], one message, no aliasing."""

from __future__ import annotations

import re

import numpy as np
import pytest

from clusterclip.cluster.arrays import random_stream
from clusterclip.cluster.kmeans import KMeans
from clusterclip.cluster.options import ClusterOptions
from clusterclip.config import RunConfig, RunOptions, config_from_mapping
from clusterclip.embed.encoders import sample_for_fit
from clusterclip.embed.options import EmbedOptions
from clusterclip.errors import ClusterClipError, spelled_as_flags
from clusterclip.options import SEED_MAX, check_seed
from clusterclip.schedule.options import ScheduleOptions

SEEDED = [EmbedOptions, ClusterOptions, ScheduleOptions, RunOptions, RunConfig]


def _message(value) -> str:
    return rf"`seed` must be an int in \[0, 2\*\*63-1\]; got {re.escape(repr(value))}\."


@pytest.mark.parametrize("cls", SEEDED, ids=lambda c: c.__name__)
@pytest.mark.parametrize("value", [-1, SEED_MAX + 1, 10**30, True, 2.0, "1", None])
def test_every_seed_option_refuses_out_of_range_values(cls, value):
    with pytest.raises(ClusterClipError, match=_message(value)):
        cls(seed=value)


@pytest.mark.parametrize("cls", SEEDED, ids=lambda c: c.__name__)
@pytest.mark.parametrize("value", [0, 2**32 - 1, 2**32, SEED_MAX])
def test_every_seed_option_accepts_the_range(cls, value):
    assert cls(seed=value).seed == value


def test_kmeans_uses_the_same_check():
    x = np.eye(4, dtype=np.float32)
    with pytest.raises(ClusterClipError, match=_message(-2)):
        KMeans(2, seed=-2, backend="numpy").fit(x)
    KMeans(2, seed=SEED_MAX, backend="numpy").fit(x)


def test_message_is_spelled_as_the_flag_under_the_cli():
    with (
        spelled_as_flags({"seed": "--seed"}),
        pytest.raises(
            ClusterClipError,
            match=r"`--seed` must be an int in \[0, 2\*\*63-1\]; got -1\. Pass e\.g\. --seed 0\.",
        ),
    ):
        check_seed(-1)


def test_toml_seed_out_of_range_names_the_key():
    with pytest.raises(ClusterClipError, match=_message(2**63)):
        config_from_mapping({"seed": 2**63})


@pytest.mark.parametrize("low", [0, 7, 2**32 - 1])
def test_seeds_past_32_bits_are_not_smaller_seeds(low):
    """k-means and the tfidf sample feed numpy the seed as its own entropy: no aliasing."""
    for high in (1, 2, 5, 2**31):
        seed = low + high * 2**32
        assert (
            random_stream(seed, 0).integers(0, 2**62, 4).tolist()
            != random_stream(low, 0).integers(0, 2**62, 4).tolist()
        )
        texts = [(i, f"text {i}") for i in range(200)]
        assert sample_for_fit(texts, size=20, seed=seed) != sample_for_fit(texts, size=20, seed=low)
