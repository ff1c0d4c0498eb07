"""Near-duplicate grouping on a real corpus with planted copies: quality, clip, cost.

Plants ``--sources`` documents of the bundled KJV (every ``--step``-th verse)
``--min-copies``..``--max-copies`` times each, with small edits (word swap,
deletion, case, punctuation; 30 % of copies exact;
:func:`clusterclip.experiments.duplicates.plant_duplicates`), then runs embed
and cluster through the runner, the dedup stage at the default threshold in a
subprocess (time and peak RSS, against the cluster stage run the same way), and
for every ``--thresholds`` value:

* pairwise precision and recall of the groups found against the truth (the
  planted groups, merged with the corpus's own exact repeats: KJV repeats some
  verses word for word), and the share of planted groups found whole;
* the most draws any planted text (all its copies together) gets in a
  ``clusterclip`` schedule that exhausts the clip (R = ``--max-repeats``), with
  and without grouping.

    PYTHONPATH=src python benchmarks/bench_duplicates.py --workdir /tmp/bench-dup \\
        --encoder static --sources 1000 --step 3

Prints one table; CPU from ``lscpu``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
import warnings
from importlib import resources
from pathlib import Path

import numpy as np

DEFAULT_THRESHOLDS = (0.8, 0.85, 0.9, 0.92, 0.95, 0.97, 0.99)


def kjv(step: int) -> list[dict]:
    path = resources.files("clusterclip.data") / "kjv-verses.jsonl.gz"
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for i, line in enumerate(handle) if i % step == 0]


def pairs(groups: np.ndarray) -> int:
    _, counts = np.unique(groups, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def pair_scores(found: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Pairwise precision and recall of partition ``found`` against ``truth`` (contingency)."""
    both = pairs(found.astype(np.int64) * (int(truth.max()) + 1) + truth)
    predicted, actual = pairs(found), pairs(truth)
    return (both / predicted if predicted else 1.0), (both / actual if actual else 1.0)


def truth_partition(ids: list[str], texts: list[str], planted: list[list[str]]) -> np.ndarray:
    from clusterclip.dedup.detect import connect, normalise_text

    where = {doc: i for i, doc in enumerate(ids)}
    parent = np.arange(len(ids))
    a, b = [], []
    for group in planted:
        a += [where[doc] for doc in group[1:]]
        b += [where[group[0]]] * (len(group) - 1)
    first: dict[str, int] = {}
    for i, text in enumerate(texts):  # the corpus's own word-for-word repeats
        j = first.setdefault(normalise_text(text), i)
        if j != i:
            a.append(i)
            b.append(j)
    connect(parent, np.array(a, dtype=np.int64), np.array(b, dtype=np.int64))
    return parent


def most_draws(
    labels: np.ndarray, groups: list[np.ndarray], duplicate_of: np.ndarray | None, repeats: int
) -> int:
    """Most draws of any planted group (all its members) in a schedule that exhausts the clip."""
    from clusterclip import build_schedule

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "budget cannot be met": the clip is meant to end it
        schedule = build_schedule(
            labels, max_repeats=repeats, num_samples=repeats * labels.size, seed=0,
            duplicate_of=duplicate_of,
        )  # fmt: skip
    counts = schedule.stats.repeats_per_document
    return max(int(counts[g].sum()) for g in groups)


#: Printed by the stage's process at its end: its own peak resident memory. (The
#: rusage of a child counts the parent's memory it was forked with, even after exec.)
_PEAK = "; print('VmHWM', [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"


def timed_stage(code: str) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of ``code`` run in a fresh Python process."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code + _PEAK], env=os.environ.copy(), capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"stage failed: {code}\n{done.stderr}")
    peak_kib = int(done.stdout.split("VmHWM")[-1].split()[0].strip("[]'"))
    return time.perf_counter() - began, peak_kib / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--step", type=int, default=3, help="every STEP-th KJV verse")
    parser.add_argument("--sources", type=int, default=1000)
    parser.add_argument("--min-copies", type=int, default=2)
    parser.add_argument("--max-copies", type=int, default=50)
    parser.add_argument("--encoder", default="sentence-transformers")
    parser.add_argument("--n-clusters", type=int, default=100)
    parser.add_argument("--max-repeats", type=int, default=2)
    parser.add_argument("--thresholds", type=float, nargs="+", default=DEFAULT_THRESHOLDS)
    args = parser.parse_args()

    import clusterclip
    from clusterclip.dedup.detect import find_groups, hash_texts, second_nearest
    from clusterclip.dedup.options import DEFAULT_THRESHOLD
    from clusterclip.experiments.duplicates import plant_duplicates
    from clusterclip.io import WorkDir

    args.workdir.mkdir(parents=True, exist_ok=True)
    records, planted = plant_duplicates(
        kjv(args.step), n_sources=args.sources, min_copies=args.min_copies,
        max_copies=args.max_copies, seed=0,
    )  # fmt: skip
    corpus = args.workdir / "corpus.jsonl"
    if not corpus.exists():
        with open(corpus, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record) + "\n")
    ids = [r["id"] for r in records]
    texts = [r["text"] for r in records]
    copies = sum(len(g) - 1 for g in planted)
    print(f"corpus: {len(records):,} documents = {len(records) - copies:,} KJV verses "
          f"(every {args.step}th) + {copies:,} planted copies of {len(planted):,} verses "
          f"({args.min_copies}-{args.max_copies} each); encoder {args.encoder}")  # fmt: skip
    work = str(args.workdir / "work")
    began = time.perf_counter()
    clusterclip.embed([str(corpus)], workdir=work, encoder=args.encoder)
    print(f"embed: {time.perf_counter() - began:.1f} s")
    src = str(Path(__file__).resolve().parents[1] / "src")
    cluster_s, cluster_mib = timed_stage(
        f"import sys; sys.path.insert(0, {src!r}); import clusterclip; "
        f"clusterclip.cluster({work!r}, n_clusters={args.n_clusters}, seed=0, overwrite=True)"
    )
    dedup_s, dedup_mib = timed_stage(
        f"import sys; sys.path.insert(0, {src!r}); import clusterclip; "
        f"clusterclip.dedup({work!r}, overwrite=True)"
    )
    entry = WorkDir(work).entry("dedup")
    print(f"cluster stage (K={args.n_clusters}): {cluster_s:.1f} s wall, peak RSS "
          f"{cluster_mib:.0f} MiB; dedup stage (threshold {DEFAULT_THRESHOLD}): {dedup_s:.1f} s "
          f"wall ({entry['seconds']:.2f} s in the stage: hash {entry['summary']['seconds']['hash']}"
          f" s, compare {entry['summary']['seconds']['compare']} s), peak RSS "
          f"{dedup_mib:.0f} MiB")  # fmt: skip

    w = WorkDir(work)
    labels = w.labels().astype(np.int64)
    embeddings = w.embeddings()
    where = {doc: i for i, doc in enumerate(ids)}
    groups = [np.array([where[d] for d in g]) for g in planted]
    truth = truth_partition(ids, texts, planted)
    hashes = hash_texts(texts, len(texts))
    off = most_draws(labels, groups, None, args.max_repeats)
    print(f"\nR = {args.max_repeats}; most draws of one planted text without grouping: {off}")
    neighbours = second_nearest(embeddings.__getitem__, labels, w.centroids())
    print("| threshold | compared with | groups | docs in groups | pair precision | pair recall | "
          "planted groups found whole | most draws of one planted text, grouped | dedup s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for threshold in args.thresholds:
        for where_, near in (("own cluster", None), ("+ 2nd-nearest", neighbours)):
            began = time.perf_counter()
            found = find_groups(
                embeddings.__getitem__, labels, threshold=threshold, hashes=hashes,
                neighbours=near,
            )  # fmt: skip
            seconds = time.perf_counter() - began
            rep = found.representative
            precision, recall = pair_scores(rep, truth)
            whole = sum(len(np.unique(rep[g])) == 1 for g in groups) / len(groups)
            summary = found.summary()
            grouped = most_draws(labels, groups, rep, args.max_repeats)
            print(f"| {threshold} | {where_} | {summary['groups']:,} | "
                  f"{summary['documents_in_groups']:,} | {precision:.4f} | {recall:.4f} | "
                  f"{whole:.3f} | {grouped} | {seconds:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
