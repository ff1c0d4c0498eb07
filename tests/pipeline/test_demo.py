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
