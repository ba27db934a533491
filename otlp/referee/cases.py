"""The instances a sampler is refereed on, with their exact target laws and draft laws.

* :class:`PositionCase` — one position: target ``p`` (V,), draft ``q`` (V,) or (n, V) for
  independent drafters, ``n`` drafts under a draft scheme (``iid``, ``without_replacement``,
  ``independent``). Its outcomes are the V tokens and its target law is ``p``.
* :class:`TreeCase` — a toy autoregressive pair (a target and a draft law at every prefix up
  to the tree's depth D) and a static tree shape; the referee drafts the tree under a scheme
  (``iid`` or ``without_replacement`` siblings), the sampler returns the accepted path and a
  bonus token, and the emitted tokens are completed with target draws to length D + 1
  ([GBV] Definition 3.1). Its outcomes are the V^(D+1) sequences and its target law is the
  target's product law; the completion is applied exactly, in law (:meth:`TreeCase.completion`).

Every case is checked when it is built (a case the user passes, a reproducer read back): the
laws must be distributions (finite, nonnegative, summing to 1 within :data:`SUM_TOL`; they are
then renormalised in float64), of consistent shapes, with a scheme the protocol drafts and a
draft able to produce the drafts. A case that is not is refused with a ``ValueError`` naming
the field, never judged: a target that is not a distribution would make every lossless
sampler look like it deviates.

Cases are plain data with a JSON form (:meth:`to_json` / :func:`case_from_json`), so a failure
is saved and replayed exactly. Draft enumeration (every drafted tuple or tree with its
probability) gives the exact mode its outer sum.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray

POSITION_SCHEMES = ("iid", "without_replacement", "independent")
TREE_SCHEMES = ("iid", "without_replacement")
SUM_TOL = 1e-6  # a law's sum may differ from 1 by this (float32 inputs), then renormalised
EXACT_SUM = 1e-12  # within this of 1, a law is kept as given (far below the exact TV tolerance)


def distribution_rows(name: str, values: Any, ndim: int) -> FloatArray:
    """``values`` as float64 distributions along the last axis, renormalised where a sum is
    off by more than :data:`EXACT_SUM`; ValueError
    naming ``name`` if it is not ``ndim``-dimensional, not finite, negative somewhere, or a
    row does not sum to 1 within :data:`SUM_TOL`."""
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected an array of probabilities, got {values!r}") from None
    if array.ndim != ndim or array.shape[-1] == 0 or 0 in array.shape:
        raise ValueError(f"{name}: expected a nonempty {ndim}-d array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: not a distribution (not finite)")
    if np.any(array < 0):
        raise ValueError(f"{name}: not a distribution (a negative mass, {array.min():g})")
    sums = array.sum(axis=-1, keepdims=True)
    worst = sums.reshape(-1)[int(np.argmax(np.abs(sums - 1.0)))]
    if not abs(worst - 1.0) <= SUM_TOL:
        raise ValueError(f"{name}: not a distribution (sums to {worst:.9g}, not 1)")
    if abs(worst - 1.0) <= EXACT_SUM:  # rounding only: kept bit for bit (JSON round trips)
        return array
    return np.asarray(array / sums, dtype=np.float64)


def _scheme(scheme: object, known: tuple[str, ...], protocol: str) -> str:
    if scheme not in known:
        raise ValueError(
            f"scheme: expected one of {', '.join(known)} for a {protocol} case, got {scheme!r}"
        )
    return str(scheme)


def _floats(values: Any) -> Any:
    return np.asarray(values, dtype=np.float64).tolist()


def _ordered_tuples(
    laws: list[FloatArray], distinct: bool
) -> Iterator[tuple[tuple[int, ...], float]]:
    """Every drafted tuple of positive probability, with it: draw i from ``laws[i]`` (i.i.d.
    or independent), or sequentially without replacement from ``laws[0]`` if ``distinct``
    (the mass left is summed over the tokens left, never taken as 1 - the drawn mass)."""
    supports = [np.flatnonzero(law > 0) for law in laws]
    for omega in itertools.product(*supports):
        if distinct and len(set(omega)) < len(omega):
            continue
        prob = 1.0
        for i, x in enumerate(omega):
            if distinct:
                left = np.ones(laws[0].shape[0], dtype=bool)
                left[list(omega[:i])] = False
                prob *= laws[0][x] / laws[0][left].sum()
            else:
                prob *= laws[i][x]
        if prob > 0:
            yield tuple(int(x) for x in omega), float(prob)


def _draw(laws: list[FloatArray], distinct: bool, rng: np.random.Generator, count: int) -> IntArray:
    """``count`` drafted tuples (count, n): column i from ``laws[i]``, or without replacement
    from ``laws[0]`` by Gumbel-top-n (equal in law to sequential draws without replacement)."""
    if not distinct:
        return np.stack([rng.choice(law.shape[0], size=count, p=law) for law in laws], axis=1)
    with np.errstate(divide="ignore"):
        keys = np.log(laws[0]) + rng.gumbel(size=(count, laws[0].shape[0]))
    return np.argsort(-keys, axis=1, kind="stable")[:, : len(laws)].astype(np.int64)


@dataclass(frozen=True)
class PositionCase:
    """One position: ``p`` (V,), ``q`` (V,) or (n, V) (``independent``), ``n`` drafts."""

    p: FloatArray
    q: FloatArray
    n: int
    scheme: str
    label: str = ""

    def __post_init__(self) -> None:
        scheme = _scheme(self.scheme, POSITION_SCHEMES, "position")
        if isinstance(self.n, bool) or not isinstance(self.n, int | np.integer) or self.n < 1:
            raise ValueError(f"n: expected a positive number of drafts, got {self.n!r}")
        p = distribution_rows("p", self.p, 1)
        q = distribution_rows("q", self.q, 2 if scheme == "independent" else 1)
        if q.shape[-1] != p.shape[0]:
            raise ValueError(f"q: {q.shape[-1]} tokens where p has {p.shape[0]}")
        if scheme == "independent" and q.shape[0] != self.n:
            raise ValueError(f"q: {q.shape[0]} drafters' laws for n = {self.n} drafts")
        if scheme == "without_replacement" and np.count_nonzero(q) < self.n:
            raise ValueError(f"q: fewer than n = {self.n} tokens to draft without replacement")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "n", int(self.n))

    @property
    def vocab(self) -> int:
        return int(self.p.shape[0])

    @property
    def target(self) -> FloatArray:
        """The target law over the outcomes (the V tokens)."""
        return self.p

    def draft_laws(self) -> list[FloatArray]:
        if self.scheme == "independent":
            return [self.q[i] for i in range(self.n)]
        return [self.q] * self.n

    def drafts(self) -> Iterator[tuple[tuple[int, ...], float]]:
        """Every drafted tuple (draw order) with its probability."""
        return _ordered_tuples(self.draft_laws(), self.scheme == "without_replacement")

    def draft_count(self) -> int:
        return int(np.prod([np.count_nonzero(law) for law in self.draft_laws()]))

    def sample_drafts(self, rng: np.random.Generator, count: int) -> IntArray:
        """``count`` drafted tuples, (count, n)."""
        return _draw(self.draft_laws(), self.scheme == "without_replacement", rng, count)

    def alpha_star(self) -> float:
        """Optimal acceptance α* of the scheme ([GR] §4, :func:`otlp.optimal_acceptance`)."""
        import otlp

        q = list(self.q) if self.scheme == "independent" else self.q
        return float(
            otlp.optimal_acceptance(otlp.Instance(self.p, q, self.n, self.scheme)).alpha_star
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": "position",
            "p": _floats(self.p),
            "q": _floats(self.q),
            "n": self.n,
            "scheme": self.scheme,
            "label": self.label,
        }

    def describe(self, full: bool = False) -> str:
        """One line: the sizes and the laws (their 4 likeliest tokens beyond V = 8); ``full``
        changes nothing for a position (it has one context)."""
        return f"V={self.vocab}, n={self.n}, {self.scheme}, p={_short(self.p)}, q={_short(self.q)}"


@dataclass(frozen=True)
class TreeCase:
    """A toy model pair and a tree shape. ``target[d]`` and ``draft[d]`` are (V^d, V): the
    next-token laws after every prefix of length d (row = the prefix in base V), d = 0..D."""

    target_tables: tuple[FloatArray, ...]
    draft_tables: tuple[FloatArray, ...]
    parents: IntArray
    scheme: str
    label: str = ""
    _depths: IntArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _scheme(self.scheme, TREE_SCHEMES, "tree")
        parents = np.asarray(self.parents)
        if (
            parents.ndim != 1
            or parents.shape[0] == 0
            or not np.issubdtype(parents.dtype, np.integer)
        ):
            raise ValueError(f"parents: expected a nonempty 1-d integer array, got {self.parents}")
        if np.any(parents < -1) or np.any(parents >= np.arange(parents.shape[0])):
            raise ValueError(f"parents: expected -1 <= parents[i] < i, got {parents.tolist()}")
        depths = np.ones(parents.shape[0], dtype=np.int64)
        for i, parent in enumerate(parents):
            if parent >= 0:
                depths[i] = depths[parent] + 1
        object.__setattr__(self, "parents", parents.astype(np.int64))
        object.__setattr__(self, "_depths", depths)
        for name in ("target_tables", "draft_tables"):
            tables = getattr(self, name)
            if len(tables) < self.length:
                raise ValueError(f"{name}: {len(tables)} levels for a tree of depth {self.depth}")
            checked = tuple(distribution_rows(name, t, 2) for t in tables)
            vocab = checked[0].shape[1]
            for d, table in enumerate(checked):
                if table.shape != (vocab**d, vocab):
                    raise ValueError(
                        f"{name}: level {d} has shape {table.shape}, expected {(vocab**d, vocab)}"
                    )
            object.__setattr__(self, name, checked)
        if self.scheme == "without_replacement" and not self.distinct_feasible():
            raise ValueError("draft_tables: too few tokens to draft siblings without replacement")

    @property
    def vocab(self) -> int:
        return int(self.target_tables[0].shape[1])

    @property
    def depth(self) -> int:
        """D: the tree's depth (the tables cover prefixes of length 0..D)."""
        return int(self._depths.max()) if self.parents.shape[0] else 0

    @property
    def length(self) -> int:
        """D + 1: the length of the completed emitted sequences."""
        return self.depth + 1

    def law(self, tables: tuple[FloatArray, ...], prefix: tuple[int, ...]) -> FloatArray:
        index = 0
        for token in prefix:
            index = index * self.vocab + token
        return tables[len(prefix)][index]

    def children(self) -> list[IntArray]:
        """Children per context index (0 the root, i + 1 node i), increasing node order."""
        kids: list[list[int]] = [[] for _ in range(self.parents.shape[0] + 1)]
        for i, parent in enumerate(self.parents):
            kids[int(parent) + 1].append(i)
        return [np.array(k, dtype=np.int64) for k in kids]

    def prefixes(self, tokens: IntArray) -> list[tuple[int, ...]]:
        out: list[tuple[int, ...]] = [()]
        for i, parent in enumerate(self.parents):
            out.append(out[int(parent) + 1] + (int(tokens[i]),))
        return out

    def context_laws(self, tokens: IntArray) -> tuple[FloatArray, FloatArray]:
        """The sampler's ``p`` and ``q`` (N + 1, V) for a drafted tree."""
        prefixes = self.prefixes(tokens)
        p = np.array([self.law(self.target_tables, pre) for pre in prefixes])
        q = np.array([self.law(self.draft_tables, pre) for pre in prefixes])
        return p, q

    def drafts(self) -> Iterator[tuple[IntArray, float]]:
        """Every drafted tree (tokens per node) with its probability."""
        kids = self.children()
        distinct = self.scheme == "without_replacement"

        def fill(context: int, tokens: IntArray, mass: float) -> Iterator[tuple[IntArray, float]]:
            if context == len(kids):
                yield tokens.copy(), mass
                return
            nodes = kids[context]
            if nodes.shape[0] == 0:
                yield from fill(context + 1, tokens, mass)
                return
            prefix = self.prefixes(tokens)[context]
            q = self.law(self.draft_tables, prefix)
            for omega, prob in _ordered_tuples([q] * nodes.shape[0], distinct):
                tokens[nodes] = omega
                yield from fill(context + 1, tokens, mass * prob)
            tokens[nodes] = -1

        tokens = np.full(self.parents.shape[0], -1, dtype=np.int64)
        return fill(0, tokens, 1.0)

    def draft_count(self) -> int:
        return int(self.vocab ** self.parents.shape[0])

    def distinct_feasible(self) -> bool:
        """Every context's draft has as many tokens as the most children any node has."""
        widest = max(k.shape[0] for k in self.children())
        return all(int(np.min(np.count_nonzero(t, axis=1))) >= widest for t in self.draft_tables)

    def sample_tree(self, rng: np.random.Generator) -> IntArray:
        """One drafted tree: the tokens per node."""
        kids = self.children()
        tokens = np.full(self.parents.shape[0], -1, dtype=np.int64)
        prefixes: list[tuple[int, ...]] = [() for _ in range(self.parents.shape[0] + 1)]
        for context, nodes in enumerate(kids):
            if nodes.shape[0] == 0:
                continue
            q = self.law(self.draft_tables, prefixes[context])
            distinct = self.scheme == "without_replacement"
            tokens[nodes] = _draw([q] * nodes.shape[0], distinct, rng, 1)[0]
            for node in nodes:
                prefixes[node + 1] = prefixes[context] + (int(tokens[node]),)
        return tokens

    def context_depths(self) -> IntArray:
        """The prefix length at every context (0 the root, ``depth(i)`` for node i's)."""
        return np.concatenate([[0], self._depths]).astype(np.int64)

    def sample_trees(self, rng: np.random.Generator, count: int) -> tuple[IntArray, IntArray]:
        """``count`` drafted trees at once, equal in law to :meth:`sample_tree`: the tokens
        (count, N) and every context's prefix as a row index of its level's tables (count,
        N + 1). Siblings are drawn from the draft at their context by inverse CDF (i.i.d.)
        or by Gumbel-top-k (without replacement)."""
        kids = self.children()
        nodes_count = self.parents.shape[0]
        tokens = np.full((count, nodes_count), -1, dtype=np.int64)
        rows = np.zeros((count, nodes_count + 1), dtype=np.int64)
        depths = self.context_depths()
        for context, nodes in enumerate(kids):
            if nodes.shape[0] == 0:
                continue
            q = self.draft_tables[depths[context]][rows[:, context]]  # (count, V)
            if self.scheme == "without_replacement":
                with np.errstate(divide="ignore"):
                    keys = np.log(q) + rng.gumbel(size=q.shape)
                draws = np.argsort(-keys, axis=1, kind="stable")[:, : nodes.shape[0]]
            else:  # the token j with cdf[j - 1] <= u * total < cdf[j]: q[j] > 0 always
                cdf = np.cumsum(q, axis=1)
                u = rng.random((count, nodes.shape[0])) * cdf[:, -1:]
                draws = (cdf[:, None, :] <= u[:, :, None]).sum(axis=2)
            tokens[:, nodes] = draws
            rows[:, nodes + 1] = rows[:, [context]] * self.vocab + draws
        return tokens, rows

    @cached_property
    def target(self) -> FloatArray:
        """The target's product law over the V^(D+1) sequences (base-V index)."""
        return self.completion(())

    def completion(self, prefix: tuple[int, ...]) -> FloatArray:
        """The law of ``prefix`` completed by the target to length D + 1, over V^(D+1)."""
        out = np.zeros(self.vocab**self.length)
        if len(prefix) > self.length:
            raise ValueError(f"emitted {len(prefix)} tokens, more than D + 1 = {self.length}")
        stack = [(prefix, 1.0)]
        while stack:
            seq, mass = stack.pop()
            if len(seq) == self.length:
                index = 0
                for token in seq:
                    index = index * self.vocab + token
                out[index] += mass
                continue
            law = self.law(self.target_tables, seq)
            for y in np.flatnonzero(law > 0):
                stack.append(((*seq, int(y)), mass * law[y]))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": "tree",
            "target": [_floats(t) for t in self.target_tables],
            "draft": [_floats(t) for t in self.draft_tables],
            "parents": [int(x) for x in self.parents],
            "scheme": self.scheme,
            "label": self.label,
        }

    def describe(self, full: bool = False) -> str:
        """One line: the shape, the scheme and the laws at the root; ``full``: at every
        context the tree can visit (:meth:`visited`), as ``prefix: target | draft``."""
        head = f"V={self.vocab}, parents={self.parents.tolist()}, {self.scheme}, "
        if not full:
            return (
                head + f"target at the root={np.round(self.target_tables[0][0], 4).tolist()}, "
                f"draft at the root={np.round(self.draft_tables[0][0], 4).tolist()}"
            )
        parts = [
            f"{list(prefix)}: {_short(np.round(self.law(self.target_tables, prefix), 4))}"
            f" | {_short(np.round(self.law(self.draft_tables, prefix), 4))}"
            for prefix in self.visited()
        ]
        return head + "target | draft after each prefix: " + "; ".join(parts)

    def visited(self) -> list[tuple[int, ...]]:
        """The prefixes (contexts) of length 0..D that a drafted tree or its completion can
        reach: each token of the prefix has positive target or draft mass after the tokens
        before it. Breadth first, tokens in increasing order."""
        out: list[tuple[int, ...]] = [()]
        level: list[tuple[int, ...]] = [()]
        for _ in range(self.depth):
            level = [
                (*prefix, int(token))
                for prefix in level
                for token in np.flatnonzero(
                    (self.law(self.target_tables, prefix) > 0)
                    | (self.law(self.draft_tables, prefix) > 0)
                )
            ]
            out.extend(level)
        return out


Case = PositionCase | TreeCase


def _short(law: FloatArray) -> str:
    if law.ndim == 2:
        return "[" + ", ".join(_short(row) for row in law) + "]"
    if law.shape[0] <= 8:
        return "[" + ", ".join(f"{x:.4g}" for x in law) + "]"
    top = np.argsort(-law, kind="stable")[:4]
    return "{" + ", ".join(f"{int(t)}: {law[t]:.4g}" for t in top) + ", ...}"


def case_from_json(data: dict[str, Any]) -> Case:
    """A case from its :meth:`to_json` form (ValueError naming the missing or bad field)."""
    try:
        if data["protocol"] == "position":
            return PositionCase(
                np.asarray(data["p"], dtype=np.float64),
                np.asarray(data["q"], dtype=np.float64),
                int(data["n"]),
                str(data["scheme"]),
                str(data.get("label", "")),
            )
        if data["protocol"] == "tree":
            return TreeCase(
                tuple(np.asarray(t, dtype=np.float64) for t in data["target"]),
                tuple(np.asarray(t, dtype=np.float64) for t in data["draft"]),
                np.asarray(data["parents"], dtype=np.int64),
                str(data["scheme"]),
                str(data.get("label", "")),
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"case: malformed reproducer case ({type(exc).__name__}: {exc})") from None
    raise ValueError(f"case: protocol must be 'position' or 'tree', got {data['protocol']!r}")
