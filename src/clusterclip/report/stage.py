"""The report stage in the runner's contract (:mod:`clusterclip.runner`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterclip.io import WorkDir
from clusterclip.report.options import ReportOptions
from clusterclip.runner import StageOutput

__all__ = ["ReportStage"]


class ReportStage:
    """Write ``report.html``, ``report.json`` and the PNGs into the work directory.

    Its inputs are the labels, the schedule *and its sidecar* (a change of the
    recorded policy with identical indices still redoes the report) and the
    document index.

    >>> ReportStage().artifacts
    ('report_html', 'report_json')
    """

    name = "report"
    artifacts = ("report_html", "report_json")

    def __init__(
        self, *, engine: str = "local", engine_options: Mapping[str, Any] | None = None
    ) -> None:
        from clusterclip.engines import resolve_options

        resolve_options(engine, engine_options)  # checked before any work
        self.engine, self.engine_options = engine, engine_options

    def inputs(self, work: WorkDir, options: ReportOptions) -> dict[str, Any]:
        """Fingerprints of the labels, the schedule, its sidecar and the document index."""
        work.require("schedule")
        keys = ("cluster.clusters", "schedule.schedule", "schedule.meta", "embed.documents")
        return {key: work.output(key) for key in keys}

    def load(self, work: WorkDir, entry: Mapping[str, Any]) -> Path:
        """Path of the existing ``report.html``."""
        return work.path_of("report_html")

    def run(self, work: WorkDir, options: ReportOptions, *, resume: bool) -> StageOutput:
        """Compute every number, draw the figures, write the page."""
        from clusterclip.report import write_report

        path = write_report(
            work, work.path, n_slices=options.n_slices, n_keywords=options.n_keywords,
            engine=self.engine, engine_options=self.engine_options,
        )  # fmt: skip
        outputs = {
            "report_html": work.fingerprint("report_html"),
            "report_json": work.fingerprint("report_json"),
        }
        record = {"versions": _versions()}
        return StageOutput(outputs, {}, record, path)


def _versions() -> dict[str, str]:
    from clusterclip.io import versions

    return versions("matplotlib", "pyarrow")
