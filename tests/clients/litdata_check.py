"""The LitData export read by the real litdata 0.2.76 (run inside ``.venvs/litdata``).

    .venvs/litdata/bin/python -m tests.clients.litdata_check ROOT

Builds a KJV work directory and checks, with ``StreamingDataset(shuffle=False)``
and ``StreamingDataLoader``:

1. one process, no workers and two workers: the loader yields exactly the
   schedule, in order; a stop after a few batches resumed from
   ``StreamingDataLoader.state_dict()`` in a new dataset and loader continues
   exactly;
2. two real ranks (gloo), two DataLoader workers each, an export laid out for
   that topology: global step ``t`` is schedule positions ``[t*W*B, (t+1)*W*B)``
   with slot ``k`` of rank ``r`` at ``(t*B + k)*W + r``; the draws that do not
   fill a global batch are the ones LitData drops (``drop_last``, its default on
   several ranks); a stop + resume in new processes continues exactly.

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
STOP = 4  # batches before the interruption


def _positions(batch: dict) -> list[int]:
    return [int(v) for v in batch["position"]]


def _read(
    out: Path, *, workers: int, batch: int, state: dict | None = None, stop: int | None = None
):
    """(batches of positions, loader state after ``stop`` batches or None)."""
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(str(out), shuffle=False)
    loader = StreamingDataLoader(dataset, batch_size=batch, num_workers=workers)
    if state is not None:
        loader.load_state_dict(state)
    batches, saved = [], None
    for step, got in enumerate(loader, start=1):
        batches.append(_positions(got))
        if step == stop:
            saved = loader.state_dict()
            break
    return batches, saved


def rank_main(out: Path, mode: str, results: Path) -> None:
    """One rank: read (and stop after STOP batches), or resume from the saved state."""
    import torch.distributed as dist

    from tests.clients.ranks import join_group, load, save

    rank, _world = join_group()
    if mode == "run":
        batches, _ = _read(out, workers=WORKERS, batch=BATCH)
        save(results / f"run-rank{rank}.json", {"batches": batches})
        dist.barrier()
        _, state = _read(out, workers=WORKERS, batch=BATCH, stop=STOP)
        save(results / f"stop-rank{rank}.json", {"state": state})
    else:
        state = load(results / f"stop-rank{rank}.json")["state"]
        batches, _ = _read(out, workers=WORKERS, batch=BATCH, state=state)
        save(results / f"resume-rank{rank}.json", {"batches": batches})
    dist.barrier()
    dist.destroy_process_group()


def check_single_process(made: dict, root: Path) -> None:
    from clusterclip.adapters.litdata_export import export_litdata

    n_samples = len(made["indices"])
    for workers in (0, 2):
        out = root / f"single-{workers}"
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            summary = export_litdata(
                made["workdir"], out, num_workers=workers, batch_size=4, chunk_bytes=1 << 13
            )
        if "x their text" not in stderr.getvalue() or summary["chunks"] < 3:
            raise SystemExit(f"export said {stderr.getvalue()!r}, returned {summary}")
        batches, _ = _read(out, workers=workers, batch=4)
        flat = [p for b in batches for p in b]
        if flat != list(range(n_samples)):
            raise SystemExit(f"{workers} workers read {flat[:12]}... not the schedule order")
        head, state = _read(out, workers=workers, batch=4, stop=STOP)
        rest, _ = _read(out, workers=workers, batch=4, state=state)
        if head + rest != batches:
            raise SystemExit(
                f"{workers} workers: stop after {STOP} + resume read {(head + rest)[:6]}..."
            )


def check_samples(made: dict, out: Path) -> None:
    """Every item holds the right document and text."""
    from litdata import StreamingDataset

    indices = made["indices"]
    dataset = StreamingDataset(str(out), shuffle=False)
    if len(dataset) != len(indices):
        raise SystemExit(f"{len(dataset)} items for {len(indices)} draws")
    for item in range(len(dataset)):
        sample = dataset[item]
        document = int(indices[int(sample["position"])])
        text = made["rows"][document][3]["text"]
        if (int(sample["index"]), sample["text"]) != (document, text):
            raise SystemExit(f"item {item} is {sample}, want document {document}")


def check_ranks(made: dict, root: Path) -> None:
    from clusterclip.cli import main as cli
    from tests.clients.ranks import load, run_ranks

    out = root / "ranks"
    flags = ["--world-size", str(WORLD), "--num-workers", str(WORKERS), "--batch-size", str(BATCH)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli(
            [
                "export",
                "--workdir",
                str(made["workdir"]),
                "--format",
                "litdata",
                "--out",
                str(out),
                *flags,
            ]
        )
    if code != 0:
        raise SystemExit(f"clusterclip export --format litdata exited {code}")
    check_samples(made, out)
    results = root / "results"
    results.mkdir()
    module = "tests.clients.litdata_check"
    run_ranks(module, ["rank", str(out), "run", str(results)], world_size=WORLD)
    run_ranks(module, ["rank", str(out), "resume", str(results)], world_size=WORLD)
    runs = [load(results / f"run-rank{r}.json")["batches"] for r in range(WORLD)]
    n_samples = len(made["indices"])
    steps = (n_samples // BATCH) // WORLD
    for rank, batches in enumerate(runs):
        if len(batches) != steps:
            raise SystemExit(f"rank {rank} read {len(batches)} batches, want {steps}")
        for t, batch in enumerate(batches):
            want = [(t * BATCH + k) * WORLD + rank for k in range(BATCH)]
            if batch != want:
                raise SystemExit(f"rank {rank} step {t} read {batch}, want {want}")
        resumed = load(results / f"resume-rank{rank}.json")["batches"]
        if resumed != batches[STOP:]:
            raise SystemExit(
                f"rank {rank} resumed with {resumed[:3]}..., want {batches[STOP : STOP + 3]}..."
            )


def main(argv: list[str]) -> int:
    if argv[0] == "rank":
        rank_main(Path(argv[1]), argv[2], Path(argv[3]))
        return 0
    from clusterclip.adapters.litdata_export import litdata_layout
    from tests.product_support import make_workdir

    root = Path(argv[0])
    made = make_workdir(root / "kjv", step=150, max_repeats=2, epochs=1.6)
    n_samples = len(made["indices"])
    if n_samples % (WORLD * BATCH) == 0:
        raise SystemExit(
            f"pick a schedule length that leaves a partial global batch, not {n_samples}"
        )
    check_single_process(made, root)
    check_ranks(made, root)
    layout = litdata_layout(n_samples, world_size=WORLD, num_workers=WORKERS, batch_size=BATCH)
    print(
        f"litdata check: ok ({n_samples} draws; 1 process with 0 and 2 workers; {WORLD} ranks x "
        f"{WORKERS} workers, batch {BATCH}: {layout.regular} positions in whole global batches, "
        f"{n_samples - layout.regular} dropped; stopped after {STOP} batches and resumed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
