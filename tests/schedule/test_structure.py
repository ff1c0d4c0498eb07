"""The schedule core's declared interfaces and its size rules, as tests that fail.

* every group table, source and draw rule satisfies its protocol
  (:mod:`clusterclip.schedule.protocols`): ``isinstance`` of the
  ``runtime_checkable`` protocol *and* the same signature for every method;
* no module of the core imports another's private name;
* no module over 600 lines, no function over 80 lines of code.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import clusterclip.schedule
from clusterclip.schedule.feistel import FeistelGroups
from clusterclip.schedule.groups import Groups
from clusterclip.schedule.passes import PassTable
from clusterclip.schedule.policy import SchedulePolicy
from clusterclip.schedule.protocols import DrawRule, GroupedTable, GroupTable, OnlineSource
from clusterclip.schedule.rules import BLOCK_RULE, CHUNK_RULE, DRAW_RULES, WINDOW_RULE
from clusterclip.schedule.units import RotatingGroups, Units

CORE = Path(clusterclip.schedule.__file__).resolve().parent
LABELS = np.repeat(np.arange(5), [1, 3, 40, 7, 2])
MEMBERS, SIZES, KEYS = np.arange(53), np.array([1, 3, 40, 7, 2]), np.arange(5)


def _tables() -> dict[str, object]:
    kwargs = dict(seed=3, purpose=2)
    groups = Groups(MEMBERS, SIZES, KEYS, **kwargs)
    units = Units(np.arange(LABELS.size), LABELS)
    return {
        "Groups": groups,
        "FeistelGroups": FeistelGroups(MEMBERS, SIZES, KEYS, **kwargs),
        "PassTable": PassTable(MEMBERS, SIZES, KEYS, **kwargs),
        "RotatingGroups": RotatingGroups(groups, units),
    }


def _sources() -> dict[str, object]:
    out = {}
    for version in (1, 3, 4):
        for order in ("online", "planned"):
            stream = SchedulePolicy(
                max_repeats=2, num_samples=50, order=order, seed=1, schedule_version=version
            ).stream(LABELS)
            rule, prep = stream.prep.rule, stream.prep
            source = rule.online(prep) if order == "online" else rule.planned(prep, stream.plan)
            out[f"v{version} {order}: {type(source).__name__}"] = source
    return out


def _methods(protocol: type) -> list[str]:
    own = [name for name, value in vars(protocol).items() if inspect.isfunction(value)]
    for base in protocol.__mro__[1:]:
        if base is not object and getattr(base, "_is_protocol", False):
            own += [n for n, v in vars(base).items() if inspect.isfunction(v) and n not in own]
    return [name for name in own if not name.startswith("_") or name == "__len__"]


def _same_signature(protocol: type, implementation: object) -> None:
    for name in _methods(protocol):
        wanted = inspect.signature(getattr(protocol, name))
        got = inspect.signature(getattr(type(implementation), name))
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
            (p.name, p.kind, p.default) for p in wanted.parameters.values()
        ], f"{type(implementation).__name__}.{name}{got} is not {protocol.__name__}.{name}{wanted}"


@pytest.mark.parametrize("name", sorted(_tables()))
def test_every_group_table_satisfies_the_protocol(name):
    table = _tables()[name]
    assert isinstance(table, GroupTable)
    _same_signature(GroupTable, table)
    docs = table.lookup(np.array([2, 2, 2]), np.array([0, 1, 41]))
    assert docs.dtype == np.int64 and set(docs.tolist()) <= set(range(4, 44))


def test_the_grouped_table_is_the_block_rules():
    tables = _tables()
    assert isinstance(tables["Groups"], GroupedTable)
    _same_signature(GroupedTable, tables["Groups"])
    assert not isinstance(tables["PassTable"], GroupedTable)


@pytest.mark.parametrize("name", sorted(_sources()))
def test_every_source_satisfies_the_protocol(name):
    source = _sources()[name]
    assert isinstance(source, OnlineSource)
    _same_signature(OnlineSource, source)


@pytest.mark.parametrize("rule", [BLOCK_RULE, WINDOW_RULE, CHUNK_RULE], ids=lambda r: r.name)
def test_every_draw_rule_satisfies_the_protocol(rule):
    assert isinstance(rule, DrawRule)
    _same_signature(DrawRule, rule)
    table = rule.groups(MEMBERS, SIZES, KEYS, seed=0, purpose=2)
    assert isinstance(table, GroupTable)


def test_every_registered_version_has_a_rule_of_the_protocol():
    from clusterclip.schedule.config import SUPPORTED_VERSIONS

    assert set(DRAW_RULES) == set(SUPPORTED_VERSIONS)
    assert all(isinstance(rule, DrawRule) for rule in DRAW_RULES.values())


def _modules() -> list[Path]:
    return sorted(CORE.glob("*.py"))


def test_no_private_name_crosses_a_module():
    crossing = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clusterclip"):
                crossing += [
                    f"{path.name}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and alias.name != "__version__"
                ]
    assert not crossing


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


def test_modules_and_functions_stay_small():
    too_long = []
    for path in _modules():
        source = path.read_text("utf-8")
        if len(source.splitlines()) > 600:
            too_long.append(f"{path.name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if function and _code_lines(source, node) > 80:
                too_long.append(f"{path.name}: {node.name}")
    assert not too_long
