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


@pytest.mark.parametrize("largest", [9, 10**6])  # sizes by a table, and by np.unique
def test_temperature_weights_are_python_powers_of_every_size(largest):
    """The same floats as Python's ``size ** alpha``, once per size, whichever way the
    distinct sizes are found (a table where the largest is below 4x their number)."""
    rng = np.random.default_rng(largest)
    sizes = rng.integers(0, 10, 50)
    sizes[0] = largest
    weights = POLICIES["temperature"].cluster_weights(sizes, 0.37, None)
    assert weights.dtype == np.float64
    assert weights.tolist() == [float(n) ** 0.37 if n else 0.0 for n in sizes.tolist()]


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
        "`max_repeats` must be an int in [1, inf) or None (no limit); got 0. Default: 4.",
        "`--max-repeats` must be an int in [1, inf) or none (no limit); got 0. Default: 4.",
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


# -- the front door takes a policy; the keywords are its thin shortcut -------------------
@pytest.mark.parametrize(
    "settings",
    [
        {"num_samples": 11, "max_repeats": 2},
        {"num_tokens": 60, "policy": "temperature", "alpha": 0.5},
        {"num_samples": 30, "policy": "random", "max_repeats": 2, "on_exhausted": "random"},
    ],
)
def test_a_policy_value_and_its_keywords_give_the_same_schedule_everywhere(settings):
    lengths = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    value = SchedulePolicy(seed=7, **settings)
    keywords = {"seed": 7, **settings}
    built = build_schedule(LABELS, value, lengths=lengths)
    assert (
        built.indices.tobytes()
        == build_schedule(LABELS, lengths=lengths, **keywords).indices.tobytes()
    )
    assert built.config == open_stream(LABELS, value, lengths=lengths).config
    streamed = np.concatenate(list(iter_schedule(LABELS, value, lengths=lengths, start=2)))
    assert streamed.tolist() == built.indices[2:].tolist()
    sampler = ClusterClipSampler(LABELS, value, lengths=lengths, rank=1, world_size=2)
    assert list(sampler) == built.indices[1 : 2 * (len(built) // 2) : 2].tolist()


def test_settings_next_to_a_value_are_refused():
    value = SchedulePolicy(num_samples=4, seed=0)
    with pytest.raises(
        ClusterClipError, match=r"`policy` must be a SchedulePolicy without separate"
    ):
        build_schedule(LABELS, value, max_repeats=2)
    with pytest.raises(ClusterClipError, match=r"dataclasses.replace\(policy, max_repeats=...\)"):
        ClusterClipSampler(LABELS, value, max_repeats=2)


def test_an_unknown_keyword_is_a_type_error_listing_the_settings():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'max_repeat'; .*max_repeats"):
        build_schedule(LABELS, max_repeat=2, num_samples=4, seed=0)
    with pytest.raises(TypeError, match=r"'rank'"):  # the sampler's own keywords stay its own
        iter_schedule(LABELS, num_samples=4, seed=0, rank=0)


def test_stage_options_without_a_budget_are_no_policy_to_apply():
    from clusterclip.schedule.options import ScheduleOptions

    options = ScheduleOptions(epochs=2.0, seed=3)
    with pytest.raises(ClusterClipError, match=r"options.policy_value\(n_usable\)"):
        build_schedule(LABELS, options)
    policy = options.policy_value(int((LABELS >= 0).sum()))
    assert type(policy) is SchedulePolicy and policy.num_samples == 14
    assert build_schedule(LABELS, policy).indices.size == 14
    with_budget = ScheduleOptions(num_samples=14, seed=3)  # schedule_version None: resolved
    assert build_schedule(LABELS, with_budget).config == build_schedule(LABELS, policy).config


def test_stage_options_are_the_policy_plus_epochs_and_duplicates():
    from clusterclip.schedule.options import ScheduleOptions

    policy = {f.name: f for f in dataclasses.fields(SchedulePolicy)}
    stage = {f.name: f for f in dataclasses.fields(ScheduleOptions)}
    assert list(stage) == [*policy, "epochs", "duplicates"]
    for name, field in policy.items():  # declared once: the same help, kind and choices
        assert stage[name].metadata == field.metadata, name
    assert stage["seed"].default == 0  # the run-wide seed's default; required in Python
    assert ScheduleOptions().schedule_version is None  # recorded as given in the manifest
    assert SchedulePolicy(num_samples=1, seed=0).schedule_version == 4  # resolved


def test_numpy_numbers_are_settings_too():
    value = SchedulePolicy(num_samples=np.int64(5), max_repeats=np.int32(2), seed=np.uint8(1))
    assert (value.num_samples, value.max_repeats, value.seed) == (5, 2, 1)
    assert type(value.num_samples) is int and type(value.max_repeats) is int
    alpha = SchedulePolicy(policy="temperature", alpha=np.float32(0.5), num_samples=1, seed=0)
    assert type(alpha.alpha) is float
    with pytest.raises(ClusterClipError, match=r"`alpha` must be a finite number; got True"):
        SchedulePolicy(policy="temperature", alpha=True, num_samples=1, seed=0)


def test_the_tree_versions_are_the_draw_rules_that_draw_trees():
    from clusterclip.schedule.config import SUPPORTED_VERSIONS, TREE_VERSIONS
    from clusterclip.schedule.rules import DRAW_RULES

    assert set(DRAW_RULES) == set(SUPPORTED_VERSIONS)
    assert tuple(v for v, rule in DRAW_RULES.items() if rule.draws_trees) == TREE_VERSIONS


def test_the_signatures_show_the_settings():
    for function in (build_schedule, iter_schedule, open_stream, ClusterClipSampler):
        parameters = inspect.signature(function).parameters
        assert list(parameters)[:2] in (["labels", "policy"], ["self", "labels"])
        assert parameters["seed"].kind is inspect.Parameter.KEYWORD_ONLY
        assert "settings" not in parameters
