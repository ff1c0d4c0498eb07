"""Help texts and messages say what they mean: one meaning per flag, no inverted help,
advice that names a new value, counts written as 1e6, "1 cluster".

The parsers are the real sub-commands' (:func:`clusterclip.cli.build_parser`); the
commands run in-process through :func:`clusterclip.cli.main` on real (small) data:
labels from Bible books, and a work directory made by ``clusterclip run`` over KJV
verses.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from clusterclip.cli import COMMANDS, build_parser, main
from tests.abuse.support import FAST, call
from tests.product_support import kjv_records, require_module

ROOT = Path(__file__).resolve().parents[2]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(choices.choices)


def visible_flags() -> list[tuple[str, str, argparse.Action]]:
    """(command, long flag, action) of every flag that ``--help`` shows."""
    found = []
    for command, sub in subcommands().items():
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            found += [(command, flag, action) for flag in action.option_strings if flag[:2] == "--"]
    return found


@pytest.fixture(autouse=True)
def _no_progress_bars(monkeypatch):
    monkeypatch.setenv("CLUSTERCLIP_PROGRESS", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A work directory made by ``clusterclip run`` over 200 verses (corpus by absolute path)."""
    require_module("sklearn")
    require_module("pyarrow")
    root = tmp_path_factory.mktemp("help")
    corpus = root / "verses.jsonl"
    records = kjv_records(step=1, limit=200)
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(corpus), "--workdir", str(root / "work"), *FAST]) == 0
    return root / "work"


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    """``labels.npy``: the book of each of 1,000 verses spread over the Bible (real sizes)."""
    records = kjv_records(step=31)[:1000]
    names = [r["book"] for r in records]
    path = tmp_path_factory.mktemp("books") / "labels.npy"
    np.save(path, np.unique(names, return_inverse=True)[1])
    return path


# --------------------------------------------------------------------------- inverted help


def test_a_flag_that_turns_a_setting_off_says_so():
    helps = {flag: action.help for _, flag, action in visible_flags()}
    assert helps["--no-exact"].startswith("Do not group exact copies across clusters")
    assert helps["--no-report"].startswith("Do not write the report")
    assert helps["--no-eos"].startswith("Write documents without an end-of-document token")


def test_every_off_flag_declares_what_it_does():
    """A bool setting on by default gets a flag that turns it off, and help for that flag."""
    from clusterclip.adapters.options import TokenOptions
    from clusterclip.config import SECTIONS

    for cls in (*SECTIONS.values(), TokenOptions):
        for field in cls.__dataclass_fields__.values():
            meta = field.metadata
            if meta.get("kind") == "bool" and field.default is True and meta.get("cli", True):
                assert meta.get("flag", "").startswith("--no-"), (cls.__name__, field.name)
                assert meta.get("flag_help"), f"{cls.__name__}.{field.name}: no flag_help"
                assert meta["flag_help"] != meta["help"]


# --------------------------------------------------------------------------- one meaning per flag


@pytest.mark.parametrize("flag", ["--top", "--num-workers", "--batch-size"])
def test_a_flag_means_one_thing_in_every_command(flag):
    meanings = {
        (action.dest.rpartition("__")[2], action.help)
        for _, name, action in visible_flags()
        if name == flag
    }
    assert len(meanings) <= 1, f"{flag} means several things: {meanings}"


def test_the_renamed_flags_exist_where_the_old_ones_were():
    where = {(command, flag) for command, flag, _ in visible_flags()}
    assert {("inspect", "--keywords"), ("dedup", "--largest"), ("export", "--loader-workers"),
            ("export", "--loader-batch-size")} <= where  # fmt: skip
    assert not {("inspect", "--top"), ("dedup", "--top"), ("export", "--num-workers"),
                ("export", "--batch-size")} & where  # fmt: skip


def test_the_old_spellings_still_work_with_a_note(work, capsys):
    new = call(capsys, "inspect", "--workdir", str(work), "--keywords", "2", "--examples", "0")
    old = call(capsys, "inspect", "--workdir", str(work), "--top", "2", "--examples", "0")
    assert new[0] == old[0] == 0 and new[1] == old[1]
    assert "clusterclip inspect: note: --top is deprecated; use --keywords" in old[2]
    new = call(capsys, "dedup", "--workdir", str(work), "--largest", "1")
    old = call(capsys, "dedup", "--workdir", str(work), "--top", "1")
    assert new[0] == old[0] == 0 and new[1] == old[1]
    assert "clusterclip dedup: note: --top is deprecated; use --largest" in old[2]
    # an error names the spelling the user typed
    code, _, err = call(capsys, "inspect", "--workdir", str(work), "--top", "-3")
    assert code == 2 and "`--top` must be an int in [0, inf); got -3" in err


def test_the_litdata_topology_flags_old_and_new(work, tmp_path, capsys):
    for flags, named in (
        (
            ["--loader-workers", "2", "--loader-batch-size", "4"],
            "--loader-workers, --loader-batch-size",
        ),
        (["--num-workers", "2", "--batch-size", "4"], "--num-workers, --batch-size"),  # old
    ):
        code, out, err = call(capsys, "export", "--workdir", str(work), "--format",
                              "ordered-jsonl", "--out", str(tmp_path / "out"), *flags)  # fmt: skip
        assert code == 2 and out == ""
        assert (
            f"error: {named} do not apply to --format ordered-jsonl (only to litdata). Drop them."
            in err
        )
        assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- advice and messages


def test_the_exhausted_error_names_a_new_value_not_the_current_one(books, tmp_path, capsys):
    code, _, err = call(capsys, "schedule", "--labels", str(books), "--num-samples", "5000",
                        "--max-repeats", "1", "--on-exhausted", "error",
                        "--out", str(tmp_path / "s.npy"))  # fmt: skip
    assert code == 2
    assert "Raise --max-repeats above 1, lower the budget" in err
    assert "Raise --max-repeats 1" not in err


def documented_runs() -> list[str]:
    """``clusterclip run|schedule ... --epochs`` lines of the README and the commands' help."""
    texts = [(ROOT / "README.md").read_text("utf-8")]
    texts += [
        getattr(__import__(m, fromlist=["EXAMPLE"]), "EXAMPLE", "") for m in COMMANDS.values()
    ]
    texts.append(build_parser().epilog)
    lines = []
    for text in texts:
        joined = re.sub(r"\\\n\s*", " ", text)
        lines += re.findall(r"clusterclip (?:run|schedule) [^\n|#`]*--epochs [^\n|#`]*", joined)
    return lines


def test_the_documented_examples_do_not_draw_the_advice_against_themselves():
    from clusterclip.schedule.advice import clip_advice
    from clusterclip.schedule.options import ScheduleOptions

    lines = documented_runs()
    assert any(line.startswith("clusterclip run data/*.jsonl.gz") for line in lines), lines
    for line in lines:
        words = shlex.split(line)
        given = dict(zip(words, words[1:], strict=False))
        options = ScheduleOptions(max_repeats=int(given.get("--max-repeats", 4)))
        advice = clip_advice(options.policy, options.max_repeats, passes=float(given["--epochs"]))
        assert advice is None, f"{line!r} gets: {advice}"


# --------------------------------------------------------------------------- counts as 1e6


def test_count_flags_accept_scientific_notation(books, tmp_path, capsys):
    out = tmp_path / "schedule.npy"
    code, text, err = call(capsys, "schedule", "--labels", str(books), "--num-samples", "1.5e3",
                           "--max-repeats", "1e1", "--seed", "1e1", "--out", str(out))  # fmt: skip
    assert code == 0, err
    assert "draws          1,500 (budget num_samples=1,500: met)" in text
    assert "max_repeats=10, order=online, seed=10" in text
    assert np.load(out).size == 1500


@pytest.mark.parametrize("value", ["1.5", "1e-3", "nan", "1,000"])
def test_a_count_that_is_not_a_whole_number_is_refused(books, tmp_path, capsys, value):
    code, _, err = call(capsys, "schedule", "--labels", str(books), "--num-samples", value,
                        "--out", str(tmp_path / "s.npy"))  # fmt: skip
    assert code == 2 and "Traceback" not in err
    assert f"--num-samples: invalid int value: {value!r} (expected a whole number such as" in err


def test_every_integer_flag_reads_counts_the_same_way():
    from clusterclip.options import parse_count, parse_int_list, parse_repeats

    loose = [(command, flag) for command, flag, action in visible_flags() if action.type is int]
    assert not loose, f"integer flags that refuse 1e6: {loose}"
    assert parse_int_list("1e2,3e3") == (100, 3000) and parse_repeats("1e1") == 10
    assert parse_count("1e6") == 1_000_000


# --------------------------------------------------------------------------- 1 cluster


def test_one_cluster_is_singular(work, books, tmp_path, capsys):
    code, out, err = call(capsys, "inspect", "--workdir", str(work), "--cluster", "0",
                          "--examples", "0")  # fmt: skip
    assert code == 0, err
    assert re.search(r"^1 cluster shown, [\d,]+ documents$", out, re.M), out
    code, out, err = call(capsys, "schedule", "--labels", str(books), "--num-samples", "100",
                          "--out", str(tmp_path / "s.npy"))  # fmt: skip
    assert code == 0, err
    n_books = np.unique(np.load(books)).size
    assert f"smallest 10%   {round(n_books * 0.1)} clusters (" in out
    small = tmp_path / "small.npy"
    np.save(small, np.repeat(np.arange(5), [8, 6, 4, 2, 1]))
    code, out, err = call(capsys, "schedule", "--labels", str(small), "--num-samples", "20",
                          "--out", str(tmp_path / "t.npy"))  # fmt: skip
    assert code == 0, err
    assert "smallest 10%   1 cluster (1 doc): " in out
