"""Slow, obviously-correct reference sampler: DESIGN.md section 2, one draw at a time.

Plain Python loops over plain lists. It shares with the fast engine only the
*sources* of randomness, which are part of the contract: the uniforms of a
position block (``block_uniforms``), the pass permutations of a group
(``chunk_permutations``) and the planned phases (``planned_phases``) for
versions 1 and 2; for version 3 the candidates of a window (the generator of
``seed_sequence(seed, PURPOSE_CHOICE_V3, w)``) and the pass permutation of a
group (``FeistelGroups`` of that one group, keyed by its cluster id); for
version 4 the same candidates and small groups' passes, while the larger
groups' pass orders (splitmix64 sort keys), the streams of a tree's inner
nodes and the planned order's time grid are recomputed here in Python ints.
Everything else -- clusters, weights, the active set, the clip, the draw
counts, passes and cursors, the plan, the interleaving, the token budget and
the fallback -- is recomputed here step by step.
"""

from __future__ import annotations

import math

import numpy as np

from clusterclip.schedule.choosers import block_uniforms
from clusterclip.schedule.feistel import FeistelGroups
from clusterclip.schedule.groups import (
    CHOICE_BLOCK,
    PURPOSE_CHOICE_V3,
    PURPOSE_CLUSTER_PASS,
    PURPOSE_FALLBACK_PASS,
    PURPOSE_RANDOM_PASS,
    chunk_permutations,
    passes_per_chunk,
    seed_sequence,
)
from clusterclip.schedule.planned import planned_phases
from clusterclip.schedule.seeds import PURPOSE_TREE
from clusterclip.schedule.windows import WINDOW

_MASK64 = 2**64 - 1
_GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    """splitmix64's output function, on a Python int."""
    z &= _MASK64
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _MASK64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def key_of(seed, purpose, key):
    """``G``: a group's (or a tree node's) 64-bit key."""
    return mix64(key ^ mix64(mix64(seed) ^ purpose))


def step_key(base, step):
    """Output ``step`` of the splitmix64 stream seeded with ``base``."""
    return mix64(base + (step + 1) * _GAMMA)


class _Group:
    """Members of one group, drawn pass after pass, cursor by cursor."""

    def __init__(self, members, seed, purpose, key, version):
        self.members = list(members)
        self.seed, self.purpose, self.key = seed, purpose, key
        self.drawn = 0
        self._chunk, self._rows = -1, None
        self.feistel = None
        self.version = version
        self._pass, self._order = -1, None
        if version in (3, 4):
            self.feistel = FeistelGroups(
                np.array(self.members, dtype=np.int64),
                np.array([len(self.members)]),
                np.array([key]),
                seed=seed,
                purpose=purpose,
            )

    def document(self, draw):
        size = len(self.members)
        if self.version == 4 and size > 32:  # members by their splitmix64 sort keys
            pass_number, cursor = divmod(draw, size)
            if pass_number != self._pass:
                pass_key = step_key(key_of(self.seed, self.purpose, self.key), pass_number)
                keys = [(step_key(pass_key, i) >> 32, i) for i in range(size)]
                self._pass, self._order = pass_number, [i for _, i in sorted(keys)]
            return self.members[self._order[cursor]]
        if self.feistel is not None:  # versions 3 and 4: the small groups' table
            return self.members[int(self.feistel.positions(np.array([0]), np.array([draw]))[0])]
        size = len(self.members)
        pass_number, cursor = divmod(draw, size)
        per_chunk = passes_per_chunk(size)
        chunk = pass_number // per_chunk
        if chunk != self._chunk:  # regenerate the pass permutations from (seed, key, chunk)
            rows = chunk_permutations(self.seed, self.purpose, self.key, chunk, size)
            self._chunk, self._rows = chunk, rows.tolist()
        return self.members[self._rows[pass_number % per_chunk][cursor]]

    def next(self):
        doc = self.document(self.drawn)
        self.drawn += 1
        return doc


class _Uniforms:
    def __init__(self, seed):
        self.seed, self.block, self.values = seed, -1, None

    def at(self, position):
        block, offset = divmod(position, CHOICE_BLOCK)
        if block != self.block:
            self.block, self.values = block, block_uniforms(self.seed, block).tolist()
        return self.values[offset]


class _Windows:
    """Version 3: candidates window by window, from the groups listed at the window's start."""

    def __init__(self, seed, groups, weights):
        self.seed = seed
        self.weights = weights
        self.equal = min(weights.values()) == max(weights.values())
        self.listed = sorted(groups)
        self.window = 0
        self.queue = []
        self.at = 0

    def next(self, is_clipped):
        """The next candidate whose group is not clipped (None: every group is)."""
        while True:
            if all(is_clipped(k) for k in self.listed):
                return None
            while self.at >= len(self.queue):
                self._refill(is_clipped)
            k = self.queue[self.at]
            self.at += 1
            if not is_clipped(k):
                return k

    def _refill(self, is_clipped):
        clipped = sum(1 for k in self.listed if is_clipped(k))
        if 4 * clipped > len(self.listed):
            self.listed = [k for k in self.listed if not is_clipped(k)]
        rng = np.random.Generator(
            np.random.PCG64(seed_sequence(self.seed, PURPOSE_CHOICE_V3, self.window))
        )
        self.window += 1
        self.at = 0
        m = len(self.listed)
        if self.equal:
            self.queue = [self.listed[i] for i in rng.integers(m, size=WINDOW).tolist()]
            return
        cumulative, acc = [], 0.0
        for k in self.listed:
            acc += self.weights[k]
            cumulative.append(acc)
        self.queue = []
        for u in rng.random(WINDOW).tolist():
            i = 0
            while i < m and not u < cumulative[i] / acc:
                i += 1
            self.queue.append(self.listed[min(i, m - 1)])


class _Tree:
    """Version 4 down a cluster tree: top nodes by windows, then each node's own stream."""

    def __init__(self, seed, paths, is_clipped):
        self.seed = seed
        self.is_clipped = is_clipped
        paths = {leaf: tuple(path[:-1]) for leaf, path in paths.items()}  # ancestors only
        while (
            paths and len(next(iter(paths.values()))) and len({p[0] for p in paths.values()}) == 1
        ):
            paths = {leaf: p[1:] for leaf, p in paths.items()}  # a lone top node
        self.paths = paths
        self.depth = len(next(iter(paths.values())))
        if self.depth == 0:
            return
        ids = [sorted({p[level] for p in paths.values()}) for level in range(self.depth)]
        first, self.gid = 0, []
        for level_ids in ids:  # nodes numbered level after level, ascending id
            self.gid.append({node: first + i for i, node in enumerate(level_ids)})
            first += len(level_ids)
        self.children = {}
        for leaf, p in paths.items():
            for level in range(self.depth):
                child = p[level + 1] if level + 1 < self.depth else leaf
                self.children.setdefault((level, p[level]), set()).add(child)
        self.children = {node: sorted(kids) for node, kids in self.children.items()}
        self.listed = dict(self.children)
        self.leaves_of = {}
        for leaf, p in paths.items():
            for level in range(self.depth):
                self.leaves_of.setdefault((level, p[level]), []).append(leaf)
        top = {node: 1.0 for node in ids[0]}
        self.windows = _Windows(seed, top, top)
        self.window = -1
        self.counter = {}

    def exhausted(self, level, node):
        if level == self.depth:
            return self.is_clipped(node)
        return all(self.is_clipped(leaf) for leaf in self.leaves_of[(level, node)])

    def _new_window(self):
        self.window = self.windows.window - 1
        self.counter = {}
        for node, listed in self.listed.items():
            dead = sum(1 for child in listed if self.exhausted(node[0] + 1, child))
            if 4 * dead > len(listed):
                self.listed[node] = [c for c in listed if not self.exhausted(node[0] + 1, c)]

    def next(self, is_clipped):
        top = self.windows.next(lambda node: self.exhausted(0, node))
        if top is None:
            return None
        if self.windows.window - 1 != self.window:
            self._new_window()
        node = top
        for level in range(self.depth):
            listed = self.listed[(level, node)]
            base = step_key(key_of(self.seed, PURPOSE_TREE, self.gid[level][node]), self.window)
            while True:
                n = self.counter.get((level, node), 0)
                self.counter[(level, node)] = n + 1
                u = (step_key(base, n) >> 11) / 2**53
                child = listed[min(int(u * len(listed)), len(listed) - 1)]
                if not self.exhausted(level + 1, child):
                    break
            node = child
        return node


def _weights(labels, policy, alpha, cluster_weights):
    sizes = {}
    for label in labels:
        if label >= 0:
            sizes[label] = sizes.get(label, 0) + 1
    weights = {}
    for k in sorted(sizes):
        if cluster_weights is not None:
            w = float(cluster_weights[k])
        elif policy == "temperature":
            w = float(sizes[k]) ** alpha
        else:
            w = 1.0
        if w > 0:
            weights[k] = w
    return sizes, weights


def _plan(weights, caps, total):
    """Water-filling, as a plain loop: cap whoever's share reaches its cap, repeat."""
    plan = {k: 0 for k in weights}
    free = sorted(weights)
    remaining = total
    while True:
        if not free:
            return plan
        weight_sum = math.fsum(weights[k] for k in free)
        shares = {k: remaining * weights[k] / weight_sum for k in free}
        over = [k for k in free if caps is not None and shares[k] >= caps[k]]
        if not over:
            break
        for k in over:
            plan[k] = caps[k]
            remaining -= caps[k]
        free = [k for k in free if k not in over]
    for k in free:
        plan[k] = math.floor(shares[k])
    leftover = remaining - sum(math.floor(shares[k]) for k in free)
    by_fraction = sorted(free, key=lambda k: (-(shares[k] - math.floor(shares[k])), k))
    for k in by_fraction[: max(leftover, 0)]:
        plan[k] += 1
    if leftover < 0:
        for k in sorted(free, key=lambda k: (shares[k] - math.floor(shares[k]), -k)):
            if leftover == 0:
                break
            if plan[k] > 0:
                plan[k] -= 1
                leftover += 1
    return plan


def _walk(paths, active, u):
    """``policy="hierarchical"``: the leaf one uniform picks, level by level (module docs)."""
    depth = len(next(iter(paths.values())))
    prefix = ()
    for level in range(depth):
        nodes = sorted({paths[k][level] for k in active if paths[k][:level] == prefix})
        m = len(nodes)
        y = u * m
        i = min(int(y), m - 1)
        u = y - i
        prefix = (*prefix, nodes[i])
    return prefix[-1]


def oracle_schedule(
    labels,
    *,
    policy="clusterclip",
    max_repeats=4,
    num_samples=None,
    num_tokens=None,
    lengths=None,
    alpha=None,
    cluster_weights=None,
    order="online",
    on_exhausted="stop",
    seed,
    schedule_version=3,
    planned_total=None,
    levels=None,
):
    """Return (indices list, clip_step dict {cluster: position}, exhausted_at or None).

    ``planned_total`` overrides the planned budget in draws (used for token budgets).
    ``levels`` (with ``policy="hierarchical"``): the ancestors of each document's
    cluster, coarsest first; each draw then walks the tree of the active clusters.
    """
    labels = [int(x) for x in labels]
    paths = None
    if levels is not None:  # cluster -> (ancestors..., cluster), from any of its documents
        paths = {
            x: (*(int(v) for v in row), x) for x, row in zip(labels, levels, strict=True) if x >= 0
        }
    if policy == "uniform":
        max_repeats = None
    sizes, weights = _weights(labels, policy, alpha, cluster_weights)
    if policy == "random":
        groups = {
            -1: _Group(
                [i for i, x in enumerate(labels) if x >= 0],
                seed,
                PURPOSE_RANDOM_PASS,
                0,
                schedule_version,
            )
        }
        weights = {-1: 1.0}
    else:
        groups = {
            k: _Group(
                [i for i, x in enumerate(labels) if x == k],
                seed,
                PURPOSE_CLUSTER_PASS,
                k,
                schedule_version,
            )
            for k in weights
        }
    caps = None
    if max_repeats is not None:
        caps = {k: max_repeats * len(g.members) for k, g in groups.items()}
    fallback_members = sorted(i for g in groups.values() for i in g.members)
    fallback = _Group(fallback_members, seed, PURPOSE_FALLBACK_PASS, 0, schedule_version)

    planned_sequence = None
    if order == "planned":
        total = planned_total if planned_total is not None else num_samples
        plan = _plan(weights, caps, total)
        phases = planned_phases(seed, len(groups)).tolist()
        draws = []
        for index, k in enumerate(sorted(groups)):
            for j in range(plan[k]):
                tau = (j + phases[index]) / plan[k]
                if schedule_version == 4:  # on a grid of 2**-40, then cluster, then draw
                    draws.append((math.floor(tau * 2**40), index, j, k))
                else:
                    draws.append((tau, index, j, k))
        draws.sort()
        planned_sequence = [k for *_, k in draws]

    uniforms = _Uniforms(seed)

    def is_clipped(k):
        return caps is not None and groups[k].drawn >= caps[k]

    windows = tree = None
    if schedule_version == 4 and paths is not None:
        tree = _Tree(seed, paths, is_clipped)
        if tree.depth == 0:  # a lone top node over every cluster: the flat rule
            tree = None
    if tree is not None:
        windows = tree
    elif schedule_version in (3, 4):
        windows = _Windows(seed, groups, weights)

    active = sorted(groups)  # clusters not yet clipped, by id; shrinks at each clip
    active_weights = [weights[k] for k in active]
    out, clip_step = [], {}
    tokens = 0
    exhausted_at = None
    position = 0
    while True:
        if num_samples is not None and position >= num_samples:
            break
        if num_tokens is not None and tokens >= num_tokens:
            break
        if exhausted_at is None:
            if planned_sequence is not None:
                chosen = planned_sequence[position] if position < len(planned_sequence) else None
            elif windows is not None:
                chosen = windows.next(is_clipped)
            else:
                chosen = None
                if active and paths is not None:
                    chosen = _walk(paths, active, uniforms.at(position))
                elif active:
                    m = len(active)
                    ws = active_weights
                    if m == 1:
                        chosen = active[0]
                    elif min(ws) == max(ws):
                        chosen = active[min(int(uniforms.at(position) * m), m - 1)]
                    else:
                        cumulative, acc = [], 0.0
                        for w in ws:
                            acc += w
                            cumulative.append(acc)
                        u = uniforms.at(position)
                        i = 0
                        while i < m and not u < cumulative[i] / acc:
                            i += 1
                        chosen = active[min(i, m - 1)]
            if chosen is None:
                exhausted_at = position
                if on_exhausted == "stop":
                    break
                if on_exhausted == "error":
                    raise RuntimeError("exhausted")
        if exhausted_at is None:
            doc = groups[chosen].next()
            if caps is not None and groups[chosen].drawn == caps[chosen]:
                clip_step[chosen] = position
                if planned_sequence is None:  # R passes done: leaves the active set
                    active.remove(chosen)
                    active_weights = [weights[k] for k in active]
        else:
            doc = fallback.next()
        out.append(doc)
        if lengths is not None:
            tokens += int(lengths[doc])
        position += 1
    return out, clip_step, exhausted_at
