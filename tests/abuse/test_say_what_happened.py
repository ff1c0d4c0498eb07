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
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
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
    """The command started with stdout and stderr as pipes (not a terminal).

    Ctrl-C is given its default action in the child, as in a terminal: a test
    run started in the background by a shell (``make test &``, nohup) inherits
    SIGINT ignored, and Python then never raises KeyboardInterrupt.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "clusterclip", *args], cwd=cwd, env=env(progress),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
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


def many_verses(folder: Path) -> Path:
    """``folder/verses.jsonl`` with 10,000 verses.

    A run over them takes seconds after each stage starts, so a signal or a
    closed pipe lands part-way even on a loaded machine (300 verses could
    finish before the test's next step).
    """
    require_module("sklearn")  # the tfidf encoder
    (folder / "verses.jsonl").write_bytes(jsonl(kjv_records(step=3)))
    return folder


@pytest.mark.slow
def test_broken_pipe_finishes_the_run_and_says_so(tmp_path):
    """`clusterclip run ... | head -n 2`: the run goes on to the end and says what ran."""
    small = many_verses(tmp_path)
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
def test_a_stopped_run_says_which_stages_did_not_run(tmp_path, signal_name, status, said):
    many_verses(tmp_path)
    args = ("run", "verses.jsonl", "--workdir", "w", *FAST, "--epochs", "2")
    process = start(*args, cwd=tmp_path, progress="60s")
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
    rerun = clusterclip(*args, cwd=tmp_path)  # what the message promises
    assert rerun.returncode == 0, rerun.stderr
    assert "clusterclip run: done" in rerun.stdout


# --------------------------------------------------------------------------- what was changed


@pytest.fixture(scope="module")
def changed(tmp_path_factory, verses) -> dict:
    """Two real runs over a corpus with a Latin-1 byte, a hidden file and exact copies.

    ``corpus/*.jsonl`` (a glob: it skips ``corpus/.draft.jsonl``); run A clips at
    one repeat and stops (the copies withhold documents); run B, on the same work
    directory, continues with random passes past the cap.
    """
    root = tmp_path_factory.mktemp("changed")
    corpus = root / "corpus"
    corpus.mkdir()
    copies = [{**v, "id": f"copy-{k}-{v['id']}"} for v in verses[:6] for k in range(COPIES)]
    (corpus / "a.jsonl").write_bytes(jsonl(verses[:300] + copies))
    latin = jsonl(verses[300:400]).split(b"\n")
    latin[LATIN1_LINE - 1] = latin[LATIN1_LINE - 1].replace(b'"text": "', b'"text": "caf\xe9 ')
    (corpus / "b.jsonl").write_bytes(b"\n".join(latin))
    (corpus / ".draft.jsonl").write_bytes(jsonl(verses[:10]))
    args = ["run", "corpus/*.jsonl", "--workdir", "work", *FAST]
    run_a = clusterclip(*args, "--max-repeats", "1", "--epochs", "1", cwd=root)
    assert run_a.returncode == 0, run_a.stderr
    work = root / "work"
    found = {
        "root": root,
        "stdout_a": run_a.stdout,
        "report_a": json.loads((work / "report.json").read_text()),
        "html_a": (work / "report.html").read_text(),
        "schedule_a": np.load(work / "schedule.npy"),
    }
    run_b = clusterclip(*args, "--max-repeats", "1", "--epochs", "3", "--on-exhausted",
                        "random", cwd=root)  # fmt: skip
    assert run_b.returncode == 0, run_b.stderr
    found.update(
        stdout_b=run_b.stdout,
        report_b=json.loads((work / "report.json").read_text()),
        html_b=(work / "report.html").read_text(),
        schedule_b=np.load(work / "schedule.npy"),
        meta_b=json.loads((work / "schedule.json").read_text()),
    )
    return found


@pytest.mark.slow
def test_invalid_utf8_is_a_warning_with_its_first_line_and_counted(changed):
    where = f"corpus/b.jsonl:{LATIN1_LINE}"
    line = f"warning:     invalid UTF-8 replaced by U+FFFD on 1 line(s), first at {where}"
    assert line in changed["stdout_a"]
    assert changed["report_a"]["notices"]["invalid_utf8"] == {"lines": 1, "first": where}
    assert f"invalid UTF-8 replaced by U+FFFD on 1 line(s), first at {where}" in changed["html_a"]


@pytest.mark.slow
def test_a_lone_surrogate_escape_is_mended_said_and_exported(small, verses):
    """A text escaping half of a surrogate pair (JSON ``\\ud800``) stopped the embed stage with
    the tokenizer's TypeError. It is replaced by U+FFFD as invalid UTF-8 is, said with its file
    and line, and the MDS export writes the mended text."""
    lines = jsonl(verses[:300]).split(b"\n")
    lines[6] = lines[6].replace(b'"text": "', b'"text": "\\ud800 ')  # line 7: document 6
    (small / "verses.jsonl").write_bytes(b"\n".join(lines))
    run = clusterclip("run", "verses.jsonl", "--workdir", "work", *FAST, "--epochs", "2",
                      cwd=small)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "invalid UTF-8 replaced by U+FFFD on 1 line(s), first at verses.jsonl:7" in run.stdout
    assert 6 in np.load(small / "work" / "schedule.npy")
    export = clusterclip("export", "--workdir", "work", "--format", "mds", "--out", "mds",
                         cwd=small)  # fmt: skip
    assert export.returncode == 0, export.stderr
    shards = b"".join(p.read_bytes() for p in sorted((small / "mds").glob("shard.*.mds")))
    assert ("\ufffd " + verses[6]["text"]).encode("utf-8") in shards


@pytest.mark.slow
def test_hidden_files_a_glob_skips_are_named_and_counted(changed):
    line = "warning:     1 hidden file(s) skipped by a glob: corpus/.draft.jsonl"
    assert line in changed["stdout_a"]
    hidden = changed["report_a"]["notices"]["hidden_files_skipped"]
    assert hidden == {"count": 1, "names": ["corpus/.draft.jsonl"]}
    assert "1 hidden file(s) skipped by a glob: corpus/.draft.jsonl" in changed["html_a"]


@pytest.mark.slow
def test_near_duplicate_groups_and_what_they_withhold(changed):
    import pyarrow.parquet as pq

    work = changed["root"] / "work"
    representative = pq.read_table(work / "duplicates.parquet").column("representative")
    representative = representative.to_numpy()  # the groups as the dedup stage wrote them
    seen = np.bincount(changed["schedule_a"], minlength=representative.size) > 0
    sizes = np.bincount(representative, minlength=representative.size)
    in_group = sizes[representative] >= 2
    group_seen = np.bincount(representative[seen], minlength=representative.size) > 0
    withheld = int((in_group & ~seen & group_seen[representative]).sum())
    assert withheld >= 6 * (COPIES - 1)  # one turn per group at max_repeats 1: copies wait
    found = changed["report_a"]["duplicates"]
    assert found["grouping"] == "group"
    assert found["groups"] == int((sizes >= 2).sum()) >= 6
    assert found["largest_group"] == int(sizes.max()) >= COPIES + 1
    assert found["withheld"] == withheld
    assert found["never_seen"] == int((~seen).sum()) == changed["report_a"]["summary"]["never_seen"]
    assert found["share_of_never_seen"] == pytest.approx(withheld / found["never_seen"])
    line = (
        f"duplicates:  {found['groups']} near-duplicate groups ({found['documents_in_groups']} "
        f"documents; largest {found['largest_group']}, #{found['largest_representative']}): "
        f"{withheld} withheld (never drawn while a near-copy was), "
        f"{withheld / found['never_seen']:.0%} of the {found['never_seen']} never seen"
    )
    assert line in changed["stdout_a"]
    assert "<h2>Near-duplicate groups</h2>" in changed["html_a"]
    assert "documents withheld (never drawn while a near-copy was)" in changed["html_a"]


@pytest.mark.slow
def test_random_fallback_past_the_cap_is_said_and_counted(changed):
    stats = changed["meta_b"]["stats"]
    start_at = stats["exhausted_at"]
    n_draws = len(changed["schedule_b"])
    most = int(np.bincount(changed["schedule_b"]).max())
    assert start_at is not None and most > 1  # the cap is 1: the fallback repeats documents
    line = (
        f"warning:     every cluster was clipped at draw {start_at:,}; the other "
        f"{n_draws - start_at:,} draws are random passes past max_repeats 1 "
        f"(on_exhausted: random): one document is drawn {most} times"
    )
    assert line in changed["stdout_b"]
    fallback = changed["report_b"]["notices"]["random_fallback"]
    assert fallback == {"draws": n_draws - start_at, "from_draw": start_at,
                        "most_repeats": most, "max_repeats": 1}  # fmt: skip
    assert "random draws past max_repeats (on_exhausted: random)" in changed["html_b"]
    assert changed["report_a"]["notices"]["random_fallback"]["draws"] == 0


@pytest.mark.slow
def test_keywords_dropped_by_report_are_said_and_counted(changed, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(changed["root"], root)
    with open(root / "corpus" / "b.jsonl", "ab") as handle:  # the corpus changed since
        handle.write(b'\n{"id": "late", "text": "a verse added later"}\n')
    done = clusterclip("report", "--workdir", "work", "--out-dir", "again", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "  warning: the report has no keywords or examples: corpus file corpus/b.jsonl " \
        "changed size" in done.stdout  # fmt: skip
    data = json.loads((root / "again" / "report.json").read_text())
    assert data["notices"]["keywords_dropped"]["dropped"] is True
    assert "corpus/b.jsonl changed size" in data["notices"]["keywords_dropped"]["reason"]
    assert data["keywords_available"] is False
    assert changed["report_a"]["notices"]["keywords_dropped"] == {"dropped": False, "reason": None}


def test_labels_beyond_int64_are_a_warning_and_counted(tmp_path):
    labels = np.array([0, 1, 2**63, 1, 0, 2**64 - 1, 2, 2**63 + 7, 2], dtype=np.uint64)
    np.save(tmp_path / "labels.npy", labels)
    done = clusterclip("schedule", "--labels", "labels.npy", "--out", "s.npy",
                       "--num-samples", "12", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning        clusterclip: 3 of 9 labels are >= 2**63 (unsigned) and cannot be " \
        "cluster ids: those documents are excluded" in done.stdout  # fmt: skip
    assert "documents      9 (6 usable, 3 excluded)" in done.stdout
    meta = json.loads((tmp_path / "s.json").read_text())
    assert meta["config"]["labels_out_of_range"] == 3
    assert not set(np.load(tmp_path / "s.npy").tolist()) & {2, 5, 7}
