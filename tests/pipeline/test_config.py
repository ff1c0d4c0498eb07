"""Config files, command-line overrides and the options registry."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from clusterclip.config import (
    SECTIONS,
    RunConfig,
    ScheduleOptions,
    apply_overrides,
    config_from_mapping,
    configuration_table,
    load_config,
)
from clusterclip.errors import ClusterClipError

TOML = """
inputs = ["corpus/*.jsonl.gz"]
workdir = "work"
seed = 7

[embed]
encoder = "tfidf"
text_field = "text"

[cluster]
n_clusters = 12

[schedule]
policy = "temperature"
alpha = 0.3
max_repeats = 3
epochs = 2.5

[report]
n_slices = 20
"""


def _parse(argv: list[str]) -> argparse.Namespace:
    from clusterclip.cli import run as run_cli

    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_load_config_reads_every_section(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    config = load_config(path)
    assert config.inputs == [str(tmp_path / "corpus/*.jsonl.gz")]  # relative to the file
    assert config.workdir == str(tmp_path / "work")
    assert config.seed == 7
    assert config.embed.encoder == "tfidf" and config.embed.text_field == "text"
    assert config.cluster.n_clusters == 12
    assert (config.schedule.policy, config.schedule.alpha) == ("temperature", 0.3)
    assert (config.schedule.max_repeats, config.schedule.epochs) == (3, 2.5)
    assert config.report.n_slices == 20 and config.report.enabled is True


def test_unknown_keys_name_the_key_and_the_valid_ones(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[schedule]\nmax_repeat = 3\n")
    with pytest.raises(
        ClusterClipError,
        match=r"unknown option `schedule.max_repeat` in .*run.toml\. Valid keys in \[schedule\]: "
        r"policy, max_repeats, num_samples, num_tokens, alpha, cluster_weights, order, "
        r"on_exhausted, schedule_version, epochs, duplicates\.",  # not seed: set at the top level
    ):
        load_config(path)
    path.write_text("n_cluster = 3\n")
    with pytest.raises(
        ClusterClipError,
        match=r"unknown option `n_cluster` in .*\. Valid keys at the top level: inputs, workdir, "
        r"seed, engine, portable, \[embed\], \[cluster\], \[dedup\], \[schedule\], \[report\], \[ray\]\.",
    ):
        load_config(path)


def test_bad_values_are_errors(tmp_path):
    with pytest.raises(
        ClusterClipError, match=r"\[cluster\]: `n_clusters` must be an int in \[1, inf\); got '8'"
    ):
        config_from_mapping({"cluster": {"n_clusters": "8"}})
    with pytest.raises(
        ClusterClipError,
        match=r"\[schedule\]: `policy` must be one of random, uniform, clusterclip, temperature",
    ):
        config_from_mapping({"schedule": {"policy": "balanced"}})
    path = tmp_path / "bad.toml"
    path.write_text("[cluster\nn_clusters = 3")
    with pytest.raises(ClusterClipError, match=r"bad.toml: not valid TOML"):
        load_config(path)


def test_command_line_overrides_the_file(tmp_path):
    from clusterclip.cli.run import build_config

    path = tmp_path / "run.toml"
    path.write_text(TOML)
    args = _parse(
        [
            "--config",
            str(path),
            "--seed",
            "1",
            "--num-samples",
            "500",
            "--max-repeats",
            "none",
            "--strict",
            "--no-report",
            "other.jsonl",
        ]
    )
    config = build_config(args)
    assert config.seed == 1
    assert config.inputs == ["other.jsonl"]
    assert config.schedule.num_samples == 500
    assert config.schedule.epochs is None  # the command-line budget replaces the file's
    assert config.schedule.max_repeats is None
    assert config.schedule.alpha == 0.3  # untouched options keep the file's value
    assert config.embed.strict is True and config.report.enabled is False
    # without flags the file's values stand
    assert build_config(_parse(["--config", str(path)])).schedule.epochs == 2.5


def test_overrides_and_budget():
    from clusterclip.pipeline import plan_budget

    config = apply_overrides(
        RunConfig(), {"cluster": {"n_clusters": 5}, "schedule": {"epochs": 2.0}}
    )
    assert plan_budget(config.schedule, 1001) == {"num_samples": 2002, "num_tokens": None}
    assert plan_budget(ScheduleOptions(), 10) == {"num_samples": 10, "num_tokens": None}
    with pytest.raises(ClusterClipError, match=r"`epochs` must be left out when num_samples"):
        ScheduleOptions(num_samples=3, epochs=1.0)


def test_docs_table_lists_every_option():
    import dataclasses

    table = configuration_table()
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            key = f"{section}.{field.name}" if section else field.name
            assert f"`{key}`" in table or field.name == "seed"
    docs = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    # The table in the docs is the generated one (regenerate with the snippet in that file).
    assert table in docs.read_text("utf-8")


def test_every_flag_is_accepted_by_the_parser():
    args = _parse(
        [
            "x.jsonl",
            "--workdir",
            "w",
            "--n-clusters",
            "4",
            "--encoder",
            "static",
            "--order",
            "planned",
            "--on-exhausted",
            "random",
            "--engine",
            "ray",
            "--trust-remote-code",
            "--precision",
            "float32",
            "--batch-size",
            "8",
        ]
    )
    from clusterclip.cli.run import overrides_from_args

    found = overrides_from_args(args)
    assert found == {
        "": {"engine": "ray"},
        "embed": {
            "encoder": "static",
            "batch_size": 8,
            "precision": "float32",
            "trust_remote_code": True,
        },
        "cluster": {"n_clusters": 4},
        "dedup": {},
        "schedule": {"order": "planned", "on_exhausted": "random"},
        "report": {},
        "ray": {},
    }


def test_engine_options_from_the_command_line():
    from clusterclip.cli.run import build_config

    args = _parse(
        [
            "x.jsonl",
            "--engine",
            "ray",
            "--ray-address",
            "auto",
            "--num-gpus-per-worker",
            "1",
        ]
    )
    config = build_config(args)
    assert config.engine == "ray"
    assert config.ray.engine_options() == {"address": "auto", "num_gpus_per_worker": 1.0}
    with pytest.raises(
        ClusterClipError, match=r"`address` apply to the Ray engine only\. Add engine='ray'"
    ):
        build_config(_parse(["x.jsonl", "--ray-address", "auto"]))
