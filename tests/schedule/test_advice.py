"""The repetition-cap advice printed by the schedule and run summaries."""

from __future__ import annotations

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.schedule.advice import clip_advice


@pytest.mark.parametrize(
    ("policy", "max_repeats", "passes", "suggested"),
    [
        ("clusterclip", 4, 4.0, 8),  # the grid's losing case: R = passes
        ("clusterclip", 4, 3.2, 7),
        ("temperature", 2, 1.6, 4),  # any clipped policy
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
