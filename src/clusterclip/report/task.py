"""The report's numbers as one engine task: the worker reads the per-document arrays.

:func:`clusterclip.report.data.report_numbers` reads the labels, the schedule
(every draw), the document index and the near-duplicate groups, and returns
what is as small as the cluster count. On the Ray engine it runs on a worker,
so the driver reads none of those arrays; the local engine runs the same
function in its own process. The keywords and example texts still come from
the read tasks of :mod:`clusterclip.describe.reading`, planned on the driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from clusterclip.engines import resolve_options, run_task

__all__ = ["NumbersWorker", "numbers_on_engine"]


class NumbersWorker:
    """:func:`~clusterclip.report.data.report_numbers` of one work directory, as a worker.

    Pass ``functools.partial(NumbersWorker, workdir, n_slices)`` as the ``worker`` of
    :func:`clusterclip.engines.run_task`; the task's payload is ignored.

    >>> NumbersWorker("work", 50)(None)["summary"]["n_documents"]  # doctest: +SKIP
    10000
    """

    def __init__(self, workdir: str, n_slices: int) -> None:
        self.workdir, self.n_slices = str(workdir), int(n_slices)

    def __call__(self, _payload: Any) -> dict[str, Any]:
        from clusterclip.report.data import report_numbers

        return report_numbers(self.workdir, self.n_slices)


def numbers_on_engine(
    work: Any,
    n_slices: int,
    *,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`~clusterclip.report.data.report_numbers` of ``work``, as one task of ``engine``.

    >>> numbers_on_engine(WorkDir("work"), 50)["sizes"][:3]  # doctest: +SKIP
    [812, 640, 533]
    """
    worker = partial(NumbersWorker, str(work.path.resolve()), n_slices)
    options = resolve_options(engine, engine_options)
    return run_task(worker, None, engine=engine, options=options)
