"""A run killed with SIGKILL resumes from its finished shards, byte-identical to a clean run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from embed_helpers import write_jsonl

import clusterclip
from clusterclip.io import read_stage

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
