"""The work directory is clusterclip's alone: a marker says so, one writer holds a lock.

Found by a tester (issue 29): ``clusterclip run data/good.jsonl --workdir data``
replaced the user's ``data/report.html`` and ``data/documents.parquet`` and
deleted ``data/embeddings/notes.txt`` with exit 0; a foreign ``manifest.json``
was merged into; two runs with different options on one work directory both
exited 0 and one printed a summary mixing the two.

Every case runs the real ``clusterclip`` command (in-process through
:func:`clusterclip.cli.main`, or as a subprocess where a second process is the
point) on the first 300 verses of the bundled King James Bible with the
tf-idf encoder.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clusterclip.cli import main
from tests.abuse.support import FAST, call, env
from tests.product_support import kjv_records, require_module

MARKER = ".clusterclip-workdir"
LOCK = ".clusterclip-lock"

#: A process that takes the work directory's lock through the public API, says so, then
#: either waits for a line on stdin (and releases it) or dies holding it (SIGKILL).
HOLDER = """
import os, signal, sys
from clusterclip.io import WorkDir
held = WorkDir(sys.argv[1]).lock()
held.__enter__()
print("held", flush=True)
if sys.argv[2] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.readline()
held.__exit__(None, None, None)
"""


def refused(code: int, err: str, *needles: str) -> None:
    """Exit status 2, one ``error:`` line holding every needle, no traceback."""
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and ": error: " in err, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in:\n{err}"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative name -> bytes), and every folder (-> b"/")."""
    return {
        str(p.relative_to(folder)): (b"/" if p.is_dir() else p.read_bytes())
        for p in sorted(folder.rglob("*"))
    }


def write_corpus(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def verses() -> list[dict]:
    require_module("sklearn")  # the tfidf encoder
    require_module("pyarrow")
    return kjv_records(step=1, limit=300)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, verses) -> Path:
    """A finished ``clusterclip run`` (root/verses.jsonl, root/work); copy it before writing."""
    root = tmp_path_factory.mktemp("finished")
    write_corpus(root / "verses.jsonl", verses)
    code = main(["run", str(root / "verses.jsonl"), "--workdir", str(root / "work"), *FAST])
    assert code == 0
    return root


@pytest.fixture
def root(finished, tmp_path) -> Path:
    """A private copy of the finished run."""
    shutil.copytree(finished, tmp_path / "root")
    return tmp_path / "root"


def run_args(root: Path, *extra: str) -> list[str]:
    return ["run", str(root / "verses.jsonl"), "--workdir", str(root / "work"), *FAST, *extra]


# ------------------------------------------------------------------ the marker


def test_a_folder_of_user_files_is_refused_and_left_byte_identical(tmp_path, verses, capsys):
    data = tmp_path / "data"
    write_corpus(data / "good.jsonl", verses)
    (data / "report.html").write_text("<p>my own report</p>")
    (data / "documents.parquet").write_bytes(b"my own table, not parquet at all")
    (data / "embeddings").mkdir()
    (data / "embeddings" / "notes.txt").write_text("my notes")
    before = snapshot(data)
    code, out, err = call(capsys, "run", str(data / "good.jsonl"), "--workdir", str(data), *FAST)
    refused(
        code, err, f"`--workdir` must be a new or empty directory, or one clusterclip made; "
        f"got '{data}'", "documents.parquet, embeddings/, good.jsonl, report.html",
        "Pass an empty or new --workdir", f"--workdir {data / 'clusterclip-work'}",
    )  # fmt: skip
    assert snapshot(data) == before  # nothing written, replaced or deleted; no marker either


def test_a_crowded_folder_is_named_by_a_few_files_and_a_count(
    tmp_path, verses, capsys, monkeypatch
):
    write_corpus(tmp_path / "corpus.jsonl", verses)
    for i in range(8):
        (tmp_path / f"photo-{i}.jpg").write_bytes(b"\xff\xd8" + bytes([i]))
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, _, err = call(capsys, "run", "corpus.jsonl", "--workdir", ".", *FAST)
    refused(code, err, "(corpus.jsonl, photo-0.jpg, photo-1.jpg, photo-2.jpg, photo-3.jpg "
            "and 4 more)", "--workdir clusterclip-work")  # fmt: skip
    assert snapshot(tmp_path) == before


def test_a_foreign_manifest_is_refused_not_merged(tmp_path, verses, capsys):
    write_corpus(tmp_path / "corpus.jsonl", verses)
    app = tmp_path / "app"
    app.mkdir()
    manifest = {"name": "my-web-app", "version": "1.0", "icons": []}
    (app / "manifest.json").write_text(json.dumps(manifest))
    before = snapshot(app)
    code, _, err = call(capsys, "run", str(tmp_path / "corpus.jsonl"), "--workdir", str(app), *FAST)
    refused(code, err, "Its manifest.json was not written by clusterclip", "neither merge")
    assert snapshot(app) == before


def test_a_foreign_manifest_in_a_marked_directory_is_refused_not_merged(root, capsys):
    foreign = json.dumps({"name": "my-web-app", "stages": {}}).encode()
    (root / "work" / "manifest.json").write_bytes(foreign)
    code, _, err = call(capsys, *run_args(root, "--seed", "1"))
    refused(code, err, f"{root / 'work' / 'manifest.json'} was not written by clusterclip")
    assert (root / "work" / "manifest.json").read_bytes() == foreign


def test_a_new_directory_gets_the_marker(root):
    marker = json.loads((root / "work" / MARKER).read_text())
    assert marker["clusterclip_workdir"] == 1


def test_a_work_directory_of_an_earlier_version_is_adopted_and_stays_fresh(root, capsys):
    """Made before the marker (and with inputs keyed by path): adopted, nothing redone."""
    work = root / "work"
    (work / MARKER).unlink()
    manifest = json.loads((work / "manifest.json").read_text())
    embed = manifest["stages"]["embed"]
    embed["inputs"] = {embed["sources"][0]: embed["inputs"]["corpus file 1"]}  # the old keys
    embed.pop("located")
    (work / "manifest.json").write_text(json.dumps(manifest))
    parts = snapshot(work / "embeddings")
    code, out, err = call(capsys, *run_args(root))
    assert code == 0, err
    for stage in ("embed", "cluster", "dedup", "schedule"):
        assert f"{stage:<9} skipped (up to date" in out, out
    assert (work / MARKER).exists()
    assert snapshot(work / "embeddings") == parts


# ------------------------------------------------------------------ only our own files


def test_a_redone_embed_stage_keeps_a_users_file_in_embeddings(root, capsys):
    notes = root / "work" / "embeddings" / "notes.txt"
    notes.write_text("why these settings")
    code, out, err = call(capsys, *run_args(root, "--shard-size", "100"))  # redoes embed
    assert code == 0, err
    assert "embed     ran" in out and "shard_size: 20000 -> 100" in out
    assert notes.read_text() == "why these settings"
    assert sorted(p.name for p in notes.parent.glob("part-*.npy")) == [
        "part-00000.npy", "part-00001.npy", "part-00002.npy"
    ]  # fmt: skip
    code, _, err = call(capsys, "embed", str(root / "verses.jsonl"), "--workdir",
                        str(root / "work"), "--encoder", "tfidf", "--overwrite")  # fmt: skip
    assert code == 0, err
    assert notes.read_text() == "why these settings"
    assert [p.name for p in notes.parent.glob("part-*.npy")] == ["part-00000.npy"]


# ------------------------------------------------------------------ the lock


def hold(workdir: Path, how: str) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workdir), how],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env(),
    )  # fmt: skip
    assert holder.stdout.readline() == "held\n"
    return holder


def release(holder: subprocess.Popen) -> None:
    holder.communicate("go\n", timeout=60)
    assert holder.returncode == 0


def test_a_second_writer_is_refused_naming_the_holder(root, capsys):
    work = root / "work"
    before = snapshot(work)
    holder = hold(work, "wait")
    try:
        code, out, err = call(capsys, *run_args(root, "--seed", "1"))
        refused(
            code, err, f"work directory {work} is being written by another clusterclip process: "
            f"pid {holder.pid} on host {socket.gethostname()}", "since 20",
            f"lock file {work / LOCK}", "Wait for it to finish, or use another --workdir",
        )  # fmt: skip
        assert out == ""
        lock = json.loads((work / LOCK).read_text())
        assert lock["pid"] == holder.pid and lock["command"].endswith(f"{work} wait")
        # Read-only commands take no lock.
        code, out, err = call(capsys, "inspect", "--workdir", str(work), "--json")
        assert code == 0, err
    finally:
        release(holder)
    assert snapshot(work) == before  # the refused run wrote nothing; the holder left no lock
    code, out, err = call(capsys, *run_args(root, "--seed", "1"))
    assert code == 0, err


def test_a_stale_lock_of_a_dead_process_is_taken_over(root, capsys):
    work = root / "work"
    holder = hold(work, "die")
    holder.wait(timeout=60)
    assert holder.returncode == -signal.SIGKILL
    assert json.loads((work / LOCK).read_text())["pid"] == holder.pid  # left behind
    code, out, err = call(capsys, *run_args(root, "--seed", "1"))
    assert code == 0, err
    assert f"took over {work / LOCK} from pid {holder.pid} on host " in out
    assert "that process is no longer running" in out
    assert not (work / LOCK).exists()


def test_a_lock_copied_with_the_directory_does_not_block_the_copy(root, tmp_path, capsys):
    holder = hold(root / "work", "wait")
    try:
        shutil.copytree(root / "work", tmp_path / "copy")
        code, out, err = call(capsys, "run", str(root / "verses.jsonl"), "--workdir",
                              str(tmp_path / "copy"), *FAST, "--seed", "1")  # fmt: skip
        assert code == 0, err
        assert f"it was copied from {(root / 'work').resolve()}" in out
    finally:
        release(holder)
