"""How every adapter splits the global schedule over ranks: one rule, written once.

From the resume point ``c = consumed_samples``, with ``left = total - c``
positions of the schedule still to read, rank ``r`` of ``W`` reads the global
positions ``c + r + j * W`` for ``j = 0 .. n - 1``, where

* ``drop_last=True``: ``n = left // W`` (the last ``left % W`` positions are
  dropped, so every rank reads the same count);
* ``drop_last=False``: ``n = ceil(left / W)``; the positions past the end
  wrap around to the start of the schedule (position ``total + i`` reads
  position ``i % total``), as ``torch.utils.data.DistributedSampler`` pads, so
  again every rank reads the same count.

Equal counts matter: a rank that runs out one step early leaves the others
waiting in their next collective (all-reduce) forever. A configuration
that gives the ranks nothing (a schedule shorter than the world size with
``drop_last=True``) is refused (:func:`check_share`), never answered with an
empty epoch.

Pure Python, no numpy or torch: the sampler and the Hugging Face dataset share it.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from clusterclip.errors import hint, invalid

__all__ = ["check_index", "check_share", "rank_length", "wrap"]


def check_index(name: str, value: Any, low: int) -> int:
    """``value`` as an int of at least ``low`` (numpy ints too, never a bool), or the standard error.

    >>> check_index("rank", 2, 0)
    2
    >>> check_index("world_size", 0, 1)
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `world_size` must be an int in [1, inf); got 0.
    """
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise invalid(name, f"an int in [{low}, inf)", value)
    return int(value)


def rank_length(left: int, world_size: int, *, drop_last: bool) -> int:
    """Positions each rank reads when ``left`` remain (the same for every rank).

    >>> rank_length(10, 4, drop_last=True), rank_length(10, 4, drop_last=False)
    (2, 3)
    """
    left = max(0, left)
    return left // world_size if drop_last else -(-left // world_size)


def check_share(total: int, world_size: int, *, drop_last: bool) -> None:
    """Refuse a world size that leaves every rank with nothing to read.

    Only ``drop_last=True`` with a schedule shorter than the world size does
    that (``drop_last=False`` pads every rank to one position). A resumed run
    with fewer than ``world_size`` positions left is not refused: those are the
    last ``< world_size`` positions that ``drop_last=True`` drops, the normal
    end of a run.

    >>> check_share(3, 4, drop_last=True)
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: `world_size` must be at most the schedule's length, 3 positions, when drop_last=True (every rank would get none); got 4. Train on at most 3 ranks, pass drop_last=False (ranks are then padded from the start of the schedule), or raise the budget.
    """
    if drop_last and 0 < total < world_size:
        raise invalid(
            "world_size",
            f"at most the schedule's length, {total} positions, when "
            f"{hint('drop_last', True)} (every rank would get none)",
            world_size,
            f"Train on at most {total} ranks, pass {hint('drop_last', False)} "
            "(ranks are then padded from the start of the schedule), or raise the budget.",
        )


def wrap(position: int, total: int) -> int:
    """Schedule position read at global position ``position`` (padding wraps to the start).

    >>> [wrap(p, 3) for p in range(7)]
    [0, 1, 2, 0, 1, 2, 0]
    """
    return position if position < total else (position - total) % total
