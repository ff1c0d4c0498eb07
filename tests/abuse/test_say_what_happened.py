"""The command says what happened: progress without a terminal, stops, and what it changed.

Every case runs the real ``clusterclip`` command (a subprocess, as a user or a
CI job runs it; ``--help`` in-process) on verses of the bundled King James
Bible, and checks what the user reads: stderr while it works, the summary, and
``report.json`` / ``report.html``, against counts taken from the inputs and the
work directory's own files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clusterclip.cli import main
from tests.product_support import kjv_records, require_module

SRC = Path(__file__).resolve().parents[2] / "src"
FAST = ["--encoder", "tfidf", "--n-clusters", "3", "--backend", "numpy"]
#: The stages of `clusterclip run` with near-duplicate groups and the report, in order.
STAGES = ("embed", "cluster", "dedup", "schedule", "report")
LATIN1_LINE = 5  # the line of b.jsonl that holds a Latin-1 byte
COPIES = 4  # exact copies of each of the first verses: near-duplicate groups of 5


def env(progress: str | None = "0") -> dict[str, str]:
    """The environment of the command; ``progress=None`` leaves CLUSTERCLIP_PROGRESS unset."""
    found = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    found.pop("CLUSTERCLIP_PROGRESS", None)
    if progress is not None:
        found["CLUSTERCLIP_PROGRESS"] = progress
    return found


def clusterclip(*args: str, cwd: Path, progress: str | None = "0") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "clusterclip", *args], cwd=cwd, env=env(progress),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def start(*args: str, cwd: Path, progress: str | None = "0") -> subprocess.Popen:
    """The command started with stdout and stderr as pipes (not a terminal)."""
    return subprocess.Popen(
        [sys.executable, "-m", "clusterclip", *args], cwd=cwd, env=env(progress),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


@pytest.fixture(scope="module")
def verses() -> list[dict]:
    require_module("sklearn")  # the tfidf encoder
    require_module("pyarrow")
    return kjv_records(step=1, limit=400)


@pytest.fixture
def small(tmp_path, verses) -> Path:
    """A folder with ``verses.jsonl``: 300 clean verses."""
    (tmp_path / "verses.jsonl").write_bytes(jsonl(verses[:300]))
    return tmp_path


# --------------------------------------------------------------------------- progress


@pytest.mark.slow
def test_progress_lines_on_stderr_without_a_terminal_by_default(small):
    done = clusterclip("run", "verses.jsonl", "--workdir", "w", *FAST, "--no-report",
                       cwd=small, progress=None)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    for step in ("embed", "k-means", "schedule"):
        assert f"progress: {step}: started" in "\n".join(lines), done.stderr
        assert any(line.startswith(f"progress: {step}: done, ") for line in lines), done.stderr
    assert "\r" not in done.stderr  # plain lines, no terminal bar
    assert "progress:" not in done.stdout  # the summary stays clean
    quiet = clusterclip("run", "verses.jsonl", "--workdir", "w2", *FAST, "--no-report",
                        cwd=small, progress="0")  # fmt: skip
    assert quiet.returncode == 0 and "progress:" not in quiet.stderr


@pytest.mark.slow
def test_progress_interval_comes_from_the_setting(small):
    """``CLUSTERCLIP_PROGRESS=0s``: a line at every step of the work (the interval is 0 s)."""
    done = clusterclip("run", "verses.jsonl", "--workdir", "w", *FAST, "--no-report",
                       cwd=small, progress="0s")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "progress: embed: 300 of 300 doc (100%) after " in done.stderr
    assert "progress: k-means: 1 of 20 iter (5%) after " in done.stderr


@pytest.mark.parametrize("command", ["run", "demo", "embed", "cluster", "dedup", "schedule"])
def test_help_says_how_to_silence_progress(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "CLUSTERCLIP_PROGRESS=0 silences it" in out
    assert "CLUSTERCLIP_PROGRESS=10s sets the interval" in out


# --------------------------------------------------------------------------- stops


@pytest.mark.slow
def test_broken_pipe_finishes_the_run_and_says_so(small):
    """`clusterclip run ... | head -n 2`: the run goes on to the end and says what ran."""
    process = start("run", "verses.jsonl", "--workdir", "w", *FAST, "--epochs", "2", cwd=small)
    first = [process.stdout.readline() for _ in range(2)]
    process.stdout.close()  # head -n 2 leaves
    err = process.stderr.read()
    process.wait(timeout=600)
    assert first[0].startswith("embed ") and first[1].startswith("cluster ")
    assert process.returncode == 141, err
    assert "clusterclip run: stdout was closed after " in err
    assert "the run went on: every stage finished (embed ran, cluster ran, dedup ran, " \
        "schedule ran, report ran)" in err  # fmt: skip
    assert "Traceback" not in err
    for name in ("schedule.npy", "schedule.json", "report.html", "report.json"):
        assert (small / "w" / name).is_file(), name


@pytest.mark.slow
@pytest.mark.parametrize(
    "signal_name, status, said",
    [("SIGINT", 130, "interrupted (Ctrl-C)"), ("SIGTERM", 143, "terminated (SIGTERM)")],
)
def test_a_stopped_run_says_which_stages_did_not_run(small, signal_name, status, said):
    args = ("run", "verses.jsonl", "--workdir", "w", *FAST, "--epochs", "2")
    process = start(*args, cwd=small, progress="60s")
    for line in process.stderr:  # stop it once the embed stage is under way
        if line.startswith("progress: embed: started"):
            process.send_signal(getattr(signal, signal_name))
            break
    out, err = process.communicate(timeout=600)
    assert process.returncode == status, err
    assert f"clusterclip run: {said}: " in err
    assert "Traceback" not in err
    stopped = err.split(f"{said}: ", 1)[1]
    assert "stopped part-way" in stopped and "not run: " in stopped
    assert stopped.split("not run: ", 1)[1].split(".")[0].endswith("report")
    assert "Rerun the same command to finish" in stopped
    rerun = clusterclip(*args, cwd=small)  # what the message promises
    assert rerun.returncode == 0, rerun.stderr
    assert "clusterclip run: done" in rerun.stdout
