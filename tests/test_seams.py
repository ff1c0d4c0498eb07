"""The seams between stages: import rules, one spelling per setting, flags in CLI errors,
and a report that follows a config-only change of the schedule."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import numpy as np
import pytest

import clusterclip
from clusterclip.cli import build_parser, main

SRC = Path(clusterclip.__file__).resolve().parent
STAGES = ("embed", "cluster", "dedup", "schedule", "report")


def _imports(path: Path) -> set[str]:
    """Every clusterclip module a file imports (at any depth of the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("clusterclip")}


def _package(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return parts[0] if len(parts) > 1 else parts[0]


def _modules(package: str) -> list[Path]:
    root = SRC / package
    return sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]


def test_schedule_core_imports_only_numpy_stdlib_io_and_errors():
    allowed = (
        "clusterclip.schedule",
        "clusterclip.io",
        "clusterclip.errors",
        "clusterclip.options",
        "clusterclip.threads",  # stdlib only at import: the helper thread
        "clusterclip.arrays",  # numpy helpers only
    )
    for path in _modules("schedule"):
        if path.name in ("stage.py",):  # the stage wrapper also speaks the runner's contract,
            # and hands its one task to the engine
            allowed_here = (*allowed, "clusterclip.runner", "clusterclip.progress",
                            "clusterclip.engines")  # fmt: skip
        else:
            allowed_here = allowed
        version = {"clusterclip", "clusterclip.__version__"}  # the version string only
        bad = {m for m in _imports(path) - version if not m.startswith(allowed_here)}
        assert not bad, f"{path.name} imports {sorted(bad)}"
        tree = ast.parse(path.read_text("utf-8"))
        third = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            node.module.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        }
        heavy = third & {"torch", "faiss", "pyarrow", "sentence_transformers", "ray", "datasets"}
        assert not heavy, f"{path.name} imports {sorted(heavy)}"


#: Modules of a stage that another stage may import (tests/test_stage_imports.py says why).
READABLE = ("clusterclip.schedule.config",)
#: The schedule modules that hold its settings and records: what building the CLI's parser,
#: or reading a recorded config, may load. Everything else in the package is the engine.
SCHEDULE_LIGHT = {
    "clusterclip.schedule",
    "clusterclip.schedule.config",
    "clusterclip.schedule.io",
    "clusterclip.schedule.options",
    "clusterclip.schedule.policies",
    "clusterclip.schedule.policy",
    "clusterclip.schedule.stats",
}


@pytest.mark.parametrize("stage", STAGES)
def test_no_stage_imports_another_stage(stage):
    others = tuple(f"clusterclip.{s}" for s in STAGES if s != stage)
    for path in _modules(stage):
        imported = {m for m in _imports(path) if not m.startswith(READABLE)}
        bad = {m for m in imported if m.startswith(others)}
        assert not bad, f"{path.relative_to(SRC)} imports another stage: {sorted(bad)}"


def _loaded_after(code: str) -> list[str]:
    """The clusterclip.schedule modules a fresh interpreter holds after running ``code``."""
    import subprocess
    import sys

    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [m for m in result.stdout.split() if m.startswith("clusterclip.schedule")]


def test_building_the_cli_parser_loads_no_schedule_engine():
    loaded = _loaded_after("from clusterclip.cli import build_parser\nbuild_parser()")
    assert "clusterclip.schedule.options" in loaded  # the flags come from the settings
    engine = sorted(set(loaded) - SCHEDULE_LIGHT)
    assert not engine, f"building the parser loaded the schedule engine: {engine}"


@pytest.mark.parametrize(
    "code",
    [
        "import clusterclip.schedule.config",  # what another stage may read
        "import clusterclip.schedule.policy",  # the one declaration of the settings
        "import clusterclip.schedule.options",  # the stage's options
        "import clusterclip.report.data",  # the report reads the stored settings
        "from clusterclip.schedule import SchedulePolicy, ScheduleConfig",
    ],
)
def test_the_settings_load_no_schedule_engine(code):
    engine = sorted(set(_loaded_after(code)) - SCHEDULE_LIGHT)
    assert not engine, f"`{code}` loaded the schedule engine: {engine}"


def test_the_front_door_loads_the_engine_when_first_used():
    loaded = _loaded_after("import clusterclip.schedule as s\ns.build_schedule")
    assert "clusterclip.schedule.stream" in loaded
    # a sub-module is still an attribute of the package, as when __init__ imported it
    assert "clusterclip.schedule.api" in _loaded_after("import clusterclip.schedule as s\ns.api")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        import clusterclip.schedule as package

        package.nope  # noqa: B018


def test_executors_import_no_stage_and_nothing_imports_the_cli():
    stages = tuple(f"clusterclip.{s}" for s in STAGES)
    for path in _modules("engines"):
        bad = {m for m in _imports(path) if m.startswith(stages)}
        assert not bad, f"{path.relative_to(SRC)} imports a stage: {sorted(bad)}"
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).parts[0] in ("cli", "__main__.py"):  # `python -m clusterclip`
            continue
        bad = {m for m in _imports(path) if m.startswith("clusterclip.cli")}
        assert not bad, f"{path.relative_to(SRC)} imports the CLI: {sorted(bad)}"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_one_spelling_per_setting_across_every_subcommand():
    """A keyword has one flag everywhere, and a flag means one keyword everywhere."""
    flags_of: dict[str, set[str]] = {}
    keywords_of: dict[str, set[str]] = {}
    for sub in _subcommands().values():
        for action in sub._actions:
            longs = [s for s in action.option_strings if s.startswith("--")]
            if not longs or action.dest in ("help",) or action.help == argparse.SUPPRESS:
                continue  # a renamed flag's old spelling, hidden and deprecated
            keyword = action.dest.rpartition("__")[2]
            flags_of.setdefault(keyword, set()).add(longs[0])
            keywords_of.setdefault(longs[0], set()).add(f"{keyword}")
    several = {k: v for k, v in flags_of.items() if len(v) > 1}
    assert not several, f"settings spelled several ways: {several}"
    shared = {f: v for f, v in keywords_of.items() if len(v) > 1}
    assert not shared, f"flags meaning several settings: {shared}"
    # the spellings the issue found inconsistent now agree
    assert flags_of["address"] == {"--ray-address"}
    assert flags_of["n_slices"] == {"--n-slices"}
    assert "afk-mc2" in next(
        a.choices for a in _subcommands()["run"]._actions if a.dest == "cluster__init"
    )


def test_no_report_help_says_what_it_does():
    run = _subcommands()["run"]
    action = next(a for a in run._actions if "--no-report" in a.option_strings)
    assert "skips" in action.help and action.const is False


def test_cli_errors_name_the_flag_and_python_errors_the_keyword(tmp_path, capsys):
    from clusterclip import build_schedule
    from clusterclip.errors import ClusterClipError

    labels = tmp_path / "labels.npy"
    np.save(labels, np.array([0, 0, 1, 1, 2]))
    code = main(["schedule", "--labels", str(labels), "--out", str(tmp_path / "s.npy"),
                 "--num-samples", "100", "--max-repeats", "1", "--on-exhausted", "error"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--on-exhausted" in err and "on_exhausted=" not in err
    with pytest.raises(ClusterClipError, match=r"on_exhausted='stop'"):
        build_schedule(np.array([0, 0, 1, 1, 2]), max_repeats=1, num_samples=100,
                       on_exhausted="error", seed=0)  # fmt: skip
    code = main(["run", str(labels), "--workdir", str(tmp_path / "w"), "--n-clusters", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "`--n-clusters` must be an int in [1, inf)" in err
    assert not (tmp_path / "w").exists()  # refused before any stage ran
    code = main(["run", str(labels), "--workdir", str(tmp_path / "w"), "--n-clusters", "3",
                 "--epochs", "inf"])  # fmt: skip
    assert code == 2 and "`--epochs` must be a number" in capsys.readouterr().err


def test_report_follows_a_config_only_change_of_the_schedule(tmp_path, capsys):
    """max_repeats 4 -> none where the cap never bound: same indices, new sidecar, new report."""
    from tests.product_support import kjv_records

    corpus = tmp_path / "kjv.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in kjv_records(step=100)), "utf-8")
    work = tmp_path / "w"
    base = ["run", str(corpus), "--workdir", str(work), "--encoder", "tfidf",
            "--n-clusters", "5", "--epochs", "1"]  # fmt: skip
    assert main([*base, "--max-repeats", "4"]) == 0
    first = np.load(work / "schedule.npy")
    capsys.readouterr()
    assert main([*base, "--max-repeats", "none"]) == 0
    out = capsys.readouterr().out
    np.testing.assert_array_equal(np.load(work / "schedule.npy"), first)  # same indices
    assert "report    ran" in out and "input schedule.meta changed" in out
    report = json.loads((work / "report.json").read_text())
    sidecar = json.loads((work / "schedule.json").read_text())
    assert report["summary"]["max_repeats"] is None is sidecar["config"]["max_repeats"]
    assert "max_repeats None" in out and "max_repeats 4" not in out
