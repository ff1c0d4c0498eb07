"""``ClusterClipSampler``: the schedule as a resumable, distributed PyTorch sampler.

The sampler streams the global schedule (never materialises it; memory
O(N + K)) and gives rank ``r`` of ``W`` the global positions
``c + r, c + r + W, c + r + 2W, ...`` where ``c`` is ``consumed_samples``. The
global schedule does not depend on ``W``, so a checkpoint taken with 8 ranks
resumes exactly on 2, and vice versa.

Two sources, one slicing: :class:`ClusterClipSampler` computes the schedule
from labels and policy arguments; :meth:`ClusterClipSampler.from_workdir`
streams the schedule recorded in a work directory (memory-mapped), refused
when the directory's labels changed since it was built.

Works without torch too: then the class is a plain iterable with the same API.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from clusterclip.adapters.ranks import check_index, check_share, rank_length
from clusterclip.errors import ClusterClipError, hint, invalid
from clusterclip.io import STAGE_COMMANDS, WorkDir
from clusterclip.schedule.api import open_stream
from clusterclip.schedule.config import ScheduleConfig
from clusterclip.schedule.policy import (
    DEFAULT_POLICY,
    SchedulePolicy,
    as_policy,
    with_policy_keywords,
)

try:  # a real torch Sampler when torch is importable; a plain iterable otherwise
    from torch.utils.data import Sampler as _SamplerBase
except ImportError:  # pragma: no cover - exercised only without torch
    _SamplerBase = object  # type: ignore[assignment,misc]

__all__ = ["ClusterClipSampler"]


#: Positions handed to a rank's loop per read of a recorded schedule (memory only).
RECORDED_BLOCK = 65536
#: Callers looked at for a DataLoader above the sampler (its batch sampler, user wrappers).
CALLER_DEPTH = 8


def _drawn_by_dataloader(frame: Any) -> bool:
    """Whether a torch ``DataLoader`` (or its iterator) is among the callers of ``frame``.

    A DataLoader draws a sampler's indices ahead of the training loop: a multi-worker one
    ``prefetch_factor * num_workers`` batches ahead, and wrappers (Accelerate) one batch
    more, so under one the sampler's count is not a checkpoint. torch gives a sampler no
    other way to know who iterates it; this looks at the calling frames, once per pass.
    """
    if _SamplerBase is object:  # no torch, so no DataLoader
        return False
    from torch.utils.data import DataLoader
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    for _ in range(CALLER_DEPTH):
        frame = frame.f_back
        if frame is None:
            return False
        if isinstance(frame.f_locals.get("self"), (DataLoader, _BaseDataLoaderIter)):
            return True
    return False


class _RecordedSchedule:
    """A saved schedule read in blocks from a memory map (the stream's ``blocks`` protocol)."""

    def __init__(self, indices: np.ndarray) -> None:
        self.indices = indices
        self.end = int(indices.shape[0])

    def blocks(self, start: int = 0) -> Iterator[np.ndarray]:
        for begin in range(start, self.end, RECORDED_BLOCK):
            yield np.asarray(self.indices[begin : begin + RECORDED_BLOCK], dtype=np.int64)


def _recorded_config(path: Any, meta: dict[str, Any], fix: str) -> ScheduleConfig:
    """The sidecar's settings (its fingerprints were checked by ``WorkDir.schedule``)."""
    if "config" not in meta:
        raise ClusterClipError(f"{path}: its sidecar records no `config`. {fix}")
    try:
        return ScheduleConfig.from_dict(meta["config"])
    except (TypeError, ValueError) as error:
        raise ClusterClipError(
            f"{path}: the sidecar's config is not a clusterclip schedule config ({error}). {fix}"
        ) from None


class ClusterClipSampler(_SamplerBase):  # type: ignore[misc]
    """Resumable, rank-aware sampler over the ClusterClip schedule.

    Parameters
    ----------
    labels : array_like of int, shape (N,)
        Cluster id of every dataset index (negative = never sampled).
    policy : SchedulePolicy or str
        The settings (a :class:`~clusterclip.schedule.policy.SchedulePolicy`),
        or a policy name with the settings as keywords (``**settings``),
        exactly as :func:`clusterclip.build_schedule`; the sampler yields the
        same global sequence.
    lengths, duplicate_of, levels
        As for :func:`clusterclip.build_schedule` (``duplicate_of``:
        near-duplicate groups drawn as units, their members taking turns;
        ``levels``: the cluster tree of ``policy="hierarchical"``, whose
        fingerprint a checkpoint records).
    rank, world_size : int
        This process's rank and the number of ranks (``0 <= rank < world_size``).
    drop_last : bool
        Every rank yields the same number of indices either way, so that ranks
        stay in lockstep (a rank that stops one step early hangs the others'
        next all-reduce). True (default): the last ``< world_size`` positions
        of the schedule are dropped. False: the ranks short of a last index are
        padded like ``torch.utils.data.DistributedSampler`` pads, by wrapping
        around to the start of the schedule (global position ``total + i``
        reads position ``i``), so those few documents are seen once more.
    **settings
        With a policy name only: the policy's settings (``max_repeats``,
        ``num_samples``, ``seed``, ...), the fields of ``SchedulePolicy``.

    See Also
    --------
    ClusterClipSampler.from_workdir : the same sampler over the schedule recorded
        in a work directory.

    Attributes
    ----------
    consumed_samples : int
        Global positions handed out so far (``m * world_size`` after this rank
        yielded ``m`` indices in this run, plus where it started; at most
        ``total_samples``, also after a padded last index). A DataLoader asks
        for indices ahead of the training loop, so under one this is an upper
        bound of what was trained on, not a checkpoint: see :meth:`state_dict`.
    config : ScheduleConfig

    Raises
    ------
    ClusterClipError
        ``drop_last=True`` and a schedule shorter than ``world_size`` (every
        rank would get none): raised by the constructor when the length is
        known without a pass, else by ``len()`` or iteration. The message
        names both sizes and the fix (fewer ranks, or ``drop_last=False``).

    Notes
    -----
    ``len(sampler)`` is the number of indices this rank will yield from the
    current ``consumed_samples``: ``left // world_size`` with ``drop_last=True``,
    ``ceil(left / world_size)`` with ``drop_last=False``, where ``left =
    total_samples - consumed_samples`` (for a token budget it needs one
    counting pass over the schedule, O(T) time, O(N) memory, computed once).

    The order is consumed in the main process, also with DataLoader workers
    (they only load the items), so resuming from ``steps * global_batch_size``
    continues exactly where the interrupted run stopped, with any world size,
    micro-batch size or number of workers.

    A ``DataLoader`` runs the sampler ahead of training by the batches it
    prefetches (``prefetch_factor * num_workers`` with workers; wrappers such as
    Accelerate's look one batch ahead too), so only the training loop knows what
    was trained on: checkpoint with
    ``sampler.state_dict(consumed_samples=steps * global_batch_size)``, the
    loop's count (as Megatron does). Once a DataLoader has drawn indices from the
    sampler, ``state_dict()`` without that count raises rather than return the
    sampler's own count, which may be ahead. Iterated directly (``next``,
    ``list``, ``itertools.islice``), the sampler counts what it handed out.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([0, 0, 0, 1, 1, 2])
    >>> sampler = ClusterClipSampler(labels, num_samples=8, max_repeats=3, seed=0,
    ...                              rank=1, world_size=2)
    >>> len(sampler), len(list(sampler)), sampler.state_dict()["consumed_samples"]
    (4, 4, 8)
    >>> padded = ClusterClipSampler(labels, num_samples=7, max_repeats=3, seed=0,
    ...                             rank=1, world_size=2, drop_last=False)
    >>> len(padded), list(padded)[-1] == next(iter(ClusterClipSampler(
    ...     labels, num_samples=7, max_repeats=3, seed=0)))  # padded with position 0
    (4, True)
    >>> from clusterclip import SchedulePolicy
    >>> policy = SchedulePolicy(num_samples=8, max_repeats=3, seed=0)
    >>> list(ClusterClipSampler(labels, policy, rank=1, world_size=2)) == list(
    ...     ClusterClipSampler(labels, num_samples=8, max_repeats=3, seed=0, rank=1, world_size=2))
    True
    """

    @with_policy_keywords
    def __init__(
        self,
        labels: Any,
        policy: SchedulePolicy | str = DEFAULT_POLICY,
        *,
        lengths: Any = None,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = True,
        duplicate_of: Any = None,
        levels: Any = None,
        **settings: Any,
    ) -> None:
        self._place(rank, world_size, drop_last)
        self._stream = open_stream(
            labels, as_policy(policy, settings), lengths=lengths, duplicate_of=duplicate_of,
            levels=levels,
        )  # fmt: skip
        self.config: ScheduleConfig = self._stream.config
        self._total: int | None = None
        if self.config.num_tokens is None:  # the length is known without a pass
            self._check_share()

    def _place(self, rank: Any, world_size: Any, drop_last: bool) -> None:
        """Validate and set this rank's place (shared by both constructors)."""
        if _SamplerBase is not object:
            super().__init__()
        self.world_size = check_index("world_size", world_size, 1)
        self.rank = check_index("rank", rank, 0)
        if self.rank >= self.world_size:
            raise invalid("rank", f"an int in [0, {hint('world_size', self.world_size)})", rank)
        self.drop_last = bool(drop_last)
        self.consumed_samples = 0
        self._resumed_at = 0  # the resume point: a trainer's count is at least this
        self._ahead = False  # a DataLoader drew indices: consumed_samples may be ahead of training

    @classmethod
    def from_workdir(
        cls,
        workdir: str | os.PathLike[str] | WorkDir,
        *,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = True,
    ) -> ClusterClipSampler:
        """A sampler over exactly the schedule recorded in a work directory.

        Reads ``schedule.npy`` memory-mapped (through :class:`clusterclip.io.WorkDir`)
        and slices it per rank like the labels-built sampler slices its stream.
        Its ``config`` is the recorded :class:`ScheduleConfig`, so its
        :meth:`state_dict` loads into a sampler built from the same labels and
        policy arguments, and vice versa.

        Parameters
        ----------
        workdir : path or WorkDir
            A work directory with a built schedule (``clusterclip run``).
        rank, world_size, drop_last
            As for :class:`ClusterClipSampler`.

        Raises
        ------
        ClusterClipError
            No schedule; the labels in the work directory changed since the
            schedule was built; or ``schedule.npy`` does not match its sidecar.
            The message names the command that rebuilds it. Also, as for the
            constructor, a schedule shorter than ``world_size`` with ``drop_last=True``.

        Notes
        -----
        Construction reads the labels and the whole schedule file once to check
        their fingerprints (O(N + T) time, nothing held in memory); iteration
        then reads only this run's positions.

        Examples
        --------
        >>> sampler = ClusterClipSampler.from_workdir("work", rank=0, world_size=8)  # doctest: +SKIP
        >>> sampler.load_state_dict(checkpoint["sampler"])  # doctest: +SKIP
        """
        work = workdir if isinstance(workdir, WorkDir) else WorkDir(workdir)
        recorded = work.schedule()  # the one loader: fresh, hash and labels checked
        fix = f"Rebuild the schedule: `{STAGE_COMMANDS['schedule']}`."
        config = _recorded_config(recorded.path, recorded.meta, fix)
        indices = recorded.indices
        sampler = cls.__new__(cls)
        sampler._place(rank, world_size, drop_last)
        sampler._stream = _RecordedSchedule(indices)
        sampler.config = config
        sampler._total = int(indices.shape[0])
        sampler._check_share()
        return sampler

    # -- sizes --------------------------------------------------------------
    @property
    def total_samples(self) -> int:
        """Length of the global schedule (all ranks together)."""
        if self._total is None:
            stream = self._stream
            if self.config.num_tokens is None and stream.end is not None:
                self._total = int(stream.end)
            else:  # token budget: one counting pass
                self._total = sum(block.size for block in stream.blocks(0))
        return self._total

    def _check_share(self) -> None:
        check_share(self.total_samples, self.world_size, drop_last=self.drop_last)

    def __len__(self) -> int:
        self._check_share()
        left = self.total_samples - self.consumed_samples
        return rank_length(left, self.world_size, drop_last=self.drop_last)

    # -- iteration ----------------------------------------------------------
    def __iter__(self) -> Iterator[int]:
        world, rank = self.world_size, self.rank
        loader = _drawn_by_dataloader(sys._getframe())  # this generator runs on the first next()
        pending = np.zeros(0, dtype=np.int64)
        # Blocks end wherever the source cuts them: carry the < world_size
        # positions after the last full row of ranks over to the next block.
        for block in self._stream.blocks(self.consumed_samples):
            buffer = np.concatenate([pending, block]) if pending.size else block
            full = buffer.size - buffer.size % world
            pending = buffer[full:]
            for index in buffer[rank:full:world].tolist():
                self.consumed_samples += world  # before the yield: counts what was handed out
                self._ahead = self._ahead or loader  # ... which a DataLoader may not train on yet
                yield index
        if not pending.size:
            return
        end = self.consumed_samples + pending.size  # the schedule's length
        if self.drop_last:
            check_share(end, world, drop_last=True)  # a world size that gets nothing: refuse
            return
        # Pad the last row of ranks from the start of the schedule (wrapping
        # again if the schedule is shorter than the row).
        head = self._head(world - pending.size)
        row = np.concatenate([pending, np.resize(head, world - pending.size)])
        self.consumed_samples = end
        self._ahead = self._ahead or loader
        yield int(row[rank])

    def _head(self, count: int) -> np.ndarray:
        """The first ``min(count, total)`` documents of the schedule."""
        parts, held = [], 0
        for block in self._stream.blocks(0):
            parts.append(block[: count - held])
            held += parts[-1].size
            if held >= count:
                break
        return np.concatenate(parts)

    # -- checkpointing ------------------------------------------------------
    def set_consumed_samples(self, consumed_samples: int) -> None:
        """Resume at global position ``consumed_samples`` (e.g. steps * global batch)."""
        self.consumed_samples = check_index("consumed_samples", consumed_samples, 0)
        self._resumed_at = self.consumed_samples
        self._ahead = False

    def state_dict(self, consumed_samples: int | None = None) -> dict[str, Any]:
        """Resume state: ``consumed_samples`` + the config (and its fingerprint).

        Parameters
        ----------
        consumed_samples : int, optional
            Global schedule positions the training loop consumed: ``steps *
            micro_batch_size * world_size`` counted from the start of training
            (the resume point included), the same on every rank. Required once
            a DataLoader has drawn indices from this sampler: it draws them ahead
            of the loop (with ``num_workers=2`` and the default prefetch, 4
            batches ahead), so the sampler's own count is only an upper bound.
            Without it, the sampler's count (exact when iterated directly).

        Raises
        ------
        ClusterClipError
            No ``consumed_samples`` after a DataLoader drew indices; or one outside
            ``[resume point, positions handed out]`` (a count since the restart, or
            per rank instead of global).

        Examples
        --------
        >>> import numpy as np
        >>> sampler = ClusterClipSampler(np.array([0, 0, 1, 1, 2]), num_samples=12, seed=0)
        >>> from torch.utils.data import DataLoader
        >>> loader = DataLoader(range(5), sampler=sampler, batch_size=4)
        >>> for step, batch in enumerate(loader, start=1):  # the training loop
        ...     break  # checkpoint after the first step
        >>> sampler.state_dict(consumed_samples=step * 4)["consumed_samples"]
        4
        """
        if consumed_samples is None:
            if self._ahead:
                raise ClusterClipError(
                    "ClusterClipSampler.state_dict() needs the training loop's count: this "
                    f"sampler has handed out positions up to {self.consumed_samples:,}, but a "
                    "DataLoader asks for indices ahead of training (prefetch_factor * "
                    "num_workers batches with workers), so that count can be ahead of what "
                    "was trained on. Pass sampler.state_dict(consumed_samples=steps * "
                    "micro_batch_size * world_size), counted from the start of training."
                )
            consumed = self.consumed_samples
        else:
            consumed = self._trained_count(consumed_samples)
        return {
            "consumed_samples": int(consumed),
            "config_fingerprint": self.config.fingerprint(),
            "config": self.config.to_dict(),
            "schedule_version": self.config.schedule_version,
            "world_size": self.world_size,
            "rank": self.rank,
        }

    def _trained_count(self, value: Any) -> int:
        """A training loop's global count, checked against what this sampler handed out."""
        consumed = check_index("consumed_samples", value, 0)
        low, high = self._resumed_at, self.consumed_samples
        if not low <= consumed <= high:
            raise invalid(
                "consumed_samples",
                f"an int in [{low}, {high}] (from this run's resume point to the positions "
                "this sampler handed out)",
                consumed,
                "Count global positions from the start of training: the checkpoint's "
                "consumed_samples plus steps * micro_batch_size * world_size of this run.",
            )
        return consumed

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict`, with any world size.

        Raises
        ------
        ClusterClipError
            The state belongs to a different config (names every difference).
        """
        if not isinstance(state, dict) or "consumed_samples" not in state:
            raise invalid("state", "a dict from ClusterClipSampler.state_dict()", state)
        if state.get("config_fingerprint") != self.config.fingerprint():
            differences = self.config.differences(state.get("config") or {})
            detail = "; ".join(differences) if differences else "config fingerprint"
            saved = (state.get("config") or {}).get("schedule_version", 1)
            version = ""
            if saved != self.config.schedule_version:
                version = (
                    f" The checkpoint was drawn by schedule version {saved}: pass "
                    f"{hint('schedule_version', saved)} to resume it exactly."
                )
            raise ClusterClipError(
                f"sampler state belongs to a different schedule: {detail} differ. Build the "
                "sampler with the labels and policy arguments of the checkpointed run, or start "
                f"a new run without load_state_dict().{version}"
            )
        self.set_consumed_samples(state["consumed_samples"])
