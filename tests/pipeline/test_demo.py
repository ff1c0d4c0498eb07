"""`clusterclip demo` with its default encoder (all-MiniLM-L6-v2, offline) on a sample."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("clusterclip.embed")
pytest.importorskip("sentence_transformers")


def test_demo_runs_offline_with_the_default_encoder(tmp_path, capsys, monkeypatch):
    from clusterclip.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    workdir = tmp_path / "demo"
    status = main(["demo", "--workdir", str(workdir), "--sample", "200", "--n-clusters", "6"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "encoder sentence-transformers" in out
    assert f"file://{(workdir / 'report.html').resolve()}" in out
    manifest = json.loads((workdir / "manifest.json").read_text())
    embed = manifest["stages"]["embed"]
    assert "MiniLM" in json.dumps(embed)
    report = json.loads((workdir / "report.json").read_text())
    assert report["summary"]["n_usable"] == 200
    assert report["summary"]["n_clusters"] == 6
    assert report["keywords_available"] is True
    assert all(row["keywords"] and row["example"] for row in report["clusters"])
    # The verses' ids are kept: examples name the verse.
    assert any(":" in (row["example"]["id"] or "") for row in report["clusters"])
    # A rerun does nothing.
    assert main(["demo", "--workdir", str(workdir), "--sample", "200", "--n-clusters", "6"]) == 0
    assert "embed     skipped" in capsys.readouterr().out


def _shape(line: str, workdir: str) -> str:
    """A summary line with its numbers, paths and machine-specific words taken out."""
    import re

    line = re.sub(r"file://\S+", "file://PATH", line.replace(workdir, "W"))
    if line.startswith("machine:"):
        return "machine: ..."  # the CPU, precision, backend and threads of the machine at hand
    line = re.sub(r"kjv-sample-\d+\.jsonl", "kjv-sample-N.jsonl", line)
    return re.sub(r"\d[\d,]*(\.\d+)?", "#", line).rstrip()


def test_readme_tour_has_the_shape_of_the_real_output_and_names_its_machine(
    tmp_path, capsys, monkeypatch
):
    """The README's tour is one machine's output: its lines must be the lines
    `clusterclip demo` prints (numbers aside), and the README must say where
    they come from, not promise another CPU's numbers."""
    from pathlib import Path

    from clusterclip.cli import main

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    tour = readme.split("## A five-minute tour", 1)[1]
    block = tour.split("```", 2)[1].strip("\n").splitlines()
    assert block[0] == "$ clusterclip demo"
    intro = tour.split("```", 1)[0]
    assert "lscpu" in intro and "family" in intro  # which CPU printed it
    assert "The same seed gives the same output on every run." not in readme  # unqualified
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    workdir = tmp_path / "clusterclip-demo"
    args = ["demo", "--workdir", str(workdir), "--sample", "200", "--n-clusters", "6"]
    assert main(args) == 0
    printed = {_shape(line, str(workdir)) for line in capsys.readouterr().out.splitlines()}
    # the duplicates line is there only when the corpus has near-copies (this 200-verse
    # sample may have none, or one group: "1 near-duplicate group")
    shapes = [_shape(line, "clusterclip-demo") for line in block[1:]
              if not line.startswith("duplicates:")]  # fmt: skip
    missing = [s for s in shapes if s and s not in printed]
    assert not missing, (missing, sorted(printed))
    assert "machine: ..." in shapes and any(s.startswith("stability:") for s in shapes)
