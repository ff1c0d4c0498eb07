"""The MDS export's own shard writer: MDSWriter's cut rule, and shards that hold the schedule.

Byte-for-byte equality with mosaicml-streaming's ``MDSWriter`` is checked in its own
environment (``tests/clients/mds_check.py``); here, in the main environment, the cut
rule is checked against a sample-by-sample replay of the writer's ``write`` for any
sizes, limits and blocks, and the shards of a real export are decoded by the layout
the module documents.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterclip.adapters import mds_shards
from clusterclip.adapters.mds import export_mds
from clusterclip.adapters.mds_shards import ShardCuts, mds_config
from tests.product_support import make_workdir


def replayed(sizes: list[int], limit: int, base: int) -> list[tuple[int, int, int]]:
    """MDSWriter.write, one sample at a time: close the shard before a sample that overflows."""
    shards, first, held = [], 0, base
    for position, size in enumerate(sizes):
        if limit < held + size:
            shards.append((first, position, held))
            first, held = position, base
        held += size
    if len(sizes) > first:
        shards.append((first, len(sizes), held))
    return shards


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(24, 600), max_size=80),
    limit=st.integers(1, 2000),
    cuts=st.lists(st.integers(0, 80), max_size=6),
)
def test_shard_cuts_are_the_writers_for_any_sizes_limit_and_blocks(sizes, limit, cuts):
    cutter = ShardCuts(limit, mds_config(None, limit))
    bounds = [0, *sorted(c for c in cuts if c <= len(sizes)), len(sizes)]
    for low, high in zip(bounds[:-1], bounds[1:], strict=True):
        cutter.add(np.array(sizes[low:high], dtype=np.int64))
    assert cutter.finish() == replayed(sizes, limit, cutter.base)


def decoded(folder: Path) -> list[tuple[int, int, str]]:
    """Every sample of an MDS folder, by the documented layout: (position, index, text)."""
    index = json.loads((folder / "index.json").read_text())
    samples = []
    for shard in index["shards"]:
        data = (folder / shard["raw_data"]["basename"]).read_bytes()
        assert len(data) == shard["raw_data"]["bytes"] and shard["zip_data"] is None
        count = int(np.frombuffer(data[:4], np.uint32)[0])
        offsets = np.frombuffer(data[4 : 8 + 4 * count], np.uint32).astype(np.int64)
        config = json.loads(data[8 + 4 * count : offsets[0]])
        assert config == {
            k: v for k, v in shard.items() if k not in ("samples", "raw_data", "zip_data")
        }
        assert count == shard["samples"] and offsets[-1] == len(data)
        for begin, end in zip(offsets[:-1], offsets[1:], strict=True):
            size = int(np.frombuffer(data[begin : begin + 4], np.uint32)[0])
            document, position = np.frombuffer(data[begin + 4 : begin + 20], np.int64)
            assert end - begin == 20 + size
            samples.append((int(position), int(document), data[begin + 20 : end].decode()))
    return samples


def test_mds_shards_hold_every_draw_in_order_in_many_tasks(tmp_path, monkeypatch):
    made = make_workdir(tmp_path / "made", step=150, max_repeats=2, epochs=1.6)
    monkeypatch.setattr(mds_shards, "SHARD_TASK_BYTES", 3000)  # tasks of a shard or two
    summary = export_mds(made["workdir"], tmp_path / "mds", size_limit=2000)
    texts = {i: row[3]["text"] for i, row in enumerate(made["rows"]) if row[3]}
    want = [(j, int(d), texts[int(d)]) for j, d in enumerate(made["indices"])]
    assert decoded(tmp_path / "mds") == want
    assert summary["samples"] == len(want) and summary["shards"] > 10
    names = sorted(p.name for p in (tmp_path / "mds").iterdir())
    assert names == sorted(
        ["index.json", "clusterclip.json", *(f"shard.{n:05}.mds" for n in range(summary["shards"]))]
    )
    assert (
        json.loads((tmp_path / "mds" / "index.json").read_text())["shards"][0]["size_limit"] == 2000
    )
