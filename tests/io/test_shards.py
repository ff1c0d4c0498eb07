"""ShardedMatrix: reads through memory maps without keeping the pages mapped."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from clusterclip.cluster.assignment import AssignWorker
from clusterclip.io.shards import ShardedMatrix


def rss_file_kib() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    raise AssertionError("no RssFile line")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((40_000, 256)).astype(np.float16) for _ in range(4)]  # 80 MB
    paths = []
    for i, part in enumerate(parts):
        paths.append(root / f"part-{i:05d}.npy")
        np.save(paths[-1], part)
    return paths, np.concatenate(parts)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_pass_over_the_shards_leaves_no_pages_mapped(shards):
    paths, whole = shards
    matrix = ShardedMatrix(paths)
    before = rss_file_kib()
    for start, block in matrix.iter_blocks(30_000):  # slices, across part boundaries
        assert np.array_equal(block, whole[start : start + len(block)])
    rows = np.random.default_rng(1).permutation(len(whole))[:50_000]  # a gather from every part
    assert np.array_equal(matrix[rows], whole[rows])
    assert matrix[5].tolist() == whole[5].tolist()
    grown = rss_file_kib() - before
    assert grown < 20 * 1024, f"{grown} KiB of the 80 MB of shards stayed mapped"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_the_assignment_worker_reads_blocks_without_keeping_them_mapped(shards):
    paths, whole = shards
    centroids = np.eye(256, dtype=np.float32)[:8]
    worker = AssignWorker(centroids, "numpy")
    before = rss_file_kib()
    for i, path in enumerate(paths):
        labels, _ = worker((str(path), 0, 40_000, 40_000 * i))
        part = whole[40_000 * i : 40_000 * (i + 1)].astype(np.float32)
        assert np.array_equal(
            labels, np.argmax(part[:, :8] / np.linalg.norm(part, axis=1, keepdims=True), axis=1)
        )
    assert rss_file_kib() - before < 20 * 1024
