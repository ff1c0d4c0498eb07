"""Dedup groups never chain: every two distinct texts of a group are near copies.

Found by a tester: the connected components of links at cosine 0.9 put eight
different ``hashlib`` docstrings ("Returns a md5 hash object ...", "... sha224
...", ...) into one group, and the CLI showed a pair at cosine 0.89 as a "copy".
Groups are now cliques made in index order (docs/clustering.md,
"Near-duplicates"); these cases pin that on the real docstrings with the default
encoder, on hand-made vectors, and against a slow, obviously-correct oracle.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import numpy as np
import pytest

from clusterclip.cli import main
from clusterclip.dedup.detect import find_groups, hash_texts
from clusterclip.io import WorkDir
from tests.product_support import require_module

THRESHOLD = 0.9


def hashlib_docstrings() -> list[dict]:
    """The docstrings of the ``hashlib`` functions and classes of the running Python."""
    records = []
    for name in sorted(dir(hashlib)):
        obj = getattr(hashlib, name)
        if not name.startswith("_") and callable(obj) and isinstance(obj.__doc__, str):
            records.append({"id": name, "text": obj.__doc__})
    return records


def members_of(representative: np.ndarray) -> list[np.ndarray]:
    """The groups of two or more documents."""
    heads = np.unique(representative[representative != np.arange(representative.size)])
    return [np.flatnonzero(representative == head) for head in heads]


def oracle_groups(x: np.ndarray, labels: np.ndarray, threshold: float) -> list[int]:
    """Greedy cliques by plain loops: in index order, each document joins the group of the
    lowest representative (same cluster) to every member of which its cosine is >= threshold."""
    groups: dict[int, list[int]] = {}
    representative = list(range(len(labels)))
    for j in range(len(labels)):
        if labels[j] < 0:
            continue
        for head in sorted(groups):
            if labels[head] == labels[j] and all(
                float(np.dot(x[j], x[m])) >= threshold for m in groups[head]
            ):
                groups[head].append(j)
                representative[j] = head
                break
        else:
            groups[j] = [j]
    return representative


@pytest.fixture(scope="module")
def docstrings_workdir(tmp_path_factory):
    """The hashlib docstrings embedded by the default encoder (all-MiniLM-L6-v2, offline)."""
    require_module("sentence_transformers", "embed")
    root = tmp_path_factory.mktemp("hashlib")
    records = hashlib_docstrings()
    assert len(records) >= 8 and len({r["text"] for r in records}) == len(records)
    corpus = root / "docstrings.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    work = root / "work"
    status = main(["run", str(corpus), "--workdir", str(work), "--n-clusters", "1",
                   "--backend", "numpy", "--no-report", "--epochs", "1"])  # fmt: skip
    assert status == 0
    return work


def test_hashlib_docstrings_are_not_chained_into_one_group(docstrings_workdir, capsys):
    work = WorkDir(docstrings_workdir)
    representative = work.duplicate_of()
    x = np.asarray(work.embeddings()[:], dtype=np.float32)
    groups = members_of(representative)
    assert groups, "the sha*/md5 docstrings are near copies of each other at 0.9"
    table = work.duplicates()
    lowest = table.column("min_similarity").to_numpy()
    for members in groups:
        scores = x[members] @ x[members].T
        assert scores.min() >= THRESHOLD - 1e-6, (members.tolist(), float(scores.min()))
        head = members[0]
        # the group's reported minimum is its real lowest pairwise cosine, and >= threshold
        assert lowest[head] == pytest.approx(float(scores.min()), abs=1e-5)
        assert lowest[head] >= THRESHOLD
    summary = work.entry("dedup")["summary"]
    assert THRESHOLD <= summary["min_similarity"] <= min(lowest[g[0]] for g in groups)

    capsys.readouterr()
    assert main(["dedup", "--workdir", str(docstrings_workdir), "--top", "10"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "warning" not in shown
    assert f"lowest cosine inside a group {summary['min_similarity']:.4f} (every pair >= 0.9)" in (
        shown
    )
    # nothing below the threshold is called a copy, nor shown as a group's lowest cosine
    copies = [float(v) for v in re.findall(r"near copy: .*? \(cosine (\d\.\d+)\)", shown)]
    lowest_shown = [float(v) for v in re.findall(r"lowest cosine (\d\.\d+)", shown)]
    assert copies and lowest_shown
    assert min(copies + lowest_shown) >= THRESHOLD


def test_three_texts_in_a_row_are_not_one_group():
    """0 deg, 20 deg, 40 deg: neighbours at cosine 0.94, the ends at 0.77 (below 0.9)."""
    angles = np.radians([0.0, 20.0, 40.0])
    x = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    groups = find_groups(lambda rows: x[rows], np.zeros(3, dtype=np.int64), threshold=0.9)
    assert groups.representative.tolist() == [0, 0, 2]
    assert groups.min_similarity[0] == pytest.approx(np.cos(np.radians(20.0)), abs=1e-6)
    assert groups.min_similarity[2] == 1.0
    assert groups.summary()["min_similarity"] == pytest.approx(0.9396, abs=1e-4)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block_size", [1, 5, 1024])
def test_groups_equal_the_greedy_clique_oracle(seed, block_size):
    """Families of noisy copies (chains between them): the groups are the oracle's, any block."""
    rng = np.random.default_rng(seed)
    n, dim = 90, 6
    centres = rng.standard_normal((12, dim))
    x = centres[rng.integers(0, 12, n)] + 0.25 * rng.standard_normal((n, dim))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    labels = rng.integers(-1, 3, n)  # three clusters and some excluded documents
    scores = x.astype(np.float64) @ x.T.astype(np.float64)
    assert np.abs(scores - THRESHOLD).min() > 1e-5  # no pair within float rounding of it
    groups = find_groups(lambda rows: x[rows], labels, threshold=THRESHOLD, block_size=block_size)
    assert groups.representative.tolist() == oracle_groups(x, labels, THRESHOLD)
    chained = False
    for members in members_of(groups.representative):
        assert scores[np.ix_(members, members)].min() >= THRESHOLD
        assert groups.min_similarity[members[0]] == pytest.approx(
            scores[np.ix_(members, members)].min(), abs=1e-5
        )
        chained |= len(members) > 2
    assert chained  # the data holds groups of three or more, where chains could form


def test_a_group_across_a_cluster_border_merges_only_when_all_are_near():
    """Doc 2 (cluster 1, 20 deg from doc 0) is near doc 0 but not doc 1 (30 deg) of cluster
    0's group {0, 1}: the border pair alone would chain 1 ~ 0 ~ 2; doc 3 (cluster 2) is near
    both and merges."""
    angles = np.radians([10.0, 0.0, 30.0, 14.0])
    x = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    labels = np.array([0, 0, 1, 2])
    neighbours = np.array([1, 1, 0, 0])
    rows_of = lambda rows: x[rows]  # noqa: E731
    groups = find_groups(rows_of, labels, threshold=0.9, neighbours=neighbours)
    assert (x[0] @ x[2] >= 0.9) and (x[1] @ x[2] < 0.9)
    assert groups.representative.tolist() == [0, 0, 2, 0]
    assert groups.min_similarity[0] == pytest.approx(float(x[1] @ x[3]), abs=1e-6)


def test_exact_copies_follow_their_first_occurrence_and_are_compared_once():
    """A case-changed copy (same normalised text) stays with its text whatever its
    embedding; the group's minimum is over its distinct texts."""
    texts = ["In the beginning", "In the beginning God", "IN THE BEGINNING", "unrelated"]
    x = np.array([[1, 0, 0], [0.96, 0.28, 0], [0, 0, 1], [0, 1, 0]], dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    groups = find_groups(
        lambda rows: x[rows], np.array([0, 0, 1, 0]), threshold=0.9, hashes=hash_texts(texts, 4)
    )
    assert groups.representative.tolist() == [0, 0, 0, 3]
    assert groups.exact.tolist() == [False, False, True, False]
    assert groups.min_similarity[0] == pytest.approx(0.96, abs=1e-6)


def test_groups_made_by_an_earlier_version_are_redone(docstrings_workdir, tmp_path, capsys):
    """A dedup entry without the grouping method (connected components) is not reused."""
    work = tmp_path / "work"
    shutil.copytree(docstrings_workdir, work)
    manifest = json.loads((work / "manifest.json").read_text("utf-8"))
    del manifest["stages"]["dedup"]["config"]["grouping"]
    (work / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    capsys.readouterr()
    assert main(["dedup", "--workdir", str(work)]) == 2
    err = capsys.readouterr().err
    assert "grouping: None -> 'cliques'" in err and "--overwrite" in err
    assert main(["dedup", "--workdir", str(work), "--overwrite"]) == 0
    assert WorkDir(work).entry("dedup")["config"]["grouping"] == "cliques"
