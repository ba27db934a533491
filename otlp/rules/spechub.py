"""SpecHub for two drafts ([SpecHub] §4 and Appendix C).

Hub joint: with a = argmax q, Q(x, a) = q(x) and Q(a, x) = q(a) q(x) / (1 - q(a)) for x != a
(every pair contains a). Sequential rule (Algorithm 3, with GetResidual of Algorithm 2):

1. pair (x, a): accept x with probability min(1, p(x) / q(x)); p'(x) = max(p(x) - q(x), 0),
   leftover Q'(x, a) = max(q(x) - p(x), 0).
2. pair (a, x): accept x with probability min(1, p'(x) / Q(a, x)); p''(x) = max(p'(x) -
   Q(a, x), 0), leftover Q'(a, x) = max(Q(a, x) - p'(x), 0).
3. pair (a, x), x rejected: accept a with probability min(1, p(a) / sum_x Q'(a, x));
   p'(a) = max(p(a) - sum_x Q'(a, x), 0).
4. pair (x, a), x rejected: accept a with probability min(1, p'(a) / sum_x Q'(x, a));
   p''(a) = max(p'(a) - sum_x Q'(x, a), 0).
5. otherwise draw from norm(p'').

Acceptance sum_{x != a} min(p(x), q(x) + Q(a, x)) + min(p(a), sum Q'(a, .) + sum Q'(., a)),
and the second term is p(a) (Corollary 1). Every token's acceptance meets the bound
min(p(y), P(y drafted)), so this is the optimum of SpecHub's LP over its own joint (Theorem 1
makes that LP optimum alpha* of the hub joint).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otlp.instance import Instance
from otlp.rules.base import DraftThenVerify, draft_ext, ratio_accept, residual
from otlp.rules.joints import hub_lp_optimum
from otlp.rules.sequential import sequential_conditionals, sequential_verify
from otlp.solvers.arrays import FloatArray, IntArray


@dataclass(frozen=True)
class HubVerification:
    """Per-token acceptance in (x, a) and (a, x) pairs, the hub's two acceptance probabilities
    and the final residual (all over the extended vocabulary)."""

    hub: int
    first: FloatArray  # accept x in (x, a)
    second: FloatArray  # accept x in (a, x)
    hub_after_second: float  # accept a in (a, x) once x is rejected
    hub_after_first: float  # accept a in (x, a) once x is rejected
    accepted: FloatArray  # P(output = y and y drafted), per token
    final: FloatArray


def hub_verification(p: FloatArray, q: FloatArray, hub: int) -> HubVerification:
    """Algorithm 3 of [SpecHub] turned into per-token probabilities."""
    others = np.ones(p.shape[0], dtype=bool)
    others[hub] = False
    rest = float(q[others].sum())  # 1 - q(a), summed: 1 - q(a) cancels when q(a) is near 1
    if not rest > 0:  # one-hot draft: the only pair is (a, a); speculative sampling on it
        first = ratio_accept(p, q)
        accepted = np.zeros_like(p)
        accepted[hub] = min(p[hub], q[hub])
        final = residual(p, q, fallback=_normalized(p))
        return HubVerification(hub, first, first, 0.0, 0.0, accepted, final)
    q_xa = np.where(others, q, 0.0)  # Q(x, a)
    q_ax = np.where(others, q[hub] * (q / rest), 0.0)  # Q(a, x)
    first = ratio_accept(p, q_xa)
    p1 = np.where(others, np.maximum(p - q_xa, 0.0), p)
    left_xa = np.maximum(q_xa - p, 0.0) * others  # Q'(x, a)
    second = ratio_accept(p1, q_ax)
    p2 = np.where(others, np.maximum(p1 - q_ax, 0.0), p)
    left_ax = np.maximum(q_ax - p1, 0.0) * others  # Q'(a, x)
    hub_p = p[hub]
    after_second = _hub_accept(hub_p, left_ax.sum())
    hub_p1 = max(hub_p - left_ax.sum(), 0.0)
    after_first = _hub_accept(hub_p1, left_xa.sum())
    p2[hub] = max(hub_p1 - left_xa.sum(), 0.0)
    accepted = np.minimum(p, q_xa + q_ax) * others
    accepted[hub] = min(hub_p, left_ax.sum() + left_xa.sum())
    return HubVerification(
        hub,
        first,
        second,
        after_second,
        after_first,
        accepted,
        residual(p2, 0 * p2, _normalized(p)),
    )


def _normalized(p: FloatArray) -> FloatArray:
    """p as a distribution: the residual draw when rounding alone leads to it."""
    return p / p.sum()


def _hub_accept(mass: float, leftover: float) -> float:
    return min(1.0, mass / leftover) if leftover > 0 else 1.0


def hub_candidates(
    ver: HubVerification, drafts: IntArray
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Algorithm 3's order on rows of drafted pairs: the non-hub draft first, then the hub;
    (candidates (m, 2), their acceptance probabilities (m, 2), final residual), the input of
    :func:`otlp.rules.sequential.sequential_conditionals`."""
    hub_second = drafts[:, 1] == ver.hub  # pair (x, a)
    other = np.where(hub_second, drafts[:, 0], drafts[:, 1])
    candidates = np.column_stack([other, np.full_like(other, ver.hub)])
    accept = np.column_stack(
        [
            np.where(hub_second, ver.first[other], ver.second[other]),
            np.where(hub_second, ver.hub_after_first, ver.hub_after_second),
        ]
    )
    return candidates, accept, ver.final


class SpecHub(DraftThenVerify):
    name = "spechub"
    description = (
        "SpecHub, n = 2: hub draft joint around a = argmax q and its sequential rule "
        "([SpecHub] §4, App. C); optimal for its own joint (Theorem 1)"
    )
    joint_kind = "hub"

    def verification(self, inst: Instance) -> HubVerification:
        """The rule's per-token probabilities on ``inst`` (hub joint from the first row)."""
        hub = self.draft_joint(inst).hub
        return hub_verification(inst.target_rows, draft_ext(inst.q_local), hub)

    def lp_optimum(self, inst: Instance, backend: str = "highs") -> float:
        """Optimum of SpecHub's LP ([SpecHub] §3.2, ``otlp.builders.spechub_lp``) over the
        hub joint, solved by ``backend``."""
        return hub_lp_optimum(inst, self.draft_joint(inst), backend)

    def acceptance(self, inst: Instance) -> float:
        return float(self.verification(inst).accepted.sum())

    def _candidates(
        self, inst: Instance, drafts: IntArray
    ) -> tuple[IntArray, FloatArray, FloatArray]:
        """Verification order per pair: the non-hub draft first, then the hub."""
        return hub_candidates(self.verification(inst), drafts)

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        return sequential_conditionals(*self._candidates(inst, members))

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        return sequential_verify(*self._candidates(inst, drafts), rng)
