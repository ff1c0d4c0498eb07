"""Schedule.save / Schedule.load: files, sidecar, fingerprints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.errors import ClusterClipError
from clusterclip.io import fingerprint_array
from clusterclip.schedule import Schedule, build_schedule, labels_fingerprint


def test_round_trip(tmp_path, skewed_labels):
    lengths = np.arange(skewed_labels.size) % 17
    schedule = build_schedule(
        skewed_labels, max_repeats=3, num_samples=900, lengths=lengths, order="planned", seed=5
    )
    path = schedule.save(tmp_path / "schedule.npy")
    assert path == tmp_path / "schedule.npy"
    meta = json.loads((tmp_path / "schedule.json").read_text())
    assert meta["format"] == "clusterclip.schedule"
    assert meta["labels_fingerprint"] == fingerprint_array(skewed_labels.astype(np.int64))
    assert meta["config"]["order"] == "planned" and meta["config"]["seed"] == 5
    assert meta["config_fingerprint"] == schedule.config.fingerprint()
    assert meta["stats"]["n_draws"] == 900 and meta["stats"]["n_tokens"] == int(
        lengths[schedule.indices].sum()
    )
    loaded = Schedule.load(path, labels=skewed_labels.astype(np.int32))
    assert np.array_equal(loaded.indices, schedule.indices)
    assert loaded.config == schedule.config
    assert loaded.stats.to_dict() == schedule.stats.to_dict()
    assert np.array_equal(loaded.stats.repeats_per_document, schedule.stats.repeats_per_document)
    # without the suffix, the same files
    assert np.array_equal(Schedule.load(tmp_path / "schedule").indices, schedule.indices)


def test_load_refuses_other_labels(tmp_path, skewed_labels):
    schedule = build_schedule(skewed_labels, num_samples=50, seed=0)
    schedule.save(tmp_path / "s.npy")
    changed = skewed_labels.copy()
    changed[0] = 11 if changed[0] != 11 else 10
    with pytest.raises(
        ClusterClipError,
        match=r"labels fingerprint mismatch: the schedule was built from labels [0-9a-f]{32} \(1499 documents\), the labels given have [0-9a-f]{32} \(1499 documents\)",
    ):
        Schedule.load(tmp_path / "s.npy", labels=changed)
    assert labels_fingerprint(changed) != schedule.config.labels_fingerprint


def test_load_detects_missing_or_tampered_files(tmp_path, skewed_labels):
    schedule = build_schedule(skewed_labels, num_samples=50, seed=0)
    schedule.save(tmp_path / "s.npy")
    np.save(tmp_path / "s.npy", schedule.indices[::-1].copy())
    with pytest.raises(
        ClusterClipError,
        match="indices do not match the fingerprint recorded in its sidecar s.json",
    ):
        Schedule.load(tmp_path / "s.npy")
    (tmp_path / "s.json").unlink()
    with pytest.raises(ClusterClipError, match=r"s.json: no such file"):
        Schedule.load(tmp_path / "s.npy")
    (tmp_path / "t.json").write_text("{not json")
    np.save(tmp_path / "t.npy", schedule.indices)
    with pytest.raises(ClusterClipError, match="t.json: not valid JSON"):
        Schedule.load(tmp_path / "t.npy")
