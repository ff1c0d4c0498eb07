"""What every artifact handle shares: its work directory, its file, its stage and freshness."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from clusterclip.errors import ClusterClipError, require_extra
from clusterclip.io.files import fingerprint_file

if TYPE_CHECKING:
    from clusterclip.io.workdir import WorkDir

__all__ = ["Artifact", "Column", "arrow_schema", "read_in_index_order"]

#: One column of a table artifact: its name and its Arrow type name (``pyarrow.<type>()``).
Column = tuple[str, str]


def arrow_schema(columns: Sequence[Column]) -> Any:
    """The pyarrow schema of ``columns`` (``(name, type)`` pairs, e.g. ``("index", "int64")``).

    >>> arrow_schema([("index", "int64"), ("status", "string")]).names
    ['index', 'status']
    """
    pa = require_extra("pyarrow", "io")
    return pa.schema([(name, getattr(pa, kind)()) for name, kind in columns])


class Artifact:
    """One file (or folder) of a work directory: where it is, who writes it, whether it is fresh.

    Subclasses name their :data:`~clusterclip.io.workdir.ARTIFACTS` key (``key``),
    the stage that writes them (``stage``) and own their schema, ``write`` and
    readers; no other module spells their layout.

    Parameters
    ----------
    work : WorkDir or path
        The work directory.
    """

    key: ClassVar[str]
    stage: ClassVar[str]

    def __init__(self, work: WorkDir | str | os.PathLike[str]) -> None:
        from clusterclip.io.workdir import WorkDir

        self.work = work if isinstance(work, WorkDir) else WorkDir(work)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({os.fspath(self.work.path)!r})"

    @property
    def path(self) -> Path:
        """The artifact's file or folder."""
        return self.work.path_of(self.key)

    def exists(self) -> bool:
        """Whether the file or folder is present (written, not necessarily fresh)."""
        return self.path.exists()

    def fingerprint(self) -> str:
        """Content hash of the file, as the manifest records it among the stage's outputs."""
        return fingerprint_file(self.path)

    def check_fresh(self) -> dict[str, Any]:
        """The writing stage's manifest entry; refused if missing or an input changed since."""
        return self.work.require_fresh(self.stage)


def read_in_index_order(path: Path, columns: Sequence[str] | None, *, fix: str) -> Any:
    """A parquet table with an ``index`` column, its rows sorted into index order.

    Rows written out of order (a merge of parallel tasks, a hand-made file) are
    put back in order; an ``index`` that is not a permutation of ``0..N-1`` is
    refused with ``fix`` as the remedy.
    """
    pq = require_extra("pyarrow.parquet", "io")
    wanted = None if columns is None else list(dict.fromkeys(["index", *columns]))
    table = pq.read_table(path, columns=wanted)
    index = table.column("index").to_numpy()
    if len(index) and not np.array_equal(index, np.arange(len(index))):
        order = np.argsort(index, kind="stable")
        if not np.array_equal(index[order], np.arange(len(index))):
            raise ClusterClipError(
                f"{path}: column 'index' is not a permutation of 0..{len(index) - 1}. {fix}"
            )
        table = table.take(order)
    return table
