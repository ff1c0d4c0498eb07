"""What both k-means estimators share: checks of their input, its rows as float32
unit rows, and their seeded random streams.

The input may be anything with ``shape``, ``dtype`` and ``__getitem__`` taking a
slice or an int array (a numpy array, a float16 memmap, a
:class:`clusterclip.io.shards.ShardedMatrix`); :func:`gather_rows` reads it in
blocks, so only the rows asked for are ever held in memory.

Every use of randomness has its own stream, a ``SeedSequence(seed,
spawn_key=(purpose, ...))`` with a purpose from this module, so no two uses
share draws and adding one never moves another's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterclip.errors import invalid

__all__ = [
    "PURPOSE_INIT",
    "PURPOSE_NODE",
    "PURPOSE_SAMPLE",
    "PURPOSE_SPLIT",
    "check_finite",
    "check_int",
    "check_matrix",
    "gather_rows",
    "normalise_rows",
    "random_stream",
]

#: SeedSequence spawn keys: one independent stream per use of randomness. The fit
#: sample, the centroid seeding, the re-split of empty clusters (kmeans.py) and the
#: per-node fits of the hierarchy (hierarchical.py).
PURPOSE_SAMPLE, PURPOSE_INIT, PURPOSE_SPLIT, PURPOSE_NODE = 0, 1, 2, 3

_SHOW_ROWS = 5


def random_stream(seed: int, purpose: int, run: int = 0) -> np.random.Generator:
    """The generator of one use of randomness: ``purpose``, and ``run`` of ``n_init``.

    Run 0 has the spawn key ``(purpose,)``, later runs ``(purpose, run)``.

    >>> a = random_stream(0, PURPOSE_SAMPLE).integers(0, 100, 3).tolist()
    >>> a == random_stream(0, PURPOSE_SAMPLE).integers(0, 100, 3).tolist()
    True
    >>> a == random_stream(0, PURPOSE_INIT).integers(0, 100, 3).tolist()
    False
    """
    key = (purpose,) if run == 0 else (purpose, run)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def check_int(name: str, value: Any, low: int, fix: str) -> int:
    """``value`` as an int, or the standard error naming ``name``, the rule and ``fix``.

    >>> check_int("n_iter", 3, 1, "Pass n_iter=20.")
    3
    >>> check_int("n_iter", 0, 1, "Pass n_iter=20.")
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `n_iter` must be an int in [1, inf); got 0. Pass n_iter=20.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise invalid(name, f"an int in [{low}, inf)", value, fix)
    return int(value)


def check_matrix(X: Any, name: str = "X") -> tuple[int, int]:
    """``(n_rows, dim)`` of a 2-D floating-point matrix, or the standard error.

    >>> check_matrix(np.zeros((4, 3), dtype=np.float16))
    (4, 3)
    """
    shape = getattr(X, "shape", None)
    if shape is None or not hasattr(X, "__getitem__") or len(shape) != 2:
        raise invalid(
            name,
            "a 2-D matrix (numpy array, memmap or ShardedMatrix) of shape (n_rows, dim)",
            type(X).__name__ if shape is None else f"shape {tuple(shape)}",
            "Pass the embeddings as an (n_rows, dim) array.",
        )
    if not np.issubdtype(np.dtype(X.dtype), np.floating):
        raise invalid(name, "a floating-point matrix", f"dtype {X.dtype}", "Cast it to float32.")
    return int(shape[0]), int(shape[1])


def _shown(rows: np.ndarray) -> str:
    head = ", ".join(str(int(r)) for r in rows[:_SHOW_ROWS])
    more = f" and {len(rows) - _SHOW_ROWS} more" if len(rows) > _SHOW_ROWS else ""
    return f"rows [{head}]{more}"


def check_finite(block: np.ndarray, rows: np.ndarray, name: str = "X") -> None:
    """Raise naming the first rows of ``block`` with NaN or infinite values.

    ``rows`` holds the row number (in the caller's numbering) of each block row.

    >>> check_finite(np.array([[1.0], [np.nan]]), np.array([7, 8]))
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `X` must be finite (no NaN or infinite values); got 'non-finite values in rows [8]'. Re-embed those documents (or drop the rows) and fit again.
    """
    finite = np.isfinite(block).all(axis=1)
    if not finite.all():
        raise invalid(
            name,
            "finite (no NaN or infinite values)",
            f"non-finite values in {_shown(rows[~finite])}",
            "Re-embed those documents (or drop the rows) and fit again.",
        )


def normalise_rows(block: np.ndarray, rows: np.ndarray, *, allow_zero: bool) -> np.ndarray:
    """float32 unit rows; zero rows raise (or stay zero when ``allow_zero``).

    ``rows`` holds the row number of each block row, for the error message.

    >>> normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]]), np.arange(2), allow_zero=True)
    array([[0.6, 0.8],
           [0. , 0. ]], dtype=float32)
    """
    block = np.array(block, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", block, block))
    if not np.isfinite(norms).all():  # NaN/inf rows, or squares overflowing float32
        check_finite(block, rows)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64)).astype(np.float32)
    zero = norms == 0
    if zero.any() and not allow_zero:
        raise invalid(
            "X",
            "rows with a non-zero norm (the cosine of a zero vector is undefined)",
            f"all-zero {_shown(rows[zero])}",
            "Drop those rows before fitting (the cluster stage leaves out non-ok "
            "documents, whose embeddings are zero, by itself; a work directory embedded "
            "before the zero_vector status was added needs `clusterclip embed ... "
            "--overwrite`).",
        )
    norms[zero] = 1.0
    block /= norms[:, None]
    return block


def gather_rows(X: Any, rows: np.ndarray, batch_size: int) -> np.ndarray:
    """Rows ``rows`` (sorted) of ``X`` as float32 unit rows, read ``batch_size`` at a time.

    >>> gather_rows(np.array([[2.0, 0.0], [0.0, 5.0], [1.0, 1.0]]), np.array([0, 1]), 1)
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    n, dim = check_matrix(X)
    out = np.empty((len(rows), dim), dtype=np.float32)
    contiguous = len(rows) == n
    # A row view (e.g. the ok documents) names rows by their number in the source.
    source_rows = getattr(X, "source_rows", None)
    for start in range(0, len(rows), batch_size):
        stop = min(start + batch_size, len(rows))
        block = X[start:stop] if contiguous else X[rows[start:stop]]
        names = rows[start:stop] if source_rows is None else source_rows[rows[start:stop]]
        out[start:stop] = normalise_rows(block, names, allow_zero=False)
    return out
