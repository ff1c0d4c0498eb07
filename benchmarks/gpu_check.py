"""The GPU paths against the CPU path, on one machine with a GPU (issue 28, item 6).

On N distinct documents (two KJV verses each, four jsonl files, as
``bench_scaleout.py`` writes them) it measures and checks:

1. **embed** on the GPU (``--device cuda``; the transformer in float16 by
   ``--precision auto``): documents/s over the whole corpus;
2. **the embeddings against the CPU path**: the first ``--reference`` documents
   embedded again on the CPU in float32; every row's cosine to its GPU row
   (the check: the lowest is at least 0.995);
3. **k-means**: one fit with ``--backend auto`` (``torch-cuda`` where torch sees
   the GPU) and one with the exact CPU backend ``torch-fp32``, same seed and
   K, each timed, and the adjusted Rand index between their labels of every
   document;
4. **the whole run**: ``clusterclip run`` on the corpus with ``--device cuda``,
   timed (embed, cluster, schedule, report).

It prints one line per step and writes them to ``OUT/gpu_check.json``; the
exit status is 1 when a check fails. Usage (``benchmarks/gpu_check.sh`` wraps
it)::

    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/gpu_check.py OUT
    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/gpu_check.py OUT --docs 600 --device cpu

The second line runs every step on a CPU machine (its "GPU" rows then measure
the CPU: the script, not the hardware, is what it checks). Not part of the
test suite's timings; on one H200 the default 10^6 documents are meant to take
under 10 minutes (an estimate until it has run there).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaleout import write_corpus  # noqa: E402  (the same corpus as the scale-out bench)

COSINE_FLOOR = 0.995


def machine() -> dict:
    """CPU model and count, torch and its GPU (if any)."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cpus": os.cpu_count()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["torch"] = info["gpu"] = None
    return info


def timed(args: list[str]) -> float:
    """Run one ``clusterclip`` command in this process; its wall seconds (exit 0 required)."""
    from clusterclip.cli import main as cli

    started = time.perf_counter()
    status = cli(args)
    if status != 0:
        raise SystemExit(f"gpu_check: clusterclip {' '.join(args)} exited {status}")
    return time.perf_counter() - started


def check_embeddings(out: Path, paths: list[Path], device: str, encoder: str, n: int) -> dict:
    """Steps 1 and 2: embed on ``device``, then the first ``n`` documents on the CPU."""
    from clusterclip.io import WorkDir

    work = out / "work-device"
    seconds = timed(["embed", *map(str, paths), "--workdir", str(work), "--encoder", encoder,
                     "--device", device])  # fmt: skip
    device_rows = WorkDir(work).embeddings()
    total = device_rows.shape[0]
    first = out / "first.jsonl"
    with open(paths[0], encoding="utf-8") as source, open(first, "w", encoding="utf-8") as sink:
        for _, line in zip(range(n), source, strict=False):
            sink.write(line)
    reference = out / "work-cpu"
    timed(["embed", str(first), "--workdir", str(reference), "--encoder", encoder, "--device",
           "cpu", "--precision", "float32"])  # fmt: skip
    cpu_rows = np.asarray(WorkDir(reference).embeddings()[np.arange(n)], np.float32)
    gpu_rows = np.asarray(device_rows[np.arange(n)], np.float32)
    cosine = np.einsum("ij,ij->i", cpu_rows, gpu_rows) / (
        np.linalg.norm(cpu_rows, axis=1) * np.linalg.norm(gpu_rows, axis=1)
    )
    return {
        "embed_seconds": round(seconds, 2),
        "embed_docs_per_second": round(total / seconds, 1),
        "reference_documents": n,
        "cosine_min": round(float(cosine.min()), 5),
        "cosine_mean": round(float(cosine.mean()), 5),
        "cosine_ok": bool(cosine.min() >= COSINE_FLOOR),
    }


def check_kmeans(out: Path, n_clusters: int) -> dict:
    """Step 3: ``auto`` (the GPU where there is one) against ``torch-fp32`` on the CPU."""
    from sklearn.metrics import adjusted_rand_score

    from clusterclip.cluster import KMeans
    from clusterclip.cluster.backends import resolve_backend
    from clusterclip.io import WorkDir

    rows = np.asarray(WorkDir(out / "work-device").embeddings()[:], np.float32)
    found = {}
    for name in ("auto", "torch-fp32"):
        started = time.perf_counter()
        model = KMeans(n_clusters, seed=0, backend=name).fit(rows)
        found[name] = (time.perf_counter() - started, model.labels_, model.objective_)
    (auto_s, auto_labels, auto_objective) = found["auto"]
    (cpu_s, cpu_labels, cpu_objective) = found["torch-fp32"]
    return {
        "kmeans_clusters": n_clusters,
        "kmeans_auto_backend": resolve_backend("auto"),
        "kmeans_auto_seconds": round(auto_s, 2),
        "kmeans_cpu_seconds": round(cpu_s, 2),
        "kmeans_objective_auto": round(float(auto_objective), 6),
        "kmeans_objective_cpu": round(float(cpu_objective), 6),
        "kmeans_ari_auto_vs_cpu": round(float(adjusted_rand_score(cpu_labels, auto_labels)), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="a folder for the corpus, the work directories and the JSON")
    parser.add_argument("--docs", type=int, default=1_000_000, help="documents (default 10^6)")
    parser.add_argument("--device", default="cuda", help="the encoder's device (default cuda)")
    parser.add_argument(
        "--encoder", default="sentence-transformers", choices=("sentence-transformers", "static")
    )
    parser.add_argument("--reference", type=int, default=2000, help="documents embedded on CPU")
    parser.add_argument("--clusters", type=int, help="K (default: sqrt(N) / 4, at least 8)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    report = {"machine": machine(), "documents": args.docs, "device": args.device,
              "encoder": args.encoder}  # fmt: skip
    print(f"gpu_check: {report['machine']}")
    paths = write_corpus(out / "corpus", args.docs)
    report |= check_embeddings(out, paths, args.device, args.encoder, min(args.reference,
                                                                           args.docs // 4))  # fmt: skip
    print(f"gpu_check: embed {report['embed_docs_per_second']:,.0f} docs/s on {args.device}; "
          f"cosine to the CPU float32 rows: min {report['cosine_min']}, "
          f"mean {report['cosine_mean']} (need >= {COSINE_FLOOR})")  # fmt: skip
    clusters = args.clusters or max(8, int(round(args.docs**0.5 / 4)))
    report |= check_kmeans(out, clusters)
    print(f"gpu_check: k-means K={clusters}: {report['kmeans_auto_backend']} "
          f"{report['kmeans_auto_seconds']} s, torch-fp32 (CPU) {report['kmeans_cpu_seconds']} s, "
          f"ARI {report['kmeans_ari_auto_vs_cpu']}")  # fmt: skip
    report["run_seconds"] = round(timed(
        ["run", *map(str, paths), "--workdir", str(out / "work-run"), "--encoder", args.encoder,
         "--device", args.device, "--n-clusters", str(clusters)]), 2)  # fmt: skip
    print(f"gpu_check: clusterclip run on {args.docs:,} documents: {report['run_seconds']} s")
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0 if report["cosine_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
