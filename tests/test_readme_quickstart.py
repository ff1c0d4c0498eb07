"""The README's Quickstart runs exactly as written.

The section is read from README.md at test time: its inline Python (how to get
``labels.npy`` out of a work directory), its ```python block and its command
lines. They run one after the other, each in a fresh interpreter (so a bare
``import clusterclip`` is what they get), in a directory holding a work directory
made by a real ``clusterclip run`` over verses of the bundled King James Bible,
with the fast model-free flags.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.product_support import kjv_records, require_module

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--encoder", "tfidf", "--n-clusters", "3", "--backend", "numpy", "--no-report"]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


def quickstart() -> str:
    """The README's Quickstart section (up to the next ``## `` heading)."""
    text = (ROOT / "README.md").read_text("utf-8")
    start = text.index("\n## Quickstart")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def inline_python(section: str) -> list[str]:
    """Inline code spans of the prose that are Python calls into clusterclip."""
    prose = FENCE.sub("", section)
    return [
        span for span in re.findall(r"`([^`\n]+)`", prose) if "clusterclip." in span and "(" in span
    ]


def fenced(section: str, language: str) -> list[str]:
    return [code for lang, code in FENCE.findall(section) if lang == language]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1",
            "CLUSTERCLIP_PROGRESS": "0"}  # fmt: skip


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env(), capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """``corpus.jsonl`` (every 50th bundled verse) and ``work``, made by ``clusterclip run``."""
    require_module("sklearn")  # the tfidf encoder
    require_module("pyarrow")
    root = tmp_path_factory.mktemp("quickstart")
    records = kjv_records(step=50)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    done = run([sys.executable, "-m", "clusterclip", "run", "corpus.jsonl", "--workdir", "work",
                *FAST], root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root


@pytest.mark.slow
def test_the_quickstart_runs_as_written(made):
    section = quickstart()
    # what this test runs is there (a renamed heading or a rewritten span would skip it)
    assert any("clusterclip.io.WorkDir" in span for span in inline_python(section))
    assert fenced(section, "python")
    assert any("clusterclip schedule" in block for block in fenced(section, ""))
    # 1. the labels out of the work directory, after the imports the Python block starts with
    script = "import numpy as np\nimport clusterclip\n" + "\n".join(inline_python(section)) + "\n"
    done = run([sys.executable, "-c", script], made)
    assert done.returncode == 0, f"{script}\n{done.stderr[-3000:]}"
    from clusterclip.io import WorkDir

    assert np.array_equal(np.load(made / "labels.npy"), WorkDir(made / "work").labels())
    # 2. the Python block, as written
    for code in fenced(section, "python"):
        (made / "quickstart.py").write_text(code, "utf-8")
        done = run([sys.executable, "quickstart.py"], made)
        if done.returncode != 0 and "No module named 'torch'" in done.stderr:
            require_module("torch")  # skip, or fail under CI=true
        assert done.returncode == 0, f"{code}\n{done.stderr[-3000:]}"
    assert np.load(made / "schedule.npy").size > 0 and (made / "schedule.json").is_file()
    # 3. the command lines, as written
    (made / "schedule.npy").unlink()
    for block in fenced(section, ""):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            words = shlex.split(line)
            if words[:1] != ["clusterclip"]:
                continue
            done = run([sys.executable, "-m", "clusterclip", *words[1:]], made)
            assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
            assert "Traceback" not in done.stderr
    assert np.load(made / "schedule.npy").size > 0
