"""Only clusterclip.io spells a work-directory file name (DESIGN.md section 3, "The seams").

Every other module reads and writes the work directory through
``clusterclip.io.WorkDir`` (``path_of("clusters")``, ``labels()``, ...). A string
constant that is exactly one of the names in ``ARTIFACTS`` (docstrings aside)
means a module opens a work-directory file behind its owner's back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import clusterclip
from clusterclip.io.workdir import ARTIFACTS

SRC = Path(clusterclip.__file__).parent
#: Names with an extension are file names wherever they appear. Bare words
#: ("embeddings", "records", "lm") are also plain words (a dict key, a sub-command),
#: so they count only where used as a path.
_FILE_NAMES = {name for name in ARTIFACTS.values() if "." in name}
_WORDS = set(ARTIFACTS.values()) - _FILE_NAMES

#: Modules the lead is moving onto WorkDir at the same time (issue 11). They may
#: still spell file names; empty this set as each one is merged onto WorkDir.
PENDING: set[str] = set()

#: WorkDir methods whose first argument is an artifact key, not a file name.
_KEY_METHODS = {"path_of", "exists", "fingerprint"}
#: Calls whose string arguments are paths.
_PATH_CALLS = {"Path", "open", "joinpath", "join", "with_name", "load", "save", "read_table"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _artifact_keys(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in _KEY_METHODS and node.args:
            found.add(id(node.args[0]))
    return found


def _path_operands(tree: ast.AST) -> set[int]:
    """Constants used as a path: an operand of ``/`` or an argument of a path call."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found.update((id(node.left), id(node.right)))
        elif isinstance(node, ast.Call) and _call_name(node) in _PATH_CALLS:
            found.update(id(arg) for arg in node.args)
    return found


def file_names_spelled(path: Path) -> list[str]:
    """``"line: 'name'"`` for each work-directory file name spelled in ``path``."""
    tree = ast.parse(path.read_text("utf-8"))
    skip = _docstrings(tree) | _artifact_keys(tree)
    as_path = _path_operands(tree)
    return [
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and (node.value in _FILE_NAMES or (node.value in _WORDS and id(node) in as_path))
    ]


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != "io")


def test_no_module_but_io_spells_a_work_directory_file_name():
    offenders = {}
    for path in _modules():
        relative = path.relative_to(SRC).as_posix()
        if relative in PENDING:
            continue
        found = file_names_spelled(path)
        if found:
            offenders[relative] = found
    assert not offenders, (
        "these modules spell work-directory file names; use clusterclip.io.WorkDir "
        f"accessors (or WorkDir.path_of(key)) instead: {offenders}"
    )


def test_the_pending_list_names_existing_modules():
    existing = {p.relative_to(SRC).as_posix() for p in _modules()}
    assert existing >= PENDING, sorted(PENDING - existing)


def test_the_check_catches_a_spelled_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""Reads clusters.parquet."""\n'
        "def f(work, root):\n"
        '    """Also clusters.parquet."""\n'
        '    work.path_of("records")\n'
        '    sizes = {"embeddings": 1}\n'
        '    open(root / "embeddings" / "part-00000.npy")\n'
        '    return root / "clusters.parquet"\n'
    )
    assert sorted(file_names_spelled(module)) == ["6: 'embeddings'", "7: 'clusters.parquet'"]
