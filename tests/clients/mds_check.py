"""The MDS export read by the real mosaicml-streaming 0.13 (run inside ``.venvs/streaming``).

    .venvs/streaming/bin/python -m tests.clients.mds_check ROOT

Builds a KJV work directory, exports it (API and CLI), and checks, with
``StreamingDataset(shuffle=False, num_canonical_nodes=1, batch_size=B)``:

1. random access: sample ``j`` is the draw at schedule position ``j``;
2. streaming's own partition function, for several nodes x ranks x workers,
   from the start and resumed: global step ``t`` is schedule positions
   ``[t*W*B, (t+1)*W*B)``, slot ``k`` on node ``p``, local rank ``r`` is
   ``(t*B + k)*W + p + P*r``;
3. two real ranks (gloo), each a ``StreamingDataLoader`` with two worker
   processes: they read exactly that, and a stop after a few steps resumed from
   ``StreamingDataLoader.state_dict()`` in new processes continues exactly, as
   does a resume of that state on one rank.

Exits non-zero with the reason on the first failure. Nothing heavy is imported
at module level: pytest imports this file for its doctests in the main venv.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

BATCH = 3
WORLD = 2
WORKERS = 2
STOP = 4  # global steps before the interruption


def _options() -> dict:
    return {"shuffle": False, "num_canonical_nodes": 1, "batch_size": BATCH}


def expected_rank_positions(n_samples: int, world: int, rank: int) -> list[int]:
    """The positions rank ``rank`` of ``world`` reads, in order (one node), before padding.

    >>> expected_rank_positions(7, 2, 1)
    [1, 3, 5]
    """
    return list(range(rank, n_samples, world))


def _positions(batch: dict) -> list[int]:
    return [int(v) for v in batch["position"]]


def rank_main(out: Path, mode: str, results: Path) -> None:
    """One rank: read the export with a 2-worker StreamingDataLoader."""
    import torch.distributed as dist
    from streaming import StreamingDataLoader, StreamingDataset

    from tests.clients.ranks import join_group, load, save

    rank, _world = join_group()
    dataset = StreamingDataset(local=str(out), **_options())
    loader = StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)
    record: dict = {"batches": []}
    if mode == "resume":
        loader.load_state_dict(load(results / "run-rank0.json")["state"])
    for step, batch in enumerate(loader, start=1):
        record["batches"].append(_positions(batch))
        if mode == "run" and step == STOP:
            record["state"] = loader.state_dict()
    save(results / f"{mode}-rank{rank}.json", record)
    dist.barrier()
    dist.destroy_process_group()


def check_partitions(n_samples: int) -> None:
    """streaming's own partition, for several topologies, fresh and resumed.

    With one canonical node the ``relaxed`` algorithm is ``orig`` for any number
    of physical nodes, so a resume on another node count is one of these cases.
    """
    from streaming.base.partition import get_partitions

    for nodes, ranks, workers, batch in [(1, 2, 2, 3), (2, 2, 3, 2), (1, 3, 1, 5), (2, 1, 2, 4)]:
        world = nodes * ranks
        for resumed_steps in (0, 3):
            drop = resumed_steps * world * batch
            ids = get_partitions("relaxed", n_samples, 1, nodes, ranks, workers, batch, drop)
            # (nodes, ranks, workers, batches per worker, batch) -> per rank, DataLoader order
            for p in range(nodes):
                for r in range(ranks):
                    per_worker = ids[p, r]
                    read = []
                    for step in range(per_worker.shape[1]):
                        for w in range(workers):
                            read.extend(int(v) for v in per_worker[w, step] if v != -1)
                    slot = p + nodes * r
                    want = list(range(drop + slot, n_samples, world))
                    if read[: len(want)] != want:
                        raise SystemExit(
                            f"partition P={nodes} R={ranks} workers={workers} B={batch} "
                            f"drop={drop}: node {p} rank {r} reads {read[:12]}..., want {want[:12]}..."
                        )


def check_global_order(n_samples: int, batches: list[list[list[int]]], *, start: int) -> None:
    """Rank r's k-th sample of step t is position start + (t*B + k)*W + r; steps are chunks."""
    world = len(batches)
    for rank, got in enumerate(batches):
        flat = [p for batch in got for p in batch]
        want = expected_rank_positions(n_samples - start, world, rank)
        want = [start + p for p in want]
        if flat[: len(want)] != want:
            raise SystemExit(f"rank {rank} read {flat[:12]}..., want {want[:12]}...")
    full_steps = min(len(b) for b in batches)
    for step in range(full_steps):
        union = sorted(p for got in batches for p in got[step])
        chunk = list(range(start + step * world * BATCH, start + (step + 1) * world * BATCH))
        if all(len(got[step]) == BATCH for got in batches) and union != chunk:
            raise SystemExit(f"global step {step}: {union} is not the schedule chunk {chunk}")


def check_writer_bytes(root: Path, workdir: Path, indices, texts: list[str]) -> None:
    """Our shards and index against ``MDSWriter``'s, for several limits, a codec, both engines'
    task cuts: a limit of 1 byte puts each sample in a shard of its own after an empty one."""
    from streaming import MDSWriter

    from clusterclip.adapters import mds_shards
    from clusterclip.adapters.mds import MDS_COLUMNS, export_mds

    settings = [
        {"size_limit": 1 << 12},
        {},
        {"size_limit": 1 << 13, "compression": "zstd"},
        {"size_limit": 1},
    ]
    for number, setting in enumerate(settings):
        theirs, ours = root / f"writer-{number}", root / f"ours-{number}"
        with MDSWriter(out=str(theirs), columns=MDS_COLUMNS, **setting) as writer:
            for j, (document, text) in enumerate(zip(indices, texts, strict=True)):
                writer.write({"text": text, "index": int(document), "position": j})
        task_bytes = mds_shards.SHARD_TASK_BYTES
        mds_shards.SHARD_TASK_BYTES = 5000  # several shard tasks
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                export_mds(workdir, ours, **setting)
        finally:
            mds_shards.SHARD_TASK_BYTES = task_bytes
        names = sorted(p.name for p in theirs.iterdir())
        if sorted(p.name for p in ours.iterdir()) != sorted([*names, "clusterclip.json"]):
            raise SystemExit(f"{setting}: files {sorted(p.name for p in ours.iterdir())}, "
                             f"MDSWriter wrote {names}")  # fmt: skip
        for name in names:
            if (ours / name).read_bytes() != (theirs / name).read_bytes():
                raise SystemExit(f"{setting}: {name} differs from MDSWriter's")
        if setting and len(names) < 4:  # the default limit holds it all in one shard
            raise SystemExit(f"{setting}: want several shards, got {names}")


def main(argv: list[str]) -> int:
    if argv[0] == "rank":
        rank_main(Path(argv[1]), argv[2], Path(argv[3]))
        return 0
    from streaming import StreamingDataLoader, StreamingDataset

    from clusterclip.adapters.mds import export_mds
    from clusterclip.cli import main as cli
    from clusterclip.errors import ClusterClipError
    from tests.clients.ranks import load, run_ranks
    from tests.product_support import make_workdir

    root = Path(argv[0])
    made = make_workdir(root / "kjv", step=150, max_repeats=2, epochs=1.6)
    indices = made["indices"]
    n_samples = len(indices)
    texts = [made["rows"][i][3]["text"] for i in indices]

    # export through the API (with the cost line) and through the CLI
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        summary = export_mds(made["workdir"], root / "mds", size_limit=1 << 12)
    said = stderr.getvalue()
    if "repeated documents are stored again" not in said or summary["samples"] != n_samples:
        raise SystemExit(f"export said {said!r}, returned {summary}")
    if summary["shards"] < 3 or f"writing {summary['shards']} shards" not in said:
        raise SystemExit(f"want several shards for the test, got {summary}; said {said!r}")

    # 0. the files are MDSWriter's own for the same samples, byte for byte
    check_writer_bytes(root, made["workdir"], indices, texts)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli(
            [
                "export",
                "--workdir",
                str(made["workdir"]),
                "--format",
                "mds",
                "--out",
                str(root / "cli"),
            ]
        )
    if code != 0:
        raise SystemExit(f"clusterclip export --format mds exited {code}")
    (root / "foreign").mkdir()
    (root / "foreign" / "keep.txt").write_text("mine")
    try:
        export_mds(made["workdir"], root / "foreign")
        raise SystemExit("export into a foreign non-empty folder was not refused")
    except ClusterClipError as error:
        if "already exists and is not empty" not in str(error):
            raise

    # 1. random access on the CLI's export
    dataset = StreamingDataset(local=str(root / "cli"), **_options())
    if len(dataset) != n_samples:
        raise SystemExit(f"StreamingDataset has {len(dataset)} samples, the schedule {n_samples}")
    for j in range(n_samples):
        sample = dataset[j]
        if (int(sample["position"]), int(sample["index"]), sample["text"]) != (
            j,
            int(indices[j]),
            texts[j],
        ):
            raise SystemExit(f"sample {j} is {sample}, want document {indices[j]}")

    # 2. the partition function itself
    check_partitions(n_samples)

    # 3. two real ranks with two workers each: read, stop + resume in new processes
    results = root / "results"
    results.mkdir()
    module = "tests.clients.mds_check"
    run_ranks(module, ["rank", str(root / "mds"), "run", str(results)], world_size=WORLD)
    run_ranks(module, ["rank", str(root / "mds"), "resume", str(results)], world_size=WORLD)
    runs = [load(results / f"run-rank{r}.json") for r in range(WORLD)]
    check_global_order(n_samples, [run["batches"] for run in runs], start=0)
    state = runs[0]["state"]
    if state["sample_in_epoch"] != STOP * WORLD * BATCH:
        raise SystemExit(f"state after {STOP} steps is {state}")
    for rank in range(WORLD):
        resumed = load(results / f"resume-rank{rank}.json")["batches"]
        if resumed != runs[rank]["batches"][STOP:]:
            raise SystemExit(
                f"rank {rank} resumed with {resumed[:3]}..., the uninterrupted run had "
                f"{runs[rank]['batches'][STOP : STOP + 3]}..."
            )
    # the same state resumed on a single rank continues the global order there
    single = StreamingDataset(local=str(root / "mds"), **_options())
    loader = StreamingDataLoader(single, batch_size=BATCH, num_workers=WORKERS)
    loader.load_state_dict(state)
    rest = [p for batch in loader for p in _positions(batch)]
    if rest != list(range(STOP * WORLD * BATCH, n_samples)):
        raise SystemExit(f"one rank resumed with {rest[:12]}...")
    print(
        f"mds check: ok ({n_samples} draws, {summary['shards']} shards; 2 ranks x {WORKERS} "
        f"workers, batch {BATCH}; stopped after {STOP} steps and resumed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
