"""The one result line a test driver prints, found among whatever else reaches its stdout.

A Ray driver's stdout also carries the lines Ray forwards from its workers and
raylets (``(raylet) Task ... failed ... will be retried``), and one can arrive
after the driver's own last print. So a driver prints its result behind
:data:`PREFIX`, and the test reads the last line that carries it.
"""

from __future__ import annotations

import json
from typing import Any

#: What the result line starts with (no forwarded log line does).
PREFIX = "clusterclip-test-result: "


def print_result(result: dict[str, Any]) -> None:
    """Print ``result`` as the driver's result line."""
    print(PREFIX + json.dumps(result), flush=True)


def read_result(stdout: str) -> dict[str, Any]:
    """The result a driver printed with :func:`print_result` (the last one).

    >>> read_result('noise\\n' + PREFIX + '{"a": 1}\\n(raylet) retried\\n')
    {'a': 1}
    """
    lines = [line for line in stdout.splitlines() if line.startswith(PREFIX)]
    assert lines, f"no result line in the driver's output: {stdout[-2000:]!r}"
    return json.loads(lines[-1][len(PREFIX) :])
