"""Which clusters the report describes in words, and their keywords and examples.

The words come from :func:`clusterclip.describe.inspect_clusters` (which re-reads
the embedded corpus); this module decides for which clusters and from how many
documents (:func:`keyword_plan`), so a report on ``10**5`` clusters stays within
memory, and turns a corpus that cannot be re-read into a reason the report shows; it
also fills the table's example cells and the dissolved small clusters' examples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir

__all__ = [
    "KEYWORD_BUDGET",
    "KEYWORD_CLUSTERS",
    "KEYWORD_DOCUMENTS",
    "describe_largest",
    "example_cell",
    "keyword_plan",
    "small_clusters",
]

#: Keywords come from at most this many documents per cluster, spread over the corpus ...
KEYWORD_DOCUMENTS = 1000
#: ... and from at most this many documents in all (fewer per cluster when there are many) ...
KEYWORD_BUDGET = 2_000_000
#: ... for the table's largest clusters: a word counter each (all of them at 10^5 clusters
#: took 6.9 GB); every counted document still weighs in the corpus-wide word counts.
KEYWORD_CLUSTERS = 2000


def keyword_plan(sizes: np.ndarray) -> tuple[list[int], int]:
    """The clusters the report describes (largest first, ties by id) and documents counted per cluster.

    >>> keyword_plan(np.array([5, 9, 0, 9]))
    ([1, 3, 0, 2], 1000)
    >>> keyword_plan(np.zeros(100_000, dtype=np.int64))[1]
    20
    """
    by_size = np.argsort(-np.asarray(sizes), kind="stable")
    per_cluster = min(KEYWORD_DOCUMENTS, max(1, KEYWORD_BUDGET // max(len(sizes), 1)))
    return [int(k) for k in by_size[:KEYWORD_CLUSTERS]], per_cluster


def describe_largest(
    work: WorkDir,
    sizes: np.ndarray,
    *,
    n_keywords: int,
    n_examples: int,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> tuple[dict[int, dict[str, Any]], str | None]:
    """Keywords and examples of the largest clusters, and why there are none (None: there are).

    The clusters are :func:`keyword_plan`'s. A corpus that cannot be re-read (moved,
    changed, an in-memory dataset) gives ``({}, reason)``: the report still has every
    number, minus words, and says why (``notices.keywords_dropped`` in ``report.json``,
    the notices table of ``report.html`` and a warning line). ``engine`` and
    ``engine_options`` say where the corpus is read (see
    :func:`~clusterclip.describe.inspect_clusters`).

    >>> found, reason = describe_largest(WorkDir("work"), sizes, n_keywords=8, n_examples=1)  # doctest: +SKIP
    >>> found[0]["keywords"][:3], reason  # doctest: +SKIP
    (['lord', 'god', 'israel'], None)
    """
    from clusterclip.describe import inspect_clusters

    clusters, per_cluster = keyword_plan(sizes)
    try:
        found = inspect_clusters(
            work.path,
            clusters=clusters,
            n_keywords=n_keywords,
            n_examples=n_examples,
            max_documents=per_cluster,
            engine=engine,
            engine_options=engine_options,
        )
    except (ClusterClipError, OSError) as error:
        return {}, str(error)
    return {int(entry["cluster"]): entry for entry in found}, None


def example_cell(info: dict[str, Any]) -> dict[str, Any] | None:
    """A cluster's first example document for the table, or None without one.

    >>> example_cell({"examples": [{"index": 3, "id": "a", "text": "in the beginning"}]})
    {'index': 3, 'id': 'a', 'text': 'in the beginning'}
    """
    example = (info.get("examples") or [{}])[0]
    if "index" not in example:
        return None
    return {
        "index": int(example["index"]),
        "id": example.get("id"),
        "text": str(example.get("text", "")),
    }


def small_clusters(
    work: WorkDir,
    sizes: np.ndarray,
    *,
    keywords_available: bool,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The clusters the cluster stage dissolved (too small), with examples, and sizes before.

    ``sizes_before_by_rank`` are the sizes of all ``requested`` clusters before
    dissolving (largest first); equal to ``sizes_by_rank`` when nothing was dissolved
    or the cluster stage predates dissolving.
    """
    entry = work.entry("cluster") or {}
    record = entry.get("small_clusters") or {}
    before = np.asarray(record.get("sizes_before", sizes), dtype=np.int64)
    dissolved = [dict(d) for d in record.get("dissolved", [])]
    texts: dict[int, dict[str, Any]] = {}
    if dissolved and keywords_available:  # the corpus is readable (checked by describe_largest)
        from clusterclip.describe import document_texts

        wanted = [i for d in dissolved for i in d.get("members", [])[:3]]
        try:
            texts = document_texts(work.path, wanted, engine=engine, engine_options=engine_options)
        except (ClusterClipError, OSError):
            texts = {}
    for d in dissolved:
        d["examples"] = [texts[i] for i in d.get("members", [])[:3] if i in texts]
    return {
        "min_cluster_size": int(record.get("min_cluster_size", 1)),
        "requested_clusters": len(before),
        "dissolved": dissolved,
        "sizes_before_by_rank": [int(x) for x in np.sort(before)[::-1]],
    }
