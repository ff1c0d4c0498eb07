"""Corpus readers on real corpora (KJV, fortunes) and on deliberately broken files."""

from __future__ import annotations

import gzip
import json
from importlib.resources import files
from pathlib import Path

import pytest

from clusterclip.errors import ClusterClipError
from clusterclip.io.readers import count_lines, expand_inputs, fingerprint_input, iter_records

KJV = Path(str(files("clusterclip") / "data" / "kjv-verses.jsonl.gz"))
FORTUNES = Path("/usr/share/games/fortunes")


def read_fortunes(limit_per_file: int = 40) -> list[dict]:
    """Fortune cookies as records (category, text), a few per category file."""
    if not FORTUNES.is_dir():
        pytest.skip("fortunes not installed: apt-get install fortunes fortunes-min")
    records = []
    for path in sorted(FORTUNES.iterdir()):
        if not path.is_file() or path.suffix in (".dat", ".u8") or path.name.startswith("mario"):
            continue
        text = path.read_text("utf-8", errors="replace")
        entries = [e.strip() for e in text.split("\n%\n") if e.strip()]
        records += [{"category": path.name, "content": e} for e in entries[:limit_per_file]]
    return records


def write_jsonl(path: Path, records: list, opener=open) -> Path:
    with opener(path, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return path


@pytest.fixture(scope="module")
def fortunes() -> list[dict]:
    return read_fortunes()


@pytest.fixture(scope="module")
def fortune_files(tmp_path_factory, fortunes) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    root = tmp_path_factory.mktemp("fortunes")
    out = {
        "jsonl": write_jsonl(root / "f.jsonl", fortunes),
        "jsonl.gz": write_jsonl(root / "f.jsonl.gz", fortunes, gzip.open),
    }
    raw = (root / "f.jsonl").read_bytes()
    (root / "f.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    out["jsonl.zst"] = root / "f.jsonl.zst"
    pq.write_table(pa.Table.from_pylist(fortunes), root / "f.parquet", row_group_size=100)
    out["parquet"] = root / "f.parquet"
    return out


def test_bundled_kjv_reads_every_verse_in_order():
    records = list(iter_records(KJV))
    assert len(records) == 31102 == count_lines(KJV)
    assert all(r.status == "ok" for r in records)
    assert [r.index for r in records[:3]] == [0, 1, 2]
    assert (records[0].line, records[-1].line) == (1, 31102)
    assert records[0].id == "Genesis 1:1" and records[0].text.startswith("In the beginning")
    assert records[-1].id == "Revelation 22:21"


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "jsonl.zst", "parquet"])
def test_every_format_gives_the_same_records(fortune_files, fortunes, kind):
    stream = iter_records(fortune_files[kind])
    records = list(stream)
    assert [r.text for r in records] == [f["content"] for f in fortunes]
    assert records[5].raw["category"] == fortunes[5]["category"]
    assert stream.text_fields == {"content": len(fortunes)}
    first_line = 0 if kind == "parquet" else 1  # parquet rows are 0-based, jsonl lines 1-based
    assert [r.line for r in records[:2]] == [first_line, first_line + 1]
    assert count_lines(fortune_files[kind]) == len(fortunes)


def test_directories_and_globs_expand_sorted_and_once(tmp_path):
    shards = tmp_path / "shards"
    (shards / "sub").mkdir(parents=True)
    for name in ("part-1.jsonl", "part-0.jsonl", "sub/part-2.jsonl.gz", "notes.txt"):
        (shards / name).write_text("")
    expected = [shards / "part-0.jsonl", shards / "part-1.jsonl", shards / "sub/part-2.jsonl.gz"]
    assert expand_inputs(shards) == expected
    assert expand_inputs(str(shards / "part-*.jsonl")) == expected[:2]
    # arguments keep their order; a file named twice is read once
    assert expand_inputs([shards / "part-1.jsonl", shards]) == [
        expected[1],
        expected[0],
        expected[2],
    ]


def test_inputs_that_match_nothing_are_clear_errors(tmp_path):
    with pytest.raises(ClusterClipError, match="does not exist"):
        expand_inputs(tmp_path / "missing.jsonl")
    with pytest.raises(ClusterClipError, match="matches no corpus file"):
        expand_inputs(str(tmp_path / "*.jsonl"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ClusterClipError, match="directory .* matches no corpus file"):
        expand_inputs(tmp_path / "empty")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ClusterClipError, match=r"`inputs` must be files ending in \.jsonl"):
        expand_inputs(tmp_path / "notes.txt")


def test_text_field_defaults_to_content_then_text(tmp_path):
    path = write_jsonl(
        tmp_path / "mix.jsonl",
        [{"content": "from content", "text": "ignored"}, {"text": "from text", "doc": 7}],
    )
    stream = iter_records(path)
    records = list(stream)
    assert [r.text for r in records] == ["from content", "from text"]
    assert stream.text_fields == {"content": 1, "text": 1}
    assert [r.text for r in iter_records(path, text_field="text")] == ["ignored", "from text"]
    by_doc = list(iter_records(path, text_field="text", id_field="doc"))
    assert [r.id for r in by_doc] == [None, "7"]


BROKEN_LINES = [
    b'{"id": "a", "text": "a good record"}',
    b'{"id": "b", "text": "unterminated',
    b'{"id": "c", "body": "no text field"}',
    b'{"id": "d", "text": 42}',
    b'{"id": "e", "text": "   "}',
    b"",
    b'{"id": "f", "text": "caf\xe9 latin-1 byte"}',
    b'{"id": "g", "text": null}',
    b'["a", "list"]',
]


def test_broken_records_are_all_accounted_for(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b"\n".join(BROKEN_LINES) + b"\n")
    stream = iter_records(path)
    records = list(stream)
    got = [(r.line, r.id, r.status) for r in records]
    assert got == [
        (1, "a", "ok"),
        (2, None, "malformed"),
        (3, "c", "missing_field"),
        (4, "d", "not_text"),
        (5, "e", "empty"),
        (7, "f", "ok"),
        (8, "g", "not_text"),
        (9, None, "malformed"),
    ]
    assert [r.index for r in records] == list(range(8))
    assert records[5].text == "caf\ufffd latin-1 byte"
    assert stream.replaced_utf8_lines == 1 and stream.blank_lines == 1
    assert "invalid JSON" in records[1].reason
    assert records[2].reason.startswith("no `content` or `text` field")
    assert records[3].reason == "field `text` is int, not text"
    assert records[7].reason == "expected a JSON object, got list"


def test_a_lone_surrogate_escape_is_mended_and_counted_a_pair_is_kept(tmp_path):
    """JSON may escape half of a surrogate pair; that code point has no UTF-8 form, so the
    reader replaces it by U+FFFD and counts the line as it counts invalid UTF-8. An escaped
    pair is one character and stays."""
    path = tmp_path / "escapes.jsonl"
    path.write_bytes(
        b'{"text": "lone \\udc00 low"}\n{"text": "pair \\ud83d\\ude00"}\n{"text": "high \\ud800"}\n'
    )
    stream = iter_records(path)
    records = list(stream)
    assert [r.status for r in records] == ["ok", "ok", "ok"]
    assert [r.text for r in records] == ["lone \ufffd low", "pair \U0001f600", "high \ufffd"]
    assert stream.replaced_utf8_lines == 2 and stream.first_replaced_utf8 == f"{path}:1"
    assert all(r.text.encode("utf-8") for r in records)


def test_strict_stops_at_the_first_bad_record_with_file_and_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b"\n".join(BROKEN_LINES) + b"\n")
    with pytest.raises(ClusterClipError, match=r"broken\.jsonl:2: malformed: invalid JSON"):
        list(iter_records(path, strict=True))


def test_truncated_compressed_files_name_the_file_and_last_line(tmp_path):
    import zstandard

    data = b"".join(b'{"text": "verse %d"}\n' % i for i in range(20000))
    gz = gzip.compress(data)
    (tmp_path / "cut.jsonl.gz").write_bytes(gz[: len(gz) // 2])
    with pytest.raises(
        ClusterClipError, match=r"cut\.jsonl\.gz is truncated or corrupt after line \d+"
    ):
        list(iter_records(tmp_path / "cut.jsonl.gz"))
    zst = zstandard.ZstdCompressor().compress(data)
    (tmp_path / "cut.jsonl.zst").write_bytes(zst[: len(zst) // 2])
    with pytest.raises(ClusterClipError, match=r"cut\.jsonl\.zst is truncated .* `zstdcat"):
        list(iter_records(tmp_path / "cut.jsonl.zst"))


def test_hugging_face_dataset_rows(fortunes):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_list(fortunes[:50])
    records = list(iter_records(dataset))
    assert len(records) == 50 and {r.source for r in records} == {"<dataset>"}
    assert [r.line for r in records[:2]] == [0, 1]
    assert records[3].text == fortunes[3]["content"]


def test_fingerprint_follows_content_not_mtime(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [{"text": "one"}])
    before = fingerprint_input(path)
    path.touch()
    assert fingerprint_input(path) == before
    write_jsonl(path, [{"text": "two"}])
    assert fingerprint_input(path) != before
