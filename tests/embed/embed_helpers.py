"""Helpers shared by the embed tests (a uniquely named module, unlike `conftest`)."""

from __future__ import annotations

import gzip
import json
from importlib.resources import files
from pathlib import Path

KJV = Path(str(files("clusterclip") / "data" / "kjv-verses.jsonl.gz"))


def kjv_verses() -> list[dict]:
    with gzip.open(KJV, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
