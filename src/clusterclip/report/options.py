"""The report stage's settings, declared once (flags, TOML keys and docs come from here)."""

from __future__ import annotations

from dataclasses import dataclass

from clusterclip.options import check_fields, option

__all__ = ["ReportOptions"]


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """Settings of the report stage (:func:`clusterclip.report.build_report`).

    >>> ReportOptions().n_slices
    50
    """

    enabled: bool = option(
        True,
        "Write the report (report.html, report.json, PNGs) at the end of a run; "
        "--no-report skips that stage.",
        kind="bool",
        flag="--no-report",
        flag_help="Do not write the report: skips the report stage (report.html, report.json, "
        "PNGs) at the end of a run.",
    )
    n_slices: int = option(
        50, "Slices of training in the sampling-dynamics figure.", kind="int", minimum=1
    )
    n_keywords: int = option(8, "Keywords per cluster in the report table.", kind="int", minimum=0)

    def __post_init__(self) -> None:
        check_fields(self)
