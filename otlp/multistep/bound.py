"""An upper bound on the optimum block efficiency that scales to real models and trees.

The optimum of :mod:`.optimum` (the best block efficiency of any valid verification algorithm
for a tree drafting law) is an LP over every drafted tree: tiny trees only. This module bounds
it from above for any vocabulary, evaluating the models only after the prefixes it chooses
(docs/optimum.md, "A bound that scales", has the proof).

Let a(u) = P(at least |u| tokens accepted, the accepted ones starting with u) under a valid
algorithm, so that E[accepted] = Σ_{u ≠ ∅} a(u). Target-matching forces a(u) = p(u) α(u) with
α(∅) = 1 and α non-increasing along every path (what the output leaves unaccepted is continued
by the target afresh), and prefix-matching forces a(u) <= P(u ∈ T), T the drafted tree. Hence
a(u) <= p(u) β(u) with β(∅) = 1, β(uy) = min(β(u), P(uy ∈ T) / p(uy)): the *prefix-min
bound* Σ_u min(p(u) β(parent), P(u ∈ T)), which on a chain is block verification's value
(the optimum, [GBV] Theorem 3.4). For any set H of depth-d prefixes, Σ_{u ∈ H} a(u) <=
P(T hits H) as well (the accepted prefix is one drafted path), so

    Σ_{|u| = d} a(u) <= P(T hits H) + Σ_{u ∉ H} min(p(u) β(parent), P(u ∈ T)).

The prefixes are expanded best first from the root (each expansion evaluates target and draft
after one prefix): a depth-d prefix whose parent was expanded has its own term; the others
are bounded together by a(f) <= min(p(f) β(parent), P(f ∈ T)) at their first unexpanded
ancestor f. Inclusion and hit probabilities come from :mod:`.inclusion` (with the copies an
i.i.d. tree drafts of a repeated token). H ranges over the threshold sets
{u : p(u) β(parent) > t P(u ∈ T)} (t = ∞: H empty, the prefix-min bound); each depth takes the
least, capped by the depth above.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from otlp.args import integers, positive_int
from otlp.multistep.inclusion import hit, hit_one, inclusion
from otlp.multistep.models import Model, prefix_index
from otlp.multistep.optimum import branching_of, check_scheme
from otlp.multistep.table import PrefixTable
from otlp.solvers.arrays import FloatArray, IntArray

THRESHOLDS = (np.inf, 4.0, 2.0, 2.0**0.5, 1.0, 2.0**-0.5, 0.5)  # H = {x : p(x) > t P(x in T)}
LAW_TOL = 1e-6  # how far from 1 a model's next-token law may sum

NodeLaws = Callable[[IntArray, IntArray, list[tuple[int, ...]]], FloatArray]


@dataclass(frozen=True)
class BlockEfficiencyBound:
    """An upper bound on :func:`.optimum.optimal_block_efficiency` and how it was reached."""

    shape: str
    scheme: str
    gamma: int
    branching: tuple[int, ...]
    block_efficiency: float  # the bound: 1 + sum of depth_bounds
    depth_bounds: FloatArray  # bound on P(accepted >= d), d = 1 .. gamma
    prefix_min: float  # 1 + the prefix-min bound (no hit sets), unexpanded groups included
    slack: float  # at most this much of `prefix_min` is due to the unexpanded prefixes
    expanded: int  # prefixes whose laws were evaluated, the root included
    complete: bool  # no prefix of positive bound left unexpanded above depth gamma

    @property
    def expected_accepted(self) -> float:
        return self.block_efficiency - 1.0


class _Tree:
    """The expanded prefixes: per node its draft law and its children's target mass p(uy)
    and inclusion probability P(uy in T), every child token at once."""

    def __init__(self, branching: tuple[int, ...], scheme: str) -> None:
        self.branching, self.scheme = branching, scheme
        self.depth: list[int] = []
        self.parent: list[int] = []
        self.token: list[int] = []
        self.q: list[FloatArray] = []  # draft law after the node
        self.within: list[FloatArray] = []  # P(y among the node's children | node drafted)
        self.child_p: list[FloatArray] = []  # target probability of each child prefix
        self.child_in: list[FloatArray] = []  # P(child prefix in T)
        self.beta: list[float] = []  # the cap on a(u) / p(u) (module docstring)
        self.share: list[FloatArray] = []  # each child's bound on a(uy): min(p beta, P(in T))
        self.children: list[dict[int, int]] = []

    def add(self, parent: int, token: int, p_law: FloatArray, q_law: FloatArray) -> int:
        node = len(self.depth)
        depth = 0 if parent < 0 else self.depth[parent] + 1
        mass = 1.0 if parent < 0 else float(self.child_p[parent][token])
        beta = 1.0 if parent < 0 else float(self.share[parent][token]) / mass
        within = inclusion(q_law, self.branching[depth], self.scheme)
        reach, up, a = within, parent, token
        while up >= 0:  # P(one copy of `up` drafts a path to each child prefix)
            width = self.branching[self.depth[up]]
            reach = hit_one(
                float(self.q[up][a]), float(self.within[up][a]), width, reach, self.scheme
            )
            up, a = self.parent[up], self.token[up]
        self.depth.append(depth)
        self.parent.append(parent)
        self.token.append(token)
        self.q.append(q_law)
        self.within.append(within)
        self.child_p.append(mass * p_law)
        self.child_in.append(reach)
        self.beta.append(beta)
        self.share.append(np.minimum(beta * mass * p_law, reach))
        self.children.append({})
        if parent >= 0:
            self.children[parent][token] = node
        return node

    def path(self, node: int) -> tuple[int, ...]:
        out: list[int] = []
        while node > 0:
            out.append(self.token[node])
            node = self.parent[node]
        return tuple(out[::-1])


def block_efficiency_bound(
    target: Model | PrefixTable | Any,
    draft: Model | PrefixTable | Any,
    gamma: int,
    shape: str | Sequence[int] = "paths1",
    scheme: str = "iid",
    *,
    budget: int | None = None,
    batch: int = 16,
    context: Sequence[int] = (),
) -> BlockEfficiencyBound:
    """An upper bound on the best block efficiency of any valid verification algorithm
    (:func:`.optimum.optimal_block_efficiency`) for the same drafting law, for any
    vocabulary: exact-LP-free, with at most ``budget`` prefixes evaluated.

    ``target``/``draft``: models (callables prefix -> law, after ``context``), prefix tables
    (already after the context), or tree models of :mod:`otlp.decoding` (anything with
    ``session(prompts)``: one session on ``context``, the prefixes fed as tree nodes, so a KV
    cache holds the context once). ``shape``/``scheme`` as for the optimum. ``budget``: the
    most prefixes to expand, the root included (``None``: every prefix of positive bound, which
    for tiny models is the untruncated relaxation); ``batch``: prefixes expanded per model call.
    The module docstring and docs/optimum.md say why it is a bound; it equals the optimum on
    chains (k = 1) and is checked against the LP where both run.
    """
    gamma = positive_int("gamma", gamma)
    branching = branching_of(shape, gamma)
    scheme = check_scheme(scheme)
    limit = None if budget is None else positive_int("budget", budget)
    batch = positive_int("batch", batch)
    context = integers("context", context)
    target_laws = _node_laws("target", target, context)
    draft_laws = _node_laws("draft", draft, context)
    tree = _Tree(branching, scheme)
    empty = np.zeros(0, dtype=np.int64)
    p_root, q_root = target_laws(empty, empty, [])[0], draft_laws(empty, empty, [])[0]
    if p_root.shape != q_root.shape:
        raise ValueError(
            f"draft: vocabulary {q_root.shape[0]} differs from the target's {p_root.shape[0]}"
        )
    tree.add(-1, 0, p_root, q_root)
    heap: list[tuple[float, int, int]] = []  # (-priority, parent node, token)
    _push(heap, tree, 0, gamma, limit)
    while heap and (limit is None or len(tree.depth) < limit):
        room = batch if limit is None else min(batch, limit - len(tree.depth))
        chosen = [heapq.heappop(heap) for _ in range(min(room, len(heap)))]
        tokens = np.array([t for _, _, t in chosen], dtype=np.int64)
        parents = np.array([u - 1 for _, u, _ in chosen], dtype=np.int64)  # the root is -1
        paths = [(*tree.path(u), t) for _, u, t in chosen]
        p_laws = target_laws(tokens, parents, paths)[1:]
        q_laws = draft_laws(tokens, parents, paths)[1:]
        for (_, u, t), p_law, q_law in zip(chosen, p_laws, q_laws, strict=True):
            _push(heap, tree, tree.add(u, t, p_law, q_law), gamma, limit)
    return _evaluate(tree, gamma, branching, scheme, shape)


def _push(
    heap: list[tuple[float, int, int]], tree: _Tree, node: int, gamma: int, limit: int | None
) -> None:
    """Queue the children of ``node`` that may be expanded (depth < gamma) by their slack:
    (gamma - depth) times their bound on a(u), the most they add to the bound unexpanded."""
    depth = tree.depth[node] + 1
    if depth >= gamma:
        return
    share = tree.share[node]
    keep = np.flatnonzero(share > 0)
    if limit is not None and keep.shape[0] > limit:
        keep = keep[np.argpartition(-share[keep], limit)[:limit]]
    for token in keep.tolist():
        heapq.heappush(heap, (-(gamma - depth) * float(share[token]), node, int(token)))


def _evaluate(
    tree: _Tree, gamma: int, branching: tuple[int, ...], scheme: str, shape: str | Sequence[int]
) -> BlockEfficiencyBound:
    """The bounds B_d of the module docstring on the expanded tree."""
    levels: list[list[int]] = [[] for _ in range(gamma)]
    for node, depth in enumerate(tree.depth):
        levels[depth].append(node)
    share = tree.share
    # Groups under unexpanded prefixes, by the prefix's depth (1 .. gamma).
    grouped = np.zeros(gamma + 1)
    for node, depth in enumerate(tree.depth):
        left = np.ones(share[node].shape[0], dtype=bool)
        left[list(tree.children[node])] = False
        grouped[depth + 1] += float(share[node][left].sum())
    depth_bounds = np.empty(gamma)
    prefix_min, previous = 1.0, 1.0
    for d in range(1, gamma + 1):
        carried = float(grouped[1:d].sum())
        values = []
        for t in THRESHOLDS:
            fired: dict[int, float] = {}
            rest = carried
            for node in levels[d - 1]:
                inside = (
                    tree.beta[node] * tree.child_p[node] > t * tree.child_in[node]
                    if np.isfinite(t)
                    else np.zeros(share[node].shape[0], dtype=bool)
                )
                rest += float(share[node][~inside].sum())
                if inside.any():
                    fired[node] = hit(
                        tree.q[node], inside.astype(np.float64), branching[d - 1], scheme
                    )
            for j in range(d - 2, -1, -1):
                for node in levels[j]:
                    below = {t_: fired[c] for t_, c in tree.children[node].items() if c in fired}
                    if below:
                        fire = np.zeros(tree.q[node].shape[0])
                        fire[list(below)] = list(below.values())
                        fired[node] = hit(tree.q[node], fire, branching[j], scheme)
            values.append(fired.get(0, 0.0) + rest)
        prefix_min += values[0]
        previous = min(previous, *values)
        depth_bounds[d - 1] = previous
    slack = float(sum((gamma - j) * grouped[j] for j in range(1, gamma)))
    label = shape if isinstance(shape, str) else f"branching {branching}"
    return BlockEfficiencyBound(
        shape=label,
        scheme=scheme,
        gamma=gamma,
        branching=branching,
        block_efficiency=1.0 + float(depth_bounds.sum()),
        depth_bounds=depth_bounds,
        prefix_min=prefix_min,
        slack=slack,
        expanded=len(tree.depth),
        complete=slack == 0.0,
    )


def _node_laws(name: str, model: object, context: tuple[int, ...]) -> NodeLaws:
    """``laws(tokens, parents, paths)``: the model's laws after the context (row 0) and after
    each new prefix ``paths[i]`` (node ``tokens[i]`` below node ``parents[i]``, -1 the root,
    numbered in the order given across calls), as ``(1 + m, V)``."""
    session = getattr(model, "session", None)
    if callable(session):
        opened = session([list(context)])

        def from_session(
            tokens: IntArray, parents: IntArray, paths: list[tuple[int, ...]]
        ) -> FloatArray:
            out = opened.forward(tokens[None, :], parents, np.zeros(1, dtype=np.int64))[0]
            return _checked(name, np.asarray(out, dtype=np.float64))

        return from_session
    if isinstance(model, PrefixTable):
        table = model

        def law(path: tuple[int, ...]) -> FloatArray:
            index = prefix_index(
                np.asarray([path], dtype=np.int64).reshape(1, -1), table.vocab_size
            )
            return table.conditionals[len(path)][int(index[0])]

    elif callable(model):
        call = model

        def law(path: tuple[int, ...]) -> FloatArray:
            return np.asarray(call(context + path), dtype=np.float64)

    else:
        raise ValueError(f"{name}: expected a model, a PrefixTable or a tree model, got {model!r}")
    root = _checked(name, law(())[None, :])

    def from_prefixes(
        tokens: IntArray, parents: IntArray, paths: list[tuple[int, ...]]
    ) -> FloatArray:
        if not paths:
            return root
        return _checked(name, np.vstack([root, *(law(path)[None, :] for path in paths)]))

    return from_prefixes


def _checked(name: str, laws: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(laws).all(1) | (laws < 0).any(1) | (np.abs(laws.sum(1) - 1) > LAW_TOL)
    if laws.ndim != 2 or bad.any():
        raise ValueError(f"{name}: a next-token law is not a probability vector")
    return laws
