"""The LM harness's flags come from ``ExperimentConfig``'s option() fields, spelled as before."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from clusterclip.cli import main
from clusterclip.experiments.model import ModelConfig
from clusterclip.experiments.options import ExperimentConfig, add_arguments, config_from_args

#: Every flag the harness had before its settings became option() fields (scripts use them),
#: and the ones added since.
FLAGS = [
    "--corpus",
    "--corpus-pin",
    "--text-field",
    "--label-field",
    "--workdir",
    "--out",
    "--max-docs",
    "--data-seed",
    "--encoder",
    "--precision",
    "--kmeans-backend",
    "--n-clusters",
    "--tail-docs",
    "--tail-span",
    "--heldout-per-cluster",
    "--heldout-fraction",
    "--near-duplicate",
    "--vocab-size",
    "--max-doc-tokens",
    "--independent-encoder",
    "--independent-clusters",
    "--tokens",
    "--min-tokens-per-parameter",
    "--epochs",
    "--regime",
    "--policies",
    "--seeds",
    "--n-layer",
    "--n-head",
    "--n-embd",
    "--context",
    "--batch-size",
    "--lr",
    "--lr-floor",
    "--eval-points",
    "--device",
    "--threads",
    "--schedule-version",
    "--report-only",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lm")
    add_arguments(parser)
    return parser


def test_the_flags_keep_their_spelling():
    flags = [s for a in _parser()._actions for s in a.option_strings if s.startswith("--")]
    assert sorted(set(flags) - {"--help"}) == sorted(FLAGS)


def test_no_flag_gives_the_defaults():
    assert config_from_args(_parser().parse_args([])) == ExperimentConfig()


def test_flags_reach_the_config_and_its_model():
    args = _parser().parse_args(
        ["--tokens=1e4", "--epochs=2", "--n-layer=3", "--context=32", "--label-field=book",
         "--max-docs=500", "--precision=float32", "--seeds=0,1"]
    )  # fmt: skip
    cfg = config_from_args(args)
    assert (cfg.tokens, cfg.epochs, cfg.label_field, cfg.max_docs) == (10_000, 2.0, "book", 500)
    assert cfg.model == ModelConfig(n_layer=3, context=32)
    assert (cfg.precision, cfg.seeds) == ("float32", "0,1")


def test_settings_without_a_flag_are_python_only():
    fields = {f.name: f for f in dataclasses.fields(ExperimentConfig)}
    assert fields["warmup_fraction"].metadata["cli"] is False
    assert "--warmup-fraction" not in _parser().format_help()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tokens=0"], "`--tokens` must be an int in (0, inf); got 0"),
        (["--epochs=0"], "`--epochs` must be a number in (0, inf); got 0.0"),
        (["--n-head=0"], "`--n-head` must be an int in [1, inf); got 0"),
        (["--independent-clusters=1"], "`--independent-clusters` must be an int in [2, inf)"),
        (["--data-seed=-1"], "`--data-seed` must be an int in [0, 2**63-1]; got -1"),
    ],
)
def test_errors_name_the_flag(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    code = main(["experiment", "lm", f"--out={out}", f"--workdir={tmp_path / 'w'}", *flags])
    err = capsys.readouterr().err
    assert code == 2 and f"clusterclip experiment: error: {message}" in err
    assert not (tmp_path / "w").exists()


def test_python_errors_name_the_keyword():
    from clusterclip.errors import ClusterClipError

    with pytest.raises(ClusterClipError, match=r"^`tokens` must be an int in \(0, inf\)"):
        ExperimentConfig(tokens=-5)
    with pytest.raises(ClusterClipError, match=r"^`context` must be an int in \[1, inf\)"):
        ModelConfig(context=0)


def test_a_choice_outside_the_list_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["--precision=int8"])
    assert "invalid choice: 'int8'" in capsys.readouterr().err


def test_report_only_needs_no_prepared_work(tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["experiment", "lm", f"--out={out}", "--report-only"]) == 0
    assert capsys.readouterr().out.strip() == "no results yet"
