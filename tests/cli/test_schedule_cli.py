"""``clusterclip schedule`` and ``dedup`` through the plan of stages: what runs, what is refused."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.io import WorkDir
from tests.product_support import require_module, run_small_workdir


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    require_module("sklearn")
    require_module("pyarrow")
    return run_small_workdir(tmp_path_factory.mktemp("schedule-cli"), n_lines=200, n_clusters=4)


@pytest.fixture
def work(small, tmp_path):
    """A copy of the clustered work directory, for a test that writes."""
    copy = tmp_path / "work"
    shutil.copytree(small["workdir"], copy)
    return copy


def _call(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_declared_inputs_are_the_ones_the_runner_records(small):
    """The plan's probe sees the same keys as the real inputs (one declaration, two readers)."""
    from clusterclip.config import RunConfig
    from clusterclip.dedup.stage import DedupStage
    from clusterclip.plan import declared_inputs
    from clusterclip.report.stage import ReportStage
    from clusterclip.schedule.options import ScheduleOptions
    from clusterclip.schedule.stage import ScheduleStage

    work = WorkDir(small["workdir"])
    config = RunConfig()
    for stage, options in (
        (DedupStage(), config.dedup),
        (ScheduleStage(), config.schedule),
        (ScheduleStage(), ScheduleOptions(num_tokens=5000, duplicates="off")),
        (ReportStage(), config.report),
    ):
        assert declared_inputs(stage, options) == tuple(stage.inputs(work, options))


def test_schedule_refreshes_the_groups_with_their_recorded_settings(work, capsys):
    manifest = json.loads((work / "manifest.json").read_text())
    manifest["stages"]["dedup"]["config"]["threshold"] = 0.8  # as an earlier `dedup` left it
    (work / "manifest.json").write_text(json.dumps(manifest))
    (work / "duplicates.parquet").unlink()
    code, out, _ = _call(capsys, "schedule", "--workdir", work, "--max-repeats", "3")
    assert code == 0
    lines = out.splitlines()
    # the groups are redone first (their output is missing), then the schedule
    assert lines[0].startswith("dedup") and "ran" in lines[0] and "outputs missing" in lines[0]
    assert lines[1].startswith("schedule") and "ran" in lines[1]
    assert lines[2].startswith("clusterclip schedule: wrote ")
    assert WorkDir(work).entry("dedup")["config"]["threshold"] == 0.8  # kept, not the default


def test_schedule_without_groups_runs_no_dedup(work, capsys):
    code, out, _ = _call(capsys, "schedule", "--workdir", work, "--duplicates", "off")
    assert code == 0 and not any(line.startswith("dedup") for line in out.splitlines())
    assert "max repeats" in out and "smallest 10%" in out


def test_the_schedule_summary_lines(work, capsys):
    code, out, _ = _call(capsys, "schedule", "--workdir", work, "--epochs", "2")
    assert code == 0
    summary = out[out.index("clusterclip schedule: wrote") :]
    labels = WorkDir(work).labels()
    n_usable = int((labels >= 0).sum())
    assert f"documents      {len(labels):,} ({n_usable:,} usable" in summary
    assert f"budget epochs=2.0 = {2 * n_usable:,} documents" in summary
    for name in ("clusters", "policy", "draws", "distinct docs", "max repeats", "clipped"):
        assert f"\n  {name}" in summary


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give exactly one of --workdir W"),
        (["--workdir", "W", "--labels", "L"], "give exactly one of --workdir W"),
        (["--workdir", "W", "--out", "s.npy"], "--out applies with --labels only"),
        (["--workdir", "W", "--lengths", "n.npy"], "--lengths applies with --labels only"),
        (["--labels", "L"], "--labels needs --out FILE"),
        (["--labels", "L", "--out", "s.npy", "--policy", "hierarchical"],
         "--policy hierarchical needs the cluster tree"),
    ],
)  # fmt: skip
def test_schedule_refuses_before_any_work(tmp_path, capsys, argv, message):
    labels = tmp_path / "labels.npy"
    np.save(labels, np.array([0, 0, 1, 1]))
    given = [str(labels) if a == "L" else str(tmp_path / "w") if a == "W" else a for a in argv]
    code, out, err = _call(capsys, "schedule", *given)
    assert code == 2 and message in err and out == ""
    assert not (tmp_path / "w").exists() and not (tmp_path / "s.npy").exists()


def test_schedule_names_a_work_directory_without_clusters(tmp_path, capsys):
    code, _, err = _call(capsys, "schedule", "--workdir", tmp_path / "empty")
    assert code == 2 and "clusterclip schedule: error:" in err and "cluster" in err
    assert not (tmp_path / "empty").exists()  # refused before the lock claims it


def test_dedup_refuses_changed_settings_without_overwrite(work, capsys):
    code, _, err = _call(capsys, "dedup", "--workdir", work, "--dedup-threshold", "0.7")
    assert code == 2 and "threshold: 0.9 -> 0.7" in err and "--overwrite" in err
    code, out, _ = _call(
        capsys, "dedup", "--workdir", work, "--dedup-threshold", "0.7", "--overwrite"
    )
    assert code == 0 and out.startswith("dedup") and "--overwrite: redoing it" in out
