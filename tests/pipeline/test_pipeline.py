"""`clusterclip run` end to end on real KJV verses (tfidf encoder): stages, skips, redos."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from clusterclip.config import ClusterOptions, ReportOptions, RunConfig, ScheduleOptions
from clusterclip.errors import ClusterClipError
from tests.product_support import kjv_records

pytest.importorskip("clusterclip.embed")
pytest.importorskip("clusterclip.schedule")


def _write_corpus(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _config(**schedule) -> RunConfig:
    from clusterclip.config import EmbedOptions

    return RunConfig(
        embed=EmbedOptions(encoder="tfidf", text_field="text"),
        cluster=ClusterOptions(n_clusters=6, n_iter=10),
        schedule=ScheduleOptions(max_repeats=2, **schedule),
        report=ReportOptions(enabled=False),
    )


def _actions(result) -> dict[str, str]:
    return {stage: info["action"] for stage, info in result["stages"].items()}


def test_stages_run_skip_and_redo_downstream(tmp_path):
    from clusterclip.pipeline import run
    from clusterclip.schedule import Schedule

    records = kjv_records(step=50)  # 623 verses from all 66 books
    corpus = _write_corpus(tmp_path / "kjv.jsonl", records)
    workdir = tmp_path / "work"
    lines: list[str] = []

    first = run([corpus], workdir=workdir, config=_config(epochs=1.5), log=lines.append)
    assert _actions(first) == {
        "embed": "ran",
        "cluster": "ran",
        "dedup": "ran",  # near-duplicate groups (schedule.duplicates = "group", the default)
        "schedule": "ran",
        "report": "disabled",
    }
    assert first["n_usable"] == len(records)
    assert first["budget"] == {"num_samples": round(1.5 * len(records)), "num_tokens": None}
    schedule = Schedule.load(workdir / "schedule.npy")
    assert len(schedule.indices) == round(1.5 * len(records))
    assert np.bincount(schedule.indices).max() <= 2
    assert all("first run" in line for line in lines)
    first_bytes = (workdir / "schedule.npy").read_bytes()

    # Same inputs and options: nothing to do.
    again = run([corpus], workdir=workdir, config=_config(epochs=1.5))
    assert set(_actions(again).values()) == {"skipped", "disabled"}
    assert again["stages"]["cluster"]["reason"] == "up to date"

    # A schedule option changed: only the schedule is redone, and the log says why.
    lines.clear()
    changed = run(
        [corpus],
        workdir=workdir,
        config=dataclasses.replace(
            _config(epochs=1.5), seed=0, schedule=ScheduleOptions(max_repeats=3, epochs=1.5)
        ),
        log=lines.append,
    )
    assert _actions(changed)["embed"] == _actions(changed)["cluster"] == "skipped"
    assert _actions(changed)["dedup"] == "skipped"
    assert changed["stages"]["schedule"]["action"] == "ran"
    assert "max_repeats: 2 -> 3" in changed["stages"]["schedule"]["reason"]
    assert any(line.startswith("schedule  ran") and "max_repeats: 2 -> 3" in line for line in lines)

    # Back to the first options: the schedule is rebuilt byte for byte (deterministic).
    run([corpus], workdir=workdir, config=_config(epochs=1.5))
    assert (workdir / "schedule.npy").read_bytes() == first_bytes

    # n_clusters changed: cluster and everything after it.
    more = run([corpus], workdir=workdir, n_clusters=8, config=_config(epochs=1.5))
    assert _actions(more)["embed"] == "skipped"
    assert (
        _actions(more)["cluster"] == _actions(more)["dedup"] == _actions(more)["schedule"] == "ran"
    )
    assert "n_clusters: 6 -> 8" in more["stages"]["cluster"]["reason"]
    assert "input cluster.clusters changed" in more["stages"]["schedule"]["reason"]
    assert more["n_clusters"] == 8

    # The corpus changed: every stage is redone.
    _write_corpus(corpus, records[:-40])
    edited = run([corpus], workdir=workdir, n_clusters=8, config=_config(epochs=1.5))
    assert set(_actions(edited).values()) == {"ran", "disabled"}
    assert "kjv.jsonl changed" in edited["stages"]["embed"]["reason"]
    assert edited["n_usable"] == len(records) - 40

    # An output deleted: that stage is redone.
    (workdir / "schedule.npy").unlink()
    repaired = run([corpus], workdir=workdir, n_clusters=8, config=_config(epochs=1.5))
    assert _actions(repaired)["schedule"] == "ran"
    assert "outputs missing (schedule.npy)" in repaired["stages"]["schedule"]["reason"]


def test_run_validates_its_arguments(tmp_path):
    from clusterclip.pipeline import run

    with pytest.raises(
        ClusterClipError, match=r"`n_clusters` is required \(an int in \[1, inf\)\)"
    ):
        run([tmp_path / "x.jsonl"], workdir=tmp_path / "w")
    with pytest.raises(ClusterClipError, match=r"`inputs` must be at least one corpus file"):
        run([], workdir=tmp_path / "w", n_clusters=3)


def test_cli_run_with_config_file_and_report(tmp_path, capsys):
    from clusterclip.cli import main

    records = kjv_records(step=80)
    _write_corpus(tmp_path / "kjv.jsonl", records)
    (tmp_path / "run.toml").write_text(
        'inputs = ["kjv.jsonl"]\nworkdir = "work"\n[embed]\nencoder = "tfidf"\n'
        'text_field = "text"\n[cluster]\nn_clusters = 5\n[schedule]\nmax_repeats = 2\n'
        "epochs = 2.0\n"
    )
    status = main(
        ["run", "--config", str(tmp_path / "run.toml"), "--num-samples", "700", "--seed", "2"]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    workdir = tmp_path / "work"
    assert (workdir / "report.html").exists() and (workdir / "schedule.json").exists()
    sidecar = json.loads((workdir / "schedule.json").read_text())
    assert sidecar["config"]["num_samples"] == 700 and sidecar["config"]["seed"] == 2
    assert "clusterclip run: done" in out and "budget 700 documents" in out
    assert "report:" in out and "never seen" in out
    assert "advice:" not in out  # 1.8 passes: the cap advice starts at 3 passes
    assert len(out.splitlines()) < 30  # one screen
    # An unknown key in the file is a clean CLI error, exit status 2.
    (tmp_path / "bad.toml").write_text("[cluster]\nk = 5\n")
    assert main(["run", "--config", str(tmp_path / "bad.toml")]) == 2
    assert "unknown option `cluster.k`" in capsys.readouterr().err

    # The report's clip events are the schedule's own clip steps.
    from clusterclip.schedule import Schedule

    clip_step = Schedule.load(workdir / "schedule.npy").stats.clip_step
    report = json.loads((workdir / "report.json").read_text())
    assert [e["position"] for e in report["clip_events"]] == sorted(
        int(p) for p in clip_step if p >= 0
    )
    assert report["keywords_available"] is True

    # The adapters read what the real stages wrote: export in schedule order, byte for byte.
    from clusterclip.adapters.export import export_ordered_jsonl, export_sample_index
    from clusterclip.adapters.hf import apply_schedule

    lines = (tmp_path / "kjv.jsonl").read_text("utf-8").splitlines()
    order = np.load(workdir / "schedule.npy")
    shards = export_ordered_jsonl(workdir, tmp_path / "ordered", shard_size=300)
    exported = [line for shard in shards for line in shard.read_text("utf-8").splitlines()]
    assert exported == [lines[i] for i in order]
    np.testing.assert_array_equal(np.load(export_sample_index(workdir, tmp_path / "m.npy")), order)
    datasets = pytest.importorskip("datasets")
    corpus = datasets.Dataset.from_list([json.loads(line) for line in lines])
    assert apply_schedule(corpus, workdir)["id"] == [json.loads(lines[i])["id"] for i in order]


def test_a_failed_stage_keeps_the_finished_ones(tmp_path):
    from clusterclip.pipeline import run

    corpus = _write_corpus(tmp_path / "kjv.jsonl", kjv_records(step=300))
    workdir = tmp_path / "work"
    with pytest.raises(ClusterClipError, match="n_clusters"):
        run([corpus], workdir=workdir, n_clusters=100_000, config=_config())
    manifest = json.loads((workdir / "manifest.json").read_text())
    stages = manifest["stages"]
    assert stages["embed"]["complete"] is True and stages["cluster"]["complete"] is False
    fixed = run([corpus], workdir=workdir, n_clusters=4, config=_config())
    assert _actions(fixed)["embed"] == "skipped"
    assert fixed["stages"]["cluster"]["reason"] == "n_clusters: 100000 -> 4"
    assert _actions(fixed)["schedule"] == "ran"
