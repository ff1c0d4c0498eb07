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
from collections.abc import Iterator
from typing import Any

import numpy as np

from clusterclip.adapters.ranks import check_index, check_share, rank_length
from clusterclip.errors import ClusterClipError, hint, invalid
from clusterclip.io import STAGE_COMMANDS, WorkDir, fingerprint_array
from clusterclip.schedule.config import ScheduleConfig, labels_fingerprint
from clusterclip.schedule.policy import (
    DEFAULT_MAX_REPEATS,
    DEFAULT_ON_EXHAUSTED,
    DEFAULT_ORDER,
    DEFAULT_POLICY,
    SchedulePolicy,
)

try:  # a real torch Sampler when torch is importable; a plain iterable otherwise
    from torch.utils.data import Sampler as _SamplerBase
except ImportError:  # pragma: no cover - exercised only without torch
    _SamplerBase = object  # type: ignore[assignment,misc]

__all__ = ["ClusterClipSampler"]


#: Positions handed to a rank's loop per read of a recorded schedule (memory only).
RECORDED_BLOCK = 65536


class _RecordedSchedule:
    """A saved schedule read in blocks from a memory map (the stream's ``blocks`` protocol)."""

    def __init__(self, indices: np.ndarray) -> None:
        self.indices = indices
        self.end = int(indices.shape[0])

    def blocks(self, start: int = 0) -> Iterator[np.ndarray]:
        for begin in range(start, self.end, RECORDED_BLOCK):
            yield np.asarray(self.indices[begin : begin + RECORDED_BLOCK], dtype=np.int64)


def _recorded_config(path: Any, meta: dict[str, Any], fix: str) -> ScheduleConfig:
    for key in ("config", "labels_fingerprint", "indices_fingerprint"):
        if key not in meta:
            raise ClusterClipError(
                f"{path}: its sidecar records no `{key}`, so the schedule cannot be checked "
                f"against the work directory. {fix}"
            )
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
    policy, max_repeats, num_samples, num_tokens, lengths, alpha, cluster_weights, order, on_exhausted, seed, schedule_version, duplicate_of, levels
        Exactly as :func:`clusterclip.build_schedule`; the sampler yields the
        same global sequence (``duplicate_of``: near-duplicate groups drawn as
        units, their members taking turns; ``levels``: the cluster tree of
        ``policy="hierarchical"``, whose fingerprint a checkpoint records).
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

    See Also
    --------
    ClusterClipSampler.from_workdir : the same sampler over the schedule recorded
        in a work directory.

    Attributes
    ----------
    consumed_samples : int
        Global positions consumed so far (``m * world_size`` after this rank
        yielded ``m`` indices in this run, plus where it started; at most
        ``total_samples``, also after a padded last index).
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

    With a ``DataLoader`` the sampler runs ahead of training by the prefetched
    batches, so ``state_dict()`` taken mid-epoch over-counts. Either call
    :meth:`set_consumed_samples` with the count your training loop tracked
    (``steps * global_batch_size``, as Megatron does) before saving, or use
    ``num_workers=0``.

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
    """

    def __init__(
        self,
        labels: Any,
        *,
        policy: str = DEFAULT_POLICY,
        max_repeats: int | None = DEFAULT_MAX_REPEATS,
        num_samples: int | None = None,
        num_tokens: int | None = None,
        lengths: Any = None,
        alpha: float | None = None,
        cluster_weights: Any = None,
        order: str = DEFAULT_ORDER,
        on_exhausted: str = DEFAULT_ON_EXHAUSTED,
        seed: int,
        schedule_version: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = True,
        duplicate_of: Any = None,
        levels: Any = None,
    ) -> None:
        self._place(rank, world_size, drop_last)
        self._stream = SchedulePolicy(
            policy=policy,
            max_repeats=max_repeats,
            num_samples=num_samples,
            num_tokens=num_tokens,
            alpha=alpha,
            cluster_weights=cluster_weights,
            order=order,
            on_exhausted=on_exhausted,
            seed=seed,
            schedule_version=schedule_version,
        ).stream(labels, lengths, duplicate_of=duplicate_of, levels=levels)
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
        fix = f"Rebuild the schedule: `{STAGE_COMMANDS['schedule']}`."
        recorded = work.schedule()
        config = _recorded_config(recorded.path, recorded.meta, fix)
        labels = work.labels()
        now = labels_fingerprint(labels)
        if now != recorded.meta["labels_fingerprint"] or now != config.labels_fingerprint:
            raise ClusterClipError(
                f"{recorded.path}: the labels of {work.path} changed since the schedule was "
                f"built (built from labels {config.labels_fingerprint}, "
                f"{config.n_documents} documents; the clusters now give {now}, "
                f"{labels.shape[0]} documents). {fix}"
            )
        indices = recorded.indices
        if fingerprint_array(indices) != recorded.meta["indices_fingerprint"]:
            raise ClusterClipError(
                f"{recorded.path}: the indices do not match the fingerprint recorded in its "
                f"sidecar (the file was modified or belongs to another schedule). {fix}"
            )
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
        pending = np.zeros(0, dtype=np.int64)
        # Blocks end wherever the source cuts them: carry the < world_size
        # positions after the last full row of ranks over to the next block.
        for block in self._stream.blocks(self.consumed_samples):
            buffer = np.concatenate([pending, block]) if pending.size else block
            full = buffer.size - buffer.size % world
            pending = buffer[full:]
            for index in buffer[rank:full:world].tolist():
                self.consumed_samples += world  # before the yield: counts what was handed out
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

    def state_dict(self) -> dict[str, Any]:
        """Resume state: ``consumed_samples`` + the config (and its fingerprint)."""
        return {
            "consumed_samples": int(self.consumed_samples),
            "config_fingerprint": self.config.fingerprint(),
            "config": self.config.to_dict(),
            "schedule_version": self.config.schedule_version,
            "world_size": self.world_size,
            "rank": self.rank,
        }

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
