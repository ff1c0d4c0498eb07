"""The LitData export's engine tasks on Ray against the local engine (run inside ``.venvs/litdata``).

    .venvs/litdata/bin/python -m tests.clients.litdata_ray_check ROOT

On a KJV work directory, with tasks small enough that a dozen writers share
the export (``LITDATA_TASK_BYTES`` and the read tasks' size are planned on the
driver, so setting them here reaches both engines):

1. the local engine's export is read back by the real ``StreamingDataset``:
   every item holds its draw, and one process with two DataLoader workers
   reads the schedule in order across the writers' chunks;
2. the Ray engine (a local instance on 127.0.0.1, 2 actors) writes the same
   files byte for byte (``index.json`` but for LitData's ``updated_at``), while
   an actor dies during the chunk tasks and the driver refuses to read a text
   or write a chunk.

Exits non-zero with the reason on the first failure.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
from pathlib import Path

TASK_BYTES = 4000  # text bytes per chunk task: a dozen tasks on the sample
TOPOLOGY = {"world_size": 1, "num_workers": 2, "batch_size": 4, "chunk_bytes": 1500}
REPO = str(Path(__file__).resolve().parents[2])


def _files(out: Path) -> dict[str, bytes]:
    """Every file of an export, comparable across runs and folders."""
    files = {}
    for path in sorted(out.iterdir()):
        data = path.read_bytes()
        if path.name in ("index.json", "clusterclip.json"):
            content = json.loads(data)
            content.pop("updated_at", None)  # LitData's merge time
            content.pop("workdir", None)
            data = json.dumps(content, sort_keys=True).encode()
        files[path.name] = data
    return files


def _export(workdir: Path, out: Path, **engine) -> dict:
    from clusterclip.adapters.litdata_export import export_litdata

    with contextlib.redirect_stderr(io.StringIO()):
        return export_litdata(workdir, out, **TOPOLOGY, **engine)


def check_local(made: dict, out: Path) -> dict:
    from tests.clients.litdata_check import _read, check_samples

    summary = _export(made["workdir"], out)
    writers = {name.split("-")[1] for name in os.listdir(out) if name.startswith("chunk-")}
    if len(writers) < 5:
        raise SystemExit(f"the export was written by {sorted(writers)}, want several tasks")
    check_samples(made, out)
    batches, _ = _read(out, workers=TOPOLOGY["num_workers"], batch=TOPOLOGY["batch_size"])
    flat = [p for b in batches for p in b]
    if flat != list(range(len(made["indices"]))):
        raise SystemExit(
            f"the {len(writers)} writers' chunks read {flat[:12]}..., not the schedule"
        )
    return summary


def check_ray(made: dict, local: Path, summary: dict, root: Path) -> int:
    import ray

    import clusterclip.adapters.litdata_chunks as chunks
    import clusterclip.adapters.litdata_export as litdata
    import clusterclip.io
    from tests.engines.workers import KillOnce, wrapping

    marker = root / "killed"
    kill = functools.partial(KillOnce, marker=str(marker))
    litdata.map_shards = wrapping(litdata.map_shards, kill)

    def refused(*args, **kwargs):
        raise AssertionError("the driver read a text or wrote a chunk")

    clusterclip.io.WorkDir.record_store = refused
    chunks.ChunkWorker.__call__ = refused  # the actors import their own copy
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        options = {"num_workers": 2, "max_in_flight": 3}
        got = _export(made["workdir"], root / "ray", engine="ray", engine_options=options)
    finally:
        ray.shutdown()
    if not marker.read_text().startswith("killed worker pid"):
        raise SystemExit("no actor was killed")
    same = {"out": "", "bytes": 0}  # the bytes count index.json's merge time
    if {**got, **same} != {**summary, **same}:
        raise SystemExit(f"Ray returned {got}, the local engine {summary}")
    ours, theirs = _files(root / "ray"), _files(local)
    if sorted(ours) != sorted(theirs):
        raise SystemExit(f"Ray wrote {sorted(ours)}, the local engine {sorted(theirs)}")
    for name, data in theirs.items():
        if ours[name] != data:
            raise SystemExit(f"{name} differs between Ray and the local engine")
    return len(ours)


def main(argv: list[str]) -> int:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray is imported
    os.environ["PYTHONPATH"] = REPO  # the actors import tests.engines.workers
    import clusterclip.adapters.litdata_chunks as chunks
    import clusterclip.adapters.tokenizing as tokenizing
    from tests.product_support import make_workdir

    root = Path(argv[0])
    made = make_workdir(root / "kjv", step=150, max_repeats=2, epochs=1.6)
    chunks.LITDATA_TASK_BYTES = TASK_BYTES
    tokenizing.TOKENIZE_TASK_DOCUMENTS = 50
    summary = check_local(made, root / "local")
    files = check_ray(made, root / "local", summary, root)
    print(
        f"litdata ray check: ok ({len(made['indices'])} draws, {summary['chunks']} chunks of "
        f"several writers read back in schedule order; Ray wrote the same {files} files with "
        "an actor killed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
