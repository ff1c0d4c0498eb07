"""A driver for the multi-node tests: ``clusterclip run`` and a token export, in its own process.

Run as ``python -m tests.engines.pipeline_driver SETTINGS_JSON``. The settings
name the corpus, the work directory, the export folder, the engine flags (``engine_flags``
for ``run`` and ``embed``, ``export_flags`` for ``export``), and
two test hooks for the embed stage's workers (wrapped here, never in the
production code): ``slow`` seconds before every embed task, and ``nodes_file``,
where each embed actor writes its Ray node's id when it is built. With
``embed_only`` only ``clusterclip embed`` runs. Prints the embed stage's
``shards_resumed`` as one JSON line.
"""

from __future__ import annotations

import json
import sys

from tests.engines.results import print_result


def main() -> None:
    settings = json.loads(sys.argv[1])
    import clusterclip.embed.job as job
    from clusterclip.cli import main as cli
    from clusterclip.io import read_stage
    from tests.engines.workers import NodeRecorder, Slow, wrapping

    if settings.get("slow") or settings.get("nodes_file"):

        def wrap(factory):  # type: ignore[no-untyped-def]
            slow = Slow(factory, settings.get("slow") or 0)
            return (
                NodeRecorder(slow, settings["nodes_file"]) if settings.get("nodes_file") else slow
            )

        job.map_shards = wrapping(job.map_shards, wrap)
    workdir, engine = settings["workdir"], settings["engine_flags"]
    common = ["--encoder", "static", "--shard-size", str(settings["shard_size"])]
    if settings.get("embed_only"):
        status = cli(["embed", *settings["inputs"], "--workdir", workdir, *common, *engine])
    else:
        status = cli([
            "run", *settings["inputs"], "--workdir", workdir, *common, "--n-clusters", "8",
            "--backend", "numpy", *engine,
        ])  # fmt: skip
        if status == 0:
            status = cli([
                "export", "--workdir", workdir, "--format", "megatron", "--out",
                settings["export"], "--tokenizer", settings["tokenizer"], "--eos-token",
                "[SEP]", *settings["export_flags"],
            ])  # fmt: skip
    if status != 0:
        sys.exit(status)
    summary = read_stage(workdir, "embed")["summary"]
    print_result({"shards_resumed": summary.get("shards_resumed", 0)})


if __name__ == "__main__":
    main()
