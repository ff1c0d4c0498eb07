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
from pathlib import Path

from clusterclip.io import WorkDir

__all__ = ["build_report"]


def _check_fresh(work: WorkDir) -> dict[str, str]:
    """Fingerprints of the inputs the report reads; refuse a stale schedule."""
    if work.entry("schedule") is not None:  # a hand-placed schedule has no entry to check
        work.require_fresh("schedule")
    inputs = {}
    for key, artifact in (("cluster.clusters", "clusters"), ("schedule.schedule", "schedule")):
        inputs[key] = work.output(key) or work.fingerprint(artifact)
    return inputs


def build_report(
    workdir: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    n_slices: int = 50,
    n_keywords: int = 8,
) -> Path:
    """Write ``report.html``, ``report.json`` and the PNG figures for a work directory.

    Parameters
    ----------
    workdir : path
        Work directory with ``clusters.parquet`` and ``schedule.npy``.
    out_dir : path, optional
        Where to write (default: ``workdir``). When it is the work directory,
        a ``report`` entry is recorded in ``manifest.json``.
    n_slices : int
        Slices of training for the sampling-dynamics figure (default 50).
    n_keywords : int
        Keywords per cluster in the table (needs the cluster stage).

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
    from clusterclip.errors import invalid
    from clusterclip.io import (
        atomic_write_bytes,
        atomic_write_json,
        versions,
        write_stage,
    )
    from clusterclip.report.data import compute_report_data
    from clusterclip.report.figures import FIGURES, write_figures
    from clusterclip.report.html import render_html

    if not isinstance(n_slices, int) or isinstance(n_slices, bool) or n_slices < 1:
        raise invalid("n_slices", "an int in [1, inf)", n_slices, "Pass n_slices=50.")
    workdir = Path(workdir)
    if not workdir.is_dir():
        raise invalid(
            "workdir", "an existing work directory", str(workdir), "Run `clusterclip run` first."
        )
    out = Path(out_dir) if out_dir is not None else workdir
    out.mkdir(parents=True, exist_ok=True)
    inputs = _check_fresh(WorkDir(workdir))
    data = compute_report_data(workdir, n_slices=n_slices, n_keywords=n_keywords)
    figures = write_figures(data, out)
    captions = {name: caption for name, (_draw, caption) in FIGURES.items()}
    data["figures"] = {name: {"file": name, "caption": captions[name]} for name in figures}
    target = WorkDir(out)  # the work directory itself, or a folder laid out like one
    atomic_write_json(target.path_of("report_json"), data)
    page = render_html(data, figures, captions)
    atomic_write_bytes(target.path_of("report_html"), page.encode("utf-8"))
    if out.resolve() == workdir.resolve():
        write_stage(
            workdir,
            "report",
            {
                "config": {"n_slices": n_slices, "n_keywords": n_keywords},
                "inputs": inputs,
                "outputs": {
                    "report_html": target.fingerprint("report_html"),
                    "report_json": target.fingerprint("report_json"),
                },
                "versions": versions("matplotlib", "pyarrow"),
                "complete": True,
            },
        )
    return target.path_of("report_html")
