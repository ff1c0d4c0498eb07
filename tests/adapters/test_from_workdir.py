"""``ClusterClipSampler.from_workdir``: the recorded schedule, sliced and resumed like the stream.

A real (small) work directory is written through the library's own writers:
``clusters.parquet`` via :class:`clusterclip.io.artifacts.ClustersArtifact`, the
schedule via :class:`~clusterclip.io.artifacts.ScheduleArtifact`, manifest entries
via :meth:`clusterclip.io.WorkDir.record`. The sampler over it must yield
exactly what the labels-built sampler yields, resume at any position on any
world size (checkpoints move between the two kinds), and refuse a directory
whose labels or schedule file changed.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from clusterclip.adapters import torch as torch_adapter
from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError
from clusterclip.io import WorkDir
from clusterclip.io.artifacts import ClustersArtifact, ScheduleArtifact
from clusterclip.schedule import build_schedule

pytest.importorskip("pyarrow")

POLICY = {"max_repeats": 2, "num_samples": 401, "seed": 11, "order": "online"}


def make_labels(n: int = 240, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 60, size=9)
    labels = np.repeat(np.arange(9), sizes)[:n]
    labels = np.concatenate([labels, np.full(n - labels.size, 3)]) if labels.size < n else labels
    labels[rng.choice(n, size=12, replace=False)] = -1  # excluded documents
    return rng.permutation(labels).astype(np.int32)


def write_clusters(workdir, labels: np.ndarray) -> None:
    ClustersArtifact(workdir).write(labels, np.ones(labels.size, np.float32))


def record_cluster_stage(workdir) -> None:
    WorkDir(workdir).record(
        "cluster",
        {
            "config": {"n_clusters": 9},
            "inputs": {},
            "outputs": {"clusters": ClustersArtifact(workdir).fingerprint()},
            "versions": {},
            "complete": True,
        },
    )


@pytest.fixture
def work(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    labels = make_labels()
    write_clusters(workdir, labels)
    record_cluster_stage(workdir)
    schedule = build_schedule(labels, **POLICY)
    saved = ScheduleArtifact(workdir).write(schedule.indices, schedule.sidecar_meta())
    WorkDir(workdir).record(
        "schedule",
        {
            "config": schedule.config.to_dict(),
            "inputs": {"cluster.clusters": ClustersArtifact(workdir).fingerprint()},
            "outputs": saved,
            "versions": {},
            "complete": True,
        },
    )
    return {"workdir": workdir, "labels": labels, "schedule": schedule}


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    # Blocks much shorter than the schedule: every read crosses block boundaries.
    monkeypatch.setattr(torch_adapter, "RECORDED_BLOCK", 7)


@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
def test_yields_exactly_the_labels_built_sampler(work, world_size, drop_last):
    indices = work["schedule"].indices
    pad = 0 if drop_last else -indices.size % world_size
    indices = np.concatenate([indices, np.resize(indices, pad)])  # padding wraps to the start
    usable = indices.size - indices.size % world_size
    for rank in range(world_size):
        recorded = ClusterClipSampler.from_workdir(
            work["workdir"], rank=rank, world_size=world_size, drop_last=drop_last
        )
        built = ClusterClipSampler(
            work["labels"], rank=rank, world_size=world_size, drop_last=drop_last, **POLICY
        )
        assert len(recorded) == len(built)
        got = list(recorded)
        assert got == indices[rank:usable:world_size].tolist()
        assert got == list(built)
        assert len(got) == len(indices[rank:usable:world_size])
        assert recorded.consumed_samples == built.consumed_samples


def test_config_is_the_recorded_one(work):
    sampler = ClusterClipSampler.from_workdir(work["workdir"])
    assert sampler.config == work["schedule"].config
    assert sampler.total_samples == work["schedule"].indices.size
    assert sampler.state_dict()["config_fingerprint"] == work["schedule"].config.fingerprint()


@pytest.mark.parametrize("stop", [0, 1, 6, 7, 100, 258, 399])
@pytest.mark.parametrize(("before", "after"), [(1, 1), (2, 3), (4, 1), (3, 2)])
def test_resume_across_world_sizes_and_sampler_kinds(work, stop, before, after):
    indices = work["schedule"].indices
    steps = stop // before
    # Run `before` ranks for `steps` indices each, checkpoint, resume on `after` ranks.
    first = [
        ClusterClipSampler.from_workdir(work["workdir"], rank=r, world_size=before)
        for r in range(before)
    ]
    for sampler in first:
        assert list(itertools.islice(iter(sampler), steps)) == (
            indices[sampler.rank : steps * before : before].tolist()
        )
    state = first[0].state_dict()
    consumed = steps * before
    assert state["consumed_samples"] == consumed
    usable = indices.size - (indices.size - consumed) % after
    for rank in range(after):
        expected = indices[consumed + rank : usable : after].tolist()
        recorded = ClusterClipSampler.from_workdir(work["workdir"], rank=rank, world_size=after)
        recorded.load_state_dict(state)
        assert len(recorded) == len(expected)
        assert list(recorded) == expected
        # The same checkpoint loads into a labels-built sampler, and its state back.
        built = ClusterClipSampler(work["labels"], rank=rank, world_size=after, **POLICY)
        built.load_state_dict(state)
        assert list(built) == expected
        again = ClusterClipSampler.from_workdir(work["workdir"], rank=rank, world_size=after)
        again.load_state_dict(built.state_dict())
        assert again.consumed_samples == built.consumed_samples


def test_refuses_a_checkpoint_of_another_schedule(work):
    sampler = ClusterClipSampler.from_workdir(work["workdir"])
    other = ClusterClipSampler(work["labels"], **{**POLICY, "max_repeats": 3})
    with pytest.raises(ClusterClipError, match=r"max_repeats \(saved 3, now 2\)"):
        sampler.load_state_dict(other.state_dict())


def test_refuses_labels_overwritten_since_the_schedule(work):
    labels = work["labels"].copy()
    labels[labels == 0] = 1  # the clusters changed; nothing told the manifest
    write_clusters(work["workdir"], labels)
    with pytest.raises(
        ClusterClipError,
        match=r"the labels of .* changed since the schedule was built .* Rebuild the schedule: "
        r"`clusterclip run",
    ):
        ClusterClipSampler.from_workdir(work["workdir"])


def test_refuses_labels_reclustered_since_the_schedule(work):
    labels = np.roll(work["labels"], 1)
    write_clusters(work["workdir"], labels)
    record_cluster_stage(work["workdir"])  # a new cluster stage: the schedule is stale
    with pytest.raises(ClusterClipError, match=r"stale: cluster\.clusters changed"):
        ClusterClipSampler.from_workdir(work["workdir"])


def test_refuses_a_schedule_file_that_is_not_its_sidecars(work):
    indices = work["schedule"].indices.copy()
    indices[[0, 1]] = indices[[1, 0]]
    np.save(work["workdir"] / "schedule.npy", indices)
    with pytest.raises(
        ClusterClipError, match=r"indices do not match the fingerprint recorded in its sidecar"
    ):
        ClusterClipSampler.from_workdir(work["workdir"])


def test_refuses_a_sidecar_without_fingerprints(work):
    side = work["workdir"] / "schedule.json"
    meta = json.loads(side.read_text())
    del meta["indices_fingerprint"]
    side.write_text(json.dumps(meta))
    with pytest.raises(ClusterClipError, match=r"records no `indices_fingerprint`"):
        ClusterClipSampler.from_workdir(work["workdir"])


def test_rank_arguments_are_checked(work):
    with pytest.raises(ClusterClipError, match=r"`rank` must be an int in \[0, world_size=2\)"):
        ClusterClipSampler.from_workdir(work["workdir"], rank=2, world_size=2)


def test_no_schedule_names_the_command(tmp_path):
    with pytest.raises(ClusterClipError, match=r"schedule\.npy not found"):
        ClusterClipSampler.from_workdir(tmp_path)
