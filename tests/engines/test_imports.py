"""The executors know no stage: no module of clusterclip.engines imports one, nor the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import clusterclip.engines

FORBIDDEN = ("clusterclip.embed", "clusterclip.cluster", "clusterclip.schedule")
FORBIDDEN += ("clusterclip.report", "clusterclip.adapters", "clusterclip.cli")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_engines_import_no_stage_and_no_cli():
    package = Path(clusterclip.engines.__file__).parent
    found = {
        f"{path.name}: {name}"
        for path in package.glob("*.py")
        for name in _imports(path)
        if name.startswith(FORBIDDEN)
    }
    assert not found
