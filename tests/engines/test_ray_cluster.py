"""The embed stage on a 3-node Ray cluster: workers read and write, the driver reads no text.

A ``ray.cluster_utils.Cluster`` of three raylets with 1 CPU each (bound to
127.0.0.1, ``conftest.py``) runs the embed stage over two jsonl files and one
parquet file, cut into many read ranges. The drivers run in their own
processes (``measured_driver.py``), so what they read can be measured:

- the work directory equals the local engine's, byte for byte;
- the Ray driver opens no corpus file and reads far fewer bytes than the
  corpus holds, while the local engine's driver (the control) reads it all.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import clusterclip
from tests.engines.conftest import ROOT, local_cluster
from tests.engines.results import read_result

pytest.importorskip("ray")

SHARD_SIZE = 64
RANGE_BYTES = 256 << 10  # several read ranges per jsonl file
N_NODES = 3


@pytest.fixture(scope="module")
def cluster():
    """Three raylets of 1 CPU each; its address. Drivers connect from their own processes."""
    with local_cluster(head_cpus=1, worker_nodes=N_NODES - 1) as nodes:
        yield nodes.address


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Path]:
    """About 400 long documents (~30 kB each, ~12 MB) in 2 jsonl files and 1 parquet file."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = Path(clusterclip.__file__).parent / "data" / "kjv-verses.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        verses = [json.loads(line)["text"] for _, line in zip(range(24_000), lines, strict=False)]
    texts = [" ".join(verses[i * 60 : (i + 1) * 60]) * 3 for i in range(400)]
    folder = tmp_path_factory.mktemp("corpus")
    paths = [folder / "a.jsonl", folder / "b.jsonl", folder / "c.parquet"]
    for path, chunk in zip(paths[:2], (texts[:150], texts[150:300]), strict=True):
        with open(path, "w", encoding="utf-8") as out:
            for number, text in enumerate(chunk):
                out.write(json.dumps({"text": text, "id": f"{path.stem}{number}"}) + "\n")
                if number == 40:
                    out.write('{"text": "malformed\n\n')  # a rejected record and a blank line
    table = pa.table({"text": texts[300:], "id": [f"c{i}" for i in range(100)]})
    pq.write_table(table, paths[2], row_group_size=30)
    return paths


def _drive(corpus, workdir: Path, engine: str, engine_options: dict) -> dict:
    settings = {
        "inputs": [str(p) for p in corpus], "workdir": str(workdir), "engine": engine,
        "engine_options": engine_options, "shard_size": SHARD_SIZE, "range_bytes": RANGE_BYTES,
    }  # fmt: skip
    env = dict(os.environ, CLUSTERCLIP_PROGRESS="0", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, str(Path(ROOT) / "src")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "tests.engines.measured_driver", json.dumps(settings)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return read_result(done.stdout)


@pytest.fixture(scope="module")
def local_run(corpus, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("local") / "w"
    return workdir, _drive(corpus, workdir, "local", {})


@pytest.fixture(scope="module")
def ray_run(cluster, corpus, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ray") / "w"
    # one actor per node (each takes the node's only CPU), 7 shard tasks spread over them
    options = {"address": cluster, "num_workers": N_NODES, "max_in_flight": 2 * N_NODES}
    return workdir, _drive(corpus, workdir, "ray", options)


def _files(workdir: Path) -> dict[str, bytes]:
    skipped = {"manifest.json", ".input-fingerprints.json", ".clusterclip-workdir"}
    return {
        str(path.relative_to(workdir)): path.read_bytes()
        for path in sorted(workdir.rglob("*"))
        if path.is_file() and path.name not in skipped
    }


def test_three_nodes_write_the_local_engines_bytes(local_run, ray_run):
    (local_dir, _), (ray_dir, _) = local_run, ray_run
    ours, theirs = _files(ray_dir), _files(local_dir)
    assert sorted(ours) == sorted(theirs)
    assert sum(name.startswith("embeddings/part-") for name in ours) == 7  # 401 documents
    for name, data in theirs.items():
        assert ours[name] == data, name
    summary = clusterclip.io.read_stage(ray_dir, "embed")["summary"]
    assert summary["counts"]["malformed"] == 2 and summary["blank_lines"] == 2
    assert summary == {**clusterclip.io.read_stage(local_dir, "embed")["summary"],
                       "seconds": summary["seconds"],
                       "docs_per_second": summary["docs_per_second"]}  # fmt: skip


def test_the_ray_driver_reads_no_text(corpus, local_run, ray_run):
    corpus_bytes = sum(path.stat().st_size for path in corpus)
    (_, local), (_, ray) = local_run, ray_run
    # the control: the local engine reads the corpus in the driver's process
    assert len(local["opened"]) >= 2 and local["read_bytes"] > corpus_bytes
    assert ray["opened"] == []
    # what it does read: the index fragments, npy headers, package metadata (~0.5 MB here)
    assert ray["read_bytes"] < corpus_bytes / 5, (ray["read_bytes"], corpus_bytes)
