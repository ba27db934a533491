"""The last link of global resolution's fallback chain: a lossless rule of the same scheme.

A unit whose convex solve misses its budget is solved exactly by max-flow on its own
network ([GR] §5.3). Where even that network is over ``otlp.limits`` (e.g. without
replacement at n = 8 over a 857-token unit: 5.6e19 draft sets), the drafted token still
gets a verified token: the scheme's recursive rejection sampling ([SpecHub] Algorithm 1) —
``rrs`` for i.i.d. drafts and for two independent drafts (one draft row per draw),
``rrs_without_replacement`` for sampling without replacement — drawn from the rule's exact
conditional law given omega, O(n k). Its acceptance is lower than alpha*; the report says
by how much where the rule's exact acceptance is itself within the limits.

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
from numpy.typing import NDArray

from otlp.errors import ProblemTooLarge
from otlp.instance import Instance
from otlp.rules.rrs import RecursiveRejection, RecursiveRejectionWithoutReplacement

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

FALLBACK_RULES = {
    "iid": RecursiveRejection,
    "independent": RecursiveRejection,
    "without_replacement": RecursiveRejectionWithoutReplacement,
}


@dataclass(frozen=True)
class RuleToken:
    """pi(. | omega) of the fallback rule over the draft vocabulary plus the outside row,
    the rule's name, and alpha* minus its exact acceptance (None when that acceptance is
    over the limits to compute)."""

    probs: FloatArray
    rule: str
    acceptance_lost: float | None


def rule_token(inst: Instance, local: IntArray, alpha_star: float) -> RuleToken:
    """The scheme's lossless rule given the drafted local ids ``local`` (see the module)."""
    rule = FALLBACK_RULES[inst.scheme]()
    probs = rule.local_conditionals(inst, np.asarray(local, dtype=np.int64)[None, :])[0]
    try:
        lost: float | None = max(alpha_star - rule.acceptance(inst), 0.0)
    except ProblemTooLarge:
        lost = None
    return RuleToken(probs, rule.name, lost)
