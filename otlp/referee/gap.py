"""How far from optimal: a sampler's acceptance beside the optimum on fixed cases.

* Position protocol: P(output ∈ drafts) beside α* of the scheme ([GR] §4,
  :func:`otlp.optimal_acceptance`; otlp's exact OT rule ``maxflow_cs`` attains it).
* Tree protocol: block efficiency E[accepted + 1] beside otlp's node-by-node recursive
  rejection (``rrs`` for i.i.d. siblings, ``rrs_without_replacement`` without replacement,
  :func:`otlp.decoding.verify_tree`) on the same drafted trees.

On the synthetic cases both are exact (enumeration, :mod:`otlp.referee.observe`). On the
SmolLM2-135M states (V = 1001) they are Monte Carlo means over ``draws`` drafts per state,
with their standard errors; a tree there is one level deep (the root's children), every
context carrying the state's (p, q).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from otlp.referee import observe
from otlp.referee.cases import Case, PositionCase, TreeCase
from otlp.referee.generate import TREE_SHAPES, smollm2_cases


@dataclass(frozen=True)
class Gap:
    """Mean acceptance (block efficiency) of the sampler and of the reference over ``cases``;
    ``stderr`` is the Monte Carlo standard error of the sampler's mean over the states from
    the per-state sampling variances (0 when exact)."""

    acceptance: float
    reference: float
    cases: int
    stderr: float = 0.0

    @property
    def ratio(self) -> float:
        return self.acceptance / self.reference if self.reference > 0 else math.nan


def exact_gap(sampler: observe.Sampler, cases: list[Case]) -> Gap:
    """Exact acceptance on enumerable ``cases`` beside α* (positions) or otlp's rrs (trees)."""
    from otlp.referee.judge import tree_reference

    ours, best = [], []
    for case in cases:
        ours.append(observe.exact(sampler, case).acceptance)
        best.append(case.alpha_star() if isinstance(case, PositionCase) else tree_reference(case))
    return Gap(float(np.mean(ours)), float(np.mean(best)), len(cases))


def smollm2_gap(
    sampler: observe.Sampler,
    protocol: str,
    scheme: str,
    *,
    states: int = 12,
    draws: int = 300,
    n: int = 2,
    seed: int = 0,
) -> Gap:
    """Monte Carlo acceptance on ``states`` SmolLM2 states, ``draws`` drafts each, with ``n``
    drafts (positions) or root children (trees; a chain of one node if ``n == 1``)."""
    rng = np.random.default_rng([seed, 1001])
    ours, variances, best = [], [], []
    for case in smollm2_cases(states, scheme, n=n, seed=seed):
        if protocol == "position":
            bins = np.zeros(case.vocab, dtype=np.int64)
            rate = observe.sample(sampler, case, draws, rng, bins).acceptance
            ours.append(rate)
            variances.append(rate * (1 - rate))
            best.append(case.alpha_star())
            continue
        tree = context_free_tree(case, "chain1" if n == 1 else ("root3" if n == 3 else "root2"))
        lengths = _emitted_lengths(sampler, tree, draws, rng)
        ours.append(float(lengths.mean()))
        variances.append(float(lengths.var(ddof=1)))
        best.append(float(_emitted_lengths(_reference_tree(scheme), tree, draws, rng).mean()))
    stderr = math.sqrt(sum(variances) / draws) / len(ours)  # of the mean over the states
    return Gap(float(np.mean(ours)), float(np.mean(best)), len(ours), stderr)


def context_free_tree(case: PositionCase, shape: str) -> TreeCase:
    """A one-level tree case whose every context carries the state's (p, q) (read-only
    broadcast tables, no V x V copy)."""
    parents = np.array(TREE_SHAPES[shape], dtype=np.int64)
    vocab = case.vocab
    target = (case.p[None, :], np.broadcast_to(case.p, (vocab, vocab)))
    draft = (case.q[None, :], np.broadcast_to(case.q, (vocab, vocab)))
    return TreeCase(target, draft, parents, case.scheme, case.label)


def _emitted_lengths(
    sampler: observe.Sampler, case: TreeCase, draws: int, rng: np.random.Generator
) -> np.ndarray:
    """Tokens emitted per draw (accepted + 1) on freshly drafted trees."""
    out = np.empty(draws)
    for i in range(draws):
        tokens = case.sample_tree(rng)
        p, q = case.context_laws(tokens)
        out[i] = len(observe.emitted(case, tokens, sampler(tokens, case.parents, p, q, rng)))
    return out


def _reference_tree(scheme: str) -> observe.Sampler:
    from otlp.referee import adapters

    return adapters.tree("rrs" if scheme == "iid" else "rrs_without_replacement", scheme)
