"""`clusterclip add` on the Ray engine writes the local engine's bytes (tfidf encoder:
the fit is reused, so the new files must be embedded by the recorded encoder)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import clusterclip
import clusterclip.grow
from tests.product_support import kjv_records

pytest.importorskip("ray")


def test_add_on_ray_equals_local(ray_address, tmp_path):
    records = kjv_records(step=60)
    corpus = {"a.jsonl": records[:300], "b.jsonl": records[300:]}
    for name, part in corpus.items():
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in part), "utf-8")
    base = tmp_path / "base"
    clusterclip.embed(tmp_path / "a.jsonl", workdir=base, encoder="tfidf", shard_size=128)
    clusterclip.cluster(base, n_clusters=4, stability_sample=0)
    local, ray = tmp_path / "local", tmp_path / "ray"
    shutil.copytree(base, local)
    shutil.copytree(base, ray)
    clusterclip.grow.add(tmp_path / "b.jsonl", workdir=local)
    clusterclip.grow.add(
        tmp_path / "b.jsonl", workdir=ray, engine="ray",
        engine_options={"address": ray_address, "num_workers": 2},
    )  # fmt: skip
    files = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    compared = [Path(p) for p in files if p.suffix in (".npy", ".parquet", ".jsonl")]
    assert Path("embeddings/part-00003.npy") in compared  # the added shards
    for name in compared:
        assert (local / name).read_bytes() == (ray / name).read_bytes(), name
    entries = [clusterclip.io.WorkDir(w).require("cluster")["outputs"] for w in (local, ray)]
    assert entries[0] == entries[1]
