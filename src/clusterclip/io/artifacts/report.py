"""``report.json`` + ``report.html``: what the report stage writes (its PNGs sit beside them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterclip.errors import ClusterClipError
from clusterclip.io.artifacts.base import Artifact
from clusterclip.io.files import atomic_write_bytes, atomic_write_json

__all__ = ["ReportArtifact"]


class ReportArtifact(Artifact):
    """The report of a work directory (or of a folder laid out like one).

    ``report.json`` holds every number of the report; ``report.html`` renders
    them. The figures are written beside them by the report stage.

    Examples
    --------
    >>> from clusterclip.io.artifacts import ReportArtifact
    >>> ReportArtifact("work").read()["schedule"]["length"]  # doctest: +SKIP
    15000
    """

    key = "report_json"
    stage = "report"

    @property
    def html_path(self) -> Path:
        """``report.html``."""
        return self.work.path_of("report_html")

    def write(self, data: Mapping[str, Any], page: str) -> Path:
        """Write ``report.json`` (``data``) then ``report.html`` (``page``), each atomically.

        Returns the page's path.
        """
        atomic_write_json(self.path, dict(data))
        atomic_write_bytes(self.html_path, page.encode("utf-8"))
        return self.html_path

    def read(self) -> dict[str, Any]:
        """``report.json`` (every number of the report)."""
        if not self.exists():
            raise ClusterClipError(
                f"{self.path} not found. Run `clusterclip report --workdir W` first."
            )
        return json.loads(self.path.read_text("utf-8"))
