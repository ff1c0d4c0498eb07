"""HF datasets adapters and the file exports, end to end on a real work directory."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.errors import ClusterClipError
from tests.product_support import make_workdir


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("adapters"), step=60, max_repeats=2, epochs=1.3)


@pytest.fixture(scope="module")
def dataset(made):
    datasets = pytest.importorskip("datasets")
    # The same records, same order, as one HF dataset (malformed lines become None rows).
    rows = [
        {"id": (rec or {}).get("id"), "text": (rec or {}).get("text"), "raw": raw}
        for _source, _line, raw, rec in made["rows"]
    ]
    return datasets.Dataset.from_list(rows)


def test_apply_schedule_orders_the_dataset(made, dataset):
    from clusterclip.adapters.hf import apply_schedule

    ordered = apply_schedule(dataset, made["indices"])
    assert len(ordered) == len(made["indices"])
    expected = [made["rows"][i][2] for i in made["indices"]]
    assert ordered["raw"] == expected
    # a path to the work directory works too, memory-mapped
    again = apply_schedule(dataset, made["workdir"])
    assert again["id"][:50] == ordered["id"][:50]


def test_apply_schedule_refuses_a_foreign_dataset(made, dataset):
    from clusterclip.adapters.hf import apply_schedule

    short = dataset.select(range(10))
    with pytest.raises(ClusterClipError, match=r"`schedule` must be indices in \[0, 10\)"):
        apply_schedule(short, made["indices"])


def test_apply_schedule_resumes_from_consumed_samples_and_refuses_impossible_ones(made, dataset):
    from clusterclip.adapters.hf import apply_schedule

    indices = made["indices"]
    for consumed in (0, 1, len(indices) // 2, len(indices)):  # the end: an empty dataset
        resumed = apply_schedule(dataset, made["workdir"], consumed_samples=consumed)
        assert resumed["raw"] == [made["rows"][i][2] for i in indices[consumed:]]
    too_many = len(indices) + 1
    with pytest.raises(ClusterClipError, match=rf"at most the schedule's length, {len(indices)}"):
        apply_schedule(dataset, indices, consumed_samples=too_many)
    for bad in (-1, True, 2.0):
        with pytest.raises(
            ClusterClipError, match=r"`consumed_samples` must be an int in \[0, inf\)"
        ):
            apply_schedule(dataset, indices, consumed_samples=bad)


def test_iterable_dataset_ranks_workers_and_resume(made, dataset):
    torch = pytest.importorskip("torch")
    from clusterclip.adapters.hf import ScheduledIterableDataset

    indices = made["indices"]
    ids = dataset["id"]
    expected = [ids[i] for i in indices]
    # Two ranks, each with a two-worker DataLoader: each reads its round-robin slice, in order.
    usable = len(indices) - len(indices) % 2  # drop_last: both ranks read the same count
    for rank in range(2):
        stream = ScheduledIterableDataset(dataset, indices, rank=rank, world_size=2, batch_size=1)
        loader = torch.utils.data.DataLoader(
            stream, batch_size=None, num_workers=2, collate_fn=lambda item: item["id"]
        )
        assert list(loader) == expected[rank:usable:2]
    # In-process: stop after 7 steps on both ranks, resume on 3 ranks from the saved state.
    streams = [ScheduledIterableDataset(dataset, indices, rank=r, world_size=2) for r in range(2)]
    iters = [iter(s) for s in streams]
    seen = []
    for _ in range(7):
        for it in iters:
            seen.append(next(it)["id"])
    states = [s.state_dict() for s in streams]
    assert states[0] == states[1] == {"consumed_samples": 14}
    resumed = []
    for rank in range(3):
        stream = ScheduledIterableDataset(
            dataset, indices, rank=rank, world_size=3, drop_last=False
        )
        stream.load_state_dict(states[0])
        resumed.append([row["id"] for row in stream])
    assert len({len(items) for items in resumed}) == 1  # padded to equal lengths
    merged = [None] * (3 * len(resumed[0]))
    for rank, items in enumerate(resumed):
        merged[rank::3] = items
    padding = len(merged) - (len(indices) - 14)
    assert seen + merged == expected + expected[:padding]  # padded from the schedule's start


def test_iterable_dataset_validates(made, dataset):
    from clusterclip.adapters.hf import ScheduledIterableDataset

    with pytest.raises(ClusterClipError, match=r"`rank` must be an int in \[0, world_size=2\)"):
        ScheduledIterableDataset(dataset, made["indices"], rank=2, world_size=2)
    stream = ScheduledIterableDataset(dataset, made["indices"])
    with pytest.raises(ClusterClipError, match=r"`state\['consumed_samples'\]` must be an int"):
        stream.load_state_dict({"step": 3})


def test_export_ordered_jsonl_reproduces_the_records(made, tmp_path):
    from clusterclip.adapters.export import export_ordered_jsonl

    shards = export_ordered_jsonl(made["workdir"], tmp_path / "ordered", shard_size=200)
    indices = made["indices"]
    assert [p.name for p in shards][:2] == ["part-00000.jsonl", "part-00001.jsonl"]
    assert len(shards) == -(-len(indices) // 200)
    lines = [line for p in shards for line in p.read_text("utf-8").splitlines()]
    assert len(lines) == len(indices)
    rows = made["rows"]
    for position in (0, 1, 57, len(indices) - 1):
        source, _line, raw, record = rows[indices[position]]
        if source.endswith(".parquet"):
            assert json.loads(lines[position]) == record
        else:
            assert lines[position] == raw  # the exact input line, byte for byte
    assert [json.loads(x)["id"] for x in lines] == [rows[i][3]["id"] for i in indices]
    index = json.loads((tmp_path / "ordered" / "index.json").read_text())
    assert index["n_records"] == len(indices) and index["shards"][1]["first_position"] == 200
    # The record store is reused on the second export (same documents.parquet).
    store = made["workdir"] / "records" / "records.bin"
    stamp = store.stat().st_mtime_ns
    export_ordered_jsonl(made["workdir"], tmp_path / "again", shard_size=10_000)
    assert store.stat().st_mtime_ns == stamp
    assert (tmp_path / "again" / "part-00000.jsonl").read_text("utf-8").splitlines() == lines


def test_export_detects_a_changed_source(tmp_path):
    from clusterclip.adapters.export import export_ordered_jsonl

    made = make_workdir(tmp_path, step=300)
    plain = made["sources"][0]
    plain.write_text("\n".join(plain.read_text().splitlines()[:5]) + "\n")
    with pytest.raises(
        ClusterClipError, match=r"corpus file \S*part-a.jsonl changed size .* since it was embedded"
    ):
        export_ordered_jsonl(made["workdir"], tmp_path / "out")


def test_export_sample_index(made, tmp_path):
    from clusterclip.adapters.export import export_sample_index

    path = export_sample_index(made["workdir"], tmp_path / "megatron")
    assert path == tmp_path / "megatron" / "sample_index.npy"
    index = np.load(path)
    assert index.dtype == np.dtype("<i8")
    np.testing.assert_array_equal(index, made["indices"])
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["n_samples"] == len(index) and meta["n_documents"] == len(made["labels"])


def test_iterable_dataset_from_a_workdir_streams_its_schedule(made, dataset):
    pytest.importorskip("torch")
    from clusterclip.adapters.hf import ScheduledIterableDataset

    ids = dataset["id"]
    stream = ScheduledIterableDataset.from_workdir(dataset, made["workdir"])
    assert [row["id"] for row in stream] == [ids[i] for i in made["indices"]]
    second = ScheduledIterableDataset.from_workdir(
        dataset, made["workdir"], rank=1, world_size=3, consumed_samples=6
    )
    usable = 6 + (len(made["indices"]) - 6) // 3 * 3
    assert [row["id"] for row in second] == [ids[i] for i in made["indices"][7:usable:3]]


def _set_label(workdir, index: int, label: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = workdir / "clusters.parquet"
    table = pq.read_table(path)
    labels = table.column("cluster").to_numpy().copy()
    labels[index] = label
    pq.write_table(table.set_column(1, "cluster", pa.array(labels, pa.int32())), path)


def test_iterable_dataset_from_a_workdir_refuses_changed_labels(tmp_path):
    pytest.importorskip("torch")
    from clusterclip.adapters.hf import ScheduledIterableDataset

    made = make_workdir(tmp_path, step=300)
    rows = list(range(len(made["labels"])))
    first_ok = int(np.flatnonzero(made["labels"] >= 0)[0])
    # Labels edited in place: the manifest still looks fresh, the sidecar's fingerprint does not.
    _set_label(made["workdir"], first_ok, int(made["labels"][first_ok]) + 1)
    with pytest.raises(
        ClusterClipError,
        match=r"schedule in .* was built from other cluster labels.*Rebuild the schedule",
    ):
        ScheduledIterableDataset.from_workdir(rows, made["workdir"])
    # Re-clustered since the schedule was built: the manifest says so.
    manifest_path = made["workdir"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["stages"]["cluster"]["outputs"]["clusters"] = "0" * 32
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ClusterClipError, match=r"schedule outputs in .* are stale"):
        ScheduledIterableDataset.from_workdir(rows, made["workdir"])


def test_schedule_indices_reads_a_workdir_through_workdir(tmp_path):
    from clusterclip.adapters.hf import schedule_indices

    made = make_workdir(tmp_path, step=300)
    np.testing.assert_array_equal(schedule_indices(made["workdir"]), made["indices"])
    np.testing.assert_array_equal(
        schedule_indices(made["workdir"] / "schedule.npy"), made["indices"]
    )
    manifest_path = made["workdir"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["stages"]["cluster"]["outputs"]["clusters"] = "0" * 32
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ClusterClipError, match=r"schedule outputs in .* are stale"):
        schedule_indices(made["workdir"])
    with pytest.raises(ClusterClipError, match=r"`schedule` must be a schedule.npy file"):
        schedule_indices(tmp_path / "nowhere")
