"""Every random stream of the schedule starts here: purpose codes and seed sequences.

A schedule's randomness is a function of its seed and of *where* it is used:
every stream is ``numpy.random.SeedSequence(entropy_words(seed, purpose, *parts))``
(:func:`seed_sequence`), with a purpose code per use (cluster choices, pass
permutations, phases, ...) and the parts that locate it (a block, a cluster
id and a chunk or pass). :func:`entropy_words` feeds numpy one 32-bit word per
part when every part fits in 32 bits (the words of ``SCHEDULE_VERSION`` 1) and
a fixed-width layout otherwise, so that two different ``(seed, purpose,
parts)`` never share entropy. :func:`generators` derives many such generators
at once (numpy's seeding algorithm, vectorised: :func:`pcg64_seeds`).

Every constant here is part of the schedule versions that use it: changing one
changes schedules (``tests/schedule/test_golden.py`` pins them).
"""

from __future__ import annotations

import numpy as np
from numpy.random.bit_generator import ISeedSequence

__all__ = [
    "PURPOSE_CHOICE",
    "PURPOSE_CHOICE_V3",
    "PURPOSE_CLUSTER_PASS",
    "PURPOSE_FALLBACK_PASS",
    "PURPOSE_PHASE",
    "PURPOSE_RANDOM_PASS",
    "PURPOSE_SMALL_TABLE",
    "PURPOSE_TREE",
    "entropy_words",
    "generators",
    "pcg64_seeds",
    "seed_sequence",
]

# Purpose codes: the second word of every SeedSequence, so that streams drawn
# for different purposes never share entropy. Part of SCHEDULE_VERSION.
PURPOSE_CHOICE = 1  # cluster choices of one position block
PURPOSE_CLUSTER_PASS = 2  # pass permutations of one cluster
PURPOSE_RANDOM_PASS = 3  # pass permutations of the corpus, policy="random"
PURPOSE_FALLBACK_PASS = 4  # pass permutations of the corpus after exhaustion
PURPOSE_PHASE = 5  # phases of the planned order
PURPOSE_CHOICE_V3 = 6  # candidates of one window of the version-3 online rule
PURPOSE_SMALL_TABLE = 7  # versions 3, 4: the table of small groups' pass permutations
PURPOSE_TREE = 8  # version 4: the streams of the inner nodes of a cluster tree

#: Second word of the wide layout of :func:`entropy_words` (never a purpose code).
_WIDE = 0xFFFFFFFF
_WORD = 2**32


def entropy_words(seed: int, purpose: int, *parts: int) -> list[int]:
    """The 32-bit words a schedule ``SeedSequence`` is made from.

    ``[seed, purpose, *parts]`` when all of them are below ``2**32`` (the
    layout every schedule has used; numpy reads one word per number). Any
    larger number (a seed in ``[2**32, 2**63)``, a cluster id or chunk beyond
    32 bits) switches to the wide layout ``[seed_low, 0xFFFFFFFF, seed_high,
    purpose, part_low, part_high, ...]``: its second word is never a purpose
    code and its length is fixed per purpose, so no two inputs share words
    (numpy would read a large seed as two words, which can spell a small seed
    followed by other parts).

    >>> entropy_words(7, PURPOSE_CHOICE, 3)
    [7, 1, 3]
    >>> entropy_words(2**32 + 7, PURPOSE_CHOICE, 3)
    [7, 4294967295, 1, 1, 3, 0]
    """
    if seed < _WORD and all(part < _WORD for part in parts):
        return [seed, purpose, *parts]
    words = [seed % _WORD, _WIDE, seed // _WORD, purpose]
    for part in parts:
        words += [part % _WORD, part // _WORD]
    return words


def seed_sequence(seed: int, purpose: int, *parts: int) -> np.random.SeedSequence:
    """``SeedSequence(entropy_words(seed, purpose, *parts))``: every schedule stream starts here."""
    return np.random.SeedSequence(entropy_words(seed, purpose, *parts))


# numpy's SeedSequence (numpy/random/bit_generator.pyx, pool of 4 words), for
# deriving many generator states at once; tests check it against numpy's own.
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = np.uint32(0xCA01F9DD), np.uint32(0x4973F715)
_POOL = 4
_SHIFT = np.uint32(16)
_MASK = 0xFFFFFFFF


def _hashmix(value: np.ndarray, const: int) -> tuple[np.ndarray, int]:
    value = value ^ np.uint32(const)
    const = (const * _MULT_A) & _MASK
    value *= np.uint32(const)  # uint32 arithmetic wraps, as in C
    value ^= value >> _SHIFT
    return value, const


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    result = _MIX_MULT_L * x - _MIX_MULT_R * y
    result ^= result >> _SHIFT
    return result


def pcg64_seeds(words: np.ndarray) -> np.ndarray:
    """``SeedSequence(row).generate_state(4, np.uint64)`` for every row of ``words``.

    What ``PCG64(SeedSequence(row))`` draws from its seed sequence, for many
    rows in a few vectorised steps instead of one ``SeedSequence`` each.

    Parameters
    ----------
    words : ndarray of uint32, shape (L, W)
        One entropy per row (:func:`entropy_words`; numpy reads each as these W words).

    Returns
    -------
    ndarray of uint64, shape (L, 4)

    >>> words = np.array([entropy_words(0, PURPOSE_CLUSTER_PASS, 5, 0)], dtype=np.uint32)
    >>> bool((pcg64_seeds(words)[0] == np.random.SeedSequence([0, 2, 5, 0]).generate_state(
    ...     4, np.uint64)).all())
    True
    """
    words = np.asarray(words, dtype=np.uint32)
    n_words = words.shape[1]
    zero = np.zeros(words.shape[0], dtype=np.uint32)
    const = _INIT_A
    pool = []
    for i in range(_POOL):
        value, const = _hashmix(words[:, i] if i < n_words else zero, const)
        pool.append(value)
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                hashed, const = _hashmix(pool[src], const)
                pool[dst] = _mix(pool[dst], hashed)
    for src in range(_POOL, n_words):
        for dst in range(_POOL):
            hashed, const = _hashmix(words[:, src], const)
            pool[dst] = _mix(pool[dst], hashed)
    const = _INIT_B
    state = np.empty((words.shape[0], 2 * _POOL), dtype=np.uint32)
    for i in range(2 * _POOL):
        value = pool[i % _POOL] ^ np.uint32(const)
        const = (const * _MULT_B) & _MASK
        value *= np.uint32(const)
        value ^= value >> _SHIFT
        state[:, i] = value
    return state.astype("<u4").view("<u8").astype(np.uint64)


class _Seeded(ISeedSequence):
    """A seed sequence whose PCG64 state words are already derived (:func:`pcg64_seeds`)."""

    __slots__ = ("state",)

    def __init__(self, state: np.ndarray) -> None:
        self.state = state

    def generate_state(self, n_words: int, dtype: type = np.uint64) -> np.ndarray:
        return self.state


def _entropy_rows(seed: int, purpose: int, keys: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """:func:`entropy_words` of ``(seed, purpose, key, chunk)`` for each pair, one layout.

    All the pairs must share the layout: all narrow or all wide.
    """
    n = keys.shape[0]
    if seed < _WORD and (n == 0 or max(int(keys.max()), int(chunks.max())) < _WORD):
        columns = [np.full(n, seed), np.full(n, purpose), keys, chunks]
    else:
        columns = [np.full(n, seed % _WORD), np.full(n, _WIDE), np.full(n, seed // _WORD)]
        columns += [np.full(n, purpose), keys % _WORD, keys // _WORD, chunks % _WORD]
        columns.append(chunks // _WORD)
    return np.column_stack(columns).astype(np.uint32)


def generators(
    seed: int, purpose: int, keys: np.ndarray, chunks: np.ndarray
) -> list[np.random.Generator]:
    """``default_rng(seed_sequence(seed, purpose, key, chunk))`` for each pair, made in bulk.

    The generators are those of :func:`seed_sequence` (the same streams), with
    their PCG64 states derived for all pairs at once (:func:`pcg64_seeds`).

    >>> (rng,) = generators(0, PURPOSE_CLUSTER_PASS, np.array([5]), np.array([0]))
    >>> bool((rng.permutation(9) == np.random.default_rng(seed_sequence(0, 2, 5, 0)).permutation(9)).all())
    True
    """
    keys = np.asarray(keys, dtype=np.int64)
    chunks = np.asarray(chunks, dtype=np.int64)
    out: list = [None] * keys.shape[0]
    wide = (keys >= _WORD) | (chunks >= _WORD) | (seed >= _WORD)
    for layout in (~wide, wide):
        which = np.flatnonzero(layout)
        if not which.size:
            continue
        states = pcg64_seeds(_entropy_rows(seed, purpose, keys[which], chunks[which]))
        for i, state in zip(which.tolist(), states, strict=True):
            out[i] = np.random.Generator(np.random.PCG64(_Seeded(state)))
    return out
