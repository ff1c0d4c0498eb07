"""A run killed with SIGKILL resumes from its finished shards, byte-identical to a clean run."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from embed_helpers import write_jsonl

import clusterclip
from clusterclip.embed.encoders import EncoderSpec
from clusterclip.embed.worker import ShardWorker
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir, read_stage
from clusterclip.io.artifacts import DocumentsArtifact
from clusterclip.io.readplan import plan_reads

SCRIPT = """
import sys
import clusterclip
clusterclip.embed(sys.argv[1], workdir=sys.argv[2], encoder="tfidf", shard_size=50)
"""


def _run_and_kill(corpus: Path, workdir: Path, *, after_parts: int) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(corpus), str(workdir)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    parts = workdir / "embeddings"
    while time.monotonic() < deadline and process.poll() is None:
        if parts.is_dir() and len(list(parts.glob("part-*.npy"))) >= after_parts:
            break
        time.sleep(0.005)
    finished = process.poll() is not None
    process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate()
    if finished:
        pytest.fail(f"the run ended before it could be killed: {stderr.decode()[-2000:]}")


def test_resume_after_sigkill_is_byte_identical(tmp_path, verses):
    corpus = write_jsonl(tmp_path / "verses.jsonl", verses[:1000])
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    _run_and_kill(corpus, killed, after_parts=3)
    assert read_stage(killed, "embed") is None  # the kill left an unfinished stage
    done_before = len(list((killed / "embeddings").glob("part-*.npy")))
    assert 3 <= done_before < 20

    resumed = clusterclip.embed(corpus, workdir=killed, encoder="tfidf", shard_size=50)
    assert resumed.summary["shards_resumed"] >= done_before - 1  # the last may be half-written
    clusterclip.embed(corpus, workdir=clean, encoder="tfidf", shard_size=50)

    names = sorted(p.name for p in (clean / "embeddings").glob("part-*.npy"))
    assert len(names) == 20
    assert names == sorted(p.name for p in (killed / "embeddings").glob("part-*.npy"))
    for name in names:
        assert (killed / "embeddings" / name).read_bytes() == (
            clean / "embeddings" / name
        ).read_bytes(), name
    for name in ("documents.parquet", "rejects.jsonl", "embed-tfidf.npz"):
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name
    assert not list(killed.glob("**/.*.tmp"))  # no temporary files left behind
    killed_entry, clean_entry = read_stage(killed, "embed"), read_stage(clean, "embed")
    assert killed_entry["outputs"] == clean_entry["outputs"]


def test_a_finished_shard_is_not_read_again(tmp_path, verses):
    """Resume takes a finished shard's statistics from its fragment: no record is read."""
    lines = [json.dumps({"text": v["text"]}) for v in verses[:300]]
    lines[7], lines[130] = "{not json", json.dumps({"text": ""})  # two rejects, shard 0 and 1
    corpus = tmp_path / "verses.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    workdir = tmp_path / "work"
    clusterclip.embed(corpus, workdir=workdir, encoder="tfidf", shard_size=128)
    spec = EncoderSpec(encoder="tfidf", state_dir=str(workdir))
    read_options = {"text_field": None, "id_field": None, "strict": False}
    worker = ShardWorker(spec, str(workdir), read_options)
    tasks = list(plan_reads([corpus]).shards(128))
    written = [worker(task) for task in tasks]  # as the stage's tasks wrote them
    assert sum(stats.counts["ok"] for stats, _ in written) == 298

    moved = corpus.rename(tmp_path / "elsewhere.jsonl")  # reading a record would now fail
    again = [worker(dataclasses.replace(task, write=False)) for task in tasks]
    assert [(s.to_dict(), h) for s, h in again] == [(s.to_dict(), h) for s, h in written]
    assert again[0][0].examples["malformed"].startswith(f"{corpus}:8:")

    moved.rename(corpus)  # a fragment from before the statistics were kept: read again
    documents = DocumentsArtifact(WorkDir(workdir))
    columns = documents.read_fragment(documents.fragment_path(1)).to_pydict()
    documents.write_fragment(1, columns)
    assert documents.fragment_notes(1) is None
    legacy, _ = worker(dataclasses.replace(tasks[1], write=False))
    assert legacy.to_dict() == written[1][0].to_dict()
    corpus.unlink()
    with pytest.raises(ClusterClipError, match="cannot open"):  # so the test above read none
        worker(dataclasses.replace(tasks[1], write=False))


def test_a_lost_workers_temp_file_is_gone_when_the_stage_ends(tmp_path, verses, monkeypatch):
    """A worker killed between writing a part's temp file and renaming it (its node
    removed; the task ran again elsewhere) leaves that temp file while the stage goes
    on: once every task is done, the stage deletes it."""
    import clusterclip.embed.job as job

    real = job.embed_shards

    def and_a_lost_worker(plan, *args, **kwargs):
        result = real(plan, *args, **kwargs)
        lost = plan.parts / ".part-00001.npy.q8x2k1vz.tmp"  # as io.files.atomic names them
        lost.write_bytes((plan.parts / "part-00001.npy").read_bytes())
        return result

    monkeypatch.setattr(job, "embed_shards", and_a_lost_worker)
    corpus = write_jsonl(tmp_path / "verses.jsonl", verses[:200])
    result = clusterclip.embed(corpus, workdir=tmp_path / "w", encoder="tfidf", shard_size=50)
    assert result.summary["shards"] == 4
    assert sorted(p.name for p in (tmp_path / "w" / "embeddings").iterdir()) == [
        f"part-{i:05d}.npy" for i in range(4)
    ]
