"""The schedule core's declared interfaces, as tests that fail.

Every group table, source and draw rule satisfies its protocol
(:mod:`clusterclip.schedule.protocols`): ``isinstance`` of the
``runtime_checkable`` protocol *and* the same signature for every method. The
size rules and the private-import rule hold for all of src
(``tests/test_sizes.py``).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from clusterclip.schedule.feistel import FeistelGroups
from clusterclip.schedule.groups import Groups
from clusterclip.schedule.passes import PassTable
from clusterclip.schedule.policy import SchedulePolicy
from clusterclip.schedule.protocols import DrawRule, GroupedTable, GroupTable, OnlineSource
from clusterclip.schedule.rules import BLOCK_RULE, CHUNK_RULE, DRAW_RULES, WINDOW_RULE
from clusterclip.schedule.units import RotatingGroups, Units

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
