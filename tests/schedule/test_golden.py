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

Every supported version is pinned: version 1 (the default rule of releases
before version 4, asked for with ``schedule_version=1``; every seed here is
below 2**32) and version 3 (the earlier opt-in rule) must stay byte-identical
for the schedules and checkpoints made with them, and version 4 (the default),
whose windows (``WINDOW``), purpose codes, small-group table
(``SMALL_PASS``, ``TABLE_ROWS``), pass sort keys (``KEY_BITS``) and planned
time grid (``TIME_BITS``) the pins cover: every version-3 and version-4 case
spans several windows; version 4 also pins a tree (``policy="hierarchical"``)
and 20,000 small clusters (windows processed in chunks).

Each pin is the sha256 of the schedule as little-endian int64 bytes, plus its
first values (readable when a pin breaks). If a deliberate change alters the
draw rule, bump ``SCHEDULE_VERSION`` (schedule/config.py), keep the old rule
reachable, and pin the new version next to the others.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.schedule import SCHEDULE_VERSION, build_schedule
from clusterclip.schedule.config import SUPPORTED_VERSIONS
from clusterclip.schedule.feistel import HUGE_GROUP, LARGE_GROUP, SMALL_GROUP
from clusterclip.schedule.groups import CHOICE_BLOCK, PERMUTATION_CHUNK
from clusterclip.schedule.passes import SMALL_PASS
from clusterclip.schedule.slabs import SlabOrder
from clusterclip.schedule.treewindows import CHUNK
from clusterclip.schedule.windows import WINDOW

#: The version of new schedules (version 2 is version 1's rule for seeds >= 2**32:
#: test_arithmetic pins a version-2 stream).
PINNED_VERSION = 4

#: Cluster id -> size: ids with gaps, sizes from 1 to above PERMUTATION_CHUNK.
SIZES = {0: 1, 2: 5, 3: 40, 7: 300, 9: 2500, 12: 4000}


def golden_labels() -> np.ndarray:
    labels = np.concatenate([np.full(size, k) for k, size in SIZES.items()] + [np.full(7, -1)])
    return labels[np.random.default_rng(2024).permutation(labels.size)]


def golden_lengths() -> np.ndarray:
    return np.random.default_rng(99).integers(1, 300, size=golden_labels().size)


def golden_levels() -> np.ndarray:
    """Two levels above the clusters: {0, 2} and {3, 7} under 0, {9, 12} under 1."""
    labels = golden_labels()
    middle = {0: 10, 2: 10, 3: 11, 7: 11, 9: 12, 12: 12, -1: -1}
    top = {10: 0, 11: 0, 12: 1, -1: -1}
    mid = np.array([middle[int(x)] for x in labels])
    return np.column_stack([np.array([top[int(x)] for x in mid]), mid])


def many_labels() -> np.ndarray:
    """20,000 clusters of 1 to 6 documents: more than one chunk per window."""
    sizes = np.random.default_rng(5).integers(1, 7, 20_000)
    labels = np.repeat(np.arange(20_000), sizes)
    return labels[np.random.default_rng(6).permutation(labels.size)]


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
    # version 4 only: a two-level tree, clipped on the way, then random passes
    "hierarchical": dict(
        policy="hierarchical", max_repeats=6, num_samples=150_000, on_exhausted="random", seed=2
    ),
    # version 4 only: 20,000 small clusters, online then planned
    "many-online": dict(max_repeats=3, num_samples=140_000, seed=8),
    "many-planned": dict(max_repeats=3, num_samples=140_000, order="planned", seed=8),
}
#: The cases pinned only for version 4 (the others are pinned for every version).
V4_CASES = ("hierarchical", "many-online", "many-planned")

#: version -> case -> (sha256 of the int64 little-endian bytes, length, first values)
PINS_V1 = {
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
#: leave leftovers at every block or window boundary and at the end):
#: (world_size, drop_last) -> sha256 of what the ranks read, in global order
#: (rank r's j-th index at r + j * world_size).
RANK_PINS_V1 = {
    (7, False): "192c54037eb6f5f5bf7e878a93ba1daf1aada9d52e30e15faace18d4f989d96a",
    (11, True): "cca51ecbf86db046e14386deea8b28a22b5cbe7f70de80d1a2ea72c433390208",
}

PINS_V3 = {
    "online": (
        "95674a9196d1ab13458af9fcd0f4186237bacaa5ecb91dc896af50c1fb2df53d",
        150_000,
        [6740, 2541, 4377, 4578, 211, 5174],
    ),
    "planned-fallback": (
        "4e0e5adb7ce0c04162d7bab0d65ae1234bc582c788e63b05f57b45a730f739f5",
        150_000,
        [4377, 6740, 5174, 6438, 5601, 955],
    ),
    "random": (
        "46e78239e20802bf1c11d76972fd2cea5e18ba099b954f9200c4599881c9ebb1",
        140_000,
        [1422, 2987, 6643, 2880, 858, 4580],
    ),
    "temperature": (
        "309660ffad216de12897d7f57338fffdbc36345842d93fdeae2866943cdf0b3d",
        140_000,
        [592, 2533, 1428, 5798, 6193, 107],
    ),
    "tokens-fallback": (
        "ef8c5217378aea5541cb3d21c46c71ac0a336ac51b8ef5d42e3ad44c8c087361",
        133_045,
        [5138, 5152, 1394, 6079, 3, 4779],
    ),
}
RANK_PINS_V3 = {
    (7, False): "153ef0d8ee676c21ca62fcfa031f14ec9561f6309db07eb323aadac307de0672",
    (11, True): "843ac4a02e113571838eda39f0ae23209a7fbbbc4df63724d3310a52007cc6c1",
}

PINS_V4 = {
    "hierarchical": (
        "8a4896e1247bfb3db48b92bd08ddbdecf87a480b9178dedc6a6ee3ce63e744e4",
        150_000,
        [192, 1089, 3083, 5138, 1676, 6079],
    ),
    "many-online": (
        "e4f92fd940164023bd078524dcaf32372e9c8a9ce8d9d8ddca9bd1b7f36c19a7",
        140_000,
        [28261, 29474, 44868, 15161, 24892, 53831],
    ),
    "many-planned": (
        "527323fef9367db8e083a50e7fc674c3f4885031f4eb1259b66dafb7179cfe38",
        140_000,
        [57161, 36730, 24454, 68726, 32715, 326],
    ),
    "online": (
        "588a7b51f4ec41da360b436eceaf6d94192f32fbdc14b18c1d44f0de2cf45230",
        150_000,
        [3019, 192, 4773, 1107, 6487, 974],
    ),
    "planned-fallback": (
        "a2922adb661ebbf0027e00d751495e3919dc4d7b4ac779e2dcc5987aa527f762",
        150_000,
        [4773, 3019, 974, 1776, 485, 2308],
    ),
    "random": (
        "deac5af0f961659a3cf00a433507364041d943dac237e077a98178e470253682",
        140_000,
        [5983, 2253, 1575, 4566, 34, 317],
    ),
    "temperature": (
        "d6cb98c5575ce28e4fa2670ef1d01a660ff589d0d24ea09d8c9e1e609bd97b98",
        140_000,
        [5818, 6239, 712, 3934, 2012, 6489],
    ),
    "tokens-fallback": (
        "64d51c4069c7e3afe8f7b7cee2c469a036f15a238ec8687896cc5fdb223ee9fc",
        133_050,
        [5138, 2667, 2904, 6079, 3, 363],
    ),
}
RANK_PINS_V4 = {
    (7, False): "65db5fd92e9aebc34dd57612df80414bc870fc1ac8dbd2c4c0749da9a4e0726e",
    (11, True): "fdbc00bcf54e734a77f0492647e09a29aeaa47ec61ecc81b46b822025516187a",
}

PINS = {1: PINS_V1, 3: PINS_V3, 4: PINS_V4}
RANK_PINS = {1: RANK_PINS_V1, 3: RANK_PINS_V3, 4: RANK_PINS_V4}


def digest(indices) -> str:
    return hashlib.sha256(np.asarray(indices, dtype="<i8").tobytes()).hexdigest()


def kwargs_of(case: str, version: int) -> dict:
    kwargs = dict(CASES[case], schedule_version=version)
    if "num_tokens" in kwargs:
        kwargs["lengths"] = golden_lengths()
    if case == "hierarchical":
        kwargs["levels"] = golden_levels()
    return kwargs


def labels_of(case: str) -> np.ndarray:
    return many_labels() if case.startswith("many") else golden_labels()


def test_pins_cover_every_supported_version():
    assert PINNED_VERSION == SCHEDULE_VERSION
    # 2 is version 1's rule for seeds >= 2**32 (test_arithmetic pins one such stream)
    assert set(PINS) | {2} == set(SUPPORTED_VERSIONS)


def test_cases_span_several_choice_blocks_and_windows():
    # Guards the premise of the pins: long enough to cross blocks (version 1) and
    # windows (version 3), small clusters with many passes per permutation chunk,
    # clusters on both sides of the small-group table, cluster ids with gaps.
    assert min(PINS_V1[case][1] for case in PINS_V1) > 2 * CHOICE_BLOCK
    assert min(PINS_V3[case][1] for case in PINS_V3) > 2 * WINDOW
    assert min(SIZES.values()) < PERMUTATION_CHUNK < max(SIZES.values())
    assert min(SIZES.values()) <= SMALL_GROUP < max(SIZES.values())
    # version 3's three pass sources: the table, the bijection, a generator per pass
    assert any(SMALL_GROUP < size < LARGE_GROUP for size in SIZES.values())
    assert LARGE_GROUP <= max(SIZES.values()) <= HUGE_GROUP
    assert sorted(SIZES) != list(range(len(SIZES)))
    # version 4: both pass sources, windows in chunks, a planned order of several slabs
    assert min(SIZES.values()) <= SMALL_PASS < max(SIZES.values())
    assert min(PINS_V4[case][1] for case in PINS_V4) > 2 * WINDOW
    assert np.unique(many_labels()).size > 2 * CHUNK
    plan = np.bincount(many_labels()) * 3  # every cluster to its cap
    assert SlabOrder(plan, np.zeros(plan.size)).n_slabs > 1


CASE_VERSIONS = [
    (version, case)
    for version in sorted(PINS)
    for case in sorted(CASES)
    if version == 4 or case not in V4_CASES
]


@pytest.mark.parametrize(("version", "case"), CASE_VERSIONS)
def test_golden_schedule(version, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        indices = build_schedule(labels_of(case), **kwargs_of(case, version)).indices
    got = (digest(indices), int(indices.size), indices[:6].tolist())
    assert got == PINS[version].get(case), (
        f"the version {version} {case!r} schedule changed. If the change is deliberate, "
        f"bump SCHEDULE_VERSION in schedule/config.py and pin the new version: {case!r}: {got!r}"
    )


RANK_CASES = [(v, w, d) for v in sorted(RANK_PINS) for (w, d) in [(7, False), (11, True)]]


@pytest.mark.parametrize(("version", "world_size", "drop_last"), RANK_CASES)
def test_golden_rank_slices(version, world_size, drop_last):
    per_rank = [
        list(
            ClusterClipSampler(
                golden_labels(),
                rank=rank,
                world_size=world_size,
                drop_last=drop_last,
                **kwargs_of("online", version),
            )
        )
        for rank in range(world_size)
    ]
    got = digest(np.array(per_rank).T.ravel())
    assert got == RANK_PINS[version].get((world_size, drop_last)), (
        f"what the ranks read changed; re-pin if deliberate: {(world_size, drop_last)}: {got!r}"
    )
