"""The report on dissolved small clusters (issue 13) and figures a singleton cannot distort."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterclip.io import read_stage, write_stage
from clusterclip.report import build_report
from clusterclip.report.figures import _share_top
from tests.product_support import make_workdir


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    made = make_workdir(tmp_path_factory.mktemp("small"), step=40, max_repeats=2, epochs=1.5)
    workdir = made["workdir"]
    labels = made["labels"]
    sizes = np.bincount(labels[labels >= 0]).tolist()
    members = [int(np.flatnonzero(labels == 0)[0]), int(np.flatnonzero(labels == 1)[0])]
    entry = read_stage(workdir, "cluster")
    # As the cluster stage records it: two clusters of 1 document were dissolved.
    entry["small_clusters"] = {
        "min_cluster_size": 5,
        "sizes_before": [*sizes, 1, 1],
        "kept": list(range(len(sizes))),
        "dissolved": [
            {"cluster": len(sizes), "size": 1, "members": members[:1], "moved_to": [0]},
            {"cluster": len(sizes) + 1, "size": 1, "members": members[1:], "moved_to": [1]},
        ],
    }
    write_stage(workdir, "cluster", entry)
    path = build_report(workdir)
    return made, path, json.loads((workdir / "report.json").read_text())


def test_report_lists_dissolved_clusters_with_examples_and_sizes_before(built):
    made, path, data = built
    small = data["small_clusters"]
    assert small["requested_clusters"] == len(data["sizes_by_rank"]) + 2
    assert small["sizes_before_by_rank"][-2:] == [1, 1]
    assert [d["size"] for d in small["dissolved"]] == [1, 1]
    assert all(len(d["examples"]) == 1 and d["examples"][0]["text"] for d in small["dissolved"])
    assert data["summary"]["n_dissolved_clusters"] == 2
    page = path.read_text()
    assert "Small clusters" in page and "dissolved 2 of" in page
    assert small["dissolved"][0]["examples"][0]["text"][:40] in page


def test_alt_texts_describe_the_figures(built):
    _made, path, data = built
    page = path.read_text()
    for name, figure in data["figures"].items():
        assert figure["alt"] and figure["alt"] != name
        assert f'alt="{name}"' not in page
    assert "Line chart" in data["figures"]["dynamics.png"]["alt"]


def test_headline_imbalance_ignores_one_outlier_cluster():
    from clusterclip.report.data import _percentile_ratio

    sizes = np.array([100] * 50 + [80] * 49 + [1])
    assert sizes.max() / sizes.min() == 100
    assert _percentile_ratio(sizes) == pytest.approx(1.25)


def test_share_axis_follows_the_data():
    assert _share_top([0.1, 0.52, 0.3]) == pytest.approx(0.6)
    assert _share_top([0.95]) == 1.0
    assert _share_top([]) == 0.05
