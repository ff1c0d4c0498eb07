"""The size rules of the schedule core (tests/schedule/test_structure.py), for all of src:
no module (and no C source) over 600 lines, no function over 80 lines of code, no private name imported
from another module (a helper two modules need is public, in a module named for it)."""

from __future__ import annotations

import ast
from pathlib import Path

import clusterclip

SRC = Path(clusterclip.__file__).resolve().parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _code_lines(source: str, node: ast.AST) -> int:
    """Lines of a function that hold code (no blank, comment or docstring line)."""
    skip = set()
    if ast.get_docstring(node) is not None:
        first = node.body[0]
        skip = set(range(first.lineno, first.end_lineno + 1))
    lines = source.splitlines()[node.lineno - 1 : node.end_lineno]
    return sum(
        1
        for number, line in enumerate(lines, start=node.lineno)
        if line.strip() and not line.strip().startswith("#") and number not in skip
    )


def test_no_module_over_600_lines():
    too_long = []
    for path in _modules():
        name = path.relative_to(SRC).as_posix()
        lines = len(path.read_text("utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
    assert not too_long


def test_no_c_source_over_600_lines():
    """The compiled loops too (``src/clusterclip/schedule/csrc``), read from the checkout."""
    sources = sorted((Path(__file__).resolve().parents[1] / "src").rglob("*.[ch]"))
    assert sources  # the files this guards are there
    too_long = []
    for path in sources:
        lines = len(path.read_text("utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{path.name}: {lines} lines")
    assert not too_long


def test_no_function_over_80_lines_of_code():
    too_long = []
    for path in _modules():
        source = path.read_text("utf-8")
        for node in ast.walk(ast.parse(source)):
            function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if function and _code_lines(source, node) > MAX_FUNCTION_LINES:
                too_long.append(f"{path.relative_to(SRC).as_posix()}: {node.name}")
    assert not too_long


def test_no_private_name_crosses_a_module():
    crossing = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clusterclip"):
                crossing += [
                    f"{path.relative_to(SRC).as_posix()}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and alias.name != "__version__"
                ]
    assert not crossing


def test_code_lines_count_the_def_and_the_body_only():
    source = "def f():\n" + "    x = 1\n" * 80
    assert _code_lines(source, ast.parse(source).body[0]) == 81  # one over the limit
    documented = 'def f():\n    """Doc.\n\n    More.\n    """\n    # why\n\n    return 1\n'
    assert _code_lines(documented, ast.parse(documented).body[0]) == 2
