"""The schedule report: what a schedule does to a corpus, before any GPU time is spent.

:func:`build_report` reads a work directory through
:class:`clusterclip.io.WorkDir` (labels, schedule and sidecar, documents when
present) and writes

- ``report.html``: a self-contained page (PNGs embedded as data URIs),
- ``sizes.png``, ``shares.png``, ``dynamics.png``, ``repetitions.png``,
  ``never_seen.png``: the same figures as files,
- ``report.json``: every number shown (and more), see ``docs/report.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterclip.io import WorkDir
from clusterclip.report.options import ReportOptions

__all__ = ["ReportOptions", "build_report", "report_target", "write_report"]


def build_report(
    workdir: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    n_slices: int = ReportOptions.n_slices,
    n_keywords: int = ReportOptions.n_keywords,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``report.html``, ``report.json`` and the PNG figures for a work directory.

    Parameters
    ----------
    workdir : path
        Work directory with ``clusters.parquet`` and ``schedule.npy``.
    out_dir : path, optional
        Where to write (default: ``workdir``). When it is the work directory,
        the report is a stage: it is skipped when up to date and recorded in
        ``manifest.json``.
    n_slices : int
        Slices of training for the sampling-dynamics figure (default 50).
    n_keywords : int
        Keywords per cluster in the table (needs the cluster stage).
    engine : {"local", "ray"}
        Where the corpus is read for the keywords and examples (read tasks; the
        report is the same on every engine).
    engine_options : mapping, optional
        Fields of :class:`~clusterclip.engines.RayOptions` for ``"ray"``.

    Returns
    -------
    pathlib.Path
        Path of ``report.html``. Same work directory -> same ``report.json``.

    Examples
    --------
    >>> from clusterclip.report import build_report
    >>> build_report("work")  # doctest: +SKIP
    PosixPath('work/report.html')
    """
    from clusterclip.report.stage import ReportStage
    from clusterclip.runner import run_stage

    options = ReportOptions(n_slices=n_slices, n_keywords=n_keywords)
    work, elsewhere = report_target(workdir, out_dir)
    if elsewhere is None:
        stage = ReportStage(engine=engine, engine_options=engine_options)
        return run_stage(stage, work, options).result
    return write_report(
        work, elsewhere, n_slices=options.n_slices, n_keywords=options.n_keywords,
        engine=engine, engine_options=engine_options,
    )  # fmt: skip


def report_target(
    workdir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None
) -> tuple[WorkDir, Path | None]:
    """The work directory to report on, and the other folder to write into (else None).

    Written into the work directory (``out_dir`` None or that directory), the
    report is its ``report`` stage: skipped when up to date, recorded in the
    manifest. Written elsewhere, it is a copy rendered each time, with no
    manifest entry. A work directory that does not exist is refused: the report
    makes none.
    """
    from clusterclip.errors import invalid

    work = WorkDir(workdir)
    if not work.path.is_dir():
        raise invalid(
            "workdir", "an existing work directory", str(workdir), "Run `clusterclip run` first."
        )
    out = Path(out_dir) if out_dir is not None else work.path
    return work, None if out.resolve() == work.path.resolve() else out


def write_report(
    work: WorkDir,
    out: Path,
    *,
    n_slices: int,
    n_keywords: int,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> Path:
    """Render the report of ``work`` into ``out`` (the work directory or another folder).

    ``engine`` and ``engine_options`` say where the corpus is read for the keywords.
    """
    from clusterclip.io.artifacts import ReportArtifact
    from clusterclip.report.data import compute_report_data
    from clusterclip.report.figures import FIGURES, alt_texts, write_figures
    from clusterclip.report.html import render_html

    out.mkdir(parents=True, exist_ok=True)
    data = compute_report_data(
        work.path, n_slices=n_slices, n_keywords=n_keywords, engine=engine,
        engine_options=engine_options,
    )  # fmt: skip
    figures = write_figures(data, out)
    captions = {name: caption for name, (_draw, caption) in FIGURES.items()}
    alts = alt_texts(data)
    data["figures"] = {
        name: {"file": name, "caption": captions[name], "alt": alts[name]} for name in figures
    }
    # Relative to the page, never absolute: a copied work directory's report names where it is.
    where = os.path.relpath(work.path.resolve(), out.resolve())
    page = render_html(data, figures, captions, alts, workdir=where)
    # the work directory itself, or a folder laid out like one
    return ReportArtifact(WorkDir(out)).write(data, page)
