"""Content decides freshness, not paths: the same bytes elsewhere are not embedded again.

Found by a tester (issue 29): moving the corpus to another folder, or copying a
work directory, re-embedded everything (258 s for identical bytes; hours on a
real corpus), and ``--portable`` re-embedded for 85 s although the resolved
precision was float32 both times.

Every case runs the real ``clusterclip`` command in-process
(:func:`clusterclip.cli.main`) on the first 300 verses of the bundled King James
Bible with the tf-idf encoder, and checks that the embeddings' files keep their
bytes *and* their modification times (nothing rewrote them) and that the
command reported the stage as skipped.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from clusterclip.cli import main
from tests.product_support import kjv_records, require_module

FAST = ["--encoder", "tfidf", "--n-clusters", "3", "--backend", "numpy", "--no-report"]
STAGES = ("embed", "cluster", "dedup", "schedule")
#: A modification time well in the past (the fingerprint cache skips files written just now).
LONG_AGO = 1_600_000_000 * 10**9


def call(capsys, *args: str) -> str:
    """``clusterclip ARGS`` in-process; must exit 0. Returns stdout."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def embed_files(work: Path) -> dict[str, tuple[bytes, int]]:
    """What the embed stage wrote: name -> (bytes, mtime in ns)."""
    files = [*sorted((work / "embeddings").iterdir()), work / "documents.parquet"]
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def all_skipped(out: str) -> None:
    for stage in STAGES:
        assert f"{stage:<9} skipped (up to date" in out, out


def write_corpus(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    os.utime(path, ns=(LONG_AGO, LONG_AGO))
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished run with the report: root/corpus/verses.jsonl, root/work (absolute paths)."""
    require_module("sklearn")  # the tfidf encoder
    require_module("pyarrow")
    require_module("matplotlib")  # the report
    root = tmp_path_factory.mktemp("finished")
    write_corpus(root / "corpus" / "verses.jsonl", kjv_records(step=1, limit=300))
    args = ["run", root / "corpus" / "verses.jsonl", "--workdir", root / "work", *FAST[:-1]]
    assert main([str(a) for a in args]) == 0
    return root


@pytest.fixture
def root(finished, tmp_path) -> Path:
    """A private copy of the finished run (file times kept)."""
    shutil.copytree(finished, tmp_path / "root")
    return tmp_path / "root"


def _move_to_another_folder(corpus: Path) -> Path:
    target = corpus.parent.parent / "elsewhere" / "deeper" / corpus.name
    target.parent.mkdir(parents=True)
    return Path(shutil.move(corpus, target))


def _rename(corpus: Path) -> Path:
    return corpus.rename(corpus.with_name("kjv-first-300.jsonl"))


def _copy(corpus: Path) -> Path:
    target = corpus.parent.parent / "copy" / "verses-copy.jsonl"
    target.parent.mkdir()
    return Path(shutil.copy(corpus, target))


@pytest.mark.parametrize("how", [_move_to_another_folder, _rename, _copy], ids=lambda f: f.__name__)
def test_the_same_corpus_elsewhere_is_not_re_embedded(how, root, capsys):
    work = root / "work"
    before = embed_files(work)
    corpus = how(root / "corpus" / "verses.jsonl")
    out = call(capsys, "run", corpus, "--workdir", work, *FAST)
    all_skipped(out)
    if how is not _copy:  # the original is gone: the stage says where it found the bytes
        assert "the corpus has the same content at its new paths: nothing re-embedded" in out
    assert embed_files(work) == before
    # The readers of the corpus follow it to where it is now.
    if how is not _copy:
        assert not (root / "corpus" / "verses.jsonl").exists()
    clusters = json.loads(call(capsys, "inspect", "--workdir", work, "--json"))
    assert len(clusters) == 3 and all(entry["examples"] for entry in clusters)


def test_a_corpus_in_another_order_is_embedded_again(root, capsys):
    """Content *and* order decide: document indices follow the files' order."""
    corpus = root / "corpus" / "verses.jsonl"
    lines = corpus.read_text("utf-8").splitlines(keepends=True)
    write_corpus(root / "two" / "a.jsonl", [json.loads(line) for line in lines[150:]])
    write_corpus(root / "two" / "b.jsonl", [json.loads(line) for line in lines[:150]])
    out = call(capsys, "run", root / "two", "--workdir", root / "work", *FAST)
    assert "embed     ran" in out
    assert f"input {root / 'two' / 'a.jsonl'} changed" in out
    assert f"input {root / 'two' / 'b.jsonl'} added" in out


def test_a_copied_work_directory_runs_schedule_and_report_without_re_embedding(
    finished, tmp_path, capsys
):
    copy = tmp_path / "moved-machine"
    shutil.copytree(finished, copy)
    os.rename(finished, tmp_path / "gone")  # the place it was made no longer exists
    try:
        work = copy / "work"
        before = embed_files(work)
        out = call(capsys, "run", copy / "corpus" / "verses.jsonl", "--workdir", work, *FAST[:-1])
        all_skipped(out)
        assert "report    skipped (up to date" in out
        out = call(capsys, "schedule", "--workdir", work, "--max-repeats", "3", "--epochs", "2")
        assert "dedup     skipped (up to date" in out and "schedule  ran" in out
        out = call(capsys, "report", "--workdir", work)
        assert f"report:      {work / 'report.html'}" in out
        assert embed_files(work) == before
        # Nothing in the work directory names where it was made.
        for path in work.rglob("*"):
            if path.is_file():
                assert str(finished / "work").encode() not in path.read_bytes(), path.name
        assert "Work directory: the folder holding this page" in (work / "report.html").read_text()
    finally:
        os.rename(tmp_path / "gone", finished)


def test_portable_with_the_same_resolved_settings_re_embeds_nothing(root, capsys):
    work = root / "work"
    corpus = root / "corpus" / "verses.jsonl"
    before = embed_files(work)
    out = call(capsys, "run", corpus, "--workdir", work, *FAST, "--portable")
    all_skipped(out)
    assert (
        "embed     skipped (up to date: precision: 'auto' -> 'float32'; runtime: 'auto' -> "
        "'torch' resolves to the same settings" in out
    )
    assert embed_files(work) == before
    # A setting that does change the embeddings still redoes them.
    out = call(capsys, "run", corpus, "--workdir", work, *FAST, "--portable", "--shard-size", "100")
    assert "embed     ran" in out and "shard_size: 20000 -> 100" in out


def test_a_rerun_reads_the_fingerprint_cache_not_the_corpus(root, capsys):
    """A file with the same path, size and mtime is not hashed again; a touched one is.

    That keeps a rerun over a huge corpus instant; the content still decides as
    soon as the file's size or modification time says it may have changed.
    """
    work = root / "work"
    corpus = root / "corpus" / "verses.jsonl"
    call(capsys, "run", corpus, "--workdir", work, *FAST)  # fills the cache
    data = corpus.read_bytes()
    edited = data.replace(b"God", b"GOD", 1)
    assert len(edited) == len(data) and edited != data
    corpus.write_bytes(edited)
    os.utime(corpus, ns=(LONG_AGO, LONG_AGO))  # same path, size and mtime as cached
    all_skipped(call(capsys, "run", corpus, "--workdir", work, *FAST))
    os.utime(corpus, ns=(LONG_AGO + 10**9, LONG_AGO + 10**9))  # touched: hashed again
    out = call(capsys, "run", corpus, "--workdir", work, *FAST)
    assert "embed     ran" in out and f"input {corpus} changed" in out
