"""The policy value: one declaration of each default, one path, messages in the user's spelling."""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import numpy as np
import pytest

import clusterclip
from clusterclip.adapters.torch import ClusterClipSampler
from clusterclip.errors import ClusterClipError, spelled_as_flags
from clusterclip.schedule import (
    POLICIES,
    SchedulePolicy,
    build_schedule,
    iter_schedule,
)
from clusterclip.schedule import policy as policy_module
from clusterclip.schedule.api import open_stream

LABELS = np.array([0, 0, 1, 2, 2, 2, -1, 1])
FLAGS = {
    name: "--" + name.replace("_", "-")
    for name in (
        "policy",
        "max_repeats",
        "num_samples",
        "num_tokens",
        "lengths",
        "alpha",
        "cluster_weights",
        "order",
        "on_exhausted",
        "seed",
    )
}


# -- one declaration of each default ------------------------------------------------
def test_fields_declare_default_help_and_choices():
    by_name = {f.name: f for f in dataclasses.fields(SchedulePolicy)}
    assert list(by_name) == [
        "policy",
        "max_repeats",
        "num_samples",
        "num_tokens",
        "alpha",
        "cluster_weights",
        "order",
        "on_exhausted",
        "seed",
        "schedule_version",
    ]
    assert all(f.metadata["help"] for f in by_name.values())
    assert by_name["policy"].metadata["choices"] == tuple(POLICIES)
    assert by_name["order"].metadata["choices"] == ("online", "planned")
    assert by_name["on_exhausted"].metadata["choices"] == ("stop", "random", "error")
    assert by_name["seed"].default is dataclasses.MISSING  # required, never None
    assert by_name["max_repeats"].default == policy_module.DEFAULT_MAX_REPEATS == 4


@pytest.mark.parametrize(
    "function", [build_schedule, iter_schedule, open_stream, ClusterClipSampler.__init__]
)
def test_keyword_defaults_are_the_policy_defaults(function):
    parameters = inspect.signature(function).parameters
    for field in dataclasses.fields(SchedulePolicy):
        if field.default is not dataclasses.MISSING:
            assert parameters[field.name].default == field.default, field.name
    assert parameters["seed"].default is inspect.Parameter.empty


def test_policies_are_registered_objects():
    assert list(POLICIES) == ["random", "uniform", "clusterclip", "temperature", "hierarchical"]
    assert POLICIES["uniform"].effective_max_repeats(3) is None
    assert POLICIES["clusterclip"].effective_max_repeats(3) == 3
    assert POLICIES["random"].single_group
    assert [p.name for p in POLICIES.values() if p.accepts_alpha] == ["temperature"]
    sizes = np.array([4, 0, 9])
    assert POLICIES["temperature"].cluster_weights(sizes, 0.5, None).tolist() == [2.0, 0.0, 3.0]
    assert POLICIES["clusterclip"].cluster_weights(sizes, None, (1.0, 0.0, 2.0)).tolist() == [
        1.0,
        0.0,
        2.0,
    ]


# -- the value -------------------------------------------------------------------------
def test_value_is_frozen_hashable_and_normalised():
    value = SchedulePolicy(
        num_samples=np.int64(9), seed=np.int32(2), cluster_weights=np.array([1, 2, 3])
    )
    assert value.cluster_weights == (1.0, 2.0, 3.0)
    assert type(value.num_samples) is int and type(value.seed) is int
    assert hash(value) == hash(SchedulePolicy(num_samples=9, seed=2, cluster_weights=[1, 2, 3]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.seed = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        SchedulePolicy(num_samples=9)  # type: ignore[call-arg]  # seed is required


def test_label_free_checks_happen_when_made():
    with pytest.raises(ClusterClipError, match=r"`max_repeats` must be an int in \[1, inf\)"):
        SchedulePolicy(num_samples=4, seed=0, max_repeats=0)
    with pytest.raises(
        ClusterClipError, match=r"`cluster_weights` must be finite and non-negative"
    ):
        SchedulePolicy(num_samples=4, seed=0, cluster_weights=[1.0, float("nan")])
    with pytest.raises(ClusterClipError, match=r"`cluster_weights` must be a 1-D array of numbers"):
        SchedulePolicy(num_samples=4, seed=0, cluster_weights=["a", "b"])


def test_label_dependent_checks_happen_when_applied():
    value = SchedulePolicy(num_samples=4, seed=0, cluster_weights=[1.0, 1.0])
    with pytest.raises(ClusterClipError, match=r"\(length >= 3\)"):
        value.build(LABELS)
    value = SchedulePolicy(num_tokens=10, seed=0)
    with pytest.raises(ClusterClipError, match=r"`lengths` must be given when num_tokens is used"):
        value.build(LABELS)


@pytest.mark.parametrize(
    "settings",
    [
        {"num_samples": 11, "max_repeats": 2},
        {"num_samples": 11, "policy": "uniform", "order": "planned"},
        {"num_samples": 30, "policy": "random", "max_repeats": 2, "on_exhausted": "random"},
        {"num_samples": 11, "policy": "temperature", "alpha": 0.5, "max_repeats": None},
        {"num_samples": 11, "cluster_weights": [1.0, 0.0, 2.0]},
    ],
)
def test_one_path_for_every_route(settings):
    value = SchedulePolicy(seed=4, **settings)
    built = value.build(LABELS)
    keyword = build_schedule(LABELS, seed=4, **settings)
    assert built.indices.tobytes() == keyword.indices.tobytes()
    assert built.config == keyword.config == value.config_for(LABELS)
    streamed = np.concatenate(list(value.iterate(LABELS, start=3, block_size=4)))
    assert streamed.tolist() == built.indices[3:].tolist()
    sampler = ClusterClipSampler(LABELS, seed=4, **settings)
    assert list(sampler) == built.indices.tolist()
    assert SchedulePolicy.from_config(built.config).config_for(LABELS) == built.config


def test_exported_lazily_from_the_package():
    assert clusterclip.SchedulePolicy is SchedulePolicy


# -- messages name the keyword under Python and the flag under the CLI -------------------
SPELLINGS = [
    (
        {"num_samples": 100, "max_repeats": 2, "on_exhausted": "error"},
        "the budget num_samples=100 cannot be met: every cluster is clipped at max_repeats=2 "
        "after 14 draws. Raise max_repeats above 2, lower the budget, or pass on_exhausted='stop' "
        "or on_exhausted='random'.",
        "the budget --num-samples 100 cannot be met: every cluster is clipped at --max-repeats 2 "
        "after 14 draws. Raise --max-repeats above 2, lower the budget, or pass --on-exhausted stop "
        "or --on-exhausted random.",
    ),
    (
        {"alpha": 0.5},
        "`alpha` must be None unless policy='temperature'; got 0.5. Pass policy='temperature' "
        "to weight clusters by size**alpha.",
        "`--alpha` must be None unless --policy temperature; got 0.5. Pass --policy temperature "
        "to weight clusters by size**alpha.",
    ),
    (
        {"policy": "temperature"},
        "`alpha` must be a finite float for policy='temperature'; got None. Pass e.g. "
        "alpha=0.5 (0 = uniform, 1 = natural sizes).",
        "`--alpha` must be a finite float for --policy temperature; got None. Pass e.g. "
        "--alpha 0.5 (0 = uniform, 1 = natural sizes).",
    ),
    (
        {"max_repeats": 0},
        "`max_repeats` must be an int in [1, inf); got 0. Pass max_repeats=1 or more.",
        "`--max-repeats` must be an int in [1, inf); got 0. Pass --max-repeats 1 or more.",
    ),
    (
        {"num_samples": None},
        "`num_samples/num_tokens` must be exactly one budget; got {'num_samples': None, "
        "'num_tokens': None}. Pass num_samples (draws) or num_tokens (tokens, with lengths), "
        "not both.",
        "`--num-samples/--num-tokens` must be exactly one budget; got {'num_samples': None, "
        "'num_tokens': None}. Pass --num-samples (draws) or --num-tokens (tokens, with "
        "--lengths), not both.",
    ),
    (
        {"num_samples": None, "num_tokens": 10},
        "`lengths` must be given when num_tokens is used; got None. Pass lengths (tokens per "
        "document) with num_tokens.",
        "`--lengths` must be given when --num-tokens is used; got None. Pass --lengths (tokens "
        "per document) with --num-tokens.",
    ),
    (
        {"cluster_weights": [1.0, 1.0, 1.0], "policy": "random"},
        "`cluster_weights` must be None unless policy is 'uniform' or 'clusterclip'; got "
        "\"weights with policy='random'\".",
        "`--cluster-weights` must be None unless policy is 'uniform' or 'clusterclip'; got "
        "'weights with --policy random'.",
    ),
]


@pytest.mark.parametrize(("settings", "as_python", "as_cli"), SPELLINGS)
def test_messages_in_both_spellings(settings, as_python, as_cli):
    arguments = {"num_samples": 5, "seed": 0, **settings}
    with pytest.raises(ClusterClipError) as python_error:
        build_schedule(LABELS, **arguments)
    assert str(python_error.value).startswith(as_python)
    with spelled_as_flags(FLAGS), pytest.raises(ClusterClipError) as cli_error:
        build_schedule(LABELS, **arguments)
    assert str(cli_error.value).startswith(as_cli)


def test_exhaustion_warning_in_both_spellings_points_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_schedule(LABELS, num_samples=100, max_repeats=1, seed=0)
        with spelled_as_flags(FLAGS):
            SchedulePolicy(num_samples=100, max_repeats=1, seed=0).build(LABELS)
    python, cli = (str(w.message) for w in caught)
    assert "(on_exhausted='stop'). Pass on_exhausted='random'" in python
    assert "(--on-exhausted stop). Pass --on-exhausted random" in cli
    assert all(w.filename == __file__ for w in caught)
