"""Tracebacks a tester met become errors that name the file, what is wrong and the fix.

Every case runs the real command (in-process through :func:`clusterclip.cli.main`, or
as a subprocess where the interpreter's own state matters: a bare ``import
clusterclip``, Python's warning format) on a real work directory made by
``clusterclip run`` over verses of the bundled King James Bible.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clusterclip.cli import main
from tests.abuse.support import FAST, call, env, refused
from tests.product_support import kjv_records, require_module

N_VERSES = 200


@pytest.fixture(autouse=True)
def _no_progress_bars(monkeypatch):
    monkeypatch.setenv("CLUSTERCLIP_PROGRESS", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """``root/verses.jsonl`` and ``root/work``: one real run, embedded by the relative name."""
    require_module("sklearn")  # the tfidf encoder
    require_module("pyarrow")
    root = tmp_path_factory.mktemp("named") / "root"
    root.mkdir()
    records = kjv_records(step=1, limit=N_VERSES)
    (root / "verses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    with contextlib.chdir(root), contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "verses.jsonl", "--workdir", "work", *FAST]) == 0
    return root


@pytest.fixture
def root(made, tmp_path) -> Path:
    """A private copy of the made root (corpus and work directory together)."""
    return Path(shutil.copytree(made, tmp_path / "root"))


# --------------------------------------------------------------------------- clusterclip.io


def test_clusterclip_io_is_there_after_a_bare_import(made):
    """README Quickstart: ``clusterclip.io.WorkDir("work").labels()`` after ``import clusterclip``."""
    code = (
        "import sys, clusterclip;"
        "labels = clusterclip.io.WorkDir('work').labels();"
        "print(labels.shape[0], clusterclip.schedule.build_schedule.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=made, env=env(),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(N_VERSES), "build_schedule"]


# --------------------------------------------------------------------------- a damaged part


def _truncate_part(work: Path) -> Path:
    part = work / "embeddings" / "part-00000.npy"
    os.truncate(part, part.stat().st_size - 1000)
    return part


def test_a_truncated_part_is_named_with_the_fix_by_its_reader(root, capsys):
    part = _truncate_part(root / "work")
    code, _, err = call(capsys, "cluster", "--workdir", str(root / "work"), "--n-clusters", "3",
                        "--backend", "numpy", "--overwrite")  # fmt: skip
    refused(code, err, f"{part} is truncated: its header promises {N_VERSES} x ",
            "the file has ", f"`clusterclip run INPUT... --workdir {root / 'work'}`",
            "--overwrite")  # fmt: skip
    from clusterclip.errors import ClusterClipError
    from clusterclip.io import WorkDir

    with pytest.raises(ClusterClipError, match=r"part-00000\.npy is truncated: .*Redo the embed"):
        WorkDir(root / "work").embeddings()


def test_a_truncated_part_is_not_up_to_date_and_is_redone(root, capsys, monkeypatch):
    intact = (root / "work" / "embeddings" / "part-00000.npy").read_bytes()
    part = _truncate_part(root / "work")
    monkeypatch.chdir(root)
    code, out, err = call(capsys, "run", "verses.jsonl", "--workdir", "work", *FAST)
    assert code == 0, err
    assert "embed     ran in " in out
    assert f"(outputs damaged: work/embeddings/{part.name} is truncated: " in out
    assert "cluster   skipped (up to date)" in out  # the redone parts are the same bytes
    assert part.read_bytes() == intact


# --------------------------------------------------------------------------- labels that are not ints


@pytest.mark.parametrize("kind", ["npy", "parquet"])
def test_string_labels_from_a_file_are_refused_naming_the_file(tmp_path, capsys, kind):
    names = np.array(["law", "law", "prophets", "gospels", "law"])
    if kind == "npy":
        path = tmp_path / "labels.npy"
        np.save(path, names)
        dtype = "dtype <U8"
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "labels.parquet"
        pq.write_table(pa.table({"cluster": names.tolist()}), path)
        dtype = "dtype object"
    code, _, err = call(capsys, "schedule", "--labels", str(path), "--num-samples", "10",
                        "--out", str(tmp_path / "schedule.npy"))  # fmt: skip
    refused(code, err, f"{path}: `--labels` must be a 1-D integer array", dtype,
            "np.unique(labels, return_inverse=True)[1]")  # fmt: skip
    assert not (tmp_path / "schedule.npy").exists()


def test_string_labels_in_python_get_a_fix_that_works():
    import clusterclip
    from clusterclip.errors import ClusterClipError

    names = np.array(["law", "law", "prophets", "gospels"])
    with pytest.raises(ClusterClipError, match=r"dtype <U8.*np\.unique\(labels, return_inverse"):
        clusterclip.build_schedule(names, num_samples=8, seed=0)
    ids = np.unique(names, return_inverse=True)[1]  # the fix, as the message gives it
    assert clusterclip.build_schedule(ids, num_samples=8, seed=0).indices.size == 8


# --------------------------------------------------------------------------- the budget


@pytest.mark.slow
def test_an_epochs_budget_warns_in_one_line_naming_epochs(root):
    """`run --epochs 1e12`: no raw UserWarning, no `--num-samples` the user never passed."""
    done = subprocess.run(
        [sys.executable, "-m", "clusterclip", "run", "verses.jsonl", "--workdir", "work", *FAST,
         "--epochs", "1e12"],
        cwd=root, env=env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "UserWarning" not in done.stderr and "--num-samples" not in done.stderr
    draws = np.load(root / "work" / "schedule.npy").size  # every unit clipped after 4 passes
    lines = [line for line in done.stderr.splitlines() if "warning" in line]
    assert lines == [
        f"clusterclip run: warning: the budget --epochs 1000000000000.0 "
        f"({N_VERSES * 10**12:,} documents) cannot be met: every cluster is clipped at "
        f"--max-repeats 4 after {draws} draws; the schedule stops there (--on-exhausted "
        "stop). Pass --on-exhausted random to continue with random passes, or raise "
        "--max-repeats above 4."
    ]


def test_the_advice_counts_the_passes_of_the_budget_not_of_the_draws(tmp_path, capsys):
    labels = np.repeat(np.arange(5), [40, 30, 15, 10, 5])  # 100 documents
    np.save(tmp_path / "labels.npy", labels)
    code, out, err = call(capsys, "schedule", "--labels", str(tmp_path / "labels.npy"),
                          "--num-samples", "1000", "--max-repeats", "2",
                          "--out", str(tmp_path / "schedule.npy"))  # fmt: skip
    assert code == 0, err
    assert "draws          200 (budget num_samples=1,000: NOT met)" in out  # cut at 2 passes
    assert "advice         the budget is 10.0 passes" in out
    assert out.rstrip().endswith("consider --max-repeats 20")


def test_the_run_advice_counts_the_epochs_asked_for(root, capsys, monkeypatch):
    monkeypatch.chdir(root)
    code, out, err = call(capsys, "run", "verses.jsonl", "--workdir", "work", *FAST,
                          "--epochs", "6", "--max-repeats", "2")  # fmt: skip
    assert code == 0, err
    draws = np.load(root / "work" / "schedule.npy").size
    assert draws <= 2 * N_VERSES  # cut short by the clip, at most 2 passes
    assert f"budget {6 * N_VERSES:,} documents: {draws:,} draws  (stopped early" in out
    assert "advice:      the budget is 6.0 passes" in out and "consider --max-repeats 12" in out


# --------------------------------------------------------------------------- the corpus found


def test_a_same_named_file_in_the_current_directory_does_not_stand_in_for_the_corpus(
    root, tmp_path, capsys, monkeypatch
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    corpus = (root / "verses.jsonl").read_text("utf-8").splitlines()
    (elsewhere / "verses.jsonl").write_text("\n".join(corpus[:5]) + "\n", "utf-8")
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "ordered"
    code, _, err = call(capsys, "export", "--workdir", str(root / "work"),
                        "--format", "ordered-jsonl", "--out", str(out))  # fmt: skip
    assert code == 0, err
    indices = np.load(root / "work" / "schedule.npy")
    assert (out / "part-00000.jsonl").read_text("utf-8").splitlines() == [
        corpus[i] for i in indices
    ]


def test_a_missing_corpus_is_named_by_the_absolute_path_checked(
    made, root, tmp_path, capsys, monkeypatch
):
    (root / "verses.jsonl").rename(root / "moved.jsonl")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "verses.jsonl").write_text("{}\n", "utf-8")  # must not be taken
    monkeypatch.chdir(tmp_path / "elsewhere")
    # the copied work directory would also find the same bytes where they were first
    # embedded (content decides): gone from there too, the corpus is missing
    original = made / "verses.jsonl"
    hidden = original.rename(original.with_name("verses.hidden"))
    try:
        code, _, err = call(capsys, "inspect", "--workdir", "../root/work")
    finally:
        hidden.rename(original)
    refused(code, err, "corpus file verses.jsonl is missing since it was embedded into ",
            f"(looked for {root / 'verses.jsonl'}", "Restore the file as it was")  # fmt: skip
    assert str(tmp_path / "elsewhere") not in err


# --------------------------------------------------------------------------- temporary files


def test_an_error_names_the_file_asked_for_never_a_temporary_one(tmp_path, capsys):
    np.save(tmp_path / "labels.npy", np.array([0, 0, 1, 1, 2]))
    (tmp_path / "schedule.npy").mkdir()  # the output path is taken by a folder
    code, _, err = call(capsys, "schedule", "--labels", str(tmp_path / "labels.npy"),
                        "--num-samples", "10", "--out", str(tmp_path / "schedule.npy"))  # fmt: skip
    refused(code, err, f"Is a directory: {tmp_path / 'schedule.npy'}.", "Pass a file path",
            status=1)  # fmt: skip
    assert ".tmp" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.npy", "schedule.npy"]
