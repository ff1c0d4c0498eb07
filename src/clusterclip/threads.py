"""One BLAS / torch thread for a block of many small products.

Used by the k-means++ seeding, the node splits of hierarchical k-means and the
descent of a cluster tree: on a busy machine, waking a second thread for each
small product costs more than the product.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["one_thread"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One BLAS / torch thread inside the block, for many small products in a row.

    Waking a second thread for a small product costs more than the product on a
    busy machine: 35x for a node split of hierarchical k-means (330 x 384 rows,
    33 centroids), and 6x for sequential k-means++ seeding (1,023 products of
    9 x 8,192 pool rows: 48 s on two threads, 7.7 s on one, load 6 on 2 cores).
    The thread counts are restored on exit.

    >>> with one_thread():
    ...     pass
    """
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with the cluster extra
        limits: Any = contextlib.nullcontext()
    else:
        limits = threadpool_limits(limits=1)
    with limits:
        if torch is not None:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if torch is not None:
                torch.set_num_threads(before)
