"""The plain answer of a policy grid: where balancing helped or hurt, on metrics the sampler never saw.

Reads the ``results.jsonl`` of one or more corpora (as written by
:mod:`clusterclip.experiments.lm`, e.g. by ``experiments/grid.sh``) and prints one
markdown table per regime: for every policy and corpus, the paired difference
from ``random`` (same seed, same initialisation) on the four independent
metrics (natural mix, real-category macro, independent-clustering macro and its
rarest quarter), as the mean over seeds and the per-seed range, and a verdict:

``helped``
    on at least one independent metric every seed was better than random, and on
    none was every seed worse;
``hurt``
    the reverse;
``mixed``
    some metric helped in every seed and another hurt in every seed;
``no clear effect``
    on every metric the seeds disagree in sign (the effect is within the spread).

A policy whose every metric equals another policy's in every seed (the clip never
bound, so the schedules were the same) is listed as ``= <that policy>``.

Run::

    PYTHONPATH=src python -m clusterclip.experiments.answer experiments/results/grid-cpu

>>> verdict([[-0.01, -0.02], [0.01, -0.01]])
'helped'
>>> verdict([[-0.01, 0.02], [0.01, -0.01]])
'no clear effect'
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

__all__ = ["INDEPENDENT", "answer_tables", "read_grid", "verdict"]

#: The metrics every claim rests on (the sampler never saw them), with their column titles.
INDEPENDENT = {
    "natural": "natural mix",
    "category": "real-category macro",
    "independent_macro": "independent macro",
    "independent_rare": "independent rarest 25%",
}


def read_grid(root: str | Path) -> list[dict]:
    """Every record of ``root/<corpus>/results.jsonl`` (or of ``root/results.jsonl``).

    Raises ``FileNotFoundError`` naming ``root`` when it holds no results file.
    """
    root = Path(root)
    paths = sorted(root.glob("*/results.jsonl")) or sorted(root.glob("results.jsonl"))
    if not paths:
        raise FileNotFoundError(f"{root}: no results.jsonl here or in its subdirectories")
    records = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a JSON line ({error})") from None
    return records


def verdict(per_metric: Sequence[Sequence[float]]) -> str:
    """The verdict of one row from its per-seed paired differences, one list per metric.

    Negative = lower loss than random = better. A metric counts only when every
    seed agrees in sign; one seed alone never decides (the spread is unknown).
    """
    helped = hurt = False
    for diffs in per_metric:
        if len(diffs) < 2:
            continue
        helped |= all(d < 0 for d in diffs)
        hurt |= all(d > 0 for d in diffs)
    if helped and hurt:
        return "mixed"
    if helped:
        return "helped"
    if hurt:
        return "hurt"
    return "no clear effect"


def _cell(diffs: Sequence[float]) -> str:
    if not diffs:
        return ""
    mean = statistics.fmean(diffs)
    if len(diffs) == 1:
        return f"{mean:+.3f}"
    return f"{mean:+.3f} ({min(diffs):+.3f} to {max(diffs):+.3f})"


def _same_as(
    runs: dict[str, dict[int, dict]], policy: str, seeds: list[int], earlier: list[str]
) -> str | None:
    """The first ``earlier`` policy with the same metrics as ``policy`` in every paired seed."""
    for other in earlier:
        if seeds and all(
            s in runs[other] and runs[other][s]["metrics"] == runs[policy][s]["metrics"]
            for s in seeds
        ):
            return other
    return None


def answer_tables(records: Sequence[dict], *, baseline: str = "random") -> str:
    """Markdown: one table per regime, rows = policy x corpus (see the module docstring)."""
    groups: dict[str, dict[str, dict[str, dict[int, dict]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    epochs: dict[str, list[float]] = defaultdict(list)
    for record in records:
        groups[record["regime"]][record["corpus"]][record["policy"]][record["seed"]] = record
        epochs[record["regime"]].append(float(record.get("epochs", 0.0)))
    lines = []
    for regime in sorted(groups, key=lambda r: (statistics.fmean(epochs[r]), r)):
        corpora = groups[regime]
        low, high = min(epochs[regime]), max(epochs[regime])
        span = f"{low:.1f}" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f}"
        lines.append(
            f"\n**{regime}** ({span} epochs over the training pool). Paired difference vs {baseline} in nats/token, mean over seeds "
            "(per-seed range); negative = lower held-out loss = better.\n"
        )
        lines.append(
            "| policy | corpus | seeds | " + " | ".join(INDEPENDENT.values()) + " | verdict |"
        )
        lines.append("|---" * (len(INDEPENDENT) + 4) + "|")
        policies = list(dict.fromkeys(p for runs in corpora.values() for p in runs))
        for policy in policies:
            if policy == baseline:
                continue
            for corpus, runs in corpora.items():
                if policy not in runs or baseline not in runs:
                    continue
                earlier = [p for p in policies[: policies.index(policy)] if p in runs]
                seeds = sorted(set(runs[policy]) & set(runs[baseline]))
                twin = _same_as(runs, policy, seeds, earlier)
                if twin is not None:
                    cells = [f"= {twin}"] + [""] * (len(INDEPENDENT) - 1)
                    lines.append(
                        f"| {policy} | {corpus} | {len(seeds)} | " + " | ".join(cells)
                        + " | same schedule (the clip never binds) |"
                    )  # fmt: skip
                    continue
                per_metric = []
                for metric in INDEPENDENT:
                    per_metric.append(
                        [
                            runs[policy][s]["metrics"][metric]
                            - runs[baseline][s]["metrics"][metric]
                            for s in seeds
                            if metric in runs[policy][s]["metrics"]
                            and metric in runs[baseline][s]["metrics"]
                        ]
                    )
                cells = [_cell(diffs) for diffs in per_metric]
                lines.append(
                    f"| {policy} | {corpus} | {len(seeds)} | " + " | ".join(cells)
                    + f" | {verdict(per_metric)} |"
                )  # fmt: skip
    return "\n".join(lines) + "\n" + _timing(records)


def _timing(records: Sequence[dict]) -> str:
    walls = sorted(float(r["wall_seconds"]) for r in records if "wall_seconds" in r)
    if not walls:
        return ""
    machines = sorted({str(r.get("machine", "?")) for r in records})
    return (
        f"\n{len(walls)} runs; wall time per run: median {statistics.median(walls):.0f} s "
        f"(range {walls[0]:.0f}-{walls[-1]:.0f} s) on {'; '.join(machines)}.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m clusterclip.experiments.answer RESULTS_DIR...``: print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "results", nargs="+", help="grid directories holding <corpus>/results.jsonl"
    )
    parser.add_argument("--baseline", default="random", help="the policy differences are from")
    args = parser.parse_args(argv)
    records = []
    for root in args.results:
        try:
            records += read_grid(root)
        except (FileNotFoundError, ValueError) as error:
            parser.error(str(error))
    print(answer_tables(records, baseline=args.baseline), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
