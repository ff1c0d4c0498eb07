"""``clusterclip embed`` on the command line: summary, errors, help."""

from __future__ import annotations

import json

import pytest
from embed_helpers import write_jsonl

from clusterclip.cli import main


def test_cli_embeds_and_prints_a_summary(tmp_path, verses, capsys):
    corpus = write_jsonl(tmp_path / "v.jsonl", verses[:150])
    with open(corpus, "a", encoding="utf-8") as handle:
        handle.write('{"text": 7}\n')
    workdir = tmp_path / "w"
    code = main(["embed", str(corpus), "--workdir", str(workdir), "--encoder", "tfidf",
                 "--shard-size", "64"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "embedded 151 documents" in out
    assert "ok 150, empty 0, malformed 0, missing_field 0, not_text 1" in out
    assert "dimensions:" in out and "documents/s" in out and "3 part(s)" in out
    assert "1 rejected record(s) listed in" in out
    assert json.loads((workdir / "rejects.jsonl").read_text())["line"] == 151

    assert main(["embed", str(corpus), "--workdir", str(workdir), "--encoder", "tfidf",
                 "--shard-size", "64"]) == 0  # fmt: skip
    assert "nothing to do" in capsys.readouterr().out


def test_cli_errors_exit_2_with_the_cause(tmp_path, capsys):
    code = main(["embed", str(tmp_path / "nope.jsonl"), "--workdir", str(tmp_path / "w")])
    assert code == 2
    assert "clusterclip embed: error: input" in capsys.readouterr().err


def test_cli_help_has_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["embed", "--help"])
    text = capsys.readouterr().out
    assert "clusterclip embed data/*.jsonl.gz --workdir w" in text
    assert "--trust-remote-code" in text and "--engine" in text
