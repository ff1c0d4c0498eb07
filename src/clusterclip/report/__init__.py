"""The schedule report: what a schedule does to a corpus, before any GPU time is spent.

:func:`build_report` reads a work directory (``clusters.parquet``,
``schedule.npy`` + ``schedule.json``, and ``documents.parquet`` when present)
and writes

- ``report.html``: a self-contained page (PNGs embedded as data URIs),
- ``sizes.png``, ``shares.png``, ``dynamics.png``, ``repetitions.png``,
  ``never_seen.png``: the same figures as files,
- ``report.json``: every number shown (and more), see ``docs/report.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterclip.errors import ClusterClipError

__all__ = ["build_report"]


def _check_fresh(workdir: Path) -> dict[str, str]:
    """Fingerprints of the inputs the report reads; refuse a stale schedule."""
    from clusterclip.io import check_upstream, fingerprint_file, read_stage

    schedule_stage = read_stage(workdir, "schedule")
    if schedule_stage is not None:
        changed = check_upstream(workdir, "schedule", schedule_stage.get("inputs", {}))
        if changed:
            raise ClusterClipError(
                f"the schedule in {workdir} is stale: {'; '.join(changed)}. Rebuild it "
                "(`clusterclip run` redoes the stages downstream of a change) and report again."
            )
    inputs = {}
    for key, name in (
        ("cluster.clusters", "clusters.parquet"),
        ("schedule.schedule", "schedule.npy"),
    ):
        stage, _, output = key.partition(".")
        entry = read_stage(workdir, stage)
        recorded = (entry or {}).get("outputs", {}).get(output)
        inputs[key] = recorded if recorded else fingerprint_file(workdir / name)
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
        fingerprint_file,
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
    inputs = _check_fresh(workdir)
    data = compute_report_data(workdir, n_slices=n_slices, n_keywords=n_keywords)
    figures = write_figures(data, out)
    captions = {name: caption for name, (_draw, caption) in FIGURES.items()}
    data["figures"] = {name: {"file": name, "caption": captions[name]} for name in figures}
    atomic_write_json(out / "report.json", data)
    page = render_html(data, figures, captions)
    atomic_write_bytes(out / "report.html", page.encode("utf-8"))
    if out.resolve() == workdir.resolve():
        write_stage(
            workdir,
            "report",
            {
                "config": {"n_slices": n_slices, "n_keywords": n_keywords},
                "inputs": inputs,
                "outputs": {
                    "report_html": fingerprint_file(out / "report.html"),
                    "report_json": fingerprint_file(out / "report.json"),
                },
                "versions": versions("matplotlib", "pyarrow"),
                "complete": True,
            },
        )
    return out / "report.html"
