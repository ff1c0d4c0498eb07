"""The schedule core and its CLI module import numpy only."""

from __future__ import annotations

import subprocess
import sys


def test_schedule_core_imports_nothing_heavy():
    code = (
        "import sys, clusterclip.schedule, clusterclip.cli.schedule, clusterclip.adapters;"
        "import numpy as np;"
        "clusterclip.schedule.build_schedule(np.array([0, 1, 1]), num_samples=4, seed=0);"
        "heavy = [m for m in ('torch', 'pyarrow', 'faiss', 'sentence_transformers', 'ray')"
        " if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_sampler_without_torch_is_a_plain_iterable():
    code = (
        "import sys; sys.modules['torch'] = None;"  # makes `import torch` fail
        "import numpy as np;"
        "from clusterclip.adapters.torch import ClusterClipSampler;"
        "s = ClusterClipSampler(np.array([0, 0, 1]), num_samples=6, max_repeats=2, seed=0);"
        "assert ClusterClipSampler.__mro__[1] is object;"
        "print(len(s), list(s))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("6 [")
