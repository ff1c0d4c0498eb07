"""A self-contained ``report.html``: every PNG embedded as a base64 data URI.

The page needs no network and no sibling files, so it can be mailed or
attached to an experiment tracker. A tiny inline script marks each image with
``data-loaded="1"`` once the browser decoded it (used by the test that opens
the page in headless Chromium).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

__all__ = ["render_html"]

#: Rows of the cluster table shown in the page; report.json always has all of them.
MAX_TABLE_ROWS = 300

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif;
       margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; }
.muted { color: #666; }
table { border-collapse: collapse; font-size: 0.85em; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.summary td:first-child { color: #555; width: 40%; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; max-width: 60em; }
"""

_SCRIPT = """
function markImages() {
  for (const img of document.images) {
    if (img.complete && img.naturalWidth > 0) img.setAttribute('data-loaded', '1');
  }
  const all = Array.from(document.images);
  const done = all.filter(i => i.getAttribute('data-loaded') === '1').length;
  document.body.setAttribute('data-images-loaded', done + '/' + all.length);
}
window.addEventListener('load', markImages);
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _summary_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    s = data["summary"]
    config = data["schedule"]["config"]
    budget = (
        f"{config['num_tokens']:,} tokens"
        if config.get("num_tokens")
        else f"{s['schedule_length']:,} documents"
    )
    rows = [
        ("policy", s["policy"]),
        ("max_repeats (clip)", _fmt(s["max_repeats"])),
        ("order", _fmt(config.get("order"))),
        ("seed", _fmt(config.get("seed"))),
        ("budget", budget),
        ("schedule length (draws)", _fmt(s["schedule_length"])),
        ("epochs equivalent (draws / usable documents)", f"{s['epochs_equivalent']:.3f}"),
        ("documents (usable / excluded)", f"{s['n_usable']:,} / {s['n_excluded']:,}"),
        ("clusters (empty)", f"{s['n_clusters']:,} ({s['n_empty_clusters']})"),
        (
            "largest / smallest cluster",
            f"{s['largest_cluster']:,} / {s['smallest_cluster']:,} ({s['imbalance']:.1f}x)",
        ),
        ("cluster size, 90th / 10th percentile", f"{s['imbalance_p90_p10']:.1f}x"),
        (
            "small clusters dissolved (fewer than min_cluster_size documents)",
            f"{s.get('n_dissolved_clusters', 0)} ({s.get('dissolved_documents', 0):,} documents "
            f"moved; min_cluster_size {s.get('min_cluster_size', 1)})",
        ),
        ("distinct documents seen", _fmt(s["distinct_documents_seen"])),
        ("documents never seen", f"{s['never_seen']:,} ({s['never_seen_fraction']:.2%})"),
        ("most repeats of one document", _fmt(s["max_repeats_observed"])),
        ("clusters clipped", _fmt(s["n_clipped_clusters"])),
        ("first clip at draw", _fmt(s["first_clip_position"])),
    ]
    if s.get("tokens_drawn") is not None:
        rows.append(("tokens drawn", _fmt(s["tokens_drawn"])))
    if s.get("status_counts"):
        rows.append(
            (
                "document status",
                ", ".join(f"{k}: {v:,}" for k, v in sorted(s["status_counts"].items())),
            )
        )
    return rows


def _cluster_table(data: dict[str, Any]) -> str:
    head = (
        "<tr><th>rank</th><th>cluster</th><th>size</th><th>draws</th><th>share</th>"
        "<th>random</th><th>mean repeats</th><th>max repeats</th><th>never seen</th>"
        "<th>clipped at</th><th>keywords</th><th>example</th></tr>"
    )
    rows = []
    for row in data["clusters"][:MAX_TABLE_ROWS]:
        example = row["example"]
        example_text = ""
        if example:
            text = example["text"]
            text = text if len(text) <= 200 else text[:197] + "..."
            label = f"[{example['id']}] " if example.get("id") else f"[#{example['index']}] "
            example_text = _esc(label + text)
        rows.append(
            "<tr>"
            f"<td class=num>{row['size_rank']}</td><td class=num>{row['cluster']}</td>"
            f"<td class=num>{row['size']:,}</td><td class=num>{row['draws']:,}</td>"
            f"<td class=num>{row['share_policy']:.3%}</td>"
            f"<td class=num>{row['share_random']:.3%}</td>"
            f"<td class=num>{row['mean_repeats']:.2f}</td>"
            f"<td class=num>{row['max_repeats']}</td>"
            f"<td class=num>{row['never_seen']:,} ({row['never_seen_fraction']:.0%})</td>"
            f"<td class=num>{_fmt(row['clipped_at'])}</td>"
            f"<td>{_esc(', '.join(row['keywords']))}</td><td>{example_text}</td>"
            "</tr>"
        )
    note = ""
    if len(data["clusters"]) > MAX_TABLE_ROWS:
        note = (
            f"<p class=muted>Showing the {MAX_TABLE_ROWS} largest of "
            f"{len(data['clusters']):,} clusters; report.json lists all of them.</p>"
        )
    return f"<table class=clusters>{head}{''.join(rows)}</table>{note}"


#: What the stability figure means, in one sentence (the report and docs/report.md).
STABILITY_MEANING = (
    "ClusterClip gives every cluster the same share of the draws, so a document's "
    "upsampling follows its cluster: the part of the clustering that changes with the "
    "k-means seed is the part of the balance that is chance (ARI 1 = none of it, 0 = all of it)."
)


def _stability_section(data: dict[str, Any]) -> str:
    stability = data.get("stability")
    if not stability:
        return (
            "<p class=muted>Not measured (the cluster stage ran with stability_sample = 0, "
            "with levels (hierarchical k-means, where it is not measured), or before it "
            "measured stability).</p>"
        )
    return (
        f"<p>Agreement between these clusters and a k-means with another seed, on "
        f"{stability['sample_size']:,} documents: <b>ARI {stability['ari']:.2f}</b>; "
        f"{stability['pairs_kept']:.0%} of the document pairs put in one cluster here are in "
        f"one cluster there too (Fowlkes-Mallows {stability['fowlkes_mallows']:.2f}).</p>"
        f"<p class=muted>{_esc(STABILITY_MEANING)}</p>"
    )


def _small_clusters_section(data: dict[str, Any]) -> str:
    small = data.get("small_clusters") or {}
    dissolved = small.get("dissolved") or []
    if not dissolved:
        threshold = small.get("min_cluster_size", 1)
        rule = (
            "dissolving is off (min_cluster_size 1)"
            if threshold <= 1
            else f"no cluster had fewer than {threshold} documents"
        )
        return f"<p class=muted>No small cluster was dissolved: {_esc(rule)}.</p>"
    before = small.get("sizes_before_by_rank") or [0]
    after = data["sizes_by_rank"] or [0]
    intro = (
        f"<p>The cluster stage dissolved {len(dissolved)} of {small['requested_clusters']} "
        f"clusters with fewer than {small['min_cluster_size']} documents: their documents were "
        "moved to the nearest kept cluster and are drawn at its rate instead of getting a "
        "balanced share of their own (outliers, near-copies and boilerplate form such "
        "clusters). Sizes with the small clusters: "
        f"{len(before)} clusters, smallest {before[-1]:,}, median {_median(before):,.0f}, "
        f"largest {before[0]:,}; without them (sampled): {len(after)} clusters, smallest "
        f"{after[-1]:,}, median {_median(after):,.0f}, largest {after[0]:,}.</p>"
    )
    rows = []
    for entry in dissolved[:MAX_TABLE_ROWS]:
        examples = "<br>".join(
            _esc(
                (f"[{e['id']}] " if e.get("id") else f"[#{e['index']}] ")
                + (e["text"] if len(e["text"]) <= 200 else e["text"][:197] + "...")
            )
            for e in entry.get("examples", [])
        )
        moved = sorted(set(entry.get("moved_to", [])))
        rows.append(
            f"<tr><td class=num>{entry['cluster']}</td><td class=num>{entry['size']:,}</td>"
            f"<td>{_esc(', '.join(str(m) for m in moved))}</td><td>{examples}</td></tr>"
        )
    head = "<tr><th>cluster (before)</th><th>size</th><th>moved to</th><th>examples</th></tr>"
    return f"{intro}<table class=small>{head}{''.join(rows)}</table>"


def _notices_section(data: dict[str, Any]) -> str:
    """What was replaced, skipped, excluded or fallen back to: every count, then the warnings."""
    notices = data.get("notices") or {}
    utf8 = notices.get("invalid_utf8") or {}
    hidden = notices.get("hidden_files_skipped") or {}
    fallback = notices.get("random_fallback") or {}
    labels = notices.get("labels_out_of_range") or {}
    keywords = notices.get("keywords_dropped") or {}
    rows = [
        (
            "lines with invalid UTF-8 (replaced by U+FFFD)",
            _fmt(utf8.get("lines", 0))
            + (f", first at {utf8['first']}" if utf8.get("first") else ""),
        ),
        (
            "hidden files a glob skipped",
            _fmt(hidden.get("count", 0))
            + (f": {', '.join(hidden['names'])}" if hidden.get("names") else ""),
        ),
        (
            "random draws past max_repeats (on_exhausted: random)",
            _fmt(fallback.get("draws", 0))
            + (
                f" from draw {fallback['from_draw']:,}; most repeats of one document "
                f"{fallback.get('most_repeats', 0):,}"
                if fallback.get("draws")
                else ""
            ),
        ),
        ("labels >= 2**63 excluded (out of the int64 range)", _fmt(labels.get("count", 0))),
        ("keywords dropped", f"yes: {keywords['reason']}" if keywords.get("dropped") else "no"),
    ]
    table = "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in rows)
    warnings = data.get("warnings") or []
    listed = (
        "<ul class=warnings>" + "".join(f"<li>{_esc(w)}</li>" for w in warnings) + "</ul>"
        if warnings
        else "<p class=muted>Nothing was replaced, skipped or excluded.</p>"
    )
    return f"{listed}<table class=summary>{table}</table>"


def _duplicates_section(data: dict[str, Any]) -> str:
    """The near-duplicate groups: count, largest, the documents they withhold."""
    from clusterclip.report.duplicates import duplicates_line

    found = data.get("duplicates") or {}
    line = duplicates_line(found)
    if found.get("grouping") != "group" or not found.get("groups"):
        return f"<p class=muted>{_esc(line[:1].upper() + line[1:])}.</p>"
    rows = [
        ("groups of two or more documents", _fmt(found["groups"])),
        ("documents in them", _fmt(found["documents_in_groups"])),
        (
            "largest group",
            f"{found['largest_group']:,} documents (representative #{found['largest_representative']})",
        ),
        ("documents withheld (never drawn while a near-copy was)", _fmt(found["withheld"])),
        (
            "their share of the documents never seen",
            f"{found['share_of_never_seen']:.1%} of {found['never_seen']:,}",
        ),
    ]
    table = "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in rows)
    return (
        "<p>Each group of near-copies is one unit of the schedule: its members take turns, "
        "so a member is not drawn while a near-copy of it is. Those withheld documents are "
        "part of the documents never seen.</p>"
        f"<table class=summary>{table}</table>"
    )


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(
        ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    )


def render_html(
    data: dict[str, Any],
    figures: dict[str, Path],
    captions: dict[str, str],
    alts: dict[str, str] | None = None,
    *,
    workdir: str = ".",
) -> str:
    """The report page as one HTML string with the PNGs embedded.

    Parameters
    ----------
    data : dict
        Output of :func:`clusterclip.report.data.compute_report_data`.
    figures : dict
        PNG file name -> path on disk, in display order.
    captions : dict
        PNG file name -> caption.
    alts : dict, optional
        PNG file name -> alt text (what the figure shows); the caption when missing.
    workdir : str
        The work directory relative to the page's folder (``"."``: the page is
        in it). Never absolute, so a copied work directory's page names where it is.

    >>> page = render_html(data, figures, captions)  # doctest: +SKIP
    >>> page.startswith("<!DOCTYPE html>")  # doctest: +SKIP
    True
    """
    from clusterclip import __version__

    summary = "".join(
        f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in _summary_rows(data)
    )
    blocks = []
    for name, path in figures.items():
        encoded = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        blocks.append(
            f'<figure><img alt="{_esc((alts or {}).get(name) or captions.get(name, name))}" '
            f'data-name="{_esc(name)}" '
            f'src="data:image/png;base64,{encoded}" onload="markImages()">'
            f"<figcaption>{_esc(captions.get(name, ''))}</figcaption></figure>"
        )
    keywords_note = (
        ""
        if data["keywords_available"]
        else "<p class=muted>Keywords and examples need the cluster stage "
        "(<code>clusterclip.cluster.inspect_clusters</code>) and readable source files.</p>"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ClusterClip report{_esc(_title_place(workdir))}</title>
<style>{_STYLE}</style><script>{_SCRIPT}</script></head>
<body>
<h1>ClusterClip schedule report</h1>
<p class=muted>{_place(workdir)} &middot; clusterclip
{_esc(__version__)} &middot; every number on this page is in <code>report.json</code>.</p>
<h2>Summary</h2>
<table class=summary>{summary}</table>
<h2>Replaced, skipped or excluded</h2>
{_notices_section(data)}
<h2>Near-duplicate groups</h2>
{_duplicates_section(data)}
<h2>Stability</h2>
{_stability_section(data)}
<h2>Small clusters</h2>
{_small_clusters_section(data)}
<h2>Figures</h2>
{"".join(blocks)}
<h2>Clusters</h2>
<p class=muted>Sorted by size. <em>share</em>: fraction of this schedule's draws;
<em>random</em>: the expected fraction under random sampling; <em>clipped at</em>: the draw that
completed the cluster's last allowed pass.</p>
{keywords_note}
{_cluster_table(data)}
</body></html>
"""


def _place(workdir: str) -> str:
    """Where the work directory is, relative to this page (so that a copy stays right)."""
    if workdir == ".":
        return "Work directory: the folder holding this page"
    return f"Work directory <code>{_esc(workdir)}</code> (from this page's folder)"


def _title_place(workdir: str) -> str:
    return "" if workdir == "." else f": {workdir}"
