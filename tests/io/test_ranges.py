"""Read ranges: any cut of a file reads the records the whole-file reader reads, once each."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from clusterclip.io.ranges import Piece, count_range, plan_ranges, read_pieces
from clusterclip.io.readers import RecordStream, iter_records
from clusterclip.io.readplan import plan_reads

READ = {"text_field": None, "id_field": None, "strict": False}


@pytest.fixture
def corpus(tmp_path) -> list[Path]:
    """A jsonl file with every line kind the reader knows, a gzip file and a parquet file."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    plain = tmp_path / "a.jsonl"
    lines = [
        b'\xef\xbb\xbf{"text": "first, after a byte order mark"}\n',
        b"   \n",
        b'{"text": "' + b"long " * 40 + b'"}\n',
        b'{"text": "broken\n',
        b"\n",
        b'{"text": ""}\n',
        b'{"text": "caf\xe9"}\n',
        b'{"content": "short", "id": 7}\n',
        b'{"text": "the last line has no newline"}',
    ]
    plain.write_bytes(b"".join(lines))
    packed = tmp_path / "b.jsonl.gz"
    with gzip.open(packed, "wt") as out:
        out.write('{"text": "one"}\n\n{"text": "two"}\n')
    table = pa.table({"text": [f"row {i}" if i % 4 else None for i in range(10)]})
    parquet = tmp_path / "c.parquet"
    pq.write_table(table, parquet, row_group_size=3)
    return [plain, packed, parquet]


def _records(stream) -> list[tuple]:
    return [(r.index, r.source, r.line, r.status, r.text, r.id, r.reason) for r in stream]


@pytest.mark.parametrize("range_bytes", [1, 2, 5, 17, 64, 1 << 20])
def test_any_cut_reads_the_same_records_as_the_whole_file(corpus, range_bytes):
    whole = iter_records(corpus)
    expected = _records(whole)
    plan = plan_reads(corpus, range_bytes=range_bytes)
    assert plan.n_records == len(expected)
    assert plan.blank_lines == whole.blank_lines == 3
    for shard_size in (1, 3, 4, len(expected)):
        got = []
        for task in plan.shards(shard_size):
            stream = RecordStream(
                None, **READ, start=task.first_index,
                raw=lambda s, pieces=task.pieces: read_pieces(s, pieces),
            )  # fmt: skip
            rows = _records(stream)
            assert len(rows) == task.rows
            got.extend(rows)
        assert got == expected


def test_ranges_come_from_metadata(corpus):
    ranges = plan_ranges(corpus, range_bytes=100)
    kinds = [r.kind for r in ranges]
    size = corpus[0].stat().st_size
    assert kinds == ["jsonl"] * -(-size // 100) + ["stream"] + ["parquet"] * 4
    assert [r.rows for r in ranges if r.kind == "parquet"] == [3, 3, 3, 1]  # from the footer
    assert [r.first_row for r in ranges if r.kind == "parquet"] == [0, 3, 6, 9]
    assert all(r.rows is None for r in ranges if r.kind != "parquet")  # counted by a task


def test_counts_add_up_over_byte_ranges(corpus):
    lines = corpus[0].read_bytes().count(b"\n") + 1  # the last line has no newline
    for range_bytes in (1, 3, 50):
        counts = [count_range(r) for r in plan_ranges(corpus[:1], range_bytes=range_bytes)]
        assert sum(n for n, _ in counts) == lines
        assert sum(r for _, r in counts) == lines - 2  # two blank lines


def test_a_piece_starts_where_it_is_told(corpus):
    (read_range,) = plan_ranges(corpus[1:2])
    stream = RecordStream(None, **READ, start=5, raw=lambda s: read_pieces(s, [
        Piece(read_range, first_line=1, skip=1, take=1)]))  # fmt: skip
    (record,) = list(stream)
    assert (record.index, record.line, record.text) == (5, 3, "two")


def test_shards_cover_every_record_once(corpus):
    plan = plan_reads(corpus, range_bytes=7)
    for shard_size in (1, 2, 5, 100):
        tasks = list(plan.shards(shard_size))
        assert [t.first_index for t in tasks] == list(range(0, plan.n_records, shard_size))
        assert sum(t.rows for t in tasks) == plan.n_records
        for task in tasks:
            assert sum(p.take for p in task.pieces) == task.rows
    # line 1 (45 bytes) starts in the first 7-byte range; the second owns no line
    assert np.array_equal(plan.lines[:2], [1, 0])
    assert np.array_equal(plan.first_lines()[:3], [1, 2, 2])


def test_hf_dataset_ranges(tmp_path):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_list([{"text": f"t{i}" if i != 2 else ""} for i in range(7)])
    plan = plan_reads([], dataset=dataset)
    assert plan.n_records == 7
    got = []
    for task in plan.shards(3):
        stream = RecordStream(None, **READ, start=task.first_index,
                              raw=lambda s, p=task.pieces: read_pieces(s, p, dataset))  # fmt: skip
        got.extend(_records(stream))
    assert got == _records(iter_records(dataset))


def test_a_jsonl_line_is_read_by_the_range_it_starts_in(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps({"text": f"record {i}"}) + "\n" for i in range(5)))
    size = path.stat().st_size
    for range_bytes in range(1, size + 2):
        plan = plan_reads([path], range_bytes=range_bytes)
        assert plan.records.sum() == 5 and plan.lines.sum() == 5
