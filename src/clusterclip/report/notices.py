"""What a run replaced, skipped, excluded or fell back to: each counted, each said in one line.

Nothing the stages do to the data stays silent. :func:`collect_notices` reads,
through :class:`clusterclip.io.WorkDir`, the embed stage's summary (invalid
UTF-8 replaced, hidden files a glob skipped) and the schedule's sidecar (the
random passes past the repetition cap, labels beyond the int64 range); the
report adds the keywords it could not compute. :func:`warning_lines` turns the
counts into the one-line warnings of the run summary, ``report.json`` and
``report.html``. The text never depends on the entry point (CLI or Python), so
the same work directory always gives the same report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterclip.io import WorkDir

__all__ = ["collect_notices", "keywords_notice", "run_findings", "warning_lines"]

#: Hidden file names shown in a warning; report.json lists them all.
SHOWN_NAMES = 5


def collect_notices(work: WorkDir, schedule_meta: Mapping[str, Any] | None = None) -> dict:
    """Counts of what was replaced, skipped or excluded, from the work directory.

    Parameters
    ----------
    work : WorkDir
        A work directory; a missing stage counts as nothing to say.
    schedule_meta : mapping, optional
        The schedule's sidecar (``schedule.json``), when the caller has read it.

    Returns
    -------
    dict
        ``invalid_utf8`` (``lines``, ``first``: ``file:line``), ``hidden_files_skipped``
        (``count``, ``names``), ``random_fallback`` (``draws``, ``from_draw``,
        ``most_repeats``, ``max_repeats``), ``labels_out_of_range`` (``count``) and
        ``keywords_dropped`` (``dropped``, ``reason``; filled by the report).

    Examples
    --------
    >>> collect_notices(WorkDir("work"))["invalid_utf8"]  # doctest: +SKIP
    {'lines': 1, 'first': 'corpus/b.jsonl:5'}
    """
    embed = (work.entry("embed") or {}).get("summary", {})
    if schedule_meta is None:
        schedule_meta = _schedule_meta(work)
    config = schedule_meta.get("config", {})
    stats = schedule_meta.get("stats", {})
    hidden = [str(name) for name in embed.get("hidden_files_skipped") or []]
    return {
        "invalid_utf8": {
            "lines": int(embed.get("replaced_utf8_lines") or 0),
            "first": embed.get("replaced_utf8_first"),
        },
        "hidden_files_skipped": {"count": len(hidden), "names": hidden},
        "random_fallback": _random_fallback(config, stats),
        "labels_out_of_range": {"count": int(config.get("labels_out_of_range") or 0)},
        "keywords_dropped": keywords_notice(None),
    }


def run_findings(work: WorkDir, *, report_written: bool) -> dict[str, Any]:
    """``{"notices", "duplicates"}`` for a run's summary (:func:`warning_lines` says them).

    From ``report.json`` when this run wrote (or kept) the report and it has
    them (the keywords it dropped included); otherwise counted from the work
    directory (one pass over the schedule for the near-duplicate groups).
    """
    import numpy as np

    from clusterclip.report.duplicates import duplicate_groups

    if report_written and work.exists("report_json"):
        data = work.report()
        if "notices" in data and "duplicates" in data:
            return {"notices": data["notices"], "duplicates": data["duplicates"]}
    saved = work.schedule()
    labels = work.labels()
    notices = collect_notices(work, saved.meta)
    seen = np.bincount(np.asarray(saved.indices, dtype=np.int64), minlength=len(labels))
    duplicates = duplicate_groups(
        work, labels=labels, seen_per_doc=seen, config=saved.meta.get("config", {})
    )
    return {"notices": notices, "duplicates": duplicates}


def keywords_notice(reason: str | None) -> dict[str, Any]:
    """``{"dropped", "reason"}``: why the report has no keywords (None: it has them)."""
    return {"dropped": reason is not None, "reason": reason}


def _schedule_meta(work: WorkDir) -> Mapping[str, Any]:
    if not work.exists("schedule_meta"):
        return {}
    return work.schedule().meta


def _random_fallback(config: Mapping[str, Any], stats: Mapping[str, Any]) -> dict[str, Any]:
    """The draws after every cluster was clipped (``on_exhausted="random"``), and the most repeats."""
    start = stats.get("exhausted_at")
    fell_back = config.get("on_exhausted") == "random" and start is not None
    n_draws = int(stats.get("n_draws") or 0)
    return {
        "draws": n_draws - int(start) if fell_back else 0,
        "from_draw": int(start) if fell_back else None,
        "most_repeats": int(stats.get("max_repeats_per_document") or 0),
        "max_repeats": config.get("max_repeats"),
    }


def warning_lines(notices: Mapping[str, Any]) -> list[str]:
    """One line per notice with something to say, in a fixed order.

    >>> warning_lines({"invalid_utf8": {"lines": 2, "first": "a.jsonl:7"}})
    ['invalid UTF-8 replaced by U+FFFD on 2 line(s), first at a.jsonl:7']
    """
    lines = []
    utf8 = notices.get("invalid_utf8") or {}
    if utf8.get("lines"):
        where = f", first at {utf8['first']}" if utf8.get("first") else ""
        lines.append(f"invalid UTF-8 replaced by U+FFFD on {utf8['lines']:,} line(s){where}")
    hidden = notices.get("hidden_files_skipped") or {}
    if hidden.get("count"):
        names = hidden.get("names") or []
        shown = ", ".join(names[:SHOWN_NAMES]) + (
            f" and {len(names) - SHOWN_NAMES:,} more" if len(names) > SHOWN_NAMES else ""
        )
        lines.append(
            f"{hidden['count']:,} hidden file(s) skipped by a glob: {shown} "
            "(name them, or their folder, to read them)"
        )
    fallback = notices.get("random_fallback") or {}
    if fallback.get("draws"):
        lines.append(
            f"every cluster was clipped at draw {fallback['from_draw']:,}; the other "
            f"{fallback['draws']:,} draws are random passes past max_repeats "
            f"{fallback['max_repeats']} (on_exhausted: random): one document is drawn "
            f"{fallback['most_repeats']:,} times"
        )
    labels = notices.get("labels_out_of_range") or {}
    if labels.get("count"):
        lines.append(
            f"{labels['count']:,} label(s) >= 2**63 (unsigned) excluded: an int64 cluster id "
            "cannot hold them; renumber the clusters to keep those documents"
        )
    keywords = notices.get("keywords_dropped") or {}
    if keywords.get("dropped"):
        lines.append(f"the report has no keywords or examples: {keywords['reason']}")
    return lines
