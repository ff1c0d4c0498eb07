"""Compiled loops of the schedule's hot paths, where the C extension was built.

``clusterclip.schedule.ckernels`` (the C files in ``csrc/``, built by ``pip install``
with the system's C compiler) runs a few of the schedule's loops in C. Each
computes exactly what the numpy code beside it computes: the numpy code is the
reference, and the fallback where the extension is not there (installed
without a compiler) or switched off (``CLUSTERCLIP_KERNELS=numpy``, or
:func:`numpy_only` in tests). Which one runs changes speed, never a byte.

Why C and not numpy: at 10^5 tree leaves the numpy descent is mostly numpy's
own passes over the candidates, and at 10^6 both are bound by memory, which
only a loop that loads a batch's candidates before taking them overlaps
(docs/performance.md, "What compiled loops would buy";
``benchmarks/bench_compiled_descent.py``).

>>> isinstance(compiled(), bool)
True
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import numpy as np

__all__ = [
    "ENV",
    "cdf_guide",
    "compact",
    "compiled",
    "count",
    "descend",
    "exact_sum",
    "inverse_cdf",
    "lookup",
    "numpy_only",
    "place",
    "slab",
    "take",
    "tree_column",
]

#: ``numpy``: run the numpy code even where the extension is built; ``c``: require the
#: compiled loops (an error where the extension was not built); unset or ``auto``: the
#: compiled loops where built, else the numpy code.
ENV = "CLUSTERCLIP_KERNELS"
_CHOICES = ("auto", "c", "numpy")

try:
    from clusterclip.schedule import ckernels as _built
except ImportError:  # installed without a C compiler: the numpy code runs
    _built = None

_OFF = False  # numpy_only() in effect


def _module() -> ModuleType | None:
    if _OFF:
        return None
    choice = os.environ.get(ENV, "").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ValueError(
            f"{ENV}={os.environ[ENV]!r} is not one of {', '.join(_CHOICES)}: "
            "unset it (or auto) for the compiled loops where built, numpy for the numpy code."
        )
    if choice == "numpy":
        return None
    if choice == "c" and _built is None:
        raise RuntimeError(
            f"{ENV}=c asks for the compiled loops, but clusterclip.schedule.ckernels was not "
            "built (installed without a C compiler): install gcc or clang and reinstall "
            "clusterclip (pip install . in a clone), or unset it."
        )
    return _built


def compiled() -> bool:
    """Whether the compiled loops run here (built, and not switched off)."""
    return _module() is not None


@contextmanager
def numpy_only() -> Iterator[None]:
    """Run the numpy code inside the block (for tests that compare both; not thread-safe).

    >>> with numpy_only():
    ...     compiled()
    False
    """
    global _OFF
    before, _OFF = _OFF, True
    try:
        yield
    finally:
        _OFF = before


def _int64(array: np.ndarray, name: str) -> None:
    if array.dtype != np.int64 or not array.flags.c_contiguous:
        raise TypeError(f"kernels: {name} must be C-ordered int64, got {array.dtype}")


def _int64s(**arrays: np.ndarray) -> None:
    """:func:`_int64` of every array, by its keyword's name."""
    for name, array in arrays.items():
        _int64(array, name)


def take(
    candidates: np.ndarray, state: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A window's kept candidates in C (:meth:`TreeWindows._top`), or None where numpy must run.

    ``state`` holds every entry's count and cap side by side (counts updated):
    a candidate is kept while its entry's count, with the earlier candidates'
    draws, is below its cap. Returns the kept candidates in order, their draw
    numbers and which take their entry's last draw.
    """
    module = _module()
    if module is None:
        return None
    _int64(candidates, "candidates")
    _int64(state, "state")
    if state.ndim != 2 or state.shape[1] != 2:
        raise ValueError(f"kernels: state must have shape (n, 2), got {state.shape}")
    entry = np.empty(candidates.size, dtype=np.int64)
    draws = np.empty(candidates.size, dtype=np.int64)
    final = np.empty(candidates.size, dtype=np.bool_)
    kept = module.take(candidates, state, entry, draws, final)
    return entry[:kept], draws[:kept], final[:kept]


def compact(
    start: np.ndarray,
    listed: np.ndarray,
    dead: np.ndarray,
    children: np.ndarray,
    state: np.ndarray,
    alive: np.ndarray | None = None,
) -> bool:
    """Relist a level's nodes in C (:meth:`NodeLevel.compact`), or False where numpy must run.

    Every node with ``4 * dead > listed`` keeps its listed children whose row of
    ``state`` (count, cap of the level below) has count < cap, in order, at the
    front of its list (``children[start:start + listed]``); ``listed`` becomes
    their number and ``dead`` 0 (all three updated in place). ``alive``, the
    level's alive bits (:attr:`NodeLevel.alive`), is kept: the bits of a
    relisted node's listed positions are set.
    """
    module = _module()
    if module is None:
        return False
    _int64s(start=start, listed=listed, dead=dead, children=children, state=state)
    if state.ndim != 2 or state.shape[1] != 2:
        raise ValueError(f"kernels: state must have shape (n, 2), got {state.shape}")
    if not (start.size == listed.size == dead.size):
        raise ValueError("kernels: the level's arrays differ in length")
    if alive is None:
        alive = np.zeros(0, dtype=np.uint8)
    else:
        _bits(alive, children)
    module.compact(start, state, listed, dead, children, alive)
    return True


def _bits(alive: np.ndarray, children: np.ndarray) -> None:
    """Check that ``alive`` holds a bit for every listed position of ``children``."""
    if alive.dtype != np.uint8 or not alive.flags.c_contiguous:
        raise TypeError(f"kernels: alive must be C-ordered uint8, got {alive.dtype}")
    if alive.size * 8 < children.size:
        raise ValueError(
            f"kernels: alive holds {alive.size * 8} bits for {children.size} listed positions"
        )


def descend(
    entries: np.ndarray,
    keys: np.ndarray,
    start: np.ndarray,
    listed: np.ndarray,
    children: np.ndarray,
    next_n: np.ndarray,
    dead: np.ndarray,
    state: np.ndarray,
    window: int,
    alive: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """One level of the tree descent in C, or None where the numpy code must run.

    The arguments are :meth:`TreeWindows._descend`'s: the node of every
    position, the level's stream keys, listing (``start``, ``listed``,
    ``children``), stream counters ``next_n`` and exhausted counts ``dead``
    (both updated), the children's count and cap rows ``state`` (counts
    updated), the window, and the level's alive bits (:attr:`NodeLevel.alive`:
    which listed children have draws left, exactly; kept). Returns the
    children, their draw numbers and which take their child's last draw, in
    position order.
    """
    module = _module()
    if module is None:
        return None
    _int64s(
        entries=entries, start=start, listed=listed, children=children, next_n=next_n,
        dead=dead, state=state,
    )  # fmt: skip
    if keys.dtype != np.uint64 or not keys.flags.c_contiguous:
        raise TypeError(f"kernels: keys must be C-ordered uint64, got {keys.dtype}")
    if state.ndim != 2 or state.shape[1] != 2:
        raise ValueError(f"kernels: state must have shape (n, 2), got {state.shape}")
    if not (keys.size == start.size == listed.size == next_n.size == dead.size):
        raise ValueError("kernels: the level's arrays differ in length")
    # What the loop indexes stays inside its arrays (the children index the state rows
    # by construction: they list the level below once each).
    if entries.size and (int(entries.min()) < 0 or int(entries.max()) >= keys.size):
        raise ValueError("kernels: a position's node is not in the level")
    if keys.size and int((start + listed).max()) > children.size:
        raise ValueError("kernels: a node lists children outside the level's children")
    _bits(alive, children)
    child = np.empty(entries.size, dtype=np.int64)
    draws = np.empty(entries.size, dtype=np.int64)
    final = np.empty(entries.size, dtype=np.bool_)
    module.descend(
        entries, keys, start, listed, children, next_n, dead, state, int(window),
        child, draws, final, alive,
    )  # fmt: skip
    return child, draws, final


def lookup(
    group: np.ndarray,
    draw: np.ndarray,
    first: int,
    records: np.ndarray,
    cached_at: np.ndarray,
    cache: np.ndarray,
    used: int,
    members: np.ndarray,
    table: np.ndarray,
    out: np.ndarray,
    largest: int,
) -> tuple[int, int] | None:
    """Documents of draws of a :class:`~clusterclip.schedule.passes.PassTable` in C, or None.

    Fills ``out[first:]`` with the documents of draws ``draw`` of groups
    ``group`` (what :meth:`PassTable.lookup` returns), making the passes not
    cached into ``cache`` from entry ``used`` on and updating the groups'
    cached passes (``records[:, 3]``, ``cached_at``). Stops where a new pass
    does not fit in the cache; ``largest`` bounds the groups' sizes. A draw of
    a group not in the table, or a negative one, raises ValueError (the loop
    checks each). Returns ``(stopped, used)``: the first position
    not filled (``group.size`` when done) and the cache entries used.
    None where the numpy code must run (not built, switched off, or passes too
    long to pack a position beside a 32-bit key).
    """
    module = _module()
    if module is None:
        return None
    _int64s(group=group, draw=draw, records=records, cached_at=cached_at, out=out)
    n_groups = cached_at.size
    if records.shape != (n_groups, 4):
        raise ValueError(f"kernels: records must have shape ({n_groups}, 4), got {records.shape}")
    if largest >= 2**31:
        return None
    if members.dtype not in (np.int32, np.int64) or cache.dtype != members.dtype:
        raise TypeError("kernels: members and cache must share an int32 or int64 dtype")
    if table.dtype != np.uint8 or not (members.flags.c_contiguous and cache.flags.c_contiguous):
        raise TypeError("kernels: members, cache and table must be C-ordered (table uint8)")
    if group.size != draw.size or out.size != group.size:
        raise ValueError("kernels: group, draw and out differ in length")
    stopped, used = module.lookup(
        group, draw, members, table, records, cached_at, cache, out,
        int(first), int(used), members.dtype == np.int64,
    )  # fmt: skip
    return int(stopped), int(used)


def slab(
    span: np.ndarray,
    low: np.ndarray,
    phi: np.ndarray,
    draws_of: np.ndarray,
    groups: np.ndarray,
    offset: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A slab of the planned order in C (:meth:`SlabOrder.slab_with_lasts`), or None.

    Cluster ``c`` of the slab (group ``groups[c]``, ``draws_of[c]`` planned
    draws, phase ``phi[c]``) takes its draws ``low[c]`` to ``low[c] + span[c] - 1``;
    they are ordered by ``(time, cluster, draw)`` with ``time =
    int((j + phi) / n * 2**40) - offset``. Returns the groups and draw numbers
    in that order, and which are their cluster's last planned draw.
    """
    module = _module()
    if module is None:
        return None
    _int64s(span=span, low=low, draws_of=draws_of, groups=groups)
    if phi.dtype != np.float64 or not phi.flags.c_contiguous:
        raise TypeError("kernels: phi must be C-ordered float64")
    if not (span.size == low.size == phi.size == draws_of.size == groups.size):
        raise ValueError("kernels: the slab's clusters differ in length")
    n = int(span.sum())
    if n >= 2**32 or span.size >= 2**32:
        return None
    if span.size and (int(span.min()) < 0 or int((low + span - draws_of).max()) > 0):
        raise ValueError("kernels: a slab draws past a cluster's plan")
    both = np.empty(2 * n, dtype=np.int64)  # one buffer: the sort's, then both outputs
    out_groups, out_draws = both[:n], both[n:]
    last = np.empty(n, dtype=np.bool_)
    module.slab(span, low, phi, draws_of, groups, out_groups, out_draws, last, int(offset))
    return out_groups, out_draws, last


def cdf_guide(cdf: np.ndarray) -> np.ndarray | None:
    """:func:`~clusterclip.schedule.windows.cdf_guide` in C (one merge, no searches), or None.

    ``cdf``: non-decreasing float64. Entry ``b`` is
    ``np.searchsorted(cdf, b / cdf.size, side="right")``, int32 below 2**31
    values (half the memory: the searches read it at random), else int64.
    """
    module = _module()
    if module is None:
        return None
    if cdf.dtype != np.float64 or not cdf.flags.c_contiguous:
        raise TypeError("kernels: cdf must be C-ordered float64")
    guide = np.empty(cdf.size, dtype=np.int32 if cdf.size < 2**31 else np.int64)
    module.cdf_guide(cdf, guide)
    return guide


def inverse_cdf(cdf: np.ndarray, u: np.ndarray, guide: np.ndarray) -> np.ndarray | None:
    """``np.searchsorted(cdf, u, side="right")`` in C, started from ``guide``, or None.

    ``cdf``: non-decreasing float64; ``guide``: :func:`~clusterclip.schedule.windows.cdf_guide`
    of it (``guide[b]`` is the answer for ``b / cdf.size``; int32 or int64), one entry per
    value of ``cdf``. The guide only speeds the searches: any guide gives the same indices (an
    entry outside ``0 .. cdf.size`` starts a search of the whole cdf), so it is
    not checked here, where a scan of it would cost as much as the searches.
    """
    module = _module()
    if module is None:
        return None
    for array, name in ((cdf, "cdf"), (u, "u")):
        if array.dtype != np.float64 or not array.flags.c_contiguous:
            raise TypeError(f"kernels: {name} must be C-ordered float64")
    if guide.dtype not in (np.int32, np.int64) or not guide.flags.c_contiguous:
        raise TypeError("kernels: guide must be C-ordered int32 or int64")
    if guide.size != cdf.size or not cdf.size:
        raise ValueError("kernels: the guide needs one entry per value of a non-empty cdf")
    picked = np.empty(u.size, dtype=np.int64)
    module.inverse_cdf(u, cdf, guide, picked)
    return picked


def _for_labels(labels: np.ndarray) -> ModuleType | None:
    """The compiled module for C-ordered int32 or int64 labels; None where numpy must run."""
    module = _module()
    if module is None or labels.dtype not in (np.int32, np.int64):
        return None
    return module if labels.flags.c_contiguous else None


def count(labels: np.ndarray, counts: np.ndarray) -> bool:
    """Documents per label in C (:func:`grouping._grouped_by_counts`), or False.

    Adds one to ``counts[labels[i] + 1]`` for every label (int32 or int64),
    ``counts[0]`` for the negative ones. False where numpy must run (not built,
    switched off, or other dtypes); ``counts`` is then untouched.

    >>> counts = np.zeros(4, dtype=np.int64)
    >>> count(np.array([2, -1, 0, 2]), counts) is False or counts.tolist() == [1, 1, 0, 2]
    True
    """
    module = _for_labels(labels)
    if module is None:
        return False
    _int64(counts, "counts")
    module.count(labels, counts, labels.dtype == np.int64)
    return True


def exact_sum(values: np.ndarray) -> float | None:
    """``math.fsum`` of float64 values in C (:func:`planned.exact_sum`), or None.

    The same algorithm (exact partials, then the same rounding), so the very
    same float, without a Python float per value. None where numpy must run
    (not built, switched off), or for a value or partial sum that is not
    finite (``math.fsum`` then answers, or raises).

    >>> import math
    >>> values = np.array([1e16, 1.0, -1e16, 0.1])
    >>> exact_sum(values) in (None, math.fsum(values.tolist()))
    True
    """
    module = _module()
    if module is None:
        return None
    if values.dtype != np.float64 or not values.flags.c_contiguous:
        raise TypeError(f"kernels: values must be C-ordered float64, got {values.dtype}")
    return module.exact_sum(values)


def place(labels: np.ndarray, first: int, following: np.ndarray, members: np.ndarray) -> bool:
    """Documents to their clusters' places in C (:func:`grouping._place_by_chunks`), or False.

    Document ``first + i`` (``labels[i]``, int32 or int64) goes to
    ``members[following[labels[i] + 1]]``, which then advances, in document order;
    negative labels are not members. False where numpy must run (not built,
    switched off, or other dtypes); ``following`` and ``members`` are then untouched.
    """
    module = _for_labels(labels)
    if module is None:
        return False
    _int64(following, "following")
    if members.dtype not in (np.int32, np.int64) or not members.flags.c_contiguous:
        raise TypeError("kernels: members must be C-ordered int32 or int64")
    if members.dtype == np.int32 and first + labels.shape[0] > 2**31:
        raise ValueError("kernels: document ids past int32 in int32 members")
    module.place(
        labels, following, members, int(first), labels.dtype == np.int64,
        members.dtype == np.int64,
    )  # fmt: skip
    return True


def tree_column(labels: np.ndarray, levels: np.ndarray, level: int, size: int) -> np.ndarray | None:
    """Every leaf's ancestor at ``level`` in C (:func:`hierarchy._dense_tree`), or None.

    ``labels`` (N,) and ``levels`` (N, L - 1), int64, C-ordered. Returns ``table``
    (``size`` entries, -1 for leaves with no row) where every row ``i`` with
    ``labels[i] >= 0`` has ``table[labels[i]] == levels[i, level] >= 0``, or None
    where that fails (or numpy must run): the sorted check then names the rows.
    """
    module = _module()
    if module is None:
        return None
    if labels.dtype != np.int64 or levels.dtype != np.int64:
        return None
    if not (labels.flags.c_contiguous and levels.flags.c_contiguous):
        return None
    if levels.ndim != 2 or levels.shape[0] != labels.size or not 0 <= level < levels.shape[1]:
        raise ValueError("kernels: levels must have one row per label and the level a column")
    table = np.full(size, -1, dtype=np.int64)
    return table if module.tree_column(labels, levels, table, int(level)) < 0 else None
