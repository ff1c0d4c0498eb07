"""The plan of stages: derived from the inputs each stage declares, in an order that respects them."""

from __future__ import annotations

import pytest

from clusterclip.cluster.stage import ClusterStage
from clusterclip.config import RunConfig
from clusterclip.dedup.options import DedupOptions
from clusterclip.dedup.stage import DedupStage
from clusterclip.embed.job import EmbedStage
from clusterclip.plan import StagePlan, declared_inputs, plan_stages
from clusterclip.report.stage import ReportStage
from clusterclip.schedule.options import ScheduleOptions
from clusterclip.schedule.stage import ScheduleStage


def _offered(config: RunConfig, corpus: str) -> list:
    """What ``clusterclip run`` offers the plan, with ``config``'s options."""
    stages = [
        (EmbedStage([corpus]), "embed"),
        (ClusterStage(), "cluster"),
        (DedupStage(), "dedup"),
        (ScheduleStage(), "schedule"),
        (ReportStage(), "report"),
    ]
    return [(stage, config.stage_options(section)) for stage, section in stages]


@pytest.fixture
def corpus(tmp_path) -> str:
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "a"}\n', "utf-8")
    return str(path)


def test_run_plans_every_stage_in_pipeline_order(corpus):
    plan = plan_stages(_offered(RunConfig(), corpus), ["report"])
    assert plan.names == ["embed", "cluster", "dedup", "schedule", "report"]
    assert plan.given == ()
    upstream = {step.stage.name: step.upstream for step in plan.steps}
    assert upstream == {
        "embed": (),
        "cluster": ("embed",),
        "dedup": ("embed", "cluster"),
        "schedule": ("cluster", "dedup"),
        "report": ("cluster", "schedule", "embed"),
    }


def test_the_schedule_s_duplicates_option_decides_the_dedup_stage(corpus):
    config = RunConfig(schedule=ScheduleOptions(duplicates="off"))
    assert plan_stages(_offered(config, corpus), ["report"]).names == [
        "embed", "cluster", "schedule", "report",
    ]  # fmt: skip
    assert plan_stages(_offered(config, corpus), ["schedule"]).names == [
        "embed", "cluster", "schedule",
    ]  # fmt: skip


def test_the_offered_order_does_not_matter(corpus):
    backwards = list(reversed(_offered(RunConfig(), corpus)))
    assert plan_stages(backwards, ["report"]).names == [
        "embed", "cluster", "dedup", "schedule", "report",
    ]  # fmt: skip


def test_stages_not_offered_are_given():
    """``clusterclip schedule``: the groups are refreshed, embed and cluster must exist."""
    offered = [(DedupStage(), DedupOptions()), (ScheduleStage(), ScheduleOptions())]
    plan = plan_stages(offered, ["schedule"])
    assert plan.names == ["dedup", "schedule"] and plan.given == ("cluster", "embed")
    off = [(DedupStage(), DedupOptions()), (ScheduleStage(), ScheduleOptions(duplicates="off"))]
    assert plan_stages(off, ["schedule"]).names == ["schedule"]


def test_declared_inputs_follow_the_options():
    assert declared_inputs(ScheduleStage(), ScheduleOptions(duplicates="off")) == (
        "cluster.clusters",
    )
    with_tokens = ScheduleOptions(num_tokens=1000)
    assert declared_inputs(ScheduleStage(), with_tokens) == (
        "cluster.clusters", "embed.documents", "dedup.duplicates",
    )  # fmt: skip


class _Peeks:
    name = "peeks"

    def inputs(self, work, options):
        return {"labels": work.labels()}  # reads data instead of declaring an input


def test_an_inputs_that_reads_data_is_refused():
    with pytest.raises(TypeError, match="asked the work directory for 'labels'"):
        declared_inputs(_Peeks(), None)


class _Reads:
    def __init__(self, name: str, *keys: str) -> None:
        self.name, self.keys = name, keys

    def inputs(self, work, options):
        return {key: work.output(key) for key in self.keys}


def test_a_cycle_and_an_unknown_stage_are_refused():
    with pytest.raises(ValueError, match="cycle"):
        plan_stages([(_Reads("a", "b.x"), None), (_Reads("b", "a.x"), None)], ["a"])
    with pytest.raises(ValueError, match="'c' is wanted but not offered"):
        plan_stages([(_Reads("a"), None)], ["c"])


def test_an_empty_plan_runs_nothing(tmp_path):
    from clusterclip.io import WorkDir
    from clusterclip.plan import StageLedger

    ledger = StageLedger()
    assert StagePlan(()).run(WorkDir(tmp_path / "w"), ledger=ledger) == {}
    assert ledger.describe() == "every stage finished ()"
