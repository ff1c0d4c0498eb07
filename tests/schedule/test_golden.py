"""Golden schedules: the exact bytes of long schedules, pinned to ``SCHEDULE_VERSION``.

DESIGN.md section 2: same inputs + same seed + same version -> byte-identical
schedule on any machine. The oracle tests share the engine's sources of
randomness (block uniforms, pass permutations), so a change there -- or in the
constants that shape them, ``CHOICE_BLOCK`` and ``PERMUTATION_CHUNK`` -- moves
both alike; only pinned bytes catch it. Every case below is longer than
``2 * CHOICE_BLOCK`` (choices drawn in three blocks, with two or more clusters
still active in the last), has clusters whose ids leave gaps (pass
permutations are keyed by cluster id, not by rank among the clusters), and
clusters smaller than ``PERMUTATION_CHUNK`` drawn for many passes.

Each pin is the sha256 of the schedule as little-endian int64 bytes, plus its
first values (readable when a pin breaks). If a deliberate change alters the
draw rule, bump ``SCHEDULE_VERSION`` (schedule/config.py) and re-pin: set
``PINNED_VERSION`` to it and paste the values the failures print.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.schedule import SCHEDULE_VERSION, build_schedule
from clusterclip.schedule.groups import CHOICE_BLOCK, PERMUTATION_CHUNK

#: The SCHEDULE_VERSION the pins below were computed with.
PINNED_VERSION = 2

#: Cluster id -> size: ids with gaps, sizes from 1 to above PERMUTATION_CHUNK.
SIZES = {0: 1, 2: 5, 3: 40, 7: 300, 9: 2500, 12: 4000}


def golden_labels() -> np.ndarray:
    labels = np.concatenate([np.full(size, k) for k, size in SIZES.items()] + [np.full(7, -1)])
    return labels[np.random.default_rng(2024).permutation(labels.size)]


def golden_lengths() -> np.ndarray:
    return np.random.default_rng(99).integers(1, 300, size=golden_labels().size)


CASES = {
    # clusterclip, online: the small clusters clip in block 0, the two large ones stay
    # active through block 2
    "online": dict(max_repeats=40, num_samples=150_000, seed=7),
    # planned order, clipped everywhere at 82,152 draws, then random passes
    "planned-fallback": dict(
        max_repeats=12, num_samples=150_000, order="planned", on_exhausted="random", seed=7
    ),
    # token budget that runs far past exhaustion into the random passes
    "tokens-fallback": dict(max_repeats=2, num_tokens=20_000_000, on_exhausted="random", seed=5),
    # unequal weights (the inverse-CDF path), no clip
    "temperature": dict(
        policy="temperature", alpha=0.5, max_repeats=None, num_samples=140_000, seed=3
    ),
    # one corpus group, shuffled epochs
    "random": dict(policy="random", max_repeats=30, num_samples=140_000, seed=11),
}

#: case -> (sha256 of the int64 little-endian bytes, length, first values)
PINS = {
    "online": (
        "20ea536a9c51991ccc80d8e194c795992cd0ca4d715195b695863daf133c5ec2",
        150_000,
        [4377, 5138, 6079, 5138, 5287, 4578],
    ),
    "planned-fallback": (
        "596dfc7b21196120ec5732348f34f9bc722abe3880cba2548198a947c7219989",
        150_000,
        [4377, 6740, 5174, 6438, 5601, 955],
    ),
    "random": (
        "46e78239e20802bf1c11d76972fd2cea5e18ba099b954f9200c4599881c9ebb1",
        140_000,
        [1422, 2987, 6643, 2880, 858, 4580],
    ),
    "temperature": (
        "e3acf630f0432e136809dc987e9a48791bdbe98ae9dbae38f4ed95b1407a6d61",
        140_000,
        [592, 1428, 6193, 750, 2602, 2533],
    ),
    "tokens-fallback": (
        "faed864533df5472e5931992f6b942cc034a60c7ccbaa651e8d8f9a18ab031de",
        133_045,
        [5152, 1198, 4478, 4557, 325, 3635],
    ),
}

#: The "online" case read through ClusterClipSampler on several ranks (both world sizes
#: leave leftovers at every 65,536-position block boundary and at the end):
#: (world_size, drop_last) -> sha256 of what the ranks read, in global order
#: (rank r's j-th index at r + j * world_size).
RANK_PINS = {
    (7, False): "192c54037eb6f5f5bf7e878a93ba1daf1aada9d52e30e15faace18d4f989d96a",
    (11, True): "cca51ecbf86db046e14386deea8b28a22b5cbe7f70de80d1a2ea72c433390208",
}


def digest(indices) -> str:
    return hashlib.sha256(np.asarray(indices, dtype="<i8").tobytes()).hexdigest()


def kwargs_of(case: str) -> dict:
    kwargs = dict(CASES[case])
    if "num_tokens" in kwargs:
        kwargs["lengths"] = golden_lengths()
    return kwargs


def require_pinned_version() -> None:
    if SCHEDULE_VERSION != PINNED_VERSION:
        pytest.fail(
            f"SCHEDULE_VERSION is {SCHEDULE_VERSION} but the golden schedules were pinned for "
            f"{PINNED_VERSION}: re-pin them (set PINNED_VERSION = {SCHEDULE_VERSION} and paste "
            "the values these tests print)."
        )


def test_pins_belong_to_the_current_schedule_version():
    require_pinned_version()


def test_cases_span_several_choice_blocks():
    # Guards the premise of the pins: long enough to cross blocks, small clusters with
    # many passes per permutation chunk, cluster ids with gaps.
    assert min(PINS[case][1] for case in PINS) > 2 * CHOICE_BLOCK
    assert min(SIZES.values()) < PERMUTATION_CHUNK < max(SIZES.values())
    assert sorted(SIZES) != list(range(len(SIZES)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_schedule(case):
    require_pinned_version()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        indices = build_schedule(golden_labels(), **kwargs_of(case)).indices
    sha, length, first = PINS[case]
    got = (digest(indices), int(indices.size), indices[: len(first)].tolist())
    assert got == (sha, length, first), (
        f"the {case!r} schedule changed without a SCHEDULE_VERSION bump (still "
        f"{SCHEDULE_VERSION}). If the change is deliberate, bump SCHEDULE_VERSION in "
        f"schedule/config.py and re-pin: {case!r}: {got!r}"
    )


@pytest.mark.parametrize(("world_size", "drop_last"), sorted(RANK_PINS))
def test_golden_rank_slices(world_size, drop_last):
    require_pinned_version()
    per_rank = [
        list(
            ClusterClipSampler(
                golden_labels(),
                rank=rank,
                world_size=world_size,
                drop_last=drop_last,
                **kwargs_of("online"),
            )
        )
        for rank in range(world_size)
    ]
    got = digest(np.array(per_rank).T.ravel())
    assert got == RANK_PINS[(world_size, drop_last)], (
        f"what the ranks read changed; re-pin if deliberate: {(world_size, drop_last)}: {got!r}"
    )
