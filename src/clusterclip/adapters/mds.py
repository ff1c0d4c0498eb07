"""Export a schedule as a MosaicML ``streaming`` dataset (MDS shards), in schedule order.

Sample ``j`` of the MDS dataset is the draw at schedule position ``j``
(columns ``text``, ``index``, ``position``; see
:mod:`clusterclip.adapters.by_value`). Repeated documents are written again at
each draw, so the export costs about ``len(schedule) / n_documents`` times the
corpus; the cost is printed before anything is written.

Reading contract (mosaicml-streaming 0.13, read from its source)
----------------------------------------------------------------
Read it with ``StreamingDataset(local=out, shuffle=False, num_canonical_nodes=1,
batch_size=B)`` and a ``StreamingDataLoader(dataset, batch_size=B, ...)``.
With one canonical node and no shuffling the sample space is ``0..T-1`` in
order; ``get_partitions_orig`` hands it to the P physical nodes round robin
(node ``p`` takes ``p, p + P, ...``), each node to its R ranks round robin,
and each rank's list to its DataLoader workers in consecutive runs of ``B``
samples, which the DataLoader takes back in turn. So, with ``W = P * R`` ranks:

- global step ``t`` (the ``t``-th batch of every rank) holds exactly schedule
  positions ``[t*W*B, (t+1)*W*B)``, whatever the number of workers;
- slot ``k`` of that batch on node ``p``, local rank ``r`` is position
  ``(t*B + k)*W + p + P*r`` (on one node: ``(t*B + k)*W + rank``, the same
  interleave as every other clusterclip adapter);
- ``StreamingDataLoader.state_dict()`` records ``sample_in_epoch = steps * W * B``
  and a resumed dataset drops exactly that prefix, so it continues with the
  next global batch, also on another number of nodes (``num_canonical_nodes=1``
  keeps the order independent of P).

Shuffling, or ``num_canonical_nodes > 1`` (its default when unset is the
number of physical nodes, and 64x that for the ``py1s``/``py2s`` shuffles),
breaks the order. When ``T`` is not a multiple of ``W``, streaming repeats a
few samples so every rank gets the same count; make the budget a multiple of
``W * B`` to have no partial or padded last batch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clusterclip.adapters.by_value import open_scheduled_texts
from clusterclip.adapters.output import check_export_folder, export_folder
from clusterclip.errors import invalid, require_extra
from clusterclip.progress import progress_bar

__all__ = ["MDS_COLUMNS", "export_mds"]

#: MDS column encodings of a sample.
MDS_COLUMNS = {"text": "str", "index": "int64", "position": "int64"}


def export_mds(
    workdir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    size_limit: int = 1 << 26,
    compression: str | None = None,
) -> dict[str, Any]:
    """Write the scheduled documents, in schedule order, as an MDS dataset.

    Parameters
    ----------
    workdir : path
        Work directory with a schedule; its corpus files must be unchanged
        since they were embedded (checked before anything is written).
    out : path
        Local output folder, new or empty (an earlier export is refused: delete
        it first). Receives ``index.json``, ``shard.NNNNN.mds[.zstd]`` and
        ``clusterclip.json``. The folder appears whole or not at all.
    size_limit : int
        Bytes per shard before compression (MDSWriter's ``size_limit``).
    compression : str, optional
        MDS shard compression, e.g. ``"zstd"`` (None: uncompressed).

    Returns
    -------
    dict
        ``samples``, ``shards``, ``bytes`` written, and ``out``.

    Notes
    -----
    Deterministic: the same schedule gives the same samples in the same order.
    Needs ``mosaicml-streaming`` (``pip install 'clusterclip[streaming]'``).
    See the module docstring for the reading contract (``shuffle=False``,
    ``num_canonical_nodes=1``, ``batch_size``).

    Examples
    --------
    >>> export_mds("work", "mds/")  # doctest: +SKIP
    {'samples': 15000, 'shards': 1, 'bytes': 2113536, 'out': 'mds'}
    >>> from streaming import StreamingDataset  # doctest: +SKIP
    >>> StreamingDataset(local="mds/", shuffle=False, num_canonical_nodes=1, batch_size=8)[0]["position"]  # doctest: +SKIP
    0
    """
    if not isinstance(size_limit, int) or isinstance(size_limit, bool) or size_limit < 1:
        raise invalid(
            "size_limit",
            "an int in [1, inf) (bytes per shard)",
            size_limit,
            "Pass size_limit=67108864.",
        )
    writer_module = require_extra("streaming", "streaming")
    check_export_folder(out)
    texts = open_scheduled_texts(workdir)
    with export_folder(out) as tmp:
        texts.announce("export mds")
        with (
            writer_module.MDSWriter(
                out=str(tmp), columns=MDS_COLUMNS, compression=compression, size_limit=size_limit
            ) as writer,
            progress_bar(total=len(texts), desc="export mds", unit="doc") as bar,
        ):
            for n, (position, document, text) in enumerate(texts.samples(), start=1):
                writer.write({"text": text, "index": document, "position": position})
                if n % 4096 == 0:
                    bar.update(4096)
            bar.update(len(texts) % 4096)
        texts.sidecar(
            tmp,
            {
                "format": "mds",
                "reader": "streaming.StreamingDataset(shuffle=False, num_canonical_nodes=1)",
            },
        )
        shards = sorted(p.name for p in tmp.glob("shard.*"))
        written = sum(p.stat().st_size for p in tmp.iterdir() if p.is_file())
    return {"samples": len(texts), "shards": len(shards), "bytes": written, "out": str(Path(out))}
