"""The plain-answer tables of a policy grid: pairing by seed, verdicts, identical schedules."""

from __future__ import annotations

import json

import pytest

from clusterclip.experiments.answer import answer_tables, main, read_grid, verdict


def _record(corpus, regime, policy, seed, natural, other=0.0, wall=100.0):
    metrics = {"natural": natural, "category": natural + other, "independent_macro": natural,
               "independent_rare": natural + 2 * other, "macro": 0.0}  # fmt: skip
    return {"corpus": corpus, "regime": regime, "policy": policy, "seed": seed, "epochs": 1.0,
            "metrics": metrics, "wall_seconds": wall, "machine": "cpu x"}  # fmt: skip


def test_verdict_needs_every_seed_to_agree():
    assert verdict([[-0.01, -0.02, -0.001]]) == "helped"
    assert verdict([[0.01, 0.02]]) == "hurt"
    assert verdict([[-0.01, -0.02], [0.01, 0.03]]) == "mixed"
    assert verdict([[-0.01, 0.02], [0.01, -0.03]]) == "no clear effect"
    assert verdict([[-0.5]]) == "no clear effect"  # one seed never decides


def test_tables_pair_by_seed_and_name_identical_schedules():
    records = [
        _record("kjv", "1-epoch", "random", 0, 4.0),
        _record("kjv", "1-epoch", "random", 1, 4.2),
        _record("kjv", "1-epoch", "uniform", 0, 3.9),
        _record("kjv", "1-epoch", "uniform", 1, 4.15),
        _record("kjv", "1-epoch", "uniform", 2, 1.0),  # no random of seed 2: not paired
        _record("kjv", "1-epoch", "clusterclip-r4", 0, 3.9),
        _record("kjv", "1-epoch", "clusterclip-r4", 1, 4.15),
        _record("kjv", "1-epoch", "planned-r4", 0, 4.1, other=-0.2),
        _record("kjv", "1-epoch", "planned-r4", 1, 4.3, other=-0.3, wall=300.0),
    ]
    text = answer_tables(records)
    rows = {
        line.split(" | ")[0].strip("| "): line for line in text.splitlines() if "| kjv |" in line
    }
    assert rows["uniform"].startswith("| uniform | kjv | 2 | -0.075 (-0.100 to -0.050) |")
    assert rows["uniform"].endswith("| helped |")
    assert "= uniform" in rows["clusterclip-r4"] and "never binds" in rows["clusterclip-r4"]
    # natural +0.1 in both seeds, category -0.1 / -0.2: better on one, worse on another
    assert rows["planned-r4"].endswith("| mixed |")
    assert "-0.150 (-0.200 to -0.100)" in rows["planned-r4"]
    assert "9 runs; wall time per run: median 100 s (range 100-300 s) on cpu x" in text


def test_cli_reads_corpus_directories_and_names_bad_lines(tmp_path, capsys):
    (tmp_path / "kjv").mkdir()
    lines = [_record("kjv", "4-epoch", p, s, 4.0 + s - 0.01 * (p == "uniform"))
             for p in ("random", "uniform") for s in (0, 1)]  # fmt: skip
    (tmp_path / "kjv" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert len(read_grid(tmp_path)) == 4
    assert main([str(tmp_path)]) == 0
    assert "| uniform | kjv | 2 | -0.010 (-0.010 to -0.010) |" in capsys.readouterr().out
    with (tmp_path / "kjv" / "results.jsonl").open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path)])
    assert stop.value.code == 2
    assert "results.jsonl:5: not a JSON line" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing")])
    assert "no results.jsonl" in capsys.readouterr().err
