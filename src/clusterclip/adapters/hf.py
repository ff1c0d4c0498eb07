"""Hugging Face ``datasets`` adapters: a dataset in schedule order, and a resumable stream.

The schedule holds *document indices*: row ``i`` of the dataset must be the
document the embed stage saw at index ``i`` (the same dataset, or the same
files concatenated in the same order, without filtering in between).

- :func:`apply_schedule` returns ``dataset.select(schedule)``: a map-style
  dataset in training order (repeats included). ``select`` builds an indices
  mapping (8 bytes per draw), it does not copy the rows.
- :class:`ScheduledIterableDataset` is a ``torch.utils.data.IterableDataset``
  that yields ``dataset[i]`` in schedule order, split across ranks and
  DataLoader workers, and resumes exactly from ``consumed_samples``.

From the resume point ``c = consumed_samples``, position ``c + r + j * world_size``
goes to rank ``r`` (round-robin, like Megatron's samplers), the same count on
every rank (:mod:`clusterclip.adapters.ranks`: ``drop_last`` truncates or pads).
The union over ranks of what is read from ``consumed_samples`` on is exactly
the rest of the schedule, whatever the world size.

DataLoader workers split a rank's items in whole batches, in the order the
DataLoader hands them out: with ``batch_size=b`` and ``n`` workers, worker
``w`` produces the rank's batches ``w, w + n, w + 2n, ...`` (batch ``k`` = the
rank's items ``k*b .. k*b + b - 1``), which the DataLoader yields round-robin,
so after any number of steps what was consumed is a prefix of the schedule and
``consumed_samples = steps * batch_size * world_size`` resumes it exactly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.ranks import check_index, check_share, rank_length, wrap
from clusterclip.errors import hint, invalid, require_extra

__all__ = ["ScheduledIterableDataset", "apply_schedule", "schedule_indices"]  # noqa: F822 (lazy, see __getattr__)


def schedule_indices(schedule: Any) -> np.ndarray:
    """The int64 document indices of a :class:`~clusterclip.schedule.Schedule`,
    an array, a work directory, or a ``.npy`` file (memory-mapped).

    A work directory (or its schedule file) is read through
    :meth:`clusterclip.io.WorkDir.schedule`, which refuses a schedule built
    from labels that have changed since.

    >>> schedule_indices(np.array([2, 0, 1])).tolist()
    [2, 0, 1]
    """
    if isinstance(schedule, (str, os.PathLike)):
        indices = _indices_from_path(Path(schedule))
    else:
        indices = getattr(schedule, "indices", schedule)
        indices = np.asarray(indices)
    if indices.ndim != 1 or (indices.size and indices.dtype.kind not in "iu"):
        raise invalid(
            "schedule",
            "a 1-D array of int document indices",
            f"{indices.dtype} array of shape {indices.shape}",
            "Pass a Schedule, its .indices, or a path to schedule.npy.",
        )
    return indices


def _indices_from_path(path: Path) -> np.ndarray:
    from clusterclip.io import WorkDir

    if path.is_dir():
        return WorkDir(path).schedule().indices
    if path.is_file() and WorkDir(path.parent).path_of("schedule") == path:
        return WorkDir(path.parent).schedule().indices
    if path.is_file() and path.suffix == ".npy":  # an exported sample index, say
        return np.load(path, mmap_mode="r")
    raise invalid(
        "schedule",
        "a schedule.npy file or a work directory holding one",
        str(path),
        "Run `clusterclip run` to build the schedule first.",
    )


def _check_range(indices: np.ndarray, n_rows: int) -> None:
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n_rows):
        raise invalid(
            "schedule",
            f"indices in [0, {n_rows}) (the dataset's rows)",
            f"indices in [{int(indices.min())}, {int(indices.max())}]",
            "Use the same dataset (same files, same order, unfiltered) that was embedded.",
        )


def apply_schedule(dataset: Any, schedule: Any, *, consumed_samples: int = 0) -> Any:
    """Reorder a ``datasets.Dataset`` into schedule order (repeats included).

    Parameters
    ----------
    dataset : datasets.Dataset
        The corpus that was embedded, row ``i`` = document index ``i``.
    schedule : Schedule, array of int, or path
        A :class:`~clusterclip.schedule.Schedule`, its ``.indices``, or a
        ``schedule.npy`` / work directory.
    consumed_samples : int
        Schedule positions already trained on (resume): the result starts at
        position ``consumed_samples``, and is empty when the whole schedule was
        consumed (``Dataset.skip(len(ds))`` raises in ``datasets`` 5.x).

    Returns
    -------
    datasets.Dataset
        ``dataset.select(indices[consumed_samples:])``: row ``j`` is document
        ``indices[consumed_samples + j]``. Deterministic: the schedule is the order.

    Examples
    --------
    >>> from datasets import Dataset
    >>> ds = Dataset.from_dict({"text": ["a", "b", "c"]})
    >>> list(apply_schedule(ds, np.array([2, 0, 2]))["text"])
    ['c', 'a', 'c']
    >>> list(apply_schedule(ds, np.array([2, 0, 2]), consumed_samples=1)["text"])
    ['a', 'c']
    >>> len(apply_schedule(ds, np.array([2, 0, 2]), consumed_samples=3))
    0
    """
    require_extra("datasets", "hf")
    if not hasattr(dataset, "select") or not hasattr(dataset, "__len__"):
        raise invalid(
            "dataset",
            "a datasets.Dataset (map-style, with .select)",
            type(dataset).__name__,
            "For a streaming dataset, use ScheduledIterableDataset on a map-style one.",
        )
    indices = schedule_indices(schedule)
    _check_range(indices, len(dataset))
    value = check_index("consumed_samples", consumed_samples, 0)
    if value > len(indices):
        raise invalid(
            "consumed_samples",
            f"at most the schedule's length, {len(indices)}",
            value,
            "Pass the positions consumed in this schedule (the checkpoint's consumed_samples).",
        )
    return dataset.select(np.asarray(indices[value:], dtype=np.int64))


class _ScheduledIterable:
    """Implementation of :class:`ScheduledIterableDataset` (torch base added lazily)."""

    def __init__(
        self,
        dataset: Sequence[Any] | Any,
        schedule: Any,
        *,
        rank: int = 0,
        world_size: int = 1,
        consumed_samples: int = 0,
        batch_size: int | None = None,
        drop_last: bool = True,
    ) -> None:
        for name, value, low in (
            ("world_size", world_size, 1),
            ("rank", rank, 0),
            ("consumed_samples", consumed_samples, 0),
            ("batch_size", 1 if batch_size is None else batch_size, 1),
        ):
            check_index(name, value, low)
        if rank >= world_size:
            raise invalid(
                "rank",
                f"an int in [0, world_size={world_size})",
                rank,
                "Pass torch.distributed.get_rank().",
            )
        self.dataset = dataset
        self.indices = schedule_indices(schedule)
        _check_range(self.indices, len(dataset))
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.consumed_samples = int(consumed_samples)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        check_share(len(self.indices), self.world_size, drop_last=self.drop_last)

    @classmethod
    def from_workdir(
        cls,
        dataset: Sequence[Any] | Any,
        workdir: str | os.PathLike[str],
        *,
        rank: int = 0,
        world_size: int = 1,
        consumed_samples: int = 0,
        batch_size: int | None = None,
        drop_last: bool = True,
    ) -> Any:
        """Stream the schedule saved in a work directory, refusing a stale one.

        Parameters
        ----------
        dataset : datasets.Dataset or any sequence
            The corpus that was embedded, row ``i`` = document index ``i``.
        workdir : path
            Work directory with completed ``cluster`` and ``schedule`` stages.
        rank, world_size, consumed_samples, batch_size, drop_last
            As for the constructor.

        Returns
        -------
        ScheduledIterableDataset
            Streams exactly ``WorkDir(workdir).schedule().indices``. Refused
            (:class:`~clusterclip.errors.ClusterClipError`) when the labels
            changed after the schedule was built, so a trainer never reads an
            order made for other clusters.

        Examples
        --------
        >>> stream = ScheduledIterableDataset.from_workdir(dataset, "work", rank=0, world_size=8)  # doctest: +SKIP
        """
        from clusterclip.io import WorkDir

        schedule = WorkDir(workdir).schedule()  # the one loader: fresh, hash and labels checked
        return cls(
            dataset,
            schedule.indices,
            rank=rank,
            world_size=world_size,
            consumed_samples=consumed_samples,
            batch_size=batch_size,
            drop_last=drop_last,
        )

    def __len__(self) -> int:
        """Items this rank still yields from ``consumed_samples`` to the end (all workers)."""
        left = len(self.indices) - self.consumed_samples
        return rank_length(left, self.world_size, drop_last=self.drop_last)

    def _positions(self, consumed: int, worker: int, n_workers: int) -> Iterator[int]:
        """Schedule positions read by one DataLoader worker of this rank, in order."""
        total = len(self.indices)
        count = rank_length(total - consumed, self.world_size, drop_last=self.drop_last)
        # Rank-local item j is global position consumed + rank + j * world_size
        # (round-robin over ranks, like Megatron's samplers; past the end it wraps).
        first = consumed + self.rank
        if n_workers == 1:
            batch = max(count, 1)  # one reader: the whole share, in order
        elif self.batch_size is None:
            raise invalid(
                "batch_size",
                "the DataLoader's batch_size when it has num_workers > 1",
                None,
                f"Pass {hint('batch_size', 8)} for DataLoader(..., batch_size=8, "
                f"num_workers={n_workers}) (batch_size=1 for a DataLoader with "
                "batch_size=None), or use num_workers <= 1; workers split the schedule "
                "in whole batches so that every step consumes a prefix of it.",
            )
        else:
            batch = self.batch_size
        # Worker w makes the rank's batches w, w + n, w + 2n, ...: the order in
        # which the DataLoader asks its workers for batches and yields them.
        for begin in range(worker * batch, count, batch * n_workers):
            for item in range(begin, min(begin + batch, count)):
                yield wrap(first + item * self.world_size, total)

    def __iter__(self) -> Iterator[Any]:
        worker, n_workers = 0, 1
        try:
            from torch.utils.data import get_worker_info

            info = get_worker_info()
            if info is not None:
                worker, n_workers = info.id, info.num_workers
        except ImportError:  # used without torch: one in-process reader
            pass
        self._check_loader_batch(_loader_batch_size(sys._getframe()))  # runs on the first item
        start = self.consumed_samples
        total = len(self.indices)
        for item, position in enumerate(self._positions(start, worker, n_workers)):
            row = self.dataset[int(self.indices[position])]
            if n_workers == 1:
                # Ranks advance in lock-step (one item each per step), so after this
                # item the whole row of world_size positions it belongs to is consumed.
                self.consumed_samples = min(start + (item + 1) * self.world_size, total)
            yield row

    def _check_loader_batch(self, loader_batch: int | None) -> None:
        """Refuse a ``batch_size`` other than the DataLoader's: its workers would fill
        batches of another size than the ones the order was split into, scrambling it."""
        if self.batch_size is None or loader_batch is None or loader_batch == self.batch_size:
            return
        raise invalid(
            "batch_size",
            f"the DataLoader's batch_size, {loader_batch}, since the workers split the "
            "schedule into whole batches of it",
            self.batch_size,
            f"Pass {hint('batch_size', loader_batch)} to ScheduledIterableDataset, or "
            f"DataLoader(..., batch_size={self.batch_size}).",
        )

    def state_dict(self) -> dict[str, int]:
        """``{"consumed_samples": n}``: global schedule positions already consumed.

        Counted in-process (``num_workers=0``). With DataLoader workers the
        iteration happens in other processes: save the trainer's own count,
        ``steps * global_batch_size``, instead.
        """
        return {"consumed_samples": self.consumed_samples}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume at ``state["consumed_samples"]`` (any world size)."""
        consumed = state.get("consumed_samples") if isinstance(state, dict) else None
        if not isinstance(consumed, (int, np.integer)) or consumed < 0:
            raise invalid(
                "state['consumed_samples']",
                "an int in [0, inf)",
                consumed,
                "Pass the dict returned by state_dict().",
            )
        self.consumed_samples = int(consumed)


def _loader_batch_size(frame: Any) -> int | None:
    """The batch size of the torch DataLoader asking ``frame`` (a dataset's iterator) for
    its first item, or None when no DataLoader does.

    A DataLoader's fetcher takes a whole batch from the iterator in one call, one item
    per entry of its ``possibly_batched_index`` (one item per step without automatic
    batching, ``batch_size=None``). torch tells an iterable dataset nothing else about
    its loader, so this reads the calling frame, once per pass.
    """
    try:
        from torch.utils.data._utils.fetch import _IterableDatasetFetcher
    except ImportError:  # no torch (or another layout): nothing to compare with
        return None
    caller = frame.f_back
    fetcher = None if caller is None else caller.f_locals.get("self")
    if not isinstance(fetcher, _IterableDatasetFetcher):
        return None
    if not fetcher.auto_collation:
        return 1
    batch = caller.f_locals.get("possibly_batched_index")
    return len(batch) if hasattr(batch, "__len__") else None


_CLASS_CACHE: dict[str, type] = {}


def _scheduled_iterable_dataset() -> type:
    cls = _CLASS_CACHE.get("ScheduledIterableDataset")
    if cls is None:
        data = require_extra("torch.utils.data", "torch")
        cls = type(
            "ScheduledIterableDataset",
            (_ScheduledIterable, data.IterableDataset),
            {
                "__module__": __name__,
                "__qualname__": "ScheduledIterableDataset",
                "__doc__": _DOC,
            },
        )
        _CLASS_CACHE["ScheduledIterableDataset"] = cls
    return cls


_DOC = """A resumable ``torch.utils.data.IterableDataset`` over a dataset in schedule order.

Parameters
----------
dataset : datasets.Dataset or any sequence
    Map-style: ``dataset[i]`` is document index ``i``.
schedule : Schedule, array of int, or path
    The training order (document indices). To stream a work directory's
    saved schedule with its freshness checked, use
    ``ScheduledIterableDataset.from_workdir(dataset, workdir)``.
rank, world_size : int
    This process's place among the data-parallel ranks. Rank ``r`` reads
    global positions ``consumed_samples + r + j * world_size``. The global
    order never depends on them.
consumed_samples : int
    Global schedule positions already consumed (resume point): after ``s``
    training steps of ``batch_size`` items on each of ``world_size`` ranks,
    ``s * batch_size * world_size`` (any later world size, batch size or
    worker count continues exactly there).
batch_size : int, optional
    The DataLoader's ``batch_size`` (1 for ``batch_size=None``). Required with
    ``num_workers > 1``: the workers then produce whole batches in the order
    the DataLoader yields them (worker ``w`` of ``n`` makes the rank's batches
    ``w, w + n, ...``), so every step consumes a prefix of the schedule. Keep
    the DataLoader's default ``in_order=True``. Another size than the
    DataLoader's is refused on its first batch.
drop_last : bool
    Every rank yields the same number of items (ranks stay in lockstep).
    True (default): the last ``< world_size`` positions are dropped. False:
    ranks short of a last item are padded by wrapping around to the start of
    the schedule, as ``torch.utils.data.DistributedSampler`` pads.

Raises
------
ClusterClipError
    ``drop_last=True`` with a schedule shorter than ``world_size`` (every rank
    would get none), ``num_workers > 1`` without ``batch_size``, or a
    ``batch_size`` other than the DataLoader's (on its first batch).

Examples
--------
>>> from torch.utils.data import DataLoader
>>> stream = ScheduledIterableDataset(["a", "b", "c", "d"], np.array([3, 1, 1, 0]),
...                                   rank=0, world_size=2)
>>> list(DataLoader(stream, batch_size=None))
['d', 'b']
>>> stream.load_state_dict({"consumed_samples": 2})
>>> list(stream)
['b']

Two workers and batches of 2: every step reads the next positions of the schedule.

>>> letters = ScheduledIterableDataset(list("abcdefg"), np.arange(7), batch_size=2)
>>> [list(batch) for batch in DataLoader(letters, batch_size=2, num_workers=2)]
[['a', 'b'], ['c', 'd'], ['e', 'f'], ['g']]
"""


def __getattr__(name: str) -> Any:
    # ScheduledIterableDataset subclasses torch's IterableDataset (DataLoader checks
    # isinstance), but importing this module must not import torch: build it on demand.
    if name == "ScheduledIterableDataset":
        return _scheduled_iterable_dataset()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
