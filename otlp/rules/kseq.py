"""K-SEQ (SpecTr, cited in [GR]; the formula is written out in docs/design.md).

For rho >= 1 let beta(rho) = sum_x min(q(x), p(x)/rho). Draft n tokens i.i.d. from q; accept
X_i (in order) with probability min(1, p(X_i) / (rho q(X_i))); if all are rejected, draw from
p_res = (p - c min(q, p/rho)) / (1 - beta)^n with c = (1 - (1 - beta)^n) / beta. Valid
(p_res >= 0) iff c <= rho, i.e. 1 - (1 - beta)^n <= rho beta. rho beta(rho) = sum min(rho q, p)
increases and 1 - (1 - beta)^n decreases in rho, so the valid set is [rho*, n]; rho* is found
from beta's closed form between the breakpoints p(x) / q(x) (kept on the valid side).
The procedural acceptance 1 - (1 - beta(rho*))^n is at least (1 - 1/e) alpha*.

Unlike recursive rejection sampling, the residual can return a drafted token, so
:meth:`KSeq.acceptance` (P(output in set(omega)), the OTLP objective) adds to the procedural
acceptance the chance that the residual draw lands in the rejected drafts: given that all n
were rejected the drafts are i.i.d. from u / (1 - beta) with u = q - min(q, p/rho),
independent of the residual draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otlp.instance import Instance
from otlp.rules.base import DraftThenVerify, draft_ext, ratio_accept
from otlp.rules.sequential import sequential_conditionals, sequential_verify
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.node_rules import any_accepted as compiled_any_accepted
from otlp.solvers.node_rules import kseq_beta_pass
from otlp.solvers.node_rules import kseq_rho as compiled_kseq_rho


@dataclass(frozen=True)
class KSeqParameters:
    """rho*, beta(rho*), c, the per-token acceptance and the residual p_res (extended)."""

    rho: float
    beta: float
    miss: float  # 1 - beta, summed as sum_x (q(x) - min(q(x), p(x) / rho)): no cancellation
    c: float
    accept: FloatArray
    residual: FloatArray


def kseq_beta(p: FloatArray, q: FloatArray, rho: float) -> tuple[float, float]:
    """(beta(rho), 1 - beta(rho)) with beta = sum_x min(q(x), p(x) / rho); the complement is
    summed from its own positive terms, never as ``1 - beta``."""
    beta, miss = kseq_beta_pass(p, q, float(rho))
    return float(beta), float(miss)


def any_accepted(beta: float, miss: float, n: int) -> float:
    """1 - (1 - beta)^n = 1 - miss^n without cancellation at either end."""
    return float(compiled_any_accepted(float(beta), float(miss), int(n)))


def kseq_rho(p: FloatArray, q: FloatArray, n: int) -> float:
    """The smallest valid rho in [1, n]: the root of 1 - (1 - beta)^n = rho beta, or 1
    (:func:`otlp.solvers.node_rules.kseq_rho`: a few passes over the rows, beta's closed form
    between the breakpoints p(x) / q(x))."""
    return float(compiled_kseq_rho(p, q, 1.0, 1.0, int(n))[0])


def kseq_parameters(p: FloatArray, q: FloatArray, n: int) -> KSeqParameters:
    """K-SEQ at rho* for target p and draft q over the extended vocabulary."""
    rho = kseq_rho(p, q, n)
    accepted = np.minimum(q, p / rho)
    beta, miss = kseq_beta(p, q, rho)
    c = any_accepted(beta, miss, n) / beta if beta > 0 else float(n)  # limit n as beta -> 0
    left = np.maximum(p - c * accepted, 0.0)  # >= 0 up to rounding on the valid side
    total = left.sum()
    resid = left / total if total > 0 else p.copy()
    return KSeqParameters(rho, beta, miss, c, ratio_accept(p / rho, q), resid)


class KSeq(DraftThenVerify):
    name = "kseq"
    description = (
        "K-SEQ from SpecTr with the best rho* (cited in [GR]; docs/design.md); n i.i.d. "
        "drafts, >= (1 - 1/e) alpha*"
    )
    joint_kind = "iid"

    def parameters(self, inst: Instance) -> KSeqParameters:
        """rho*, beta(rho*), c and the residual for ``inst`` (first draft row)."""
        self.draft_joint(inst)
        return self._memo(
            inst,
            "parameters",
            lambda: kseq_parameters(inst.target_rows, draft_ext(inst.q_local), inst.n),
        )

    def procedural_acceptance(self, inst: Instance) -> float:
        """P(some draft passes its test) = 1 - (1 - beta(rho*))^n (SpecTr's acceptance)."""
        par = self.parameters(inst)
        return any_accepted(par.beta, par.miss, inst.n)

    def acceptance(self, inst: Instance) -> float:
        par = self.parameters(inst)
        n, miss = inst.n, par.miss
        if miss <= 0:
            return 1.0
        q = draft_ext(inst.q_local)
        rejected = (q - np.minimum(q, inst.target_rows / par.rho)) / miss
        with np.errstate(divide="ignore"):  # log1p(-1) = -inf: that token is surely drafted
            lucky = float(par.residual @ -np.expm1(n * np.log1p(-np.minimum(rejected, 1.0))))
        return any_accepted(par.beta, miss, n) + miss**n * lucky

    def local_output(self, inst: Instance) -> FloatArray:
        par = self.parameters(inst)
        q = draft_ext(inst.q_local)
        return par.c * q * par.accept + par.miss**inst.n * par.residual

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        par = self.parameters(inst)
        return sequential_conditionals(members, par.accept[members], par.residual)

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        par = self.parameters(inst)
        return sequential_verify(drafts, par.accept[drafts], par.residual, rng)
