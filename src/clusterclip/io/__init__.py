"""Everything that touches files: corpus readers, the work directory and its artifacts.

:class:`WorkDir` is the one owner of a work directory: no other module spells
its file names or opens them. What is inside each file (schema, writer, readers,
freshness) belongs to its handle in :mod:`clusterclip.io.artifacts`. Atomic writes and fingerprints live in
:mod:`clusterclip.io.files`; corpus readers in :mod:`clusterclip.io.readers`.
Importing this package is cheap (numpy only).
"""

from clusterclip.io.files import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    fingerprint_array,
    fingerprint_file,
    human_bytes,
    json_default,
    versions,
)
from clusterclip.io.workdir import (
    ARTIFACTS,
    STAGE_COMMANDS,
    ScheduleFile,
    WorkDir,
    check_upstream,
    corpus_key,
    read_manifest,
    read_stage,
    register_artifacts,
    require_stage,
    write_stage,
)

__all__ = [
    "ARTIFACTS",
    "STAGE_COMMANDS",
    "ScheduleFile",
    "WorkDir",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "check_upstream",
    "corpus_key",
    "fingerprint_array",
    "fingerprint_file",
    "human_bytes",
    "json_default",
    "read_manifest",
    "read_stage",
    "register_artifacts",
    "require_stage",
    "versions",
    "write_stage",
]
