"""What the MDS and LitData exports share, checked without either library installed."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from clusterclip.adapters.by_value import open_scheduled_texts
from clusterclip.adapters.output import export_folder
from clusterclip.cli import main
from clusterclip.errors import ClusterClipError, MissingDependencyError
from tests.product_support import make_workdir


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("by-value"), step=120, max_repeats=2, epochs=1.5)


def test_samples_are_the_scheduled_texts_in_order(made):
    texts = open_scheduled_texts(made["workdir"])
    got = list(texts.samples())
    indices = made["indices"]
    assert [p for p, _, _ in got] == list(range(len(indices)))
    assert [d for _, d, _ in got] == indices.tolist()
    # jsonl, jsonl.gz and parquet sources alike: the text the embed stage read
    assert [t for _, _, t in got] == [made["rows"][i][3]["text"] for i in indices]
    some = [5, 0, len(indices) - 1, 5]
    assert [(p, d) for p, d, _ in texts.samples(some)] == [(p, int(indices[p])) for p in some]


def test_the_disk_cost_is_said_before_writing(made, capsys):
    texts = open_scheduled_texts(made["workdir"])
    scheduled, corpus, distinct = texts.cost()
    assert distinct == len(set(made["indices"].tolist()))
    assert 1.3 < scheduled / corpus < 1.7  # 1.5 epochs of records
    texts.announce("export mds")
    line = capsys.readouterr().err
    assert line.startswith(
        f"export mds: {len(made['indices']):,} draws of {distinct:,} documents; "
    )
    assert f"writing {scheduled / corpus:.2f}x the corpus: about " in line


def test_an_export_folder_is_new_or_empty_and_appears_whole(tmp_path):
    out = tmp_path / "out"
    with export_folder(out) as tmp:
        (tmp / "clusterclip.json").write_text("{}")
        (tmp / "a").write_text("1")
    assert sorted(p.name for p in out.iterdir()) == ["a", "clusterclip.json"]
    # an earlier export is not replaced either: nothing of a non-empty folder is deleted
    with (
        pytest.raises(ClusterClipError, match="already exists and is not empty"),
        export_folder(out),
    ):
        pass
    assert sorted(p.name for p in out.iterdir()) == ["a", "clusterclip.json"]
    with pytest.raises(RuntimeError), export_folder(tmp_path / "new") as tmp:
        raise RuntimeError("writer failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no folder, no temp left


@pytest.mark.parametrize(
    ("module", "function", "options", "line"),
    [
        (  # writing MDS needs no extra; its codecs are streaming's
            "streaming",
            "clusterclip.adapters.mds:export_mds",
            {"compression": "zstd"},
            "pip install 'clusterclip[streaming]'",
        ),
        (
            "litdata",
            "clusterclip.adapters.litdata_export:export_litdata",
            {},
            "pip install 'clusterclip[litdata]'",
        ),
    ],
)
def test_a_missing_library_names_the_pip_line(made, tmp_path, module, function, options, line):
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here")
    module_name, name = function.split(":")
    export = getattr(importlib.import_module(module_name), name)
    with pytest.raises(MissingDependencyError, match=line.replace("[", r"\[").replace("]", r"\]")):
        export(made["workdir"], tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_cli_refuses_flags_that_do_not_apply(made, tmp_path, capsys):
    workdir = str(made["workdir"])
    base = ["export", "--workdir", workdir, "--out", str(tmp_path / "x")]
    assert main([*base, "--format", "mds", "--shard-size", "10"]) != 0
    assert "--shard-size does not apply to --format mds" in capsys.readouterr().err
    assert main([*base, "--format", "megatron", "--world-size", "2", "--batch-size", "4"]) != 0
    assert (
        "--world-size, --batch-size do not apply to --format megatron (only to litdata)"
        in capsys.readouterr().err
    )
