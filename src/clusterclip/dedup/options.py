"""The dedup stage's settings, declared once (flags, TOML keys and docs come from here)."""

from __future__ import annotations

from dataclasses import dataclass

from clusterclip.errors import hint, invalid
from clusterclip.options import check_fields, option

__all__ = ["DEFAULT_THRESHOLD", "DedupOptions"]

#: Cosine at or above which two documents of one cluster are near-duplicates.
#: Chosen by measurement (benchmarks/bench_duplicates.py, docs/clustering.md
#: "Near-duplicates"): with all-MiniLM-L6-v2 and its static distillation both,
#: pair precision >= 0.975 and recall >= 0.986 there; 0.95 lost 4 points of
#: recall with the default encoder, 0.85 halved the static encoder's precision.
DEFAULT_THRESHOLD = 0.9


@dataclass(frozen=True, kw_only=True)
class DedupOptions:
    """Settings of the dedup stage (:func:`clusterclip.dedup.dedup`).

    >>> DedupOptions().threshold
    0.9
    """

    threshold: float = option(
        DEFAULT_THRESHOLD,
        "Cosine at or above which two documents of one cluster are near-duplicates "
        "(1.0: only identical embeddings).",
        kind="float",
        above=0,
        flag="--dedup-threshold",
    )
    exact: bool = option(
        True,
        "Also group exact copies (same text after Unicode NFKC, case folding and whitespace "
        "collapsing) across clusters; --no-exact skips the corpus pass this needs.",
        kind="bool",
        flag="--no-exact",
        flag_help="Do not group exact copies across clusters (near copies inside a cluster "
        "are still grouped), which skips the corpus pass this needs.",
    )
    block_size: int = option(
        1024,
        "Rows of a cluster compared at once: memory is block_size x cluster size float32.",
        kind="int",
        minimum=1,
        flag="--dedup-block-size",
    )
    grouping: str = option(
        "cliques",
        "How near copies form groups: cliques, in which every two distinct texts have cosine "
        ">= threshold (never a chain of pairs); recorded, so groups made otherwise are redone.",
        choices=("cliques",),
        cli=False,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.threshold > 1.0:
            raise invalid(
                "threshold",
                "a cosine in (0, 1]",
                self.threshold,
                f"Pass e.g. {hint('threshold', DEFAULT_THRESHOLD)}.",
            )
