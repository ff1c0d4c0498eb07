"""`clusterclip dedup` and grouping through the real CLI, on KJV verses with planted copies."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.experiments.duplicates import plant_duplicates
from clusterclip.io import WorkDir
from tests.product_support import kjv_records


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """~800 verses, one of them copied 50 times with small edits, run with --duplicates group."""
    root = tmp_path_factory.mktemp("dedup")
    records, truth = plant_duplicates(
        kjv_records(step=40), n_sources=1, min_copies=50, max_copies=50, seed=2
    )
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    work = root / "w"
    status = main(["run", str(corpus), "--workdir", str(work), "--n-clusters", "8", "--encoder",
                   "tfidf", "--max-repeats", "2", "--epochs", "50", "--no-report"])  # fmt: skip
    assert status == 0
    ids = [r["id"] for r in records]
    return work, [ids.index(doc) for doc in truth[0]], root


def test_dedup_finds_the_planted_copies(planted, capsys):
    work, copies, root = planted
    out = root / "groups.jsonl"
    assert main(["dedup", "--workdir", str(work), "--export", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "dedup     skipped (up to date)" in shown  # `run` made them already
    assert "group of 51" in shown and "kept:" in shown and "copy:" in shown
    assert "warning" not in shown  # edited copies of one verse: a family, not a chain
    groups = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    largest = groups[0]
    members = [largest["representative"]["index"]] + [d["index"] for d in largest["duplicates"]]
    assert sorted(members) == sorted(copies)
    assert largest["representative"]["index"] == min(copies)
    assert largest["representative"]["id"] == kjv_id(work, min(copies))


def kjv_id(work, index):
    return WorkDir(work).documents(["id"]).column("id")[index].as_py()


def test_the_copied_text_is_drawn_at_most_r_times_in_total(planted):
    work, copies, _ = planted
    schedule = WorkDir(work).schedule()
    assert schedule.config["duplicates"] == "group"
    assert not schedule.meta["stats"]["budget_met"]  # 50 epochs: the clip ended the schedule
    assert np.isin(np.asarray(schedule.indices), copies).sum() == 2  # R, not 51 x R


def test_duplicates_off_draws_every_copy_r_times(planted, tmp_path, capsys):
    work, copies, _ = planted
    assert main(["schedule", "--workdir", str(work), "--duplicates", "off", "--max-repeats", "2",
                 "--epochs", "50"]) == 0  # fmt: skip
    schedule = WorkDir(work).schedule()
    assert "duplicates" not in schedule.config
    assert np.isin(np.asarray(schedule.indices), copies).sum() == 2 * len(copies)


def test_errors_exit_2_and_name_the_problem(planted, tmp_path, capsys):
    work, _, _ = planted
    assert main(["dedup", "--workdir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
    assert main(["dedup", "--workdir", str(work), "--dedup-threshold", "1.5"]) == 2
    assert "`--dedup-threshold` must be a cosine in (0, 1]; got 1.5" in capsys.readouterr().err
    assert main(["dedup", "--workdir", str(work), "--dedup-threshold", "0.85"]) == 2
    err = capsys.readouterr().err
    assert "threshold: 0.9 -> 0.85" in err and "--overwrite" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["dedup", "--workdir", str(empty)]) == 2
    assert "no completed `cluster` stage" in capsys.readouterr().err


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["dedup", "--help"])
    shown = capsys.readouterr().out
    assert "--dedup-threshold" in shown and "clusterclip dedup --workdir work --export" in shown


def test_a_low_threshold_never_chains_unrelated_verses(planted, tmp_path, capsys):
    """At 0.2 the connected components of links chained unrelated verses into one group
    (then warned about); groups are cliques now: every two members are >= 0.2, and said."""
    work = tmp_path / "w"
    shutil.copytree(planted[0], work)
    assert main(["dedup", "--workdir", str(work), "--dedup-threshold", "0.2", "--overwrite"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "warning" not in shown
    summary = WorkDir(work).entry("dedup")["summary"]
    assert summary["near_groups"] > 0 and 0.2 <= summary["min_similarity"] < 0.3
    assert (
        f"lowest cosine inside a group {summary['min_similarity']:.4f} (every pair >= 0.2)" in shown
    )
    representative = WorkDir(work).duplicate_of()
    x = np.asarray(WorkDir(work).embeddings()[:], dtype=np.float32)
    for head in np.unique(representative[representative != np.arange(representative.size)]):
        members = np.flatnonzero(representative == head)
        assert (x[members] @ x[members].T).min() >= 0.2 - 1e-6, members


def test_dedup_of_a_hierarchical_run_finds_neighbours_down_the_tree(planted, tmp_path, capsys):
    """The second-nearest leaf comes from a beam-2 descent, not a product with every leaf,
    and the planted copies are still one group."""
    work, copies, root = planted
    corpus = root / "corpus.jsonl"
    tree = tmp_path / "tree"
    status = main(["run", str(corpus), "--workdir", str(tree), "--n-clusters", "12", "--levels",
                   "3", "--encoder", "tfidf", "--max-repeats", "2", "--no-report"])  # fmt: skip
    assert status == 0
    summary = WorkDir(tree).entry("dedup")["summary"]
    assert summary["second_nearest"] == "coarse to fine (beam 2)"
    assert WorkDir(work).entry("dedup")["summary"]["second_nearest"] == "exact"
    representative = WorkDir(tree).duplicate_of()
    assert set(representative[copies].tolist()) == {min(copies)}
