"""Hugging Face ``transformers.Trainer`` in schedule order, resumable with ``resume_from_checkpoint``.

``Trainer`` builds its training ``DataLoader`` with the sampler returned by
``Trainer._get_train_sampler`` (a ``RandomSampler`` by default) and then lets
Accelerate shard the *batches* over processes (process ``r`` of ``W`` takes
batches ``r, r + W, ...``). :class:`ScheduleTrainerMixin` overrides that one
method to return a :class:`~clusterclip.adapters.torch.ClusterClipSampler` over
the whole (global) schedule, so every step of every process reads the next
schedule positions: step ``s`` reads positions ``s * B .. (s + 1) * B - 1``,
``B = per_device_train_batch_size * gradient_accumulation_steps * world_size``.

Resuming: ``trainer.train(resume_from_checkpoint=...)`` restores the step and
Accelerate's ``skip_first_batches`` replays the sampler past the batches already
trained (only indices are replayed, no rows are read), so training continues
exactly at the next schedule position. With ``ignore_data_skip=True`` the
Trainer does not replay and a resumed run starts again at position 0 (its
documented behaviour for any sampler); the mixin warns about it.

The train dataset must be map-style with row ``i`` = document ``i`` (the corpus
that was embedded, tokenized, unfiltered). One pass over the schedule is the
whole training run (it already holds every repetition), so ``num_train_epochs``
must be 1 or ``max_steps`` at most the schedule's steps; both are checked.
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from typing import Any

from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.io import WorkDir

__all__ = ["ClusterClipTrainer", "ScheduleTrainerMixin"]  # noqa: F822 (lazy, see __getattr__)


class ScheduleTrainerMixin:
    """Make a ``transformers.Trainer`` (or any subclass of it) train in schedule order.

    Put it first among the bases: ``class MyTrainer(ScheduleTrainerMixin, SFTTrainer)``;
    :class:`ClusterClipTrainer` is ``ScheduleTrainerMixin`` + ``Trainer``.

    Parameters
    ----------
    *args, **kwargs
        The wrapped Trainer's own arguments, passed through unchanged (a mixin
        cannot know the signature of the Trainer class it is combined with).
    schedule : path, WorkDir or ClusterClipSampler
        A work directory (its saved schedule is read memory-mapped and checked
        against its labels, :meth:`ClusterClipSampler.from_workdir`), or a
        sampler built with ``world_size=1`` (Accelerate shards the batches over
        processes; a per-rank sampler would shard twice).

    Raises
    ------
    ClusterClipError
        When training starts: the train dataset is not map-style or does not
        have one row per embedded document; ``num_train_epochs`` is not 1 and
        ``max_steps`` is unset; ``max_steps`` asks for more documents than the
        schedule holds.

    Examples
    --------
    >>> trainer = ClusterClipTrainer(model=model, args=args, train_dataset=tokenized,  # doctest: +SKIP
    ...                              data_collator=collator, schedule="work")
    >>> trainer.train()  # doctest: +SKIP
    >>> trainer.train(resume_from_checkpoint=True)  # continues at the next schedule position  # doctest: +SKIP
    """

    def __init__(self, *args: Any, schedule: Any, **kwargs: Any) -> None:
        if isinstance(schedule, ClusterClipSampler):
            if schedule.world_size != 1:
                raise invalid(
                    "schedule",
                    "a ClusterClipSampler with world_size=1 (the global order)",
                    f"world_size={schedule.world_size}",
                    "Accelerate already splits the batches over processes; build the "
                    "sampler without rank and world_size.",
                )
            self._schedule_start = schedule.consumed_samples
        elif not isinstance(schedule, (str, os.PathLike, WorkDir)):
            raise invalid(
                "schedule",
                "a work directory or a ClusterClipSampler",
                type(schedule).__name__,
                "Pass the work directory of `clusterclip run`.",
            )
        self.clusterclip_schedule = schedule
        super().__init__(*args, **kwargs)

    def _schedule_sampler(self) -> ClusterClipSampler:
        schedule = self.clusterclip_schedule
        if isinstance(schedule, ClusterClipSampler):
            sampler = copy.copy(schedule)  # each train() starts where the sampler was given
            sampler.set_consumed_samples(self._schedule_start)
            return sampler
        return ClusterClipSampler.from_workdir(schedule)

    def get_train_dataloader(self) -> Any:
        """Trainer's loader, refused for an iterable dataset (Trainer gives it no sampler)."""
        dataset = self.train_dataset
        data = require_extra("torch.utils.data", "torch")
        if isinstance(dataset, data.IterableDataset) or not hasattr(dataset, "__len__"):
            raise ClusterClipError(
                f"the train dataset is iterable ({type(dataset).__name__}), so Trainer would "
                "read it in its own order and never ask for the schedule. Pass the map-style "
                "dataset (row i = document i), or give a plain Trainer a "
                "ScheduledIterableDataset instead of using ClusterClipTrainer."
            )
        return super().get_train_dataloader()

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        """The global schedule as the training sampler (checked against the dataset and args)."""
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        sampler = self._schedule_sampler()
        n_documents = sampler.config.n_documents
        if not hasattr(dataset, "__len__") or len(dataset) != n_documents:
            raise ClusterClipError(
                f"the train dataset has {_length(dataset)} rows but the schedule indexes "
                f"{n_documents} documents: row i must be document i (the embedded corpus, in "
                "the same order, unfiltered, tokenized with map()). Pass that dataset."
            )
        _check_length(self.args, len(sampler))
        if self.args.ignore_data_skip:
            warnings.warn(
                "ignore_data_skip=True: a run resumed from a checkpoint will restart the "
                "schedule at position 0 instead of continuing it. Leave it False (the skip "
                "replays only sampler indices, it reads no data).",
                stacklevel=2,
            )
        return sampler


def _length(dataset: Any) -> str:
    return str(len(dataset)) if hasattr(dataset, "__len__") else "no len() (an iterable dataset)"


def _check_length(args: Any, positions: int) -> None:
    """Refuse training that would go round the schedule again or run past its end."""
    per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps
    per_step *= max(1, int(getattr(args, "world_size", 1)))
    available = math.ceil(positions / per_step) if per_step else 0
    if args.max_steps is not None and args.max_steps > 0:
        if args.max_steps > available:
            raise ClusterClipError(
                f"max_steps={args.max_steps} needs {args.max_steps * per_step:,} documents "
                f"({per_step} per step) but the schedule holds {positions:,} ({available:,} "
                f"steps). Use max_steps <= {available}, or rebuild the schedule with a larger "
                "budget."
            )
    elif args.num_train_epochs != 1:
        raise ClusterClipError(
            f"num_train_epochs={args.num_train_epochs}: one pass over the schedule is the whole "
            "training run (it already holds every repetition, up to the cap). Set "
            "num_train_epochs=1, or max_steps."
        )


_CLASS_CACHE: dict[str, type] = {}


def _clusterclip_trainer() -> type:
    cls = _CLASS_CACHE.get("ClusterClipTrainer")
    if cls is None:
        transformers = require_extra("transformers", "trainers")
        require_extra("accelerate", "trainers")
        cls = type(
            "ClusterClipTrainer",
            (ScheduleTrainerMixin, transformers.Trainer),
            {
                "__module__": __name__,
                "__qualname__": "ClusterClipTrainer",
                "__doc__": "``transformers.Trainer`` training in schedule order: "
                "``ClusterClipTrainer(..., schedule=workdir)``; see "
                ":class:`ScheduleTrainerMixin`.",
            },
        )
        _CLASS_CACHE["ClusterClipTrainer"] = cls
    return cls


def __getattr__(name: str) -> Any:
    # ClusterClipTrainer subclasses transformers.Trainer, but importing this module
    # (for the mixin) must not import transformers: build it on demand.
    if name == "ClusterClipTrainer":
        return _clusterclip_trainer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
