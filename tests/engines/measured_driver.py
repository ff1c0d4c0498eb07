"""A driver for the multi-node tests: embed a corpus and say what this process read.

Run as ``python -m tests.engines.measured_driver SETTINGS_JSON``; prints one JSON
line: the bytes this process read from files (``rchar`` of ``/proc/self/io``)
during the embed call, and the corpus files it opened from Python (audit hook).
The modules and the encoder's model are loaded first, so that what is measured
is the stage's reading; the corpus fingerprints are not cached beforehand (the
Ray engine hashes the files in tasks too).
"""

from __future__ import annotations

import functools
import json
import operator
import sys
from pathlib import Path

from tests.engines.results import print_result


def _read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")


def main() -> None:
    settings = json.loads(sys.argv[1])
    import clusterclip
    import clusterclip.io.ranges
    from clusterclip.io import WorkDir

    clusterclip.io.ranges.DEFAULT_RANGE_BYTES = settings["range_bytes"]
    work = WorkDir(settings["workdir"])
    work.claim()
    if settings["engine"] == "ray":  # an actor started and stopped: Ray's own imports are done
        from clusterclip.engines import RayOptions, map_shards

        address = settings["engine_options"]["address"]
        options = RayOptions(address=address, num_workers=1)
        add_one = functools.partial(functools.partial, operator.add, 1)
        assert list(map_shards([(0, 1)], add_one, engine="ray", options=options)) == [(0, 2)]
    # What every run loads whatever the corpus (modules, the encoder's model) is loaded
    # before measuring, so the bytes measured are the stage's reading of the corpus.
    import pyarrow.dataset  # noqa: F401  (imported by the first pq.read_table)

    import clusterclip.embed.job  # noqa: F401
    from clusterclip.embed.encoders import EncoderSpec

    state_dir = str(Path(settings["workdir"]).resolve())
    EncoderSpec(encoder="static", state_dir=state_dir).build()
    corpus = {str(Path(p).resolve()) for p in settings["inputs"]}
    opened: list[str] = []

    def audit(event: str, arguments: tuple) -> None:
        path = arguments[0] if event == "open" else None
        if isinstance(path, str) and str(Path(path).resolve()) in corpus:
            opened.append(path)

    sys.addaudithook(audit)
    before = _read_bytes()
    clusterclip.embed(
        settings["inputs"], workdir=settings["workdir"], encoder="static",
        shard_size=settings["shard_size"], engine=settings["engine"],
        engine_options=settings["engine_options"],
    )  # fmt: skip
    print_result({"read_bytes": _read_bytes() - before, "opened": sorted(set(opened))})


if __name__ == "__main__":
    main()
