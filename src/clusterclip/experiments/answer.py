"""The declared analysis of a policy grid (``experiments/ANALYSIS.md``), applied and nothing else.

Reads the ``results.jsonl`` files written by :mod:`clusterclip.experiments.lm` (e.g. by
``experiments/evidence.sh``), forms paired differences over seeds for every declared
contrast, tests them (:mod:`clusterclip.experiments.stats`: sign-flip permutation p,
95% t-interval, Benjamini-Hochberg across every tested row at once) and prints one
markdown table per grid with the verdict of each row, then the decisions the analysis
makes (the advice line; how much the clustering moves the answer).

A grid is a directory ``ROOT/<grid>/<corpus>/results.jsonl`` (or ``ROOT/<corpus>/...``,
the grid then named after ROOT). Grids whose name starts with ``clip`` form the clip
family (contrasts between clip strengths); a grid named ``split`` is the main comparison
at another data seed; any other grid compares its arms with ``random``, naming
``recommended`` the one ``clusterclip-rR`` arm of a regime when there is exactly one.

Run::

    python -m clusterclip.experiments.answer experiments/results/evidence \\
        --figures docs/img/evidence

>>> contrast_policies("R=2P", "uniform", "8-epoch", ["random", "uniform", "clusterclip-r16"])
('clusterclip-r16', 'uniform')
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from clusterclip.experiments import stats

__all__ = [
    "CLIP_CONTRASTS",
    "MAIN_CONTRASTS",
    "PRIMARY",
    "Row",
    "analyse",
    "answer_tables",
    "contrast_policies",
    "grid_family",
    "main",
    "read_grid",
]

#: The primary metrics (the sampler never saw them), with their titles.
PRIMARY = {
    "natural": "natural mix",
    "category": "real-category macro",
    "independent_macro": "independent macro",
    "independent_rare": "independent rarest 25%",
}
MAIN_CONTRASTS = (("recommended", "random"), ("uniform", "random"), ("recommended", "uniform"))
CLIP_CONTRASTS = (
    ("R=P", "random"), ("R=2P", "random"), ("R=4P", "random"), ("planned R=2P", "random"),
    ("uniform", "random"), ("R=2P", "uniform"), ("R=P", "R=2P"), ("R=4P", "R=2P"),
    ("planned R=2P", "R=2P"),
)  # fmt: skip
#: Pairs of the complete clip grid (3 regimes x 5 seeds): the advice line waits for them.
CLIP_PAIRS = 15
#: Seeds never seen before the analysis was declared (the sensitivity rows of the main grid).
FRESH_SEEDS = frozenset(range(5, 10))


def read_grid(root: str | Path) -> list[dict]:
    """Every record under ``root``, each with ``_grid`` set to its grid's name.

    Raises ``FileNotFoundError`` naming ``root`` when it holds no results file, and
    ``ValueError`` naming ``file:line`` for a line that is not JSON.
    """
    root = Path(root)
    paths = sorted(root.glob("*/*/results.jsonl"))
    nested = bool(paths)
    paths = paths or sorted(root.glob("*/results.jsonl")) or sorted(root.glob("results.jsonl"))
    if not paths:
        raise FileNotFoundError(f"{root}: no results.jsonl here or in its subdirectories")
    records = []
    for path in paths:
        grid = path.parent.parent.name if nested else root.name
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a JSON line ({error})") from None
            records.append({**record, "_grid": grid})
    return records


def _passes(regime: str) -> int:
    return round(float(regime.split("-")[0]))


def contrast_policies(
    arm: str, baseline: str, regime: str, policies: Sequence[str]
) -> tuple[str, str] | None:
    """The two policy names a contrast compares in one regime, or None if one is missing.

    Roles: ``random``, ``uniform``, ``recommended`` (the regime's only ``clusterclip-rR``),
    ``R=kP`` (``clusterclip-r{k * passes}``), ``planned R=kP``; anything else is a policy name.
    """

    def resolve(role: str) -> str | None:
        if role == "recommended":
            clipped = [p for p in policies if p.startswith("clusterclip-r")]
            return clipped[0] if len(clipped) == 1 else None
        planned = role.startswith("planned R=")
        if role.startswith(("R=", "planned R=")) and role.endswith("P"):
            factor = role.split("=")[1][:-1]
            repeats = _passes(regime) * (int(factor) if factor else 1)
            name = f"{'planned' if planned else 'clusterclip'}-r{repeats}"
            return name if name in policies else None
        return role if role in policies else None

    pair = resolve(arm), resolve(baseline)
    return None if None in pair else pair  # type: ignore[return-value]


@dataclass
class Row:
    """One tested (or reported) row: where, which contrast, which metric, and its test."""

    family: str
    corpus: str
    regime: str
    contrast: str
    metric: str
    test: stats.PairedTest
    values: tuple[float, ...] = ()  # the paired differences, seed order
    q: float | None = None
    in_family: bool = True  # False: a sensitivity row, outside the BH family

    @property
    def verdict(self) -> str:
        return stats.verdict(self.test.mean, self.test.low, self.test.high, q=self.q)


def grid_family(grid: str) -> str:
    """The test family a grid's rows belong to: every ``clip*`` grid is one, ``clip``.

    Benjamini-Hochberg is applied over the rows of one family, and the figures
    draw one family at a time.

    >>> grid_family("clip-tail"), grid_family("main")
    ('clip', 'main')
    """
    return "clip" if grid.startswith("clip") else grid


def place_name(grid: str, corpus: str) -> str:
    """A corpus as the tables name it: ``kjv``, or ``kjv-tail`` in grid ``clip-tail``.

    >>> place_name("clip-tail", "kjv"), place_name("main", "kjv")
    ('kjv-tail', 'kjv')
    """
    family = grid_family(grid)
    return corpus if grid == family else f"{corpus}-{grid.removeprefix(family + '-')}"


def _contrasts(family: str, regimes: dict[str, dict[str, dict[int, dict]]]) -> list[tuple]:
    if family == "clip":
        return list(CLIP_CONTRASTS)
    if all(contrast_policies("recommended", "random", r, list(p)) for r, p in regimes.items()):
        return list(MAIN_CONTRASTS)
    policies = dict.fromkeys(p for runs in regimes.values() for p in runs if p != "random")
    return [(p, "random") for p in policies]


def _diffs(runs: dict[str, dict[int, dict]], pair, metric, seeds=None) -> list[tuple]:
    arm, base = (runs[p] for p in pair)
    keep = sorted(set(arm) & set(base) & (set(seeds) if seeds is not None else set(arm)))
    return [
        (s, arm[s]["metrics"][metric] - base[s]["metrics"][metric])
        for s in keep
        if metric in arm[s]["metrics"] and metric in base[s]["metrics"]
    ]


def _cells(records: Sequence[dict]) -> dict:
    """family -> (grid, corpus) -> regime -> policy -> seed -> record."""
    cells: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for record in records:
        key = (record["_grid"], record["corpus"])
        cells[grid_family(record["_grid"])][key][record["regime"]].setdefault(record["policy"], {})[
            record["seed"]
        ] = record
    return cells


def analyse(records: Sequence[dict]) -> list[Row]:
    """Every row of the declared analysis, with BH q-values across the tested rows."""
    rows: list[Row] = []
    for family, places in _cells(records).items():
        pooled: dict[tuple, list[float]] = defaultdict(list)
        for (grid, corpus), regimes in sorted(places.items()):
            corpus = place_name(grid, corpus)
            for contrast in _contrasts(family, regimes):
                for regime, runs in sorted(regimes.items(), key=lambda kv: _passes(kv[0])):
                    pair = contrast_policies(*contrast, regime, list(runs))
                    if pair is None:
                        continue
                    name = f"{contrast[0]} − {contrast[1]}"
                    for metric in PRIMARY:
                        diffs = _diffs(runs, pair, metric)
                        if not diffs:
                            continue
                        values = [d for _, d in diffs]
                        pooled[(name, metric)] += values
                        rows.append(Row(family, corpus, regime, name, metric,
                                        stats.paired_test(values), tuple(values)))  # fmt: skip
                        fresh = [d for s, d in diffs if s in FRESH_SEEDS]
                        if family == "main" and len(fresh) >= 2 and fresh != values:
                            test = replace(stats.paired_test(fresh), p=stats.sign_flip_p(fresh))
                            rows.append(Row(family, corpus, regime, name + " (seeds 5-9)", metric,
                                            test, tuple(fresh), in_family=False))  # fmt: skip
        for (name, metric), values in pooled.items():
            rows.append(Row(family, "pooled", "all", name, metric, stats.paired_test(values),
                            tuple(values)))  # fmt: skip
    tested = [r for r in rows if r.in_family and r.test.p is not None]
    for row, q in zip(tested, stats.bh_qvalues([r.test.p for r in tested]), strict=True):
        row.q = q
    return rows


def _format_row(row: Row) -> str:
    t = row.test
    p = "" if t.p is None else f"{t.p:.4f}"
    q = "" if row.q is None else f"{row.q:.3f}"
    verdict = row.verdict if row.in_family else "sensitivity (not in the family)"
    interval = "—" if t.n < 2 else f"[{t.low:+.4f}, {t.high:+.4f}]"  # one pair has no spread
    return (
        f"| {row.corpus} | {row.regime} | {row.contrast} | {PRIMARY[row.metric]} | {t.n} | "
        f"{t.mean:+.4f} | {interval} | {t.better}/{t.n} | {p} | {q} | "
        f"{verdict} |"
    )


def _advice_decision(rows: Sequence[Row]) -> str:
    clip = [r for r in rows if r.family == "clip" and r.corpus == "pooled"]
    key = [r for r in clip if r.contrast == "R=2P − uniform"]
    if not key or key[0].test.n < CLIP_PAIRS:
        done = key[0].test.n if key else 0
        return f"The clip grid is incomplete ({done} of {CLIP_PAIRS} pairs): the advice line is not decided yet."
    gains = [PRIMARY[r.metric] for r in key if r.verdict == "lower loss"]
    harms = [PRIMARY[r.metric] for r in key if r.verdict == "higher loss"]
    if gains and not harms:
        best = min((r for r in key if r.verdict == "lower loss"), key=lambda r: r.test.mean)
        return (
            f"**Keep the advice line** (max_repeats ≈ 2 × passes): the clip at R = 2P lowers "
            f"loss against uniform on {', '.join(gains)}; largest: {PRIMARY[best.metric]} "
            f"{best.test.mean:+.4f} [{best.test.low:+.4f}, {best.test.high:+.4f}], q = {best.q:.3f}."
        )
    why = f"it raises loss on {', '.join(harms)}" if harms else "no metric passes the test"
    return (
        "**Remove the advice line**: the clip at R = 2P against uniform without a clip: "
        f"{why} (pooled clip grid, {key[0].test.n} pairs)."
    )


def _clustering_moves(records: Sequence[dict]) -> list[str]:
    """Main-grid effect at data seed 1 minus at data seed 0 (seeds 0-4 of both), Welch CI."""
    cells = _cells(records)
    if "main" not in cells or "split" not in cells:
        return []
    split = {corpus: regimes for (_, corpus), regimes in cells["split"].items()}
    lines = [
        "| corpus | regime | contrast | metric | data seed 0 | data seed 1 | difference [95% CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for (_, corpus), regimes in sorted(cells["main"].items()):
        for regime, runs in sorted(regimes.items(), key=lambda kv: _passes(kv[0])):
            other = split.get(corpus, {}).get(regime)
            if other is None:
                continue
            for contrast in MAIN_CONTRASTS:
                pairs = [contrast_policies(*contrast, regime, list(r)) for r in (runs, other)]
                if None in pairs:
                    continue
                for metric in PRIMARY:
                    a = [d for _, d in _diffs(runs, pairs[0], metric, seeds=range(5))]
                    b = [d for _, d in _diffs(other, pairs[1], metric, seeds=range(5))]
                    if len(a) < 2 or len(b) < 2:
                        continue
                    diff, low, high = stats.welch_interval(b, a)
                    lines.append(
                        f"| {corpus} | {regime} | {contrast[0]} − {contrast[1]} | "
                        f"{PRIMARY[metric]} | {statistics.fmean(a):+.4f} | "
                        f"{statistics.fmean(b):+.4f} | {diff:+.4f} [{low:+.4f}, {high:+.4f}] |"
                    )
    return lines if len(lines) > 2 else []


def answer_tables(records: Sequence[dict], rows: Sequence[Row] | None = None) -> str:
    """Markdown: the rows of every family, the decisions, the data-seed comparison, timing."""
    rows = analyse(records) if rows is None else rows
    tested = sum(r.q is not None for r in rows)
    out = [
        f"Declared analysis (experiments/ANALYSIS.md): paired differences arm − baseline in "
        f"nats per token (negative = lower held-out loss = better); p: two-sided sign-flip "
        f"permutation; q: Benjamini-Hochberg over the {tested} tested rows below.\n"
    ]
    header = (
        "| corpus | regime | contrast | metric | pairs | mean | 95% CI | lower in | p | q | "
        "verdict |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for family in dict.fromkeys(r.family for r in rows):
        out += [f"\n### {family}\n", header]
        out += [_format_row(r) for r in rows if r.family == family]
    out += ["\n### Decisions\n", _advice_decision(rows)]
    agreement = _agreement(records)
    if agreement:
        out += ["\n### The sampler's clusters against the independent clustering\n"]
        out += agreement
    moves = _clustering_moves(records)
    if moves:
        out += ["\n### How much the clustering moves the answer (data seed 1 − data seed 0)\n"]
        out += moves
    return "\n".join(out) + "\n" + _timing(records)


def _agreement(records: Sequence[dict]) -> list[str]:
    """One line per grid, corpus and data seed: ARI and the rare-token share (descriptive).

    Both come from the run records' ``clustering`` (``experiments.lm.clustering_agreement``);
    every run of one place shares one clustering, so the first record speaks for them.
    """
    seen: dict[tuple, dict] = {}
    for r in records:
        if isinstance(r.get("clustering"), dict):
            seen.setdefault((place_name(r["_grid"], r["corpus"]), r.get("data_seed", 0)),
                            r["clustering"])  # fmt: skip
    if not seen:
        return []
    lines = [
        "| corpus | data seed | ARI | independent-rare held-out tokens in the sampler's rare "
        "quarter |\n|---|---|---|---|"
    ]
    for (place, data_seed), c in sorted(seen.items(), key=str):
        share = c.get("independent_rare_in_own_rare")
        shown = "—" if share is None else f"{share:.1%}"
        lines.append(f"| {place} | {data_seed} | {c.get('ari', float('nan')):.3f} | {shown} |")
    return lines


def _timing(records: Sequence[dict]) -> str:
    walls = sorted(float(r["wall_seconds"]) for r in records if "wall_seconds" in r)
    if not walls:
        return ""
    machines = sorted({str(r.get("machine", "?")) for r in records})
    corpora = sorted(
        {(r["corpus"], r.get("corpus_documents"), (r.get("corpus_sha256") or "")[:12])
         for r in records}, key=str,
    )  # fmt: skip
    used = "; ".join(f"{c}: {n} documents, sha256 {h or '?'}" for c, n, h in corpora)
    return (
        f"\n{len(walls)} runs; wall time per run: median {statistics.median(walls):.0f} s "
        f"(range {walls[0]:.0f}-{walls[-1]:.0f} s) on {'; '.join(machines)}.\n"
        f"Corpora: {used}.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m clusterclip.experiments.answer ROOT... [--figures DIR] [--json FILE]``."""
    parser = argparse.ArgumentParser(
        prog="python -m clusterclip.experiments.answer", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "results", nargs="+", help="grid roots holding <grid>/<corpus>/results.jsonl"
    )
    parser.add_argument("--figures", help="also draw the figures of the grid into this folder")
    parser.add_argument("--json", help="also write every row (with p, q, verdict) to this file")
    parser.add_argument(
        "--keep",
        action="append",
        metavar="REGIME:POLICIES",
        help="analyse only these policies of a regime, e.g. 1-epoch:random,uniform,clusterclip-r4 "
        "(repeatable; regimes not named are kept whole)",
    )
    args = parser.parse_args(argv)
    records = []
    for root in args.results:
        try:
            records += read_grid(root)
        except (FileNotFoundError, ValueError) as error:
            parser.error(str(error))
    keep = {}
    for item in args.keep or []:
        regime, _, policies = item.partition(":")
        if not policies:
            parser.error(f"--keep {item}: expected REGIME:POLICY,POLICY,...")
        keep[regime] = set(policies.split(","))
    records = [r for r in records if r["policy"] in keep.get(r["regime"], {r["policy"]})]
    rows = analyse(records)
    print(answer_tables(records, rows), end="")
    if args.json:
        payload = [
            {**{k: getattr(r, k) for k in ("family", "corpus", "regime", "contrast", "metric", "q",
                                           "in_family")},
             **vars(r.test), "values": list(r.values), "verdict": r.verdict}
            for r in rows
        ]  # fmt: skip
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    if args.figures:
        from clusterclip.experiments import figures

        for path in figures.draw_all(records, rows, Path(args.figures)):
            print(f"figure: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
