"""A corpus changed after embedding is refused by every reader, with one error text.

Regression (issue 11): with a line inserted at the top of the corpus, the
ordered-jsonl export exited 0 and wrote every record shifted by one; an
in-place edit was exported silently too, while ``inspect`` and the
cluster-folders export refused, because they read the corpus another way.
All three now re-read the corpus through ``clusterclip.io.WorkDir``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from clusterclip.cli import main
from tests.product_support import run_small_workdir


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict:
    made = run_small_workdir(tmp_path_factory.mktemp("changed") / "root")
    # Export once, so the record store is already built when the corpus changes.
    assert main(_export(made["workdir"], "ordered-jsonl", made["root"] / "first")) == 0
    shutil.rmtree(made["root"] / "first")
    return made


def _export(workdir: Path, fmt: str, out: Path) -> list[str]:
    return ["export", "--workdir", str(workdir), "--format", fmt, "--out", str(out)]


def _commands(workdir: Path, out: Path) -> dict[str, list[str]]:
    return {
        "ordered-jsonl": _export(workdir, "ordered-jsonl", out / "ordered"),
        "cluster-folders": _export(workdir, "cluster-folders", out / "folders"),
        "inspect": ["inspect", "--workdir", str(workdir), "--json"],
    }


def _insert_at_top(corpus: Path) -> None:
    line = json.dumps({"id": "Preface", "text": "A line added after embedding."})
    corpus.write_text(line + "\n" + corpus.read_text("utf-8"), encoding="utf-8")


def _edit_in_place(corpus: Path) -> None:
    lines = corpus.read_text("utf-8").splitlines()
    lines[10] = lines[10].replace("the", "THE", 1)  # same size, same line count
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _edit_and_grow(corpus: Path) -> None:
    lines = corpus.read_text("utf-8").splitlines()
    lines[10] = json.dumps({"id": "Genesis 1:11", "text": "Another verse entirely."})
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _move(corpus: Path) -> None:
    corpus.rename(corpus.with_name("moved.jsonl"))


def _delete(corpus: Path) -> None:
    corpus.unlink()


def _truncate(corpus: Path) -> None:
    data = corpus.read_bytes()
    corpus.write_bytes(data[: len(data) // 2])


CHANGES = {
    "insert-at-top": (_insert_at_top, "changed size (58,918 -> 58,977 bytes)"),
    "edit-same-size": (_edit_in_place, "changed content (same size)"),
    "edit-same-line-count": (_edit_and_grow, "changed size"),
    "moved": (_move, "is missing"),
    "deleted": (_delete, "is missing"),
    "truncated": (_truncate, "changed size"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_reader_refuses_a_changed_corpus_with_one_text(
    change, pristine, tmp_path, capsys, monkeypatch
):
    root = tmp_path / "root"
    shutil.copytree(pristine["root"], root)
    monkeypatch.chdir(tmp_path)  # the corpus is found next to the work directory, not via cwd
    mutate, what = CHANGES[change]
    mutate(root / "verses.jsonl")
    out = tmp_path / "out"
    messages = {}
    original = pristine["root"] / "verses.jsonl"
    # The copied work directory also knows where its corpus was embedded from: with the
    # same bytes still there it reads them (content decides, not paths), so a corpus gone
    # from both places is what must be refused.
    hidden = original.rename(original.with_name("verses.hidden"))
    try:
        for name, argv in _commands(root / "work", out).items():
            capsys.readouterr()
            assert main(argv) == 2, name
            captured = capsys.readouterr()
            assert captured.out == "", name
            messages[name] = captured.err.split(": error: ", 1)[1]
    finally:
        hidden.rename(original)
    assert not out.exists()  # nothing written, not even the folder
    texts = set(messages.values())
    assert len(texts) == 1, messages
    text = texts.pop()
    assert re.match(
        rf"corpus file verses\.jsonl {re.escape(what)}.* since it was embedded into ", text
    )
    assert "Restore the file as it was, or re-embed it: `clusterclip run INPUT... --workdir" in text


def test_the_unchanged_corpus_exports_the_embedded_records(pristine, tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(pristine["root"], root)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    for argv in _commands(root / "work", out).values():
        assert main(argv) == 0
    lines = (out / "ordered" / "part-00000.jsonl").read_text("utf-8").splitlines()
    schedule = json.loads((out / "ordered" / "index.json").read_text("utf-8"))
    assert len(lines) == schedule["n_records"] > 0
    indices = np.load(root / "work" / "schedule.npy")
    corpus = (root / "verses.jsonl").read_text("utf-8").splitlines()
    assert lines == [corpus[i] for i in indices]
