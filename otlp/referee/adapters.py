"""otlp's own verification in the referee's protocols, one line each.

>>> from otlp.referee import adapters, referee
>>> referee(adapters.position("rrs"), cases=3).lossless
True

* :func:`position` wraps :func:`otlp.verify_drafts` (methods ``sps``, ``rrs``, ``kseq``,
  ``maxflow_cs``, ``partial_resolution``, ``global_resolution`` for i.i.d. drafts;
  ``rrs_without_replacement``, ``maxflow_cs``, ``global_resolution`` without replacement;
  ``maxflow_cs``, ``global_resolution`` for independent drafters).
* :func:`tree` wraps :func:`otlp.decoding.verify_tree` (every method of
  :data:`otlp.decoding.METHODS` with a scheme it verifies).

With a real ``numpy.random.Generator`` each call runs otlp's decoder path. Under the referee's
exact mode the exact rules draw instead from the law that path samples from — the rule's exact
conditional given the drafts (:meth:`otlp.rules.Rule.conditional`, or the exact plan's slice
for ``maxflow_cs`` and ``partial_resolution``), or :func:`otlp.decoding.outcome_law` for
trees — with one branching ``choice``; global resolution (within 15 τ of p, not exact) is
refereed statistically. ``partial_resolution``'s decoder row samples a tuple-level refinement
of its set conditional (the clock race): the exact mode draws from the race's exact law given
the drafted tuple (``plan.race_slice``, Lemma 6 of docs/partial-resolution.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from otlp.referee.symbolic import NotEnumerable
from otlp.verification.rule_table import RULES

# Exact methods whose conditional is a solved plan's slice (one plan per case).
_PLAN_SLICES = ("maxflow_cs", "partial_resolution")
# The rule table's exact position rules (no tau), SpecHub's pairs aside.
_EXACT_POSITION = tuple(
    name for name, r in RULES.items() if r.positions and not r.takes_tau and r.drafts != 2
)


@dataclass(frozen=True)
class PositionAdapter:
    """``sampler(p, q, drafts, rng) -> tokens`` by :func:`otlp.verify_drafts`, batched: p, q
    (B, V) (q (B, n, V) for independent drafters), drafts (B, n), tokens (B,)."""

    method: str
    scheme: str = "iid"
    options: dict[str, Any] = field(default_factory=dict)
    protocol: str = "position"
    batched: bool = True
    solved: dict[tuple[bytes, bytes, int], Any] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def name(self) -> str:
        """The name a verdict shows."""
        return f"otlp.verify_drafts[{self.method}, {self.scheme}]"

    def __call__(self, p: np.ndarray, q: np.ndarray, drafts: np.ndarray, rng: Any) -> np.ndarray:
        import otlp

        if isinstance(rng, np.random.Generator):
            options = {"method": self.method, "scheme": self.scheme, "rng": rng, **self.options}
            if np.all(p == p[0]) and np.all(q == q[0]):  # one (p, q): otlp solves it once
                p, q = p[0], q[0]
            return np.asarray(otlp.verify_drafts(p, q, drafts, **options).tokens)
        if self.method not in _EXACT_POSITION:
            raise NotEnumerable(f"{self.method} is not an exact rule")
        if drafts.shape[0] != 1:
            raise NotEnumerable("the exact mode follows one row at a time")
        law = np.clip(self.conditional(p[0], q[0], drafts[0]), 0.0, None)
        return np.array([rng.choice(p.shape[1], p=law / law.sum())], dtype=np.int64)

    def conditional(self, p: np.ndarray, q: np.ndarray, drafts: np.ndarray) -> np.ndarray:
        """The exact law of the output given ``drafts`` (what the decoder path samples)."""
        import otlp
        import otlp.rules

        key = (p.tobytes(), q.tobytes(), drafts.shape[0])
        if key not in self.solved:  # one instance (and exact plan) per case, not per tuple
            draft = list(q) if self.scheme == "independent" else q
            inst = otlp.Instance(p, draft, drafts.shape[0], self.scheme, renormalize=True)
            plan = (
                otlp.solve(inst, self.method, check=False) if self.method in _PLAN_SLICES else None
            )
            self.solved.clear()
            self.solved[key] = (inst, plan)
        inst, plan = self.solved[key]
        if plan is not None:  # partial resolution's row races the tuple: its exact law
            return (
                plan.race_slice(drafts)
                if self.method == "partial_resolution"
                else plan.slice(drafts)
            )
        return otlp.rules.get(self.method).conditional(inst, drafts)


@dataclass(frozen=True)
class RuleAdapter(PositionAdapter):
    """A batched position sampler drawing from otlp's exact conditional law of ``method``
    given the drafts (the law :func:`otlp.verify_drafts` samples from), by inverse CDF with
    one uniform per row: a fast lossless reference for the statistical mode."""

    @property
    def name(self) -> str:
        """The name a verdict shows."""
        return f"otlp.rules[{self.method}, {self.scheme}]"

    def __call__(self, p: np.ndarray, q: np.ndarray, drafts: np.ndarray, rng: Any) -> np.ndarray:
        if not isinstance(rng, np.random.Generator):
            return super().__call__(p, q, drafts, rng)
        out = np.empty(drafts.shape[0], dtype=np.int64)
        uniforms = np.asarray(rng.random(drafts.shape[0]), dtype=np.float64)
        rows, where = np.unique(drafts, axis=0, return_inverse=True)
        for i, omega in enumerate(rows):
            mine = np.flatnonzero(where.reshape(-1) == i)
            row = int(mine[0])
            law = np.clip(self.conditional(p[row], q[row], omega), 0.0, None)
            cdf = np.cumsum(law / law.sum())
            out[mine] = np.minimum(np.searchsorted(cdf, uniforms[mine], "right"), p.shape[1] - 1)
        return out


@dataclass(frozen=True)
class TreeAdapter:
    """``sampler(tokens, parents, p, q, rng) -> (nodes, bonus)`` by
    :func:`otlp.decoding.verify_tree`."""

    method: str
    scheme: str = "iid"
    options: dict[str, Any] = field(default_factory=dict)
    protocol: str = "tree"

    @property
    def name(self) -> str:
        """The name a verdict shows."""
        return f"otlp.decoding.verify_tree[{self.method}, {self.scheme}]"

    def __call__(
        self, tokens: np.ndarray, parents: np.ndarray, p: np.ndarray, q: np.ndarray, rng: Any
    ) -> tuple[list[int], int]:
        from otlp.decoding import outcome_law, verify_tree

        common = {"method": self.method, "scheme": self.scheme, **self.options}
        if isinstance(rng, np.random.Generator):
            out = verify_tree(tokens[None, :], parents, p[None], q[None], rng=rng, **common)
            count = int(out.num_accepted[0])
            return [int(v) for v in out.path_nodes[0, :count]], int(out.bonus_token[0])
        if self.method == "global_resolution":
            raise NotEnumerable("global_resolution is not an exact rule")
        law = outcome_law(tokens, parents, p, q, **common)
        emitted = list(law)
        weights = np.clip(np.array([law[e] for e in emitted]), 0.0, None)
        seq = emitted[int(rng.choice(len(emitted), p=weights / weights.sum()))]
        return tree_path(tokens, parents, seq[:-1]), int(seq[-1])


def tree_path(tokens: np.ndarray, parents: np.ndarray, accepted: Sequence[int]) -> list[int]:
    """A root-to-node path of the tree whose tokens are ``accepted`` (depth-first, lowest node
    ids first; i.i.d. drafting merges equal siblings, so the path may pass any of them)."""

    def walk(node: int, depth: int) -> list[int] | None:
        if depth == len(accepted):
            return []
        for child in np.flatnonzero((parents == node) & (tokens == accepted[depth])):
            rest = walk(int(child), depth + 1)
            if rest is not None:
                return [int(child), *rest]
        return None

    path = walk(-1, 0)
    if path is None:
        raise ValueError(f"accepted: no tree path carries the tokens {list(accepted)}")
    return path


def position(method: str, scheme: str = "iid", **options: Any) -> PositionAdapter:
    """:func:`otlp.verify_drafts` with ``method`` and ``scheme`` as a position sampler."""
    return PositionAdapter(method, scheme, options)


def rule(method: str, scheme: str = "iid") -> RuleAdapter:
    """otlp's exact conditional of ``method`` (:data:`_EXACT_POSITION`) as a fast batched
    position sampler (:class:`RuleAdapter`; rows must share p and q)."""
    return RuleAdapter(method, scheme)


def tree(method: str, scheme: str = "iid", **options: Any) -> TreeAdapter:
    """:func:`otlp.decoding.verify_tree` with ``method`` and ``scheme`` as a tree sampler."""
    return TreeAdapter(method, scheme, options)
