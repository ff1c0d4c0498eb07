"""``clusterclip embed``, ``cluster`` and ``report`` run their stage through the plan, as ``run`` does.

Real runs on real KJV verses (tf-idf encoder, numpy k-means): what each command
plans, what it is given, what a rerun skips, what it refuses, and that it writes
the same files as the library function of its stage.
"""

from __future__ import annotations

import json
import shutil

import pytest

from clusterclip.cli import main
from clusterclip.io import WorkDir
from tests.product_support import kjv_records, require_module, run_small_workdir

EMBED = ("--encoder", "tfidf", "--shard-size", "64")
CLUSTER = ("--n-clusters", "4", "--backend", "numpy")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    require_module("sklearn")
    require_module("pyarrow")
    path = tmp_path_factory.mktemp("stage-commands") / "verses.jsonl"
    records = kjv_records(step=5, limit=200)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def clustered(corpus, tmp_path_factory):
    """A work directory embedded and clustered by the two commands."""
    work = tmp_path_factory.mktemp("clustered") / "work"
    assert main(["embed", str(corpus), "--workdir", str(work), *EMBED]) == 0
    assert main(["cluster", "--workdir", str(work), *CLUSTER]) == 0
    return work


@pytest.fixture
def work(clustered, tmp_path):
    """A copy of the clustered work directory, for a test that writes."""
    copy = tmp_path / "work"
    shutil.copytree(clustered, copy)
    return copy


@pytest.fixture
def planned(monkeypatch):
    """``(stages, given)`` of every ``StagePlan.run``, in call order."""
    from clusterclip.plan import StagePlan

    calls = []
    run = StagePlan.run

    def spy(self, work, **kwargs):
        calls.append((self.names, self.given))
        return run(self, work, **kwargs)

    monkeypatch.setattr(StagePlan, "run", spy)
    return calls


def _call(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _entry(work, stage):
    return json.loads((work / "manifest.json").read_text())["stages"][stage]


def test_embed_and_cluster_run_a_plan_and_skip_on_a_rerun(corpus, tmp_path, capsys, planned):
    work = tmp_path / "work"
    code, out, _ = _call(capsys, "embed", corpus, "--workdir", work, *EMBED)
    assert code == 0 and out.startswith(f"embedded 200 documents into {work}\n")
    embedded = _entry(work, "embed")
    code, out, _ = _call(capsys, "embed", corpus, "--workdir", work, *EMBED)
    assert code == 0 and "nothing to do (already embedded" in out
    assert _entry(work, "embed") == embedded  # skipped: not even the manifest entry rewritten

    code, out, _ = _call(capsys, "cluster", "--workdir", work, *CLUSTER)
    assert code == 0 and out.startswith("clustered 200 of 200 documents into 4 clusters")
    clusters = _entry(work, "cluster")
    code, out, _ = _call(capsys, "cluster", "--workdir", work, *CLUSTER)
    assert code == 0 and out.startswith(
        f"cluster: {work} already holds this result (same settings and inputs); skipped.\n"
        "clustered 200 of 200 documents into 4 clusters"
    )
    assert _entry(work, "cluster") == clusters
    assert planned == [(["embed"], ())] * 2 + [(["cluster"], ("embed",))] * 2


def test_cluster_without_an_embed_stage_is_refused_by_the_plan(tmp_path, capsys, planned):
    empty = tmp_path / "empty"
    empty.mkdir()
    for workdir in (empty, tmp_path / "missing"):
        code, out, err = _call(capsys, "cluster", "--workdir", workdir, *CLUSTER)
        assert code == 2 and out == ""
        assert err == (
            f"clusterclip cluster: error: work directory {workdir} has no completed `embed` "
            "stage. Run `clusterclip embed INPUT... --workdir W` first.\n"
        )
    assert planned == [(["cluster"], ("embed",))] * 2  # the given stage is what is missing
    assert list(empty.iterdir()) == [] and not (tmp_path / "missing").exists()  # as found


def test_changed_settings_are_refused_until_overwrite(corpus, work, capsys):
    before = (work / "clusters.parquet").read_bytes()
    code, out, err = _call(capsys, "cluster", "--workdir", work, "--n-clusters", "5",
                           "--backend", "numpy")  # fmt: skip
    assert code == 2 and out == ""
    assert (
        "holds `cluster` outputs made with different settings or inputs (n_clusters: 4 -> 5)" in err
    )
    assert "Pass --overwrite (overwrite=True) to redo it" in err
    assert (work / "clusters.parquet").read_bytes() == before
    code, out, _ = _call(capsys, "cluster", "--workdir", work, "--n-clusters", "5",
                         "--backend", "numpy", "--overwrite")  # fmt: skip
    assert code == 0 and "into 5 clusters" in out and "skipped" not in out
    assert _entry(work, "cluster")["config"]["n_clusters"] == 5

    code, _, err = _call(capsys, "embed", corpus, "--workdir", work, "--encoder", "tfidf")
    assert code == 2 and "(shard_size: 64 -> 20000)" in err
    code, _, err = _call(capsys, "embed", corpus, "--workdir", work, *EMBED, "--num-workers", "2")
    assert code == 2 and "`--num-workers` apply to the Ray engine only" in err


def test_the_commands_write_what_the_library_functions_write(corpus, clustered, tmp_path):
    """One stage, two callers (the command's plan, the function's runner): the same bytes."""
    import clusterclip

    library = tmp_path / "library"
    clusterclip.embed(corpus, workdir=library, encoder="tfidf", shard_size=64)
    clusterclip.cluster(library, n_clusters=4, backend="numpy")
    files = ["documents.parquet", "rejects.jsonl", "clusters.parquet", "centroids.npy"]
    files += [f"embeddings/part-{shard:05d}.npy" for shard in range(4)]
    for name in files:
        assert (library / name).read_bytes() == (clustered / name).read_bytes(), name
    for stage in ("embed", "cluster"):
        ours, theirs = _entry(library, stage), _entry(clustered, stage)
        assert ours["config"] == theirs["config"] and ours["outputs"] == theirs["outputs"]


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory):
    require_module("sklearn")
    require_module("pyarrow")
    made = run_small_workdir(tmp_path_factory.mktemp("report-cli"), n_lines=200, n_clusters=4)
    return made["workdir"]


def test_report_runs_its_stage_through_the_plan(scheduled, tmp_path, capsys, planned):
    work = tmp_path / "work"
    shutil.copytree(scheduled, work)
    written = _entry(work, "report")
    code, out, _ = _call(capsys, "report", "--workdir", work)
    assert code == 0 and out.startswith(f"report:      {work / 'report.html'}\n")
    assert _entry(work, "report") == written  # up to date after `clusterclip run`: skipped
    code, _, _ = _call(capsys, "report", "--workdir", work, "--n-slices", "10")
    assert code == 0 and _entry(work, "report")["config"]["n_slices"] == 10  # redone
    assert planned == [(["report"], ("cluster", "embed", "schedule"))] * 2

    # Into another folder the report is a copy, not the work directory's stage.
    recorded = (work / "manifest.json").read_bytes()
    code, out, _ = _call(capsys, "report", "--workdir", work, "--out-dir", tmp_path / "copy")
    assert code == 0 and out.startswith(f"report:      {tmp_path / 'copy' / 'report.html'}\n")
    assert (work / "manifest.json").read_bytes() == recorded and len(planned) == 2


def test_report_refuses_a_work_directory_without_a_schedule(work, tmp_path, capsys):
    code, out, err = _call(capsys, "report", "--workdir", work)
    assert code == 2 and out == ""
    assert err == (
        f"clusterclip report: error: work directory {work} has no completed `schedule` stage. "
        "Run `clusterclip run ... --workdir W (or clusterclip schedule)` first.\n"
    )
    assert WorkDir(work).entry("report") is None and not (work / "report.html").exists()
    code, _, err = _call(capsys, "report", "--workdir", tmp_path / "missing")
    assert code == 2 and "`--workdir` must be an existing work directory" in err
    assert not (tmp_path / "missing").exists()
