"""Refuse, before building it, a schedule that cannot fit in this machine's memory.

:func:`clusterclip.build_schedule` and the schedule stage hold the whole
schedule in memory: 8 bytes (int64) per draw, twice while the streamed blocks
are joined into one array. A budget such as ``num_samples=10**11`` without a
repetition cap would fill the memory for minutes and then die with a
``MemoryError``; :func:`check_fits` says so up front and names the ways out
(a smaller budget, a cap that ends the schedule, or streaming it).

numpy and the standard library only (the schedule core imports nothing heavy).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, hint, spell

__all__ = ["BYTES_PER_DRAW", "available_memory", "check_fits", "expected_draws"]

#: Peak bytes per draw while a schedule is built: the int64 blocks and their concatenation.
BYTES_PER_DRAW = 16


def available_memory() -> int | None:
    """Bytes this process can still allocate, or ``None`` when it cannot be told.

    The smaller of the memory the kernel reports as available (``MemAvailable``,
    which counts reclaimable page cache) and the room left under a cgroup v2
    limit (containers, Slurm jobs).

    >>> available_memory() is None or available_memory() > 0
    True
    """
    found = [value for value in (_meminfo_available(), _cgroup_room()) if value is not None]
    if not found:
        try:
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, OSError, ValueError):  # not a POSIX system
            return None
    return min(found)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            limit = handle.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as handle:
            current = int(handle.read().strip())
        return max(int(limit) - current, 0)
    except (OSError, ValueError):
        return None


def expected_draws(
    end: int | None, *, num_tokens: int | None, labels: Any, lengths: Any
) -> int | None:
    """The schedule length: ``end`` when known, else the token budget over the mean length.

    ``end`` is :attr:`ScheduleStream.end` (known for a document budget, or when
    the clip ends the schedule first). A token budget's length is only known
    once drawn; ``num_tokens`` divided by the mean tokens of a usable document
    is what it comes to on average. ``None`` when neither applies.
    """
    if end is not None:
        return int(end)
    if num_tokens is None or lengths is None:
        return None
    labels = np.asarray(labels)
    usable = np.asarray(lengths)[labels >= 0]
    total = int(usable.sum(dtype=np.int64))
    # num_tokens / mean length, in exact integers (budgets may exceed a float's precision)
    return -(-int(num_tokens) * int(usable.size) // total) if total > 0 else None


def check_fits(n_draws: int | None, *, estimated: bool = False) -> None:
    """Raise when a schedule of ``n_draws`` would not fit in the available memory.

    Parameters
    ----------
    n_draws : int or None
        Schedule length (``None``: unknown, nothing is checked).
    estimated : bool
        ``n_draws`` is an average (a token budget), said so in the message.

    Raises
    ------
    ClusterClipError
        Naming the memory needed and available, and the fixes: a smaller
        budget, a repetition cap that ends the schedule, or streaming it.

    >>> check_fits(1_000)
    >>> check_fits(10**15)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: a schedule of 1,000,000,000,000,000 draws needs ...
    """
    if n_draws is None:
        return
    available = available_memory()
    needed = int(n_draws) * BYTES_PER_DRAW
    if available is None or needed <= available:
        return
    about = "about " if estimated else ""
    budget = spell("num_tokens") if estimated else f"{spell('num_samples')} / {spell('epochs')}"
    raise ClusterClipError(
        f"a schedule of {about}{int(n_draws):,} draws needs {_size(needed)} of memory to build "
        f"({BYTES_PER_DRAW} bytes per draw) but this machine has {_size(available)} available. "
        f"Pass a smaller budget ({budget}), or a repetition cap that ends the schedule "
        f"({hint('max_repeats', 4)} with {hint('on_exhausted', 'stop')}), or stream the "
        "schedule instead of holding it: clusterclip.iter_schedule or "
        "clusterclip.ClusterClipSampler use O(N + K) memory whatever the budget."
    )


def _size(n_bytes: int) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    value, unit = float(n_bytes), 0
    while value >= 1024 and unit < len(units) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:,.1f} {units[unit]}"
