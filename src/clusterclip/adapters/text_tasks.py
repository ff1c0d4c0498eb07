"""The first round of the by-value exports (MDS, LitData): each scheduled text, written once.

Both exports open the work directory the same way and start with the same read
tasks (:class:`~clusterclip.adapters.tokenizing.TextWorker`, planned as the embed
stage plans the corpus); what they then write from the texts differs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.adapters.tokenizing import TextWorker, write_in_parts
from clusterclip.adapters.tokens import scheduled_mask
from clusterclip.engines import RayOptions, resolve_options
from clusterclip.io import WorkDir
from clusterclip.io.readplan import ReadPlan, corpus_plan
from clusterclip.progress import progress_bar

__all__ = ["TextTasks"]


@dataclass(frozen=True)
class TextTasks:
    """A work directory opened for a by-value export, and the engine its tasks run on.

    Attributes
    ----------
    work : WorkDir
    schedule : Schedule
        Its schedule (checked fresh).
    mask : ndarray of bool, shape (N,)
        The documents the schedule draws.
    plan : ReadPlan
        The corpus's read tasks (its files checked unchanged since the embed).
    read_options : dict
        How the embed stage read the records.
    engine : str
    options : RayOptions or None

    Examples
    --------
    >>> corpus = TextTasks.open("work")  # doctest: +SKIP
    >>> spans = corpus.write_texts(Path("texts.bin"), Path("spans.npy"))  # doctest: +SKIP
    """

    work: WorkDir
    schedule: Any
    mask: np.ndarray
    plan: ReadPlan
    read_options: dict[str, Any]
    engine: str
    options: RayOptions | None

    @classmethod
    def open(
        cls,
        workdir: str | os.PathLike[str],
        engine: str = "local",
        engine_options: Mapping[str, Any] | None = None,
    ) -> TextTasks:
        """Check everything an export needs before it writes anything; refuse what is stale."""
        options = resolve_options(engine, engine_options)
        work = WorkDir(workdir)
        schedule = work.schedule()
        mask = scheduled_mask(schedule.indices, work.n_documents())
        plan, read_options = corpus_plan(work, engine=engine, options=options)
        return cls(work, schedule, mask, plan, read_options, engine, options)

    @property
    def tasks(self) -> dict[str, Any]:
        """The keywords of :func:`clusterclip.engines.map_shards` for this engine."""
        return {"engine": self.engine, "options": self.options}

    def write_texts(self, texts: Path, spans: Path) -> np.ndarray:
        """Write each scheduled document's UTF-8 text once into ``texts`` (read tasks).

        Returns each document's ``(start, stop)`` byte span there (``(-1, -1)``
        when not scheduled), also saved to ``spans`` for the next round's tasks.
        """
        with progress_bar(total=int(self.mask.sum()), desc="read texts", unit="doc") as bar:
            worker = functools.partial(TextWorker, self.read_options)
            found = write_in_parts(
                self.plan, worker, self.mask, texts, progress=bar.update, **self.tasks
            )
        np.save(spans, found)
        return found
