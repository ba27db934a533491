"""The last link of global resolution's fallback chain: a lossless rule of the same scheme.

A unit whose convex solve misses its budget is solved exactly by max-flow on its own
network ([GR] §5.3). Where even that network is over ``otlp.limits`` (e.g. without
replacement at n = 8 over a 857-token unit: 5.6e19 draft sets), or where a stage (H* and the
outer targets, Newton, the exact max-flow) cannot fit what is left of the call's time budget
(:mod:`otlp.solvers.global_resolution.budget`), the drafted token still gets a verified token:
the scheme's recursive rejection sampling ([SpecHub] Algorithm 1) — ``rrs`` for i.i.d.
drafts and for two independent drafts (one draft row per draw: draft d is accepted with
probability min(1, p_d(x) / q_d(x)) against the running residual p_d, which keeps the output
law p for any sequence of draft rows), ``rrs_without_replacement`` for sampling without
replacement — drawn from the rule's exact conditional law given omega, O(n k). Its
acceptance is lower than alpha*; the report says by how much where alpha* and the rule's
exact acceptance are within the limits and fit the time left.

What this keeps and what it gives up: each such token is a correct draw of a lossless rule
given its drafts, so no row is ever left without a token, but a (p, q) whose tokens take
this path for some draft tuples and the global-resolution plan for others mixes the two
rules' conditionals, so its output law is p only up to the draft mass of the tuples served
by the rule (at most twice that mass in L1). Every such token is reported
(``fallback_rule``); raising the limits (:func:`otlp.limits.configure`) or the time budget
restores the exact chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otlp.errors import ProblemTooLarge
from otlp.instance import Instance
from otlp.rules.rrs import RecursiveRejection, RecursiveRejectionWithoutReplacement
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.budget import (
    NO_DEADLINE,
    SECONDS_PER_ELEMENT,
    Deadline,
    OutOfTime,
    require,
    setup_seconds,
)
from otlp.subset import prefix_selection

FALLBACK_RULES = {
    "iid": RecursiveRejection,
    "independent": RecursiveRejection,
    "without_replacement": RecursiveRejectionWithoutReplacement,
}


@dataclass(frozen=True)
class RuleToken:
    """pi(. | omega) of the fallback rule over the draft vocabulary plus the outside row,
    the rule's name, and alpha* minus its exact acceptance (None when that acceptance is
    over the limits to compute or did not fit the time left)."""

    probs: FloatArray
    rule: str
    acceptance_lost: float | None


PREFIX_TREE_PASSES = 10  # array passes per node of the rejected-prefix tree (63-80 ms at
# k = 1,000, n = 2: 1e6 entries)
RULE_PASSES = 2  # a decoder row's rule token: its Instance (0.3 ms per draft row at V = 32,000)
# and the rule's O(n k) conditional (0.15 ms at k = 1,000), per vocabulary entry and draft row


def acceptance_seconds(inst: Instance) -> float:
    """Estimated seconds of the fallback rule's exact acceptance: O(n k) with replacement,
    a tree of rejected prefixes (up to k^l nodes of k + 1 entries at level l) without."""
    k, n = inst.k, inst.n
    if inst.scheme != "without_replacement":
        return SECONDS_PER_ELEMENT * 10 * n * (k + 1)
    nodes = sum(float(k) ** level for level in range(n))
    return SECONDS_PER_ELEMENT * PREFIX_TREE_PASSES * (k + 1) * nodes


def rule_seconds(vocab: int, draft_rows: int) -> float:
    """Estimated seconds of a decoder row's rule token over a vocabulary of ``vocab`` with
    ``draft_rows`` draft distributions: what a call keeps in reserve, so that a row sent to
    the rule when the other stages are out of time still ends within the budget."""
    return SECONDS_PER_ELEMENT * RULE_PASSES * vocab * draft_rows


def rule_token(
    inst: Instance,
    local: IntArray,
    alpha_star: float | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> RuleToken:
    """The scheme's lossless rule given the drafted local ids ``local`` (see the module).

    The acceptance lost needs alpha* (when None, computed here by the prefix rule for
    exchangeable drafts; two independent drafts would need a min cut, so it stays unknown)
    and the rule's exact acceptance, each only where it fits before ``deadline``."""
    rule = FALLBACK_RULES[inst.scheme]()
    probs = rule.local_conditionals(inst, np.asarray(local, dtype=np.int64)[None, :])[0]
    lost: float | None = None
    try:
        if alpha_star is None and inst.scheme != "independent":
            require(deadline, setup_seconds(inst.scheme, inst.k, inst.n), "alpha*")
            alpha_star = prefix_selection(inst).alpha_star
        if alpha_star is not None:
            require(deadline, acceptance_seconds(inst), "the rule's acceptance")
            lost = max(alpha_star - rule.acceptance(inst), 0.0)
    except (ProblemTooLarge, OutOfTime):
        lost = None
    return RuleToken(probs, rule.name, lost)
