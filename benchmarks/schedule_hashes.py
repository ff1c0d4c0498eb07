"""Hashes of schedules over a grid of configurations, to check that a refactor changed no bytes.

Every released ``schedule_version`` must keep its bytes forever (DESIGN.md
section 2). Run this before and after a change to the schedule core and compare::

    PYTHONPATH=src python benchmarks/schedule_hashes.py --out before.json   # on the old commit
    PYTHONPATH=src python benchmarks/schedule_hashes.py --compare before.json

The grid: K = 10, 1,000 and 10^5 clusters (sizes 1..2N/K, shuffled); online and
planned; R = 1, 4, none; policies clusterclip, uniform, temperature, random and
hierarchical; dense and sparse cluster ids; with and without near-duplicate
groups; a token budget; a seed >= 2**32 (version 2, whose seeds are all that
large); every version given with ``--versions`` (default: every version this
release supports). Cases a version refuses (version 3 with ``hierarchical``)
are left out. A full run takes about ten minutes on two shared cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import warnings

import numpy as np

from clusterclip.schedule import build_schedule
from clusterclip.schedule.config import SUPPORTED_VERSIONS

DOCUMENTS = 200_000
DRAWS = 300_000


def labels_for(n_clusters: int, *, sparse: bool) -> np.ndarray:
    rng = np.random.default_rng(n_clusters)
    mean = max(1, DOCUMENTS // n_clusters)
    sizes = rng.integers(1, 2 * mean + 1, n_clusters)
    labels = np.repeat(np.arange(n_clusters, dtype=np.int64), sizes)
    labels = labels[rng.permutation(labels.size)]
    labels[rng.random(labels.size) < 0.01] = -1  # some excluded documents
    if sparse:  # distinct random ids in [0, 2**40), ascending like the dense ones
        ids = np.sort(rng.choice(2**40, size=n_clusters, replace=False))
        labels = np.where(labels >= 0, ids[np.maximum(labels, 0)], -1)
    return labels


def duplicates_for(labels: np.ndarray) -> np.ndarray:
    """Groups of 2..4 copies for a tenth of the documents (representative: the lowest index)."""
    n = labels.size
    rng = np.random.default_rng(5)
    duplicate_of = np.arange(n)
    heads = np.sort(rng.choice(n // 2, size=n // 40, replace=False))
    for head in heads.tolist():
        copies = head + 1 + rng.choice(n - head - 1, size=int(rng.integers(1, 4)), replace=False)
        free = copies[duplicate_of[copies] == copies]
        free = free[duplicate_of[free] == free]
        if duplicate_of[head] == head:
            duplicate_of[free] = head
    keep = duplicate_of[duplicate_of] == duplicate_of  # a chain: undo it
    duplicate_of[~keep] = np.flatnonzero(~keep)
    # a member whose representative is excluded would be refused: make it its own
    orphan = (labels >= 0) & (labels[duplicate_of] < 0)
    duplicate_of[orphan] = np.flatnonzero(orphan)
    return duplicate_of


def cases(versions: list[int]):
    for k in (10, 1000, 100_000):
        for sparse in (False, True):
            labels = labels_for(k, sparse=sparse)
            for version in versions:
                seed = 2**40 + 3 if version == 2 else 3  # version 2: the seeds >= 2**32
                for order in ("online", "planned"):
                    for repeats in (1, 4, None):
                        for policy in ("clusterclip", "uniform", "temperature", "random"):
                            if policy == "uniform" and repeats != 4:
                                continue  # uniform ignores max_repeats
                            kwargs = dict(
                                policy=policy, max_repeats=repeats, order=order,
                                num_samples=DRAWS, on_exhausted="random", seed=seed,
                            )  # fmt: skip
                            if policy == "temperature":
                                kwargs["alpha"] = 0.5
                            yield (
                                f"K={k} sparse={sparse} v{version} {order} R={repeats} {policy}",
                                (labels, version, kwargs),
                            )
                if version != 3 and not sparse:
                    levels = (np.maximum(labels, 0) % 7)[:, None]
                    kwargs = dict(
                        policy="hierarchical", levels=levels, num_samples=DRAWS, seed=seed
                    )
                    kwargs["on_exhausted"] = "random"
                    yield f"K={k} v{version} hierarchical", (labels, version, kwargs)
                kwargs = dict(max_repeats=2, num_samples=DRAWS, on_exhausted="random", seed=seed)
                kwargs["duplicate_of"] = duplicates_for(labels)
                for order in ("online", "planned"):
                    yield (
                        f"K={k} sparse={sparse} v{version} {order} duplicates",
                        (labels, version, dict(kwargs, order=order)),
                    )
                lengths = np.random.default_rng(1).integers(0, 50, labels.size)
                kwargs = dict(max_repeats=3, num_tokens=4_000_000, lengths=lengths, seed=seed)
                kwargs["on_exhausted"] = "random"
                yield f"K={k} sparse={sparse} v{version} tokens", (labels, version, kwargs)


def stats_hash(stats) -> str:
    """Hash of a schedule's statistics: every field, arrays by their little-endian bytes."""
    digest = hashlib.sha256()
    for field in dataclasses.fields(stats):
        value = getattr(stats, field.name)
        if isinstance(value, np.ndarray):
            value = value.astype("<i8").tobytes()
        digest.update(f"{field.name}={value!r};".encode())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the hashes here (JSON)")
    parser.add_argument("--compare", help="compare with the hashes in this file")
    parser.add_argument("--versions", default=None, help="comma-separated (default: all)")
    args = parser.parse_args()
    versions = (
        [int(v) for v in args.versions.split(",")] if args.versions else list(SUPPORTED_VERSIONS)
    )
    hashes = {}
    for name, (labels, version, kwargs) in cases(versions):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            schedule = build_schedule(labels, schedule_version=version, **kwargs)
        hashes[name] = hashlib.sha256(schedule.indices.astype("<i8").tobytes()).hexdigest()
        hashes[f"{name} stats"] = stats_hash(schedule.stats)
        print(f"{hashes[name][:16]}  {hashes[name + ' stats'][:16]}  {name}", flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(hashes, handle, indent=1, sort_keys=True)
    if args.compare:
        with open(args.compare) as handle:
            before = json.load(handle)
        common = sorted(set(before) & set(hashes))
        changed = [name for name in common if before[name] != hashes[name]]
        print(f"{len(common)} configurations in both, {len(changed)} changed")
        for name in changed:
            print(f"CHANGED: {name}")
        if changed:
            sys.exit(1)


if __name__ == "__main__":
    main()
