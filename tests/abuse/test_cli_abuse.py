"""Bad invocations of the real ``clusterclip`` command: a clear message, never a traceback.

Every case runs the command a user would type, either as a subprocess
(``python -m clusterclip``: the pipe, memory, garbage-bytes and fixture runs) or
through :func:`clusterclip.cli.main` in-process (the same code path, without
paying for a fresh interpreter per case). Each asserts the exit status, a message
that names the problem and the flag, and, where records were read, that every
input line is accounted for by status.

The corpus is real text: verses of the bundled King James Bible.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.abuse.support import FAST, call, clusterclip, env
from tests.product_support import kjv_records, require_module

#: A budget no machine can hold: 10**15 draws of 16 bytes is 16 PB.
HUGE = str(10**15)
BOM = b"\xef\xbb\xbf"


def refused(code: int, err: str, *needles: str) -> None:
    """Exit status 2, one message holding every needle, no traceback."""
    assert code == 2, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, f"{needle!r} not in:\n{err}"


def jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


@pytest.fixture(scope="module")
def verses() -> list[dict]:
    return kjv_records(step=1, limit=200)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, verses) -> Path:
    """A small, clean corpus file (the option cases never get as far as reading it)."""
    path = tmp_path_factory.mktemp("corpus") / "verses.jsonl"
    path.write_bytes(jsonl(verses[:40]))
    return path


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, verses) -> dict:
    """One real ``clusterclip run`` (subprocess) over a BOM file and a file with a Latin-1 line.

    Both must succeed with every line accounted for; the work directory then
    serves the cases that need one (copied first when a case writes to it). The
    tests that use it are marked slow: the run takes about 30 s on 2 busy cores.
    """
    require_module("sklearn")  # the tfidf encoder
    require_module("pyarrow")
    root = tmp_path_factory.mktemp("embedded")
    (root / "corpus").mkdir()
    bom_file = root / "corpus" / "a-bom.jsonl"
    bom_file.write_bytes(BOM + jsonl(verses[:120]))
    latin = jsonl(verses[120:200]).split(b"\n")
    latin[4] = latin[4].replace(b'"text": "', b'"text": "caf\xe9 ')  # one Latin-1 byte
    latin_file = root / "corpus" / "b-latin1.jsonl"
    latin_file.write_bytes(b"\n".join(latin))
    args = ["run", "corpus", "--workdir", "work", *FAST, "--epochs", "2"]
    done = clusterclip(*args, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return {"root": root, "work": root / "work", "args": args, "stdout": done.stdout,
            "files": {bom_file.name: 120, latin_file.name: 80}}  # fmt: skip


@pytest.fixture
def work_copy(embedded, tmp_path) -> Path:
    """A private copy of the embedded work directory (and its corpus, found by relative path)."""
    shutil.copytree(embedded["root"], tmp_path / "root")
    return tmp_path / "root" / "work"


# --------------------------------------------------------------------------- options


OPTION_CASES = {
    "n-clusters 0": (["--n-clusters", "0"], ["`--n-clusters` must be an int in [1, inf); got 0"]),
    "n-clusters -1": (["--n-clusters", "-1"], ["`--n-clusters` must be an int in [1, inf); got -1"]),
    "n-clusters abc": (["--n-clusters", "abc"], ["argument --n-clusters: invalid int value: 'abc'"]),
    "n-clusters missing": ([], ["`--n-clusters` is required (an int in [1, inf))",
                                "Pass --n-clusters 100"]),
    "epochs inf": (["--n-clusters", "3", "--epochs", "inf"],
                   ["`--epochs` must be a number in (0, inf); got inf"]),
    "epochs -1": (["--n-clusters", "3", "--epochs", "-1"],
                  ["`--epochs` must be a number in (0, inf); got -1.0"]),
    "epochs nan": (["--n-clusters", "3", "--epochs", "nan"],
                   ["`--epochs` must be a number in (0, inf); got nan"]),
    "epochs 0": (["--n-clusters", "3", "--epochs", "0"],
                 ["`--epochs` must be a number in (0, inf); got 0.0"]),
    "max-repeats 0": (["--n-clusters", "3", "--max-repeats", "0"],
                      ["`--max-repeats` must be an int in [1, inf) or none (no limit); got 0"]),
    "max-repeats -2": (["--n-clusters", "3", "--max-repeats", "-2"],
                       ["`--max-repeats` must be an int in [1, inf) or none (no limit); got -2"]),
    "max-repeats abc": (["--n-clusters", "3", "--max-repeats", "abc"],
                        ["argument --max-repeats: expected an int or one of none, inf"]),
    "seed -1": (["--n-clusters", "3", "--seed", "-1"],
                ["`--seed` must be an int in [0, 2**63-1]; got -1"]),
    "unknown policy": (["--n-clusters", "3", "--policy", "balanced"],
                       ["argument --policy: invalid choice: 'balanced'"]),
    "alpha without temperature": (["--n-clusters", "3", "--alpha", "0.5"],
                                  ["`--alpha` must be None unless --policy temperature",
                                   "Pass --policy temperature"]),
    "temperature without alpha": (["--n-clusters", "3", "--policy", "temperature"],
                                  ["`--alpha` must be a finite float for --policy temperature"]),
    "bad device": (["--n-clusters", "3", "--device", "gpu0"],
                   ["`--device` must be auto, cpu, mps", "got 'gpu0'", "--device auto"]),
    "two budgets": (["--n-clusters", "3", "--num-samples", "5", "--epochs", "2"],
                    ["`--epochs` must be left out when --num-samples is given (one budget)"]),
    "ray flag without ray": (["--n-clusters", "3", "--num-workers", "2"],
                             ["`--num-workers` apply to the Ray engine only",
                              "Add --engine ray"]),
    "shard-size 0": (["--n-clusters", "3", "--shard-size", "0"],
                     ["`--shard-size` must be an int in [1, inf); got 0"]),
    "empty text field": (["--n-clusters", "3", "--text-field", ""],
                         ["`--text-field` must be a non-empty field name; got ''"]),
}  # fmt: skip


@pytest.mark.parametrize("flags, needles", OPTION_CASES.values(), ids=OPTION_CASES.keys())
def test_bad_options_are_refused_before_any_stage(corpus, tmp_path, capsys, flags, needles):
    workdir = tmp_path / "w"
    code, _out, err = call(capsys, "run", str(corpus), "--workdir", str(workdir), *flags)
    refused(code, err, *needles)
    assert not workdir.exists()  # nothing ran, nothing was written


def test_no_input_and_a_file_as_workdir(corpus, tmp_path, capsys):
    code, _, err = call(capsys, "run", "--workdir", str(tmp_path / "w"), "--n-clusters", "3")
    refused(code, err, "`inputs` must be at least one corpus file", "Pass INPUT...")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory")
    code, _, err = call(capsys, "run", str(corpus), "--workdir", str(a_file), "--n-clusters", "3")
    refused(code, err, "`--workdir` must be a directory", "It is a file")


def test_an_unbounded_budget_too_big_for_memory_is_refused_up_front(corpus, tmp_path):
    """It used to fill the memory for minutes, then die with MemoryError."""
    done = clusterclip("run", str(corpus), "--workdir", "w", *FAST, "--num-samples", HUGE,
                       "--max-repeats", "none", cwd=tmp_path)  # fmt: skip
    refused(done.returncode, done.stderr, "1,000,000,000,000,000 draws needs",
            "available", "--num-samples", "--max-repeats 4", "iter_schedule")  # fmt: skip
    assert not (tmp_path / "w").exists()  # refused before embedding


@pytest.mark.slow
def test_a_budget_too_big_for_memory_leaves_the_work_directory_as_it_was(work_copy):
    manifest = (work_copy / "manifest.json").read_bytes()
    schedule = (work_copy / "schedule.npy").read_bytes()
    done = clusterclip("schedule", "--workdir", str(work_copy), "--num-samples", HUGE,
                       "--policy", "uniform", cwd=work_copy.parent)  # fmt: skip
    refused(done.returncode, done.stderr, "draws needs", "--num-samples")
    assert (work_copy / "manifest.json").read_bytes() == manifest
    assert (work_copy / "schedule.npy").read_bytes() == schedule


def test_the_python_api_refuses_the_same_budget():
    from clusterclip import build_schedule
    from clusterclip.errors import ClusterClipError

    with pytest.raises(ClusterClipError, match=r"draws needs .*\(num_samples / epochs\)"):
        build_schedule(np.array([0, 0, 1]), policy="uniform", num_samples=10**15, seed=0)


# --------------------------------------------------------------------------- inputs


def test_missing_file_empty_directory_and_directory_without_corpus(tmp_path, capsys):
    code, _, err = call(capsys, "run", str(tmp_path / "nope.jsonl"), "--workdir",
                        str(tmp_path / "w"), "--n-clusters", "3")  # fmt: skip
    refused(code, err, "nope.jsonl does not exist")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.md").write_text("no corpus here")
    for folder in (empty_dir, tmp_path / "notes"):
        code, _, err = call(capsys, "run", str(folder), "--workdir", str(tmp_path / "w"),
                            "--n-clusters", "3")  # fmt: skip
        refused(code, err, f"directory {folder} matches no corpus file", ".jsonl, .jsonl.gz")
    assert not (tmp_path / "w").exists()


def test_empty_file(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    code, _, err = call(capsys, "run", str(tmp_path / "empty.jsonl"), "--workdir",
                        str(tmp_path / "w"), *FAST)  # fmt: skip
    refused(code, err, "no usable document", "empty.jsonl holds no records")


def test_only_malformed_lines_are_accounted_for(tmp_path, capsys):
    lines = [b"{not json", b"[1, 2, 3]", b'"just a string"', b'{"text": "unterminated']
    (tmp_path / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    code, _, err = call(capsys, "run", str(tmp_path / "bad.jsonl"), "--workdir",
                        str(tmp_path / "w"), *FAST)  # fmt: skip
    refused(code, err, "no usable document in", f"{len(lines)} records: 0 ok, {len(lines)} malformed",
            "bad.jsonl:1: invalid JSON", "one JSON object")  # fmt: skip
    assert "[1, 0]" not in err and "or fewer" not in err  # no impossible range or advice


def test_binary_garbage_is_accounted_for_line_by_line(tmp_path):
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, size=6000, dtype=np.uint8).tobytes()
    for whitespace in b" \t\n\r\x0b\x0c":  # keep the line count exact: 12 non-blank lines
        noise = noise.replace(bytes([whitespace]), b"\x00")
    (tmp_path / "garbage.jsonl").write_bytes(
        b"\n".join(noise[i : i + 500] for i in range(0, 6000, 500))
    )
    done = clusterclip("run", "garbage.jsonl", "--workdir", "w", *FAST, cwd=tmp_path)
    refused(done.returncode, done.stderr, "no usable document in garbage.jsonl",
            "12 records: 0 ok, 12 malformed")  # fmt: skip


def test_records_without_the_text_field_name_the_flag_and_the_fields_they_have(
    tmp_path, verses, capsys
):
    renamed = [{"id": v["id"], "body": v["text"]} for v in verses[:20]]
    (tmp_path / "body.jsonl").write_bytes(jsonl(renamed))
    code, _, err = call(capsys, "run", str(tmp_path / "body.jsonl"), "--workdir",
                        str(tmp_path / "w"), *FAST)  # fmt: skip
    refused(code, err, "20 records: 0 ok, 20 missing_field",
            "no `content` or `text` field (it has: id, body)", "--text-field")  # fmt: skip


def test_truncated_gzip_names_the_file_and_the_last_line(tmp_path, verses, capsys):
    whole = gzip.compress(jsonl(verses))
    (tmp_path / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    code, _, err = call(capsys, "run", str(tmp_path / "cut.jsonl.gz"), "--workdir",
                        str(tmp_path / "w"), *FAST)  # fmt: skip
    refused(code, err, "cut.jsonl.gz is truncated or corrupt after line", "zcat")


def test_utf16_file_says_how_to_convert_it(tmp_path, verses, capsys):
    text = "".join(json.dumps(v) + "\n" for v in verses[:5])
    (tmp_path / "wide.jsonl").write_bytes(text.encode("utf-16"))  # with its BOM
    code, _, err = call(capsys, "run", str(tmp_path / "wide.jsonl"), "--workdir",
                        str(tmp_path / "w"), *FAST)  # fmt: skip
    refused(code, err, "wide.jsonl is UTF-16-encoded", "iconv -f UTF-16 -t UTF-8")


@pytest.mark.slow
def test_bom_and_latin1_files_succeed_with_every_line_accounted_for(embedded):
    """A UTF-8 BOM used to make the first record `malformed`."""
    import pyarrow.parquet as pq

    documents = pq.read_table(embedded["work"] / "documents.parquet").to_pylist()
    per_file = {name: [d for d in documents if Path(d["source"]).name == name]
                for name in embedded["files"]}  # fmt: skip
    for name, n_lines in embedded["files"].items():
        assert len(per_file[name]) == n_lines
        assert all(d["status"] == "ok" for d in per_file[name])
    assert per_file["a-bom.jsonl"][0]["id"] == "Genesis 1:1"
    total = sum(embedded["files"].values())
    assert f"documents:   {total} read, {total} usable, 0 excluded" in embedded["stdout"]
    manifest = json.loads((embedded["work"] / "manifest.json").read_text())
    assert manifest["stages"]["embed"]["summary"]["replaced_utf8_lines"] == 1


# --------------------------------------------------------------------------- output


@pytest.mark.slow
def test_a_closed_stdout_ends_quietly(embedded):
    """`clusterclip run ... | head` where the reader has left before the first line.

    The run still finishes its stages and says so on stderr, in one line.
    """
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = clusterclip(*embedded["args"], cwd=embedded["root"], stdout=write_end)
    finally:
        os.close(write_end)
    assert done.returncode == 141  # as a process killed by SIGPIPE: its output did not get out
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "stdout was closed after 0 line(s)" in done.stderr
    assert "every stage finished" in done.stderr


@pytest.mark.slow
def test_piping_into_head(embedded):
    command = f"{sys.executable} -m clusterclip inspect --workdir work --examples 20 | head -n 1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=embedded["root"],
                          env=env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode in (0, 141)  # 141 when head left before the last line was written
    assert done.stdout.startswith("cluster 0")
    assert done.stderr == ""


# --------------------------------------------------------------------------- work directories


def test_schedule_on_an_empty_or_missing_work_directory(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = call(capsys, "schedule", "--workdir", str(tmp_path / "empty"))
    refused(code, err, "has no completed `cluster` stage", "clusterclip cluster --workdir W")
    code, _, err = call(capsys, "schedule", "--workdir", str(tmp_path / "missing"))
    refused(code, err, "missing does not exist", "--workdir")
    assert not (tmp_path / "missing").exists()


@pytest.mark.slow
def test_export_without_a_schedule(work_copy, tmp_path, capsys):
    (work_copy / "schedule.npy").unlink()
    for fmt in ("ordered-jsonl", "sample-index"):
        code, _, err = call(capsys, "export", "--workdir", str(work_copy), "--format", fmt,
                            "--out", str(tmp_path / fmt))  # fmt: skip
        refused(code, err, "schedule.npy not found. Build a schedule first")
    (tmp_path / "empty").mkdir()
    code, _, err = call(capsys, "export", "--workdir", str(tmp_path / "empty"), "--format",
                        "cluster-folders", "--out", str(tmp_path / "folders"))  # fmt: skip
    refused(code, err, "has no completed `cluster` stage")


@pytest.mark.slow
def test_export_into_a_file(embedded, tmp_path, capsys):
    (tmp_path / "taken").write_text("a file")
    code, _, err = call(capsys, "export", "--workdir", str(embedded["work"]), "--format",
                        "ordered-jsonl", "--out", str(tmp_path / "taken"))  # fmt: skip
    refused(code, err, "--out", "is a file")


@pytest.mark.slow
def test_more_clusters_than_documents_gives_the_real_range(work_copy, capsys):
    code, _, err = call(capsys, "cluster", "--workdir", str(work_copy), "--n-clusters", "5000",
                        "--overwrite")  # fmt: skip
    refused(code, err, "`--n-clusters` must be an int in [1, 200]", "200 of 200 documents",
            "Pass --n-clusters 200 or fewer")  # fmt: skip


@pytest.mark.slow
def test_conflicting_flags(embedded, tmp_path, capsys):
    work = str(embedded["work"])
    labels = tmp_path / "labels.npy"
    np.save(labels, np.array([0, 0, 1]))
    code, _, err = call(capsys, "schedule", "--workdir", work, "--labels", str(labels))
    refused(code, err, "give exactly one of --workdir", "--labels")
    code, _, err = call(capsys, "schedule", "--workdir", work, "--out", str(tmp_path / "s.npy"))
    refused(code, err, "--out applies with --labels only")
    code, _, err = call(capsys, "schedule", "--labels", str(labels))
    refused(code, err, "--labels needs --out FILE")
    code, _, err = call(capsys, "export", "--workdir", work, "--format", "megatron", "--out",
                        str(tmp_path / "m"), "--shard-size", "3")  # fmt: skip
    refused(code, err, "--shard-size does not apply to --format megatron")


def test_unreadable_label_files(tmp_path, capsys):
    (tmp_path / "labels.npy").write_bytes(b"not numpy at all")
    (tmp_path / "labels.parquet").write_bytes(b"PAR1 not parquet")
    for name, needle in (("labels.npy", "is not an .npy file"),
                         ("labels.parquet", "is not a readable parquet file")):  # fmt: skip
        code, _, err = call(capsys, "schedule", "--labels", str(tmp_path / name), "--out",
                            str(tmp_path / "s.npy"))  # fmt: skip
        refused(code, err, name, needle)


@pytest.mark.slow
def test_inspect_errors_name_its_flags(embedded, capsys):
    work = str(embedded["work"])
    code, _, err = call(capsys, "inspect", "--workdir", work, "--top", "-3")
    refused(code, err, "`--top` must be an int in [0, inf); got -3", "--top 10")
    code, _, err = call(capsys, "inspect", "--workdir", work, "--cluster", "99")
    refused(code, err, "`--cluster` must be cluster ids in [0, 2]; got [99]")


def test_demo_checks_its_options_before_writing(tmp_path, capsys):
    code, _, err = call(capsys, "demo", "--sample", "0", "--workdir", str(tmp_path / "d"))
    refused(code, err, "`--sample` must be an int in [1, 31102]; got 0", "--sample all")
    (tmp_path / "taken").write_text("a file")
    code, _, err = call(capsys, "demo", "--workdir", str(tmp_path / "taken"))
    refused(code, err, "`--workdir` must be a directory", "It is a file")
    code, _, err = call(capsys, "demo", "--workdir", str(tmp_path / "d"), "--num-samples", HUGE,
                        "--max-repeats", "none")  # fmt: skip
    refused(code, err, "draws needs")  # a budget flag replaces the demo's 1.5 epochs
    assert not (tmp_path / "d").exists()


def test_config_file_errors_name_the_key_and_the_file(tmp_path, capsys):
    config = tmp_path / "run.toml"
    for text, needles in (
        (
            '[cluster]\nn_clusters = "abc"\n',
            ["[cluster] in ", "run.toml: `n_clusters` must be an int"],
        ),
        ("[schedule]\nepochs = -1\n", ["[schedule] in ", "`epochs` must be a number in (0, inf)"]),
        ("[schedule]\nmax_repeat = 3\n", ["unknown option `schedule.max_repeat`", "max_repeats"]),
        ("[schedule\n", ["run.toml: not valid TOML"]),
    ):
        config.write_text(text)
        code, _, err = call(capsys, "run", "--config", str(config))
        refused(code, err, *needles)
        assert "--n-clusters" not in err and "--epochs" not in err  # keys of a file, not flags
    code, _, err = call(capsys, "run", "--config", str(tmp_path / "missing.toml"))
    refused(code, err, "`--config` must be an existing TOML file")


@pytest.mark.slow
def test_report_into_a_file(embedded, tmp_path, capsys):
    (tmp_path / "taken").write_text("a file")
    code, _, err = call(capsys, "report", "--workdir", str(embedded["work"]), "--out-dir",
                        str(tmp_path / "taken"))  # fmt: skip
    refused(code, err, "--out-dir", "is a file")
