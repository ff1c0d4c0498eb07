"""Plant known exact and near copies in a real corpus (the dedup benchmark and tests).

Each chosen source document gets ``c`` copies (``c`` drawn in ``[min_copies,
max_copies]``); a copy is either exact or carries one or two small edits of the
kinds a web crawl produces: two neighbouring words swapped, a word deleted,
the case changed, punctuation added or removed. Copies are inserted at seeded
random positions. The ground truth is the list of planted groups (source id
followed by its copies' ids).

>>> records = [{"id": str(i), "text": f"verse {i} of the good book here"} for i in range(5)]
>>> planted, truth = plant_duplicates(records, n_sources=2, min_copies=2, max_copies=2, seed=0)
>>> len(planted), [len(group) for group in truth]
(9, [3, 3])
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["EDITS", "edit_text", "plant_duplicates"]

EDITS = ("swap", "delete", "case", "punctuation")


def edit_text(text: str, kind: str, rng: np.random.Generator) -> str:
    """One small edit of ``kind`` (see :data:`EDITS`); texts of one word only change case."""
    words = text.split()
    if kind == "swap" and len(words) > 2:
        i = int(rng.integers(len(words) - 1))
        words[i], words[i + 1] = words[i + 1], words[i]
        return " ".join(words)
    if kind == "delete" and len(words) > 3:
        del words[int(rng.integers(len(words)))]
        return " ".join(words)
    if kind == "punctuation":
        stripped = re.sub(r"[.,;:!?]", "", text)
        return stripped if stripped != text else text.rstrip() + "!"
    return text.upper() if rng.random() < 0.5 else text.lower()


def plant_duplicates(
    records: list[dict[str, Any]],
    *,
    n_sources: int,
    min_copies: int,
    max_copies: int,
    seed: int,
    exact_share: float = 0.3,
    max_edits: int = 2,
) -> tuple[list[dict[str, Any]], list[list[str]]]:
    """``(records with copies, planted groups of ids)``.

    Parameters
    ----------
    records : list of dict
        ``{"id", "text", ...}`` with unique ids.
    n_sources : int
        Documents that get copies (chosen at random).
    min_copies, max_copies : int
        Copies per source, uniform in the range.
    seed : int
    exact_share : float
        Probability that a copy is exact (no edit).
    max_edits : int
        A near copy gets 1 .. ``max_edits`` edits.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xD0D0]))
    sources = rng.choice(len(records), size=n_sources, replace=False)
    copies: list[dict[str, Any]] = []
    truth = []
    for source in sources.tolist():
        original = records[source]
        group = [original["id"]]
        for k in range(int(rng.integers(min_copies, max_copies + 1))):
            text = original["text"]
            if rng.random() >= exact_share:
                for _ in range(int(rng.integers(1, max_edits + 1))):
                    text = edit_text(text, EDITS[int(rng.integers(len(EDITS)))], rng)
            copy = {**original, "id": f"{original['id']}~dup{k}", "text": text}
            copies.append(copy)
            group.append(copy["id"])
        truth.append(group)
    out = list(records)
    for copy in copies:  # each at a random position among what is there
        out.insert(int(rng.integers(len(out) + 1)), copy)
    return out, truth
