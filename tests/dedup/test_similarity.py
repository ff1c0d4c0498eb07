"""Each grouped document's similarity, in runs on the engine: the driver's values, bit for bit."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import clusterclip.dedup.similarity
import clusterclip.dedup.stage
from clusterclip.cli import main
from clusterclip.dedup import dedup
from clusterclip.dedup.detect import find_groups, hash_texts, second_nearest
from clusterclip.dedup.similarity import (
    SimilarityWork,
    SimilarityWorker,
    similarities,
    similarity_works,
)
from clusterclip.io import WorkDir
from tests.product_support import kjv_records


def reference_similarity(rows_of, representative, chunk=65536):
    """The similarities as the driver computed them before the runs moved to the engine."""
    n = representative.size
    similarity = np.ones(n, dtype=np.float32)
    grouped = np.flatnonzero(representative != np.arange(n))
    for start in range(0, grouped.size, chunk):
        docs = grouped[start : start + chunk]
        own = np.asarray(rows_of(docs), dtype=np.float32)
        theirs = np.asarray(rows_of(representative[docs]), dtype=np.float32)
        similarity[docs] = np.einsum("ij,ij->i", own, theirs)
    return similarity


def same_bits(a, b):
    return a.dtype == b.dtype == np.float32 and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.fixture(scope="module")
def verses():
    """2,400 KJV verses, every tenth copied, as unit TF-IDF rows (float16, as stored), in
    12 spherical k-means clusters, with their text hashes and second-nearest clusters."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [r["text"] for r in kjv_records(step=13, limit=2400)]
    texts += [t.upper() for t in texts[::10]]
    x = TruncatedSVD(48, random_state=0).fit_transform(TfidfVectorizer().fit_transform(texts))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16)
    model = KMeans(12, n_init=1, random_state=0).fit(x.astype(np.float32))
    centroids = model.cluster_centers_ / np.linalg.norm(model.cluster_centers_, axis=1)[:, None]
    labels = model.labels_.astype(np.int64)
    neighbours = second_nearest(lambda r: x[r], labels, centroids.astype(np.float32))
    return x, labels, hash_texts(texts, len(texts)), neighbours


@pytest.mark.parametrize("threshold", [0.6, 0.8])
def test_the_runs_give_the_previous_values_on_real_verses(verses, threshold):
    x, labels, hashes, neighbours = verses
    groups = find_groups(x.__getitem__, labels, threshold=threshold, hashes=hashes,
                         neighbours=neighbours)  # fmt: skip
    grouped = groups.representative != np.arange(labels.size)
    assert grouped.sum() > 300 and groups.exact.sum() >= 50  # near and exact copies
    assert same_bits(groups.similarity, reference_similarity(x.__getitem__, groups.representative))
    assert (groups.similarity[~grouped] == 1).all()
    assert (groups.similarity[groups.exact] > 0.99).all()
    assert groups.similarity[grouped].min() >= threshold - 1e-3  # a member near its head


def test_the_values_do_not_depend_on_the_runs_or_their_order(verses):
    x, labels, hashes, neighbours = verses
    rows_of = x.__getitem__
    straight = find_groups(rows_of, labels, threshold=0.7, hashes=hashes, neighbours=neighbours)

    def in_runs_of(budget, order):
        def describe(works):
            runs = list(works)
            # the runs are cut again, smaller, and answered in a scrambled order
            cut = [SimilarityWork(run.docs[i : i + budget], run.reps[i : i + budget])
                   for run in runs for i in range(0, run.cost, budget)]  # fmt: skip
            answers = {}
            for i in order(len(cut)):
                answers[i] = similarities(rows_of, cut[i])
            values = np.concatenate([answers[i] for i in range(len(cut))])
            docs = np.concatenate([w.docs for w in cut])
            assert np.array_equal(docs, np.concatenate([run.docs for run in runs]))
            bounds = np.cumsum([0] + [run.cost for run in runs])
            return [values[bounds[k] : bounds[k + 1]] for k in range(len(runs))]

        return describe

    shuffled = lambda n: np.random.default_rng(0).permutation(n)  # noqa: E731
    for budget, order in ((1, range), (7, shuffled), (1000, lambda n: range(n - 1, -1, -1))):
        other = find_groups(rows_of, labels, threshold=0.7, hashes=hashes, neighbours=neighbours,
                            describe=in_runs_of(budget, order))  # fmt: skip
        assert same_bits(other.similarity, straight.similarity)
        assert np.array_equal(other.exact, straight.exact)
        assert np.array_equal(other.representative, straight.representative)


def test_runs_cover_the_grouped_documents_in_index_order():
    representative = np.array([0, 0, 2, 1, 4, 2, 6, 0])
    works = list(similarity_works(representative, budget=2))
    assert [w.docs.tolist() for w in works] == [[1, 3], [5, 7]]
    assert [w.reps.tolist() for w in works] == [[0, 1], [2, 0]]
    assert list(similarity_works(np.arange(5))) == []


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """1,300 verses (every tenth copied in capitals) embedded with TF-IDF, in 8 clusters."""
    root = tmp_path_factory.mktemp("similarity")
    records = kjv_records(step=24)
    records += [{"text": r["text"].upper()} for r in records[::10]]
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    work = root / "w"
    assert main(["embed", str(corpus), "--workdir", str(work), "--encoder", "tfidf"]) == 0
    assert main(["cluster", "--workdir", str(work), "--n-clusters", "8"]) == 0
    return work


def test_the_stage_writes_the_previous_values_in_any_run_size(workdir, tmp_path, monkeypatch):
    """Through the stage on a work directory: one run, then runs of 7 documents (many tasks of
    :class:`SimilarityWorker`): the reference values and the same bytes."""
    one, many = tmp_path / "one", tmp_path / "many"
    shutil.copytree(workdir, one)
    shutil.copytree(workdir, many)
    result = dedup(one, threshold=0.7)
    table = WorkDir(one).duplicates()
    representative = table.column("representative").to_numpy()
    similarity = table.column("similarity").to_numpy()
    embeddings = WorkDir(one).embeddings()
    assert result.summary["duplicates"] > 100 and result.summary["exact_copies"] > 50
    assert same_bits(similarity, reference_similarity(embeddings.__getitem__, representative))

    tasks = []
    original = clusterclip.dedup.stage.map_shards

    def counting(tasks_in, worker, **arguments):
        if getattr(worker, "func", None) is SimilarityWorker:
            tasks_in = list(tasks_in)
            tasks.append(len(tasks_in))
        return original(tasks_in, worker, **arguments)

    monkeypatch.setattr(clusterclip.dedup.similarity, "TASK_ROWS", 7)
    monkeypatch.setattr(clusterclip.dedup.stage, "map_shards", counting)
    dedup(many, threshold=0.7)
    assert tasks == [-(-result.summary["duplicates"] // 7)]  # every grouped document, in runs
    assert (many / "duplicates.parquet").read_bytes() == (one / "duplicates.parquet").read_bytes()


def test_the_worker_reads_the_work_directory_itself(workdir):
    embeddings = WorkDir(workdir).embeddings()
    representative = np.arange(len(embeddings))
    representative[1::3] = representative[0::3][: representative[1::3].size]
    (work,) = similarity_works(representative)
    values = SimilarityWorker(str(workdir))(work)
    assert same_bits(values, similarities(embeddings.__getitem__, work))
    assert same_bits(
        values, reference_similarity(embeddings.__getitem__, representative)[work.docs]
    )
