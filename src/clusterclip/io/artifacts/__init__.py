"""One handle per artifact of a work directory, each owning its schema, writer, readers and freshness.

==========================  ==========================================  ================
handle                      files                                       written by
==========================  ==========================================  ================
:class:`DocumentsArtifact`  ``documents.parquet``, ``rejects.jsonl``,   embed
                            task fragments in ``.embed-state/``
:class:`EmbeddingsArtifact` ``embeddings/part-NNNNN.npy`` (one a task)  embed
:class:`ClustersArtifact`   ``clusters.parquet`` (``level_*`` columns), cluster
                            task parts in ``.cluster-state/``
:class:`CentroidsArtifact`  ``centroids.npy``                           cluster
:class:`LevelCentroidsArtifact` ``level_centroids.npz``                 cluster
:class:`DuplicatesArtifact` ``duplicates.parquet``                      dedup
:class:`ScheduleArtifact`   ``schedule.npy`` + ``schedule.json``        schedule
:class:`ReportArtifact`     ``report.json`` + ``report.html``           report
:class:`RecordsArtifact`    ``records/`` (documents' original bytes)    exports, on demand
:class:`KeywordState`       ``.keyword-state/RUN/`` (a description's    report, inspect
                            plan and word counts, while it runs)
==========================  ==========================================  ================

A stage writes through its handles and a reader reads through them (or
through :class:`~clusterclip.io.WorkDir`'s accessors, which delegate here), so
a column name or file layout is spelled in one module. The documents and
embeddings are written one task at a time (``write_fragment(task, rows)``,
``write_part(task, rows)``: atomic files named by task id), and so are the
assignment's labels (``ClustersArtifact.write_part``), so many workers can write
at once and the driver only plans.

Examples
--------
>>> from clusterclip.io.artifacts import ClustersArtifact, ScheduleArtifact
>>> labels = ClustersArtifact("work").labels()  # doctest: +SKIP
>>> order = ScheduleArtifact("work").read().indices  # doctest: +SKIP
"""

from clusterclip.io.artifacts.base import Artifact, arrow_schema
from clusterclip.io.artifacts.clusters import (
    CLUSTER_COLUMNS,
    LEVEL_PREFIX,
    CentroidsArtifact,
    ClustersArtifact,
    LevelCentroidsArtifact,
    level_column,
)
from clusterclip.io.artifacts.documents import (
    DOCUMENT_COLUMNS,
    FRAGMENT_COLUMNS,
    DocumentsArtifact,
)
from clusterclip.io.artifacts.duplicates import DUPLICATE_COLUMNS, DuplicatesArtifact
from clusterclip.io.artifacts.embeddings import EMBEDDING_DTYPE, EmbeddingsArtifact
from clusterclip.io.artifacts.keywords import KeywordState
from clusterclip.io.artifacts.records import RecordsArtifact
from clusterclip.io.artifacts.report import ReportArtifact
from clusterclip.io.artifacts.schedule import (
    SCHEDULE_FORMAT,
    ScheduleArtifact,
    ScheduleFile,
    read_schedule_files,
    sidecar_path,
    write_schedule_files,
)

__all__ = [
    "CLUSTER_COLUMNS",
    "DOCUMENT_COLUMNS",
    "DUPLICATE_COLUMNS",
    "EMBEDDING_DTYPE",
    "FRAGMENT_COLUMNS",
    "LEVEL_PREFIX",
    "SCHEDULE_FORMAT",
    "Artifact",
    "CentroidsArtifact",
    "ClustersArtifact",
    "DocumentsArtifact",
    "DuplicatesArtifact",
    "EmbeddingsArtifact",
    "KeywordState",
    "LevelCentroidsArtifact",
    "RecordsArtifact",
    "ReportArtifact",
    "ScheduleArtifact",
    "ScheduleFile",
    "arrow_schema",
    "level_column",
    "read_schedule_files",
    "sidecar_path",
    "write_schedule_files",
]
