"""``clusterclip export`` lists the registered exporters: their flags, summaries and refusals."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from clusterclip.adapters.exporters import (
    EXPORTERS,
    ExportSummary,
    NoOptions,
    ShardOptions,
    TokenOptions,
    TopologyOptions,
    formats_using,
)
from clusterclip.cli import build_parser, main
from clusterclip.io import WorkDir
from tests.product_support import require_module, run_small_workdir


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    require_module("sklearn")
    require_module("pyarrow")
    made = run_small_workdir(tmp_path_factory.mktemp("export-cli"), n_lines=120, n_clusters=3)
    return made["workdir"]


def _export(capsys, work, fmt, out, *flags):
    code = main(["export", "--workdir", str(work), "--format", fmt, "--out", str(out), *flags])
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr


def _export_parser():
    import argparse

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices["export"]


# --------------------------------------------------------------------------- the registry


def test_every_exporter_keeps_the_protocol():
    for name, exporter in EXPORTERS.items():
        assert exporter.name == name and exporter.help
        assert dataclasses.is_dataclass(exporter.options)
        assert exporter.options.__dataclass_params__.frozen
        for field in dataclasses.fields(exporter.options):
            assert "help" in field.metadata, f"{name}: {field.name} is not an option()"
        exporter.options()  # every setting has a default
        assert callable(exporter.check) and callable(exporter.export)


def test_the_command_lists_the_registry():
    parser = _export_parser()
    fmt = next(a for a in parser._actions if a.dest == "format")
    assert list(fmt.choices) == sorted(EXPORTERS)
    text = parser.format_help()
    for name in EXPORTERS:
        assert f"\n  {name} " in text
    for cls in (ShardOptions, TokenOptions, TopologyOptions):
        assert f"{cls.title} ({', '.join(formats_using(cls))}):" in text


def test_the_flags_keep_their_spelling():
    flags = {s for a in _export_parser()._actions for s in a.option_strings}
    assert flags >= {
        "--workdir", "--format", "--out", "--shard-size", "--tokenizer", "--eos-token",
        "--no-eos", "--world-size", "--loader-workers", "--loader-batch-size",
        "--num-workers", "--batch-size",  # former spellings, hidden
    }  # fmt: skip


def test_formats_using():
    assert formats_using(ShardOptions) == ["cluster-folders", "ordered-jsonl"]
    assert formats_using(TopologyOptions) == ["litdata"]
    assert formats_using(NoOptions) == ["mds", "sample-index"]


# --------------------------------------------------------------------------- summaries


def test_summary_line_of_numbers_and_of_files():
    numbers = ExportSummary("cluster-folders", "out/", {"clusters": 3, "files": 1200, "out": "x"})
    assert numbers.line() == "export cluster-folders: clusters 3, files 1,200 -> out/"
    assert ExportSummary("ordered-jsonl", "o", files=("o/part-00000.jsonl",)).line() == (
        "export ordered-jsonl: wrote o"
    )
    shown = ExportSummary("megatron", "m", {"prefix": "m/p", "topology": {}, "dtype": "uint16"})
    assert shown.line() == "export megatron: dtype uint16 -> m"


def test_ordered_jsonl_prints_and_returns_its_shards(work, tmp_path, capsys):
    out = tmp_path / "ordered"
    code, stdout, _ = _export(capsys, work, "ordered-jsonl", out, "--shard-size", "100")
    assert code == 0 and stdout.strip() == f"export ordered-jsonl: wrote {out}"
    index = json.loads((out / "index.json").read_text())
    assert index["shard_size"] == 100 and len(index["shards"]) == -(-index["n_records"] // 100)
    summary = EXPORTERS["ordered-jsonl"].export(
        WorkDir(work), tmp_path / "again", ShardOptions(shard_size=100)
    )
    assert summary.files == tuple(str(out.parent / "again" / s["file"]) for s in index["shards"])
    for name in ("index.json", *(s["file"] for s in index["shards"])):
        assert (out / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_sample_index_to_a_file_name(work, tmp_path, capsys):
    out = tmp_path / "idx.npy"
    code, stdout, _ = _export(capsys, work, "sample-index", out)
    assert code == 0 and stdout.strip() == f"export sample-index: wrote {out}"
    assert np.load(out).dtype == np.int64 and out.with_suffix(".json").exists()


def test_cluster_folders_prints_its_numbers(work, tmp_path, capsys):
    code, stdout, _ = _export(capsys, work, "cluster-folders", tmp_path / "folders")
    assert code == 0
    assert stdout.startswith("export cluster-folders: ") and stdout.rstrip().endswith(
        f"-> {tmp_path / 'folders'}"
    )


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("fmt", "flags", "message"),
    [
        ("mds", ["--shard-size", "10"],
         "--shard-size does not apply to --format mds (only to cluster-folders, ordered-jsonl). "
         "Drop it."),
        ("ordered-jsonl", ["--no-eos", "--tokenizer", "t"],
         "--tokenizer, --no-eos do not apply to --format ordered-jsonl (only to flat-tokens, "
         "megatron). Drop them."),
        ("sample-index", ["--num-workers", "2"],
         "--num-workers does not apply to --format sample-index (only to litdata). Drop it."),
        ("litdata", ["--world-size", "0"], "`--world-size` must be an int in [1, inf); got 0"),
        ("ordered-jsonl", ["--shard-size", "0"],
         "`--shard-size` must be an int in [1, inf); got 0"),
        ("flat-tokens", [], "--format flat-tokens writes a token array and needs --tokenizer"),
    ],
)  # fmt: skip
def test_refused_before_anything_is_written(work, tmp_path, capsys, fmt, flags, message):
    out = tmp_path / "out"
    code, stdout, stderr = _export(capsys, work, fmt, out, *flags)
    assert code == 2 and stdout == ""
    assert f"clusterclip export: error: {message}" in stderr
    assert not out.exists()


def test_a_folder_with_files_is_refused_before_the_tokenizer_is_asked_for(work, tmp_path, capsys):
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, stderr = _export(capsys, work, "megatron", out)
    assert code == 2 and "needs --tokenizer" not in stderr
    assert f"export folder {out} already" in stderr
    assert (out / "keep.txt").read_text() == "mine"


def test_a_missing_schedule_is_named(tmp_path, capsys):
    code, _, stderr = _export(capsys, tmp_path / "nowhere", "sample-index", tmp_path / "o")
    assert code == 2 and "clusterclip export: error:" in stderr
