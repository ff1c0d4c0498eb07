"""The advice printed by the schedule and run summaries: the repetition cap, the draw rule."""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.schedule.advice import MANY_CLUSTERS, clip_advice, rule_advice


@pytest.mark.parametrize(
    ("policy", "max_repeats", "passes", "suggested"),
    [
        ("clusterclip", 4, 4.0, 8),  # the grid's losing case: R = passes
        ("clusterclip", 4, 3.2, 7),
        ("temperature", 2, 3.0, 6),  # any clipped policy
        ("clusterclip", 2, 1.5, None),  # under 3 passes: outside what the grid measured
        ("clusterclip", 4, 2.0, None),  # R = 2x passes: what the grid recommends
        ("clusterclip", 8, 4.0, None),
        ("clusterclip", 1, 1.0, None),  # about one pass: the cap hardly matters
        ("clusterclip", None, 9.0, None),  # no cap
        ("random", 1, 5.0, None),  # random passes are not clipped by cluster
    ],
)
def test_advice_only_below_twice_the_passes(policy, max_repeats, passes, suggested):
    advice = clip_advice(policy, max_repeats, passes=passes)
    if suggested is None:
        assert advice is None
    else:
        assert advice.endswith(f"--max-repeats {suggested}")
        assert f"max_repeats={max_repeats}" in advice and "docs/results.md" in advice


@pytest.mark.parametrize(("max_repeats", "advised"), [("4", True), ("8", False)])
def test_schedule_summary_advises_on_a_four_pass_budget(
    tmp_path, skewed_labels, capsys, max_repeats, advised
):
    np.save(tmp_path / "labels.npy", skewed_labels)
    argv = ["schedule", "--labels", str(tmp_path / "labels.npy"), "--epochs", "4",
            "--max-repeats", max_repeats, "--out", str(tmp_path / "schedule.npy")]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert ("advice" in text) == advised
    if advised:
        assert "4.0 passes" in text and "--max-repeats 8" in text


def test_run_summary_prints_the_advice(capsys):
    from clusterclip.cli.run import print_summary

    result = {  # the fields of clusterclip.pipeline.run's result that the summary reads
        "workdir": "w", "stages": {"schedule": {"action": "ran"}}, "n_documents": 1000,
        "n_usable": 1000, "budget": {"num_samples": 4000, "num_tokens": None},
        "schedule_path": "w/schedule.npy",
        "schedule": {"config": {"policy": "clusterclip", "max_repeats": 4, "order": "online",
                                "seed": 0}, "stats": {"n_draws": 4000, "budget_met": True}},
    }  # fmt: skip
    print_summary(result, 1.0)
    out = capsys.readouterr().out
    assert "advice:      the budget is 4.0 passes" in out and "--max-repeats 8" in out
    result["schedule"]["config"]["max_repeats"] = 8
    print_summary(result, 1.0)
    assert "advice" not in capsys.readouterr().out
    result["n_clusters"] = MANY_CLUSTERS
    print_summary(result, 1.0)
    assert "schedule version" not in capsys.readouterr().out  # the default rule: no advice
    result["schedule"]["config"]["schedule_version"] = 1
    print_summary(result, 1.0)
    advice = f"advice:      {MANY_CLUSTERS:,} clusters: schedule version 1 builds"
    assert advice in capsys.readouterr().out


@pytest.mark.parametrize(
    ("policy", "order", "version", "n_clusters", "advised"),
    [
        ("clusterclip", "online", 2, MANY_CLUSTERS, True),
        ("uniform", "online", 1, 10**6, True),
        ("temperature", "planned", 3, 10**6, True),
        ("hierarchical", "online", 1, 10**6, True),
        ("clusterclip", "online", 1, MANY_CLUSTERS - 1, False),  # about the same speed below
        ("clusterclip", "online", 4, 10**6, False),  # the default rule
        ("clusterclip", "online", None, 10**6, False),  # the default rule, unresolved
        ("random", "online", 1, 10**6, False),  # one group, no cluster to pay for
    ],
)
def test_rule_advice_only_for_many_clusters_on_an_older_rule(
    policy, order, version, n_clusters, advised
):
    advice = rule_advice(policy, order, version, n_clusters)
    assert (advice is not None) == advised
    if advised:
        assert f"{n_clusters:,} clusters: schedule version {version} builds" in advice
        assert "leave --schedule-version unset" in advice


@pytest.mark.parametrize(("version", "advised"), [([], False), (["--schedule-version", "1"], True)])
def test_schedule_summary_suggests_the_default_rule_for_many_clusters(
    tmp_path, capsys, version, advised
):
    labels = np.arange(MANY_CLUSTERS, dtype=np.int64)  # one document per cluster
    np.save(tmp_path / "labels.npy", labels)
    argv = ["schedule", "--labels", str(tmp_path / "labels.npy"), "--num-samples", "1000",
            "--out", str(tmp_path / "schedule.npy"), *version]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert ("leave --schedule-version unset" in text) == advised
