"""Seeding of spherical k-means on the fit sample: k-means++, AFK-MC2, random.

Distances are the squared Euclidean distance between unit vectors,
``2 * (1 - cosine)``, so D^2 weighting is weighting by ``1 - max cosine``.

``k-means++`` (Arthur & Vassilvitskii 2007, greedy variant as in scikit-learn)
    D^2 sampling keeping the best of ``2 + ln K`` candidates per centre, one
    centre (one draw, one candidates x pool product) at a time, over a pool that
    is a random subset of ``max(8 * K, 8192)`` rows of the fit sample (the pool
    size is reported). The ``K - 1`` products are small, so seeding runs on one
    thread (:func:`clusterclip.threads.one_thread`): on two busy cores each
    product had waited for the second thread (K = 1024: 27-35 s of an 80-90 s fit,
    1.7 s on one thread; docs/clustering.md).
``k-means++-rounds``
    the same greedy k-means++ with the candidates drawn in rounds of
    ``ceil(K / 64)`` centres (batched D^2 sampling, as in k-means||): one draw and
    one candidates x pool product per round, so about 64 products instead of
    ``K``; inside a round each centre is still the greedy best of its own
    candidates against the distances updated by the centres picked before it.
    For ``K <= 64`` it is exactly ``k-means++``. Cheaper, but measured slightly
    worse (objective 0.07 % lower, ~6 of 512 rare clusters fewer over 10 seeds
    at K = 1024), so opt-in.
``afk-mc2`` (Bachem et al. 2016)
    approximates D^2 sampling over the *whole* sample with a Markov chain of
    ``chain_length`` proposals per centre drawn from ``q(x) = d(x, c1)^2 / 2S + 1 / 2n``;
    its cost does not grow with the sample size.
``random``
    ``K`` distinct rows of the sample (what faiss and the paper's code do).

Random-point seeding merges rare clusters into big ones on imbalanced data;
D^2 seeding keeps them (see docs/clustering.md for the measured effect).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np

from clusterclip.errors import invalid

__all__ = [
    "INITS",
    "afk_mc2",
    "kmeans_plusplus",
    "picks_per_round",
    "random_init",
    "seed_centroids",
]

INITS = ("k-means++", "k-means++-rounds", "afk-mc2", "random")

#: k-means++ candidate pool: this many sample rows per centroid (at least _POOL_MIN).
POOL_PER_CENTROID = 8
_POOL_MIN = 8192
#: Draws per k-means++ step while every candidate is isolated (``min_cell``).
_REDRAWS = 8
#: ``k-means++-rounds`` draws its centres in about this many rounds (``ceil(K / ROUNDS)`` each).
ROUNDS = 64
#: Bytes of candidate x pool distances held at once (a round's product is cut to fit).
_ROUND_BYTES = 128 << 20
#: Largest k-means++ pool Gram matrix computed at once (8,192 pool rows: K <= 1024).
GRAM_BYTES = 256 << 20
#: Pool rows per block of the Gram matrix's product.
_GRAM_ROWS = 1024


def picks_per_round(n_clusters: int) -> int:
    """Centres ``k-means++-rounds`` draws per round: ``ceil(K / 64)`` (1 up to K = 64).

    >>> picks_per_round(64), picks_per_round(65), picks_per_round(1024)
    (1, 2, 16)
    """
    return max(1, -(-int(n_clusters) // ROUNDS))


def _pick(rng: np.random.Generator, weights: np.ndarray) -> int:
    """Index drawn with probability proportional to ``weights`` (uniform if all zero)."""
    cumulative = np.cumsum(weights, dtype=np.float64)
    total = cumulative[-1]
    if not total > 0:
        return int(rng.integers(len(weights)))
    return int(
        min(np.searchsorted(cumulative, rng.random() * total, side="right"), len(weights) - 1)
    )


def _products_on_torch() -> bool:
    """Whether the k-means++ products run on torch: where it is installed, except on
    AVX2 CPUs without AVX-512, where numpy's OpenBLAS runs them faster (a rule of the
    CPU flags, never a timing)."""
    from clusterclip.threads import avx2_only

    return not avx2_only() and importlib.util.find_spec("torch") is not None


def _pool_products(X: np.ndarray, draws: int = 0, workers: int = 1):
    """``rows -> X[rows] @ X.T`` as float32 numpy, on torch or numpy (:func:`_products_on_torch`).

    Each k-means++ step multiplies a few candidate rows by the whole pool: a
    thin product that oneDNN (torch) ran ~6x faster than numpy's OpenBLAS on an
    AVX-512 Xeon, given a contiguous transposed pool, while on an AVX2-only EPYC
    (Zen 2) numpy's ran it ~2x faster than torch's (1.7 vs 3.7 ms for 8 x 8,192
    rows). On numpy, when the seeding will multiply at least half as many
    candidate rows (``draws``) as the pool has and the pool's Gram matrix fits in
    :data:`GRAM_BYTES`, the Gram matrix is computed once instead, in fixed blocks
    of rows each on one BLAS thread, spread over ``workers`` threads (the same
    bits on any number), and a step looks its rows up: a big product runs at
    several times the thin ones' speed per operation (K = 1024, 8,192 pool rows:
    0.5 s for the Gram matrix against ~2 s of thin products on that EPYC).
    """
    if not _products_on_torch():
        n = len(X)
        if 4 * n * n <= GRAM_BYTES and n <= 2 * draws:
            gram = _gram(X, workers)
            return lambda rows: gram[rows]
        transposed = np.ascontiguousarray(X.T, dtype=np.float32)
        return lambda rows: X[rows] @ transposed
    import torch

    pool = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
    transposed_pool = pool.T.contiguous()

    def products(rows: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return torch.mm(pool[torch.from_numpy(rows)], transposed_pool).numpy()

    return products


def _gram(X: np.ndarray, workers: int) -> np.ndarray:
    """``X @ X.T`` (float32) in blocks of :data:`_GRAM_ROWS` rows, each on one BLAS thread."""
    from clusterclip.threads import blas_per_thread, spread

    n = len(X)
    gram = np.empty((n, n), dtype=np.float32)
    transposed = np.ascontiguousarray(X.T, dtype=np.float32)

    def block(start: int) -> None:
        np.matmul(X[start : start + _GRAM_ROWS], transposed, out=gram[start : start + _GRAM_ROWS])

    with blas_per_thread():
        spread(block, range(0, n, _GRAM_ROWS), workers)
    return gram


def kmeans_plusplus(
    X: np.ndarray,
    n_clusters: int,
    rng: np.random.Generator,
    *,
    n_local_trials: int | None = None,
    min_cell: int = 1,
    per_round: int = 1,
    workers: int = 1,
) -> np.ndarray:
    """Greedy k-means++ seeding under cosine distance; returns row indices of ``X`` (K,).

    Each centre is the one of ``n_local_trials`` candidates drawn by D^2
    sampling that lowers the total distance most (``2 + ln K`` trials by
    default, as scikit-learn does; 1 gives the original k-means++).

    With ``per_round > 1`` the candidates are drawn ``per_round`` centres at a
    time (``init="k-means++-rounds"`` passes :func:`picks_per_round`): one D^2
    draw of ``per_round * trials`` rows from the distances at the start of the
    round and one product of those rows against the pool. The centres of a round
    are then picked one after the other, each the greedy best of its own
    candidates against the distances updated by the centres picked before it (no
    product needed: the candidates' distances are already there). The default,
    ``per_round=1``, is plain sequential greedy k-means++ (``init="k-means++"``).
    Deterministic for a given ``rng`` state.

    D^2 sampling favours isolated points, and a centre on an isolated point
    keeps a cluster of one. With ``min_cell > 1`` a candidate whose cell (the
    rows closer to it than to every centre chosen so far, itself included) holds
    fewer than ``min_cell`` rows is passed over; when every candidate of a pick is
    that isolated, they are excluded from later draws and the pick draws again
    from the current distances (up to 8 times, then the best candidate is kept).

    ``workers``: threads that may compute the pool's Gram matrix (see
    :func:`_pool_products`); the result does not depend on it.

    >>> X = np.eye(3, dtype=np.float32)
    >>> sorted(kmeans_plusplus(X, 3, np.random.default_rng(0)).tolist())
    [0, 1, 2]
    """
    n = len(X)
    trials = n_local_trials or 2 + int(np.log(n_clusters))
    products = _pool_products(X, (n_clusters - 1) * trials, workers)
    per_round = max(1, int(per_round))
    chosen = np.empty(n_clusters, dtype=np.int64)
    chosen[0] = rng.integers(n)
    distance = np.maximum(1.0 - X @ X[chosen[0]], 0.0).astype(np.float32)
    # Rows found isolated are never drawn again: cells only shrink as centres are added.
    isolated = np.zeros(n, dtype=bool)

    def draw(count: int) -> np.ndarray:
        weights = np.where(isolated, 0.0, distance) if isolated.any() else distance
        return _candidates(rng, weights, count)

    step = 1
    while step < n_clusters:
        picks = min(per_round, n_clusters - step)
        drawn = draw(picks * trials).reshape(picks, trials)
        chunk = max(1, _ROUND_BYTES // (trials * n * 4))  # picks whose distances fit at once
        for first in range(0, picks, chunk):
            rows = drawn[first : first + chunk]
            block = np.maximum(1.0 - products(rows.ravel()), 0.0).reshape(len(rows), trials, n)
            for candidates, candidate_distance in zip(rows, block, strict=True):
                chosen[step], distance = _greedy_pick(
                    candidates, candidate_distance, distance, isolated, min_cell, draw, products,
                    skip_covered=per_round > 1,
                )  # fmt: skip
                step += 1
    return chosen


def _greedy_pick(
    candidates: np.ndarray,
    candidate_distance: np.ndarray,
    distance: np.ndarray,
    isolated: np.ndarray,
    min_cell: int,
    draw: Callable[[int], np.ndarray],
    products: Callable[[np.ndarray], np.ndarray],
    *,
    skip_covered: bool,
) -> tuple[int, np.ndarray]:
    """The candidate lowering the total distance most, and the distances with it added.

    Marks all-isolated candidates in ``isolated`` and draws again (``min_cell``).
    With ``skip_covered``, candidates already at distance 0 (drawn before a centre
    of the same round landed on them) lose to any other.
    """
    for attempt in range(_REDRAWS if min_cell > 1 else 1):
        if attempt:
            candidates = draw(len(candidates))
            candidate_distance = np.maximum(1.0 - products(candidates), 0.0)
        updated = np.minimum(distance[None, :], candidate_distance)
        totals = updated.sum(axis=1, dtype=np.float64)
        if skip_covered:  # one-pick rounds never draw a covered row (its weight is 0)
            covered = distance[candidates] <= 0
            if covered.any() and not covered.all():
                totals[covered] = np.inf
        if min_cell <= 1:
            break
        small = (candidate_distance < distance[None, :]).sum(axis=1) < min_cell
        if not small.all():
            totals[small] = np.inf
            break
        isolated[candidates] = True  # all isolated: draw again (the best is kept at the end)
    best = int(np.argmin(totals))
    return int(candidates[best]), updated[best]


def _candidates(rng: np.random.Generator, weights: np.ndarray, trials: int) -> np.ndarray:
    """``trials`` rows drawn with probability proportional to ``weights`` (uniform if all 0)."""
    cumulative = np.cumsum(weights, dtype=np.float64)
    if cumulative[-1] > 0:
        draws = rng.random(trials) * cumulative[-1]
        return np.minimum(np.searchsorted(cumulative, draws, side="right"), len(weights) - 1)
    return rng.integers(len(weights), size=trials)  # every row coincides with a centre


def afk_mc2(
    X: np.ndarray, n_clusters: int, rng: np.random.Generator, *, chain_length: int = 200
) -> np.ndarray:
    """AFK-MC2 seeding (assumption-free k-MC^2) under cosine distance; row indices (K,).

    >>> X = np.eye(4, dtype=np.float32)
    >>> len(set(afk_mc2(X, 4, np.random.default_rng(0)).tolist()))
    4
    """
    n = len(X)
    chosen = np.empty(n_clusters, dtype=np.int64)
    chosen[0] = rng.integers(n)
    first = np.maximum(1.0 - X @ X[chosen[0]], 0.0).astype(np.float64)
    total = first.sum()
    proposal = 0.5 / n + (0.5 * first / total if total > 0 else 0.5 / n)
    cumulative = np.cumsum(proposal)
    cumulative /= cumulative[-1]
    matrix = np.empty((n_clusters, X.shape[1]), dtype=np.float32)
    matrix[0] = X[chosen[0]]
    for step in range(1, n_clusters):
        candidates = np.minimum(
            np.searchsorted(cumulative, rng.random(chain_length), side="right"), n - 1
        )
        sims = X[candidates] @ matrix[:step].T
        distance = np.maximum(1.0 - sims.max(axis=1), 0.0).astype(np.float64)
        weight = distance / proposal[candidates]
        accept = rng.random(chain_length)
        current = 0
        for j in range(1, chain_length):
            # Metropolis-Hastings step of the chain (accept y over x with prob w(y)/w(x)).
            if weight[current] == 0.0 or weight[j] / weight[current] > accept[j]:
                current = j
        chosen[step] = candidates[current]
        matrix[step] = X[chosen[step]]
    return chosen


def random_init(X: np.ndarray, n_clusters: int, rng: np.random.Generator) -> np.ndarray:
    """``K`` distinct random rows; row indices (K,).

    >>> random_init(np.eye(3, dtype=np.float32), 2, np.random.default_rng(0)).shape
    (2,)
    """
    return np.sort(rng.choice(len(X), size=n_clusters, replace=False))


def seed_centroids(
    X: np.ndarray,
    n_clusters: int,
    *,
    init: str,
    rng: np.random.Generator,
    min_cluster_size: int = 1,
    n_rows: int | None = None,
) -> tuple[np.ndarray, dict[str, int | str]]:
    """Initial centroids (K, d) float32 and a record of how they were chosen.

    ``X`` holds the unit rows of the fit sample; the k-means++ pool is a random
    subset of them. With ``min_cluster_size > 1``, k-means++ passes over
    candidates whose cell in the pool would hold fewer rows than a cluster of
    ``min_cluster_size`` documents out of ``n_rows`` (default ``len(X)``) is
    expected to put there, and never fewer than 2 (:func:`kmeans_plusplus`'s
    ``min_cell``, recorded as ``min_cell``).

    >>> C, info = seed_centroids(np.eye(3, dtype=np.float32), 2, init="random",
    ...                          rng=np.random.default_rng(0))
    >>> C.shape, info["init"]
    ((2, 3), 'random')
    """
    from clusterclip.threads import blas_threads, one_thread

    if init != "random" and _products_on_torch():
        import torch  # noqa: F401  (so that one_thread() sets its threads too)
    workers = blas_threads()  # for the one big product (a pool's Gram matrix), if any
    # Many small products in a row: one thread is faster than waking a second for each.
    with one_thread():
        return _seed(X, n_clusters, init, rng, min_cluster_size, n_rows or len(X), workers)


def _min_cell(min_cluster_size: int, pool: int, n_rows: int) -> int:
    """Pool rows a cluster of ``min_cluster_size`` documents is expected to have (>= 2; 1 = off)."""
    if min_cluster_size <= 1:
        return 1
    return max(2, int(min_cluster_size * pool / max(n_rows, 1)))


def _seed(
    X: np.ndarray,
    n_clusters: int,
    init: str,
    rng: np.random.Generator,
    min_cluster_size: int = 1,
    n_rows: int = 0,
    workers: int = 1,
) -> tuple[np.ndarray, dict[str, int | str]]:
    min_cell = 1
    per_round = 1
    if init in ("k-means++", "k-means++-rounds"):
        pool = min(len(X), max(POOL_PER_CENTROID * n_clusters, _POOL_MIN))
        subset = np.sort(rng.choice(len(X), pool, replace=False)) if pool < len(X) else None
        min_cell = _min_cell(min_cluster_size, pool, max(n_rows, len(X)))
        if init == "k-means++-rounds":
            per_round = picks_per_round(n_clusters)
        rows = kmeans_plusplus(
            X if subset is None else X[subset],
            n_clusters,
            rng,
            min_cell=min_cell,
            per_round=per_round,
            workers=workers,
        )
        rows = rows if subset is None else subset[rows]
    elif init == "afk-mc2":
        pool = len(X)
        rows = afk_mc2(X, n_clusters, rng)
    elif init == "random":
        pool = len(X)
        rows = random_init(X, n_clusters, rng)
    else:
        raise invalid("init", f"one of {list(INITS)}", init, "Pass init='k-means++' (the default).")
    info: dict[str, int | str] = {"init": init, "pool_size": int(pool)}
    if per_round > 1:
        info["picks_per_round"] = per_round
    if min_cell > 1:
        info["min_cell"] = min_cell
    return np.array(X[rows], dtype=np.float32), info
