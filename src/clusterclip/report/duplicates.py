"""Near-duplicate groups in the report: how many, the largest, and what they withhold.

With ``duplicates="group"`` a group of near-copies is one unit of the schedule
whose members take turns, so a group drawn ``c`` times shows ``min(c, size)``
of its members. A member that is never drawn while another member of its group
is drawn is *withheld* by the grouping: it is part of the "never seen" count,
and the reason is its near-copy, not the clip or the budget. The groups are
read through :class:`clusterclip.io.WorkDir` (``duplicates.parquet``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from clusterclip.io import WorkDir

__all__ = ["duplicate_groups", "duplicates_line"]


def duplicate_groups(
    work: WorkDir,
    *,
    labels: np.ndarray,
    seen_per_doc: np.ndarray,
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """The near-duplicate groups the schedule drew as units, and the documents they withheld.

    Parameters
    ----------
    work : WorkDir
        Its ``duplicates.parquet`` is read when the schedule grouped duplicates.
    labels : ndarray of int, shape (N,)
        Cluster of every document (negative: excluded, never counted).
    seen_per_doc : ndarray of int, shape (N,)
        Draws of every document in the schedule.
    config : mapping
        The schedule's recorded config (``duplicates`` is ``"group"`` when used).

    Returns
    -------
    dict
        ``grouping`` (``group`` / ``off``), ``groups`` (of two or more usable
        documents), ``documents_in_groups``, ``largest_group`` and
        ``largest_representative``, ``withheld`` (never drawn while a member of
        their group was), ``never_seen`` (all usable documents never drawn) and
        ``share_of_never_seen`` (``withheld / never_seen``). Deterministic.

    Examples
    --------
    >>> duplicate_groups(WorkDir("work"), labels=labels, seen_per_doc=seen,
    ...                  config=meta["config"])["withheld"]  # doctest: +SKIP
    3
    """
    usable = np.asarray(labels) >= 0
    seen = np.asarray(seen_per_doc) > 0
    never_seen = int((usable & ~seen).sum())
    found: dict[str, Any] = {
        "grouping": "off",
        "groups": 0,
        "documents_in_groups": 0,
        "largest_group": 0,
        "largest_representative": None,
        "withheld": 0,
        "never_seen": never_seen,
        "share_of_never_seen": 0.0,
    }
    if config.get("duplicates") != "group" or not work.exists("duplicates"):
        return found
    representative = work.duplicate_of()
    n = representative.size
    sizes = np.bincount(representative[usable], minlength=n)
    in_group = usable & (sizes[representative] >= 2)
    group_seen = np.bincount(representative[usable & seen], minlength=n) > 0
    withheld = int((in_group & ~seen & group_seen[representative]).sum())
    largest = int(sizes.argmax()) if n else 0
    found.update(
        grouping="group",
        groups=int((sizes >= 2).sum()),
        documents_in_groups=int(in_group.sum()),
        largest_group=int(sizes[largest]) if n and sizes[largest] >= 2 else 0,
        largest_representative=largest if n and sizes[largest] >= 2 else None,
        withheld=withheld,
        share_of_never_seen=withheld / never_seen if never_seen else 0.0,
    )
    return found


def duplicates_line(found: Mapping[str, Any]) -> str:
    """The groups in one line, for the run and report summaries.

    >>> duplicates_line({"grouping": "group", "groups": 2, "documents_in_groups": 5,
    ...     "largest_group": 3, "largest_representative": 7, "withheld": 1,
    ...     "never_seen": 4, "share_of_never_seen": 0.25})
    '2 near-duplicate groups (5 documents; largest 3, #7): 1 withheld (never drawn while a near-copy was), 25% of the 4 never seen'
    """
    if found.get("grouping") != "group":
        return "grouping off (duplicates: off): every document is drawn on its own"
    if not found.get("groups"):
        return "no near-duplicate groups: every document is drawn on its own"
    if not found.get("never_seen"):
        return (
            f"{found['groups']:,} near-duplicate groups ({found['documents_in_groups']:,} "
            f"documents; largest {found['largest_group']:,}, #{found['largest_representative']}): "
            "none withheld, every document is drawn"
        )
    return (
        f"{found['groups']:,} near-duplicate groups ({found['documents_in_groups']:,} documents; "
        f"largest {found['largest_group']:,}, #{found['largest_representative']}): "
        f"{found['withheld']:,} withheld (never drawn while a near-copy was), "
        f"{found['share_of_never_seen']:.0%} of the {found['never_seen']:,} never seen"
    )
