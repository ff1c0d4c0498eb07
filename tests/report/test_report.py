"""The report on a real (hand-made) work directory: numbers, files, and a real browser."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from clusterclip.errors import ClusterClipError
from clusterclip.report import build_report
from tests.product_support import make_workdir

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    made = make_workdir(root, step=40, max_repeats=2, epochs=1.5)
    path = build_report(made["workdir"])
    data = json.loads((made["workdir"] / "report.json").read_text())
    return made, path, data


def test_numbers_match_the_schedule(built):
    made, _path, data = built
    labels, indices = made["labels"], made["indices"]
    usable = labels >= 0
    sizes = np.bincount(labels[usable])
    draws = np.bincount(labels[indices], minlength=len(sizes))
    by_cluster = {row["cluster"]: row for row in data["clusters"]}
    assert set(by_cluster) == set(range(len(sizes)))
    for k, row in by_cluster.items():
        assert row["size"] == sizes[k]
        assert row["draws"] == draws[k]
        assert row["share_random"] == pytest.approx(sizes[k] / usable.sum())
        assert row["share_uniform"] == pytest.approx(1 / len(sizes))
    # clusters are listed largest first and the rank plot follows the same order
    assert data["sizes_by_rank"] == sorted(sizes.tolist(), reverse=True)
    assert [r["size"] for r in data["clusters"]] == data["sizes_by_rank"]
    assert sum(data["shares_by_size_rank"]["policy"]) == pytest.approx(1.0)
    summary = data["summary"]
    assert summary["schedule_length"] == len(indices)
    assert summary["n_usable"] == usable.sum()
    assert summary["n_excluded"] == 2  # the malformed and the empty line
    assert summary["status_counts"] == {"ok": int(usable.sum()), "malformed": 1, "empty": 1}
    seen = np.bincount(indices, minlength=len(labels))
    assert data["repetitions"]["documents"] == np.bincount(seen[usable]).tolist()
    assert summary["never_seen"] == int((seen[usable] == 0).sum())
    assert summary["max_repeats_observed"] <= made["max_repeats"]
    assert sum(data["never_seen_by_size_rank"]) == summary["never_seen"]


def test_keywords_for_the_largest_clusters_only_when_there_are_many(built, monkeypatch):
    """At 10^5 clusters a word counter per cluster took 6.9 GB: the report keeps them for
    the KEYWORD_CLUSTERS largest only, with the keywords they get when all are kept."""
    from clusterclip.describe import inspect_clusters
    from clusterclip.report import data as report_data
    from clusterclip.report import keywords as report_keywords

    made, _path, full = built
    monkeypatch.setattr(report_keywords, "KEYWORD_CLUSTERS", 2)
    few = report_data.compute_report_data(made["workdir"])
    largest = [row["cluster"] for row in full["clusters"][:2]]
    assert [row["cluster"] for row in few["clusters"] if row["keywords"]] == largest
    every = {e["cluster"]: e for e in inspect_clusters(made["workdir"], n_keywords=8)}
    for row in few["clusters"][:2]:
        assert row["keywords"] == every[row["cluster"]]["keywords"] != []
        assert row == full["clusters"][row["size_rank"] - 1]
    assert all(row["example"] is None for row in few["clusters"][2:])


def test_clip_events_match_the_oracle_sampler(built):
    made, _path, data = built
    assert [e["position"] for e in data["clip_events"]] == made["clips"]
    assert data["summary"]["n_clipped_clusters"] == len(made["clips"]) > 0
    # after the first clip, a clipped cluster is never drawn again
    labels, indices = made["labels"], made["indices"]
    for event in data["clip_events"]:
        later = labels[indices[event["position"] + 1 :]]
        assert event["cluster"] not in set(later.tolist())


def test_dynamics_slices_cover_the_schedule(built):
    made, _path, data = built
    dynamics = data["dynamics"]
    assert dynamics["slice_start"][0] == 0
    assert dynamics["slice_stop"][-1] == len(made["indices"])
    assert len(dynamics["share_rarest_10pct"]) == 50
    # the rare clusters get far more than their random share at the start of training
    assert dynamics["share_rarest_10pct"][0] > 2 * dynamics["random_share_rarest_10pct"]
    assert all(
        0 <= x <= y <= 1
        for x, y in zip(dynamics["share_rarest_10pct"], dynamics["share_rarest_50pct"], strict=True)
    )
    assert dynamics["active_clusters"][0] == data["summary"]["n_clusters"]


def test_files_and_embedded_images(built):
    made, path, data = built
    from PIL import Image

    workdir = made["workdir"]
    assert path == workdir / "report.html"
    page = path.read_text()
    uris = re.findall(r'data-name="([^"]+)" src="data:image/png;base64,([^"]+)"', page)
    assert sorted(name for name, _ in uris) == sorted(data["figures"])
    assert len(uris) == 5
    for name, encoded in uris:
        image = Image.open(io.BytesIO(base64.b64decode(encoded)))
        image.verify()
        assert image.format == "PNG"
        assert (workdir / name).read_bytes() == base64.b64decode(encoded)
    assert "<script src" not in page and "http://" not in page and "https://" not in page
    entry = json.loads((workdir / "manifest.json").read_text())["stages"]["report"]
    assert entry["complete"] and set(entry["outputs"]) == {"report_html", "report_json"}


def test_stale_schedule_is_refused(tmp_path):
    made = make_workdir(tmp_path, step=200, max_repeats=2, epochs=1.0)
    manifest_path = made["workdir"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["stages"]["cluster"]["outputs"]["clusters"] = "0" * 32  # clusters redone since
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(
        ClusterClipError, match=r"schedule outputs in .* are stale: cluster.clusters changed"
    ):
        build_report(made["workdir"])


def test_missing_schedule_names_the_command(tmp_path):
    made = make_workdir(tmp_path, step=400)
    (made["workdir"] / "schedule.npy").unlink()
    with pytest.raises(ClusterClipError, match=r"schedule.npy not found. Build a schedule first"):
        build_report(made["workdir"], out_dir=tmp_path / "out")


def test_cli_report_prints_a_summary_and_is_deterministic(built, tmp_path, capsys):
    from clusterclip.cli import main

    made, _path, data = built
    assert main(["report", "--workdir", str(made["workdir"]), "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "report.html" in out and "never seen" in out and "rarest 10% of clusters" in out
    # Deterministic: the same work directory gives the same numbers.
    assert json.loads((tmp_path / "report.json").read_text()) == data


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian package "
    "`chromium`); install it to run the browser test",
)
def test_report_renders_in_headless_chromium(built, tmp_path):
    _made, path, data = built
    from PIL import Image

    screenshot = tmp_path / "shot.png"
    common = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ]
    uri = path.resolve().as_uri()
    subprocess.run(
        [
            *common,
            f"--user-data-dir={tmp_path / 'profile-a'}",
            f"--screenshot={screenshot}",
            "--window-size=1200,3000",
            uri,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    dom = subprocess.run(
        [
            *common,
            f"--user-data-dir={tmp_path / 'profile-b'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            uri,
        ],
        check=True,
        capture_output=True,
        timeout=120,
        text=True,
    ).stdout
    n_images = len(data["figures"])
    assert dom.count('data-loaded="1"') == n_images
    assert f'data-images-loaded="{n_images}/{n_images}"' in dom
    image = np.asarray(Image.open(screenshot).convert("L"))
    assert image.shape[0] >= 2000 and image.shape[1] >= 1000
    # not blank: the page has text, plots and white space
    assert image.std() > 20 and (image < 100).mean() > 0.001
