"""Single-draft speculative sampling: the optimal coupling of p and q ([Musco], "Optimal
coupling"; [GR] Appendix A; translated: p = target, q = draft).

Draft x ~ q; accept with probability min(1, p(x)/q(x)); otherwise output a token from the
residual norm(max(p - q, 0)). Acceptance sum_x min(p(x), q(x)) = 1 - TV(p, q), the largest
any coupling can reach. With n > 1 drafts only the first is verified.
"""

from __future__ import annotations

import numpy as np

from otlp.instance import Instance
from otlp.rules.base import DraftThenVerify, draft_ext, ratio_accept, residual
from otlp.solvers.arrays import FloatArray, IntArray


def speculative_kernel(p: FloatArray, q: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(accept probability min(1, p/q) per token, residual norm(max(p - q, 0)))."""
    return ratio_accept(p, q), residual(p, q)


def kernel_rows(accept: FloatArray, resid: FloatArray, drafted: IntArray) -> FloatArray:
    """Output laws of speculative sampling for each drafted token: a e_x + (1 - a) r."""
    a = accept[drafted]
    out = (1.0 - a)[:, None] * resid[None, :]
    out[np.arange(drafted.shape[0]), drafted] += a
    return out


def kernel_verify(
    accept: FloatArray, resid: FloatArray, drafted: IntArray, rng: np.random.Generator
) -> IntArray:
    """Run speculative sampling on drafted tokens: u < min(1, p/q) keeps the draft."""
    keep = rng.random(drafted.shape[0]) < accept[drafted]
    out = drafted.copy()
    out[~keep] = rng.choice(resid.shape[0], size=int((~keep).sum()), p=resid)
    return out


class SpeculativeSampling(DraftThenVerify):
    name = "sps"
    description = (
        "single-draft speculative sampling, the optimal coupling sum min(p, q) "
        "([Musco]; [GR] App. A); verifies the first draft"
    )
    joint_kind = "single"

    def _kernel(self, inst: Instance) -> tuple[FloatArray, FloatArray]:
        return speculative_kernel(inst.target_rows, draft_ext(inst.q_local))

    def acceptance(self, inst: Instance) -> float:
        return float(np.minimum(inst.p_local, inst.q_local).sum())

    def local_output(self, inst: Instance) -> FloatArray:
        accept, resid = self._kernel(inst)
        q = draft_ext(inst.q_local)
        return q * accept + (1.0 - self.acceptance(inst)) * resid

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        return kernel_rows(*self._kernel(inst), members[:, 0])

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        return kernel_verify(*self._kernel(inst), drafts[:, 0], rng)
