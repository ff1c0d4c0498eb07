"""No stage imports another stage (DESIGN.md section 3, "The seams").

The stages are the packages embed, cluster, schedule and report; each reads and
writes only through clusterclip.io. clusterclip.describe (keywords, inspection)
is shared by the report and the CLI, so it imports no stage either.

One exception, named here: another stage may read the schedule's stored settings
through ``clusterclip.schedule.config`` (the report asks it which cap clips
clusters instead of re-deriving it from strings). That module loads no engine
(tests/test_seams.py checks it in a fresh interpreter).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import clusterclip

SRC = Path(clusterclip.__file__).parent
STAGES = ("embed", "cluster", "dedup", "schedule", "report")
#: Modules of a stage that another stage may import: light, they load no engine.
READABLE = ("clusterclip.schedule.config",)


def imported_packages(path: Path) -> set[str]:
    """Sub-packages of clusterclip that ``path`` imports (``clusterclip.X...`` -> ``X``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "clusterclip":
                names += [f"clusterclip.{alias.name}" for alias in node.names]
            elif node.module in READABLE:
                names = []
        else:
            continue
        for name in names:
            if name in READABLE:
                continue
            parts = name.split(".")
            if parts[0] == "clusterclip" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", [*STAGES, "describe"])
def test_a_stage_imports_no_other_stage(package):
    offenders = {}
    for path in sorted((SRC / package).rglob("*.py")):
        others = imported_packages(path) & (set(STAGES) - {package})
        if others:
            offenders[path.relative_to(SRC).as_posix()] = sorted(others)
    assert not offenders, f"stage modules importing another stage: {offenders}"


def test_the_report_reads_the_schedule_only_through_its_stored_settings():
    """The exception is used, and only as named: the report imports schedule.config, nothing else."""
    found = set()
    for path in sorted((SRC / "report").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "clusterclip.schedule"
            ):
                found.add(node.module)
    assert found == set(READABLE)
