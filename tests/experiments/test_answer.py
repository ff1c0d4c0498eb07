"""The declared analysis (experiments/ANALYSIS.md) as `answer` applies it: pairing by seed,
the sign-flip test, Benjamini-Hochberg across rows, and one verdict rule for gains and harms."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterclip.experiments import stats
from clusterclip.experiments.answer import analyse, answer_tables, main, read_grid


def _record(grid, corpus, regime, policy, seed, natural, rare=None, wall=100.0):
    rare = natural if rare is None else rare
    metrics = {"natural": natural, "category": natural, "independent_macro": natural,
               "independent_rare": rare, "macro": 0.0}  # fmt: skip
    curve = [{"tokens": 0, **metrics}, {"tokens": 10, **metrics}]
    return {"_grid": grid, "corpus": corpus, "regime": regime, "policy": policy, "seed": seed,
            "epochs": 1.0, "metrics": metrics, "curve": curve, "wall_seconds": wall,
            "machine": "cpu x", "dynamics": {"rare_share_by_slice": [0.1, 0.2],
                                             "rare_share_natural": 0.1}}  # fmt: skip


def _main_grid(effect_rare: float, seeds=range(10)) -> list[dict]:
    """random, uniform (= random) and the recommended arm, whose rare metric moves by
    ``effect_rare`` +- a seed-dependent wobble."""
    records = []
    for regime, recommended in (("1-epoch", "clusterclip-r4"), ("4-epoch", "clusterclip-r8")):
        for seed in seeds:
            base = 4.0 + 0.05 * np.sin(seed)
            wobble = 0.004 * np.cos(3 * seed)
            records += [
                _record("main", "kjv", regime, "random", seed, base),
                _record("main", "kjv", regime, "uniform", seed, base),
                _record("main", "kjv", regime, recommended, seed, base,
                        rare=base + effect_rare + wobble),
            ]  # fmt: skip
    return records


@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=8))
@settings(max_examples=60, deadline=None)
def test_exact_sign_flip_p_matches_brute_force(diffs):
    observed = abs(sum(diffs))
    patterns = list(itertools.product((-1, 1), repeat=len(diffs)))
    hits = sum(abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed - 1e-9 * max(
        observed, sum(map(abs, diffs)), 1e-300) for signs in patterns)  # fmt: skip
    assert stats.sign_flip_p(diffs) == pytest.approx(hits / len(patterns))


def test_monte_carlo_p_is_reproducible_and_small_for_a_clear_shift():
    diffs = [0.01 + 0.001 * i for i in range(20)]
    p = stats.sign_flip_p(diffs)
    assert p == stats.sign_flip_p(diffs) and p < 1e-4
    assert stats.sign_flip_p([(-1) ** i * 0.01 for i in range(20)]) == 1.0


def test_bh_matches_hand_computation_and_keeps_order():
    # sorted p 0.01 0.02 0.03 0.2 -> p*m/rank 0.04 0.04 0.04 0.2
    assert stats.bh_qvalues([0.2, 0.01, 0.03, 0.02]) == pytest.approx([0.2, 0.04, 0.04, 0.04])


@given(st.floats(0.0001, 0.2), st.floats(0.0001, 0.05), st.floats(0, 1))
def test_the_verdict_treats_a_gain_and_a_harm_alike(mean, half, q):
    gain = stats.verdict(-mean, -mean - half, -mean + half, q=q)
    harm = stats.verdict(mean, mean - half, mean + half, q=q)
    assert gain.replace("lower", "X") == harm.replace("higher", "X")


@pytest.mark.parametrize(("effect", "expected"), [(-0.02, "lower loss"), (0.02, "higher loss")])
def test_ten_seed_rows_get_a_verdict_either_way(effect, expected):
    rows = analyse(_main_grid(effect))
    row = next(r for r in rows if (r.regime, r.contrast, r.metric) ==
               ("1-epoch", "recommended − random", "independent_rare"))  # fmt: skip
    assert row.test.n == 10 and row.test.p == pytest.approx(2 / 1024)
    assert row.q is not None and row.q <= 0.05 and row.verdict == expected
    same = next(r for r in rows if (r.regime, r.contrast, r.metric) ==
                ("1-epoch", "uniform − random", "natural"))  # fmt: skip
    assert same.test.mean == 0 and same.verdict == "no effect beyond ±0.01"
    pooled = next(r for r in rows if (r.corpus, r.contrast, r.metric) ==
                  ("pooled", "recommended − random", "independent_rare"))  # fmt: skip
    assert pooled.test.n == 20 and pooled.verdict == expected


def test_few_seeds_are_reported_not_tested_and_sensitivity_rows_stay_out_of_the_family():
    rows = analyse(_main_grid(-0.02, seeds=range(5)))
    assert all(r.q is None and r.verdict == "not tested (too few seeds)"
               for r in rows if r.corpus != "pooled")  # fmt: skip
    rows = analyse(_main_grid(-0.02))
    fresh = [r for r in rows if r.contrast.endswith("(seeds 5-9)")]
    assert fresh and all(not r.in_family and r.q is None and r.test.n == 5 for r in fresh)
    assert answer_tables(_main_grid(-0.02)).count("sensitivity (not in the family)") == len(fresh)


def test_the_cluster_agreement_is_reported_per_corpus_and_data_seed():
    records = _main_grid(-0.02)
    for r in records:
        r["clustering"] = {"ari": 0.0772, "independent_rare_in_own_rare": 0.137}
    records[0] = {**records[0], "_grid": "split", "data_seed": 1,
                  "clustering": {"ari": 0.0813, "independent_rare_in_own_rare": None}}  # fmt: skip
    text = answer_tables(records)
    assert "| kjv | 0 | 0.077 | 13.7% |" in text
    assert "| kjv | 1 | 0.081 | — |" in text
    assert "ARI" not in answer_tables(_main_grid(-0.02))  # older records without it


def test_clip_grid_decides_the_advice_line_only_when_complete():
    records = []
    for grid, regimes in (("clip", ("8-epoch",)), ("clip-tail", ("4-epoch", "8-epoch"))):
        for regime in regimes:
            passes = int(regime.split("-")[0])
            for seed in range(5):
                base = 4.0 + 0.01 * seed
                records += [_record(grid, "kjv", regime, p, seed, base) for p in (
                    "random", "uniform", f"clusterclip-r{passes}", f"clusterclip-r{4 * passes}",
                    f"planned-r{2 * passes}")]  # fmt: skip
                records.append(_record(grid, "kjv", regime, f"clusterclip-r{2 * passes}", seed,
                                       base, rare=base - 0.03 - 0.001 * seed))  # fmt: skip
    text = answer_tables(records)
    assert "**Keep the advice line**" in text and "independent rarest 25%" in text
    assert "| kjv-tail | 4-epoch | R=2P − uniform |" in text
    assert "not decided yet" in answer_tables([r for r in records if r["seed"] < 4])


def test_cli_reads_nested_grids_writes_json_and_figures_and_names_bad_lines(tmp_path, capsys):
    folder = tmp_path / "main" / "kjv"
    folder.mkdir(parents=True)
    lines = [{k: v for k, v in r.items() if k != "_grid"} for r in _main_grid(-0.02)]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert {r["_grid"] for r in read_grid(tmp_path)} == {"main"}
    assert main([str(tmp_path), "--json", str(tmp_path / "rows.json"),
                 "--figures", str(tmp_path / "fig")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "| kjv | 1-epoch | recommended − random | independent rarest 25% | 10 |" in out
    assert {p.name for p in (tmp_path / "fig").iterdir()} == {
        "paired-main.png", "curves-main.png", "rare-share-main.png"}  # fmt: skip
    assert main([str(tmp_path), "--keep", "1-epoch:random,uniform"]) == 0
    kept = capsys.readouterr().out
    assert "| kjv | 1-epoch | uniform − random |" in kept and "clusterclip-r4" not in kept
    assert "| kjv | 4-epoch | clusterclip-r8 − random |" in kept  # regimes not named stay whole
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert any(r["verdict"] == "lower loss" and len(r["values"]) == 10 for r in rows)
    with (folder / "results.jsonl").open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path)])
    assert stop.value.code == 2
    assert f"results.jsonl:{len(lines) + 1}: not a JSON line" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing")])
    assert "no results.jsonl" in capsys.readouterr().err
