"""The TF-IDF fit: sample texts from the whole corpus in input order, fit, write the fit.

The fit samples texts from the whole corpus in input order (a bottom-k sample,
:func:`~clusterclip.embed.encoders.sample_for_fit`), reading it through the
same read plan as the embed tasks. It runs on the driver: its SVD's bytes
depend on the BLAS thread count, so on a Ray actor with another thread count it
would change every embedding (measured: an actor with 1 CPU fits other bytes
than a 2-core driver). Every embed task reads the fit from the work directory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from clusterclip.embed.tfidf import TFIDF_SAMPLE, fit_tfidf, sample_for_fit
from clusterclip.errors import ClusterClipError, hint, spell
from clusterclip.io.ranges import Piece, read_pieces
from clusterclip.io.readers import RawRecord, RecordStream, describe_statuses

__all__ = ["TfidfFit", "no_usable_document"]


class TfidfFit:
    """Fit the TF-IDF encoder on a sample of the corpus.

    Parameters
    ----------
    read_options : dict
        ``text_field``, ``id_field`` and ``strict`` of the reader.
    sources : list of str
        The corpus files as given (for the error messages).
    dataset : datasets.Dataset, optional
        The corpus when it is a Hugging Face dataset.
    """

    def __init__(
        self, read_options: dict[str, Any], sources: list[str], dataset: Any = None
    ) -> None:
        self.read_options, self.sources, self.dataset = dict(read_options), sources, dataset

    def __call__(self, request: tuple[Sequence[Piece], str, int]) -> int:
        """Fit on the records of ``pieces``, write the fit to ``path``; return the sample size."""
        pieces, path, seed = request

        def raw(stream: RecordStream) -> Iterator[RawRecord]:
            return read_pieces(stream, pieces, self.dataset)

        stream = RecordStream(None, **self.read_options, raw=raw)
        texts = ((r.index, r.text) for r in stream if r.status == "ok")
        sample = sample_for_fit(texts, size=TFIDF_SAMPLE, seed=seed)
        if not stream.counts.get("ok"):
            raise no_usable_document(self.sources, stream)
        if len(sample) < 3:
            raise ClusterClipError(
                f"the tfidf encoder needs at least 3 documents with text to fit on; the inputs "
                f"hold {describe_statuses(stream.counts, stream.examples)}. Add documents, or "
                f"use another encoder ({hint('encoder', 'static')})."
            )
        fit_tfidf(sample, path=Path(path), seed=seed)
        return len(sample)


def no_usable_document(sources: list[str], stream: Any, rejects: Path | None = None) -> Exception:
    """The error for a corpus without one usable document, accounting for every record.

    ``stream`` has the counters of a :class:`~clusterclip.io.readers.RecordStream`
    (``counts``, ``examples``, ``blank_lines``), e.g. the stage's summed
    :class:`~clusterclip.io.readplan.ReadStats`.
    """
    shown = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
    if not stream.counts:
        blank = f" ({stream.blank_lines:,} blank lines)" if stream.blank_lines else ""
        verb = "holds" if len(sources) == 1 else "hold"
        return ClusterClipError(
            f"no usable document: {shown} {verb} no records{blank}. Check the files."
        )
    worst = max((s for s in stream.counts if s != "ok"), key=stream.counts.__getitem__)
    fix = {
        "missing_field": f"Name the field that holds the text with {spell('text_field')}.",
        "malformed": "Each line must be one JSON object in UTF-8 (JSON Lines).",
        "not_text": f"Pass {spell('text_field')} NAME if another field holds the text.",
        "empty": "Every text is empty or blank.",
        "zero_vector": "The encoder gave every text an all-zero embedding (it knows none of "
        "their tokens): use another encoder or model "
        f"({hint('encoder', 'sentence-transformers')}).",
    }[worst]
    listed = f" Every record and its reason is in {rejects}." if rejects else ""
    return ClusterClipError(
        f"no usable document in {shown}: {describe_statuses(stream.counts, stream.examples)}. "
        f"{fix}{listed}"
    )
