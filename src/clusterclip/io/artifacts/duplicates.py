"""``duplicates.parquet``: every document's near-duplicate group, written by the dedup stage."""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io.artifacts.base import Artifact, Column, arrow_schema, read_in_index_order
from clusterclip.io.files import atomic_path

__all__ = ["DUPLICATE_COLUMNS", "DuplicatesArtifact"]

#: Columns of ``duplicates.parquet``, in order, with their Arrow types.
DUPLICATE_COLUMNS: tuple[Column, ...] = (
    ("index", "int64"),
    ("representative", "int64"),  # lowest index of the group; its own index when alone
    ("similarity", "float32"),  # cosine to the representative
    ("exact", "bool_"),  # same normalised text as the representative
    ("min_similarity", "float32"),  # on a representative: lowest cosine inside its group
)


class DuplicatesArtifact(Artifact):
    """The near-duplicate groups of a work directory (:data:`DUPLICATE_COLUMNS`, index order).

    Examples
    --------
    >>> from clusterclip.io.artifacts import DuplicatesArtifact
    >>> groups = DuplicatesArtifact("work")  # doctest: +SKIP
    >>> groups.write(np.array([0, 0, 2]), similarity=np.array([1, .95, 1], np.float32),
    ...     exact=np.array([True, False, True]), min_similarity=np.ones(3, np.float32))  # doctest: +SKIP
    >>> groups.representative()  # doctest: +SKIP
    array([0, 0, 2])
    """

    key = "duplicates"
    stage = "dedup"

    def write(
        self,
        representative: np.ndarray,
        *,
        similarity: np.ndarray,
        exact: np.ndarray,
        min_similarity: np.ndarray,
    ) -> str:
        """Write the groups atomically (arrays of shape (N,)); return the fingerprint."""
        pa = require_extra("pyarrow", "io")
        pq = require_extra("pyarrow.parquet", "io")
        values = {
            "index": np.arange(np.asarray(representative).size, dtype=np.int64),
            "representative": np.asarray(representative).astype(np.int64),
            "similarity": np.asarray(similarity).astype(np.float32),
            "exact": np.asarray(exact).astype(bool),
            "min_similarity": np.asarray(min_similarity).astype(np.float32),
        }
        table = pa.table(
            {name: pa.array(values[name]) for name, _ in DUPLICATE_COLUMNS},
            schema=arrow_schema(DUPLICATE_COLUMNS),
        )
        with atomic_path(self.path) as tmp:
            pq.write_table(table, tmp)
        return self.fingerprint()

    def read(self) -> Any:
        """The groups as a pyarrow Table in index order; refused when the clusters changed since."""
        self.check_fresh()
        if not self.exists():
            raise ClusterClipError(
                f"{self.path} not found. Run `clusterclip dedup --workdir {self.work.path}` first."
            )
        return read_in_index_order(self.path, None, fix="Rerun `clusterclip dedup`.")

    def representative(self) -> np.ndarray:
        """int64 ``(N,)``: the representative of every document's near-duplicate group."""
        return self.read().column("representative").to_numpy().astype(np.int64)
