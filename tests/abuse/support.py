"""What the abuse tests share: the command run in-process or as a user runs it, fast settings,
and the shape of a refusal (one ``error:`` line, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clusterclip.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
#: Fast, model-free settings for the cases that do run stages.
FAST = ["--encoder", "tfidf", "--n-clusters", "3", "--backend", "numpy", "--no-report"]


def env() -> dict[str, str]:
    """The environment of a child ``clusterclip``: this checkout's code, offline, no bars."""
    return {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "HF_HUB_OFFLINE": "1",
        "CLUSTERCLIP_PROGRESS": "0",
    }


def clusterclip(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    """``python -m clusterclip ARGS`` as a user runs it (stdout and stderr captured)."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "clusterclip", *args],
        cwd=cwd, env=env(), stderr=subprocess.PIPE, text=True, timeout=600, **kwargs,
    )  # fmt: skip


def call(capsys, *args: str) -> tuple[int, str, str]:
    """``clusterclip ARGS`` in-process: (exit status, stdout, stderr); argparse exits too."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(code: int, err: str, *needles: str, status: int = 2) -> None:
    """The exit status, one ``error:`` line holding every needle, no traceback."""
    assert code == status, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in:\n{err}"
