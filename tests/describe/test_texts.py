"""Example texts are read by tasks that each read one small shard, not by a driver pass."""

from __future__ import annotations

import pytest

from clusterclip.describe import document_texts, reading
from clusterclip.io import WorkDir
from tests.product_support import make_workdir


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A work directory over a .jsonl (with a malformed and an empty line), a .jsonl.gz and
    a .parquet file of KJV verses."""
    return make_workdir(tmp_path_factory.mktemp("texts"), step=10)


def _streamed(workdir, indices) -> dict[int, dict]:
    """What the texts were before: one pass over the whole corpus, in index order."""
    wanted = set(indices)
    return {
        record.index: {"index": record.index, "id": record.id, "text": record.text or ""}
        for record in WorkDir(workdir).corpus()
        if record.index in wanted
    }


def test_the_texts_are_those_of_a_pass_over_the_corpus(made, monkeypatch):
    work = WorkDir(made["workdir"])
    n = work.n_documents()
    indices = [0, 3, 7, n // 3, n // 3 + 1, n // 2, n - 1]  # every file; malformed, empty
    monkeypatch.setattr(reading, "TEXT_TASK_DOCUMENTS", 16)
    found = document_texts(made["workdir"], [*indices, 3, n + 5])  # a repeat, one past the end
    assert found == _streamed(made["workdir"], indices)
    assert list(found) == sorted(found)
    assert found[3]["text"] == ""  # the malformed line has no text


def test_only_the_shards_holding_a_wanted_document_are_read(made, monkeypatch):
    monkeypatch.setattr(reading, "TEXT_TASK_DOCUMENTS", 16)
    tasks = []
    worker_call = reading.TextWorker.__call__

    def counted(self, task):
        tasks.append(task)
        return worker_call(self, task)

    monkeypatch.setattr(reading.TextWorker, "__call__", counted)
    n = WorkDir(made["workdir"]).n_documents()
    document_texts(made["workdir"], [1, 2, n - 2])
    assert [(t.shard.first_index, t.wanted) for t in tasks] == [
        (0, (1, 2)),
        ((n - 2) // 16 * 16, (n - 2,)),
    ]
    assert document_texts(made["workdir"], []) == {}
