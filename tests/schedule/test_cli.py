"""``clusterclip schedule`` end to end through ``clusterclip.cli.main``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.io import read_stage
from clusterclip.schedule import Schedule, build_schedule


def test_schedule_from_npy(tmp_path, skewed_labels, capsys):
    np.save(tmp_path / "labels.npy", skewed_labels)
    out = tmp_path / "w" / "schedule.npy"
    code = main(
        [
            "schedule",
            "--labels",
            str(tmp_path / "labels.npy"),
            "--max-repeats",
            "3",
            "--num-samples",
            "2000",
            "--seed",
            "4",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    for needle in [
        "documents      1,499 (1,490 usable, 9 excluded)",
        "clusters       12",
        "draws          2,000 (budget num_samples=2,000: met)",
        "distinct docs",
        "max repeats    3 per document",
        "clipped",
        "smallest 10%",
        "under random sampling",
    ]:
        assert needle in text, needle
    loaded = Schedule.load(out, labels=skewed_labels)
    expected = build_schedule(skewed_labels, max_repeats=3, num_samples=2000, seed=4)
    assert np.array_equal(loaded.indices, expected.indices)


def test_schedule_from_parquet_with_token_budget_planned(tmp_path, skewed_labels, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    lengths = (np.arange(skewed_labels.size) * 7) % 50 + 1
    order = np.random.default_rng(0).permutation(skewed_labels.size)  # rows out of order
    pq.write_table(
        pa.table({"index": order, "cluster": skewed_labels[order].astype(np.int32)}),
        tmp_path / "clusters.parquet",
    )
    pq.write_table(
        pa.table({"index": np.arange(skewed_labels.size), "n_tokens": lengths}),
        tmp_path / "documents.parquet",
    )
    out = tmp_path / "schedule.npy"
    code = main(
        [
            "schedule",
            "--labels",
            str(tmp_path / "clusters.parquet"),
            "--label-column",
            "cluster",
            "--num-tokens",
            "40000",
            "--lengths",
            str(tmp_path / "documents.parquet"),
            "--order",
            "planned",
            "--on-exhausted",
            "random",
            "--seed",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert "tokens         4" in capsys.readouterr().out
    expected = build_schedule(
        skewed_labels,
        num_tokens=40000,
        lengths=lengths,
        order="planned",
        on_exhausted="random",
        seed=1,
    )
    assert np.array_equal(np.load(out), expected.indices)
    meta = json.loads((tmp_path / "schedule.json").read_text())
    assert meta["config"]["order"] == "planned"
    assert read_stage(tmp_path, "schedule") is None  # file mode records no stage


def test_schedule_cli_errors(tmp_path, skewed_labels, capsys):
    np.save(tmp_path / "labels.npy", skewed_labels)
    code = main(
        [
            "schedule",
            "--labels",
            str(tmp_path / "labels.npy"),
            "--seed",
            "0",
            "--out",
            str(tmp_path / "s.npy"),
        ]
    )
    assert code == 0  # no budget: one epoch, as in `clusterclip run`
    capsys.readouterr()
    code = main(
        [
            "schedule",
            "--labels",
            str(tmp_path / "nope.npy"),
            "--num-samples",
            "5",
            "--seed",
            "0",
            "--out",
            str(tmp_path / "s.npy"),
        ]
    )
    assert code == 2
    assert "nope.npy: no such file" in capsys.readouterr().err
    code = main(
        [
            "schedule",
            "--labels",
            str(tmp_path / "labels.npy"),
            "--num-samples",
            "99999",
            "--max-repeats",
            "1",
            "--seed",
            "0",
            "--out",
            str(tmp_path / "s.npy"),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "NOT met" in text and "warning        clusterclip: the budget" in text


def test_schedule_from_npy_with_sparse_ids(tmp_path, skewed_labels, capsys):
    """Cluster ids up to 2**31 (hashes, say): the summary counts the clusters present."""
    ids = np.sort(np.random.default_rng(0).choice(2**31, size=12, replace=False))
    sparse = np.where(skewed_labels >= 0, ids[np.maximum(skewed_labels, 0)], -1)
    np.save(tmp_path / "labels.npy", sparse)
    out = tmp_path / "schedule.npy"
    args = ["schedule", "--labels", str(tmp_path / "labels.npy"), "--out", str(out)]
    assert main([*args, "--max-repeats", "3", "--num-samples", "2000", "--seed", "4"]) == 0
    text = capsys.readouterr().out
    assert "clusters       12 (sizes 1..511" in text and "clipped" in text
    assert Schedule.load(out).stats.cluster_ids.tolist() == ids.tolist()


def test_schedule_seed_out_of_range_names_the_flag(tmp_path, skewed_labels, capsys):
    np.save(tmp_path / "labels.npy", skewed_labels)
    args = ["schedule", "--labels", str(tmp_path / "labels.npy"), "--out", str(tmp_path / "s")]
    assert main([*args, "--num-samples", "10", "--seed", str(2**63)]) == 2
    assert (
        "`--seed` must be an int in [0, 2**63-1]; got 9223372036854775808"
        in capsys.readouterr().err
    )
