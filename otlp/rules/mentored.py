"""Mentored decoding ([Mentored]): lossy single-draft verification that maximises acceptance
under a KL budget. [Mentored] names the draft p and the target q; here p = target, q = draft.

Draft x ~ q; accept with probability r_x, else draw from s. The output law is
pi = q r + s (1 - R) with acceptance R = sum_x q_x r_x, and the budget is KL(p || pi) <= D.
With rho_x = p_x / q_x (target over draft) the optimum ([Mentored], end of §4) is, for a
parameter alpha in ]0, 1] and the beta >= 1 it determines:

* rho_x <= alpha:          r_x = rho_x / alpha, s_x = 0,                   pi_x = p_x / alpha
* alpha < rho_x < beta:    r_x = 1,            s_x = 0,                    pi_x = q_x
* rho_x >= beta:           r_x = 1,            s_x = (p_x / beta - q_x) / (1 - R), pi_x = p_x/beta

where 1 - R = sum relu(q - p / alpha) = sum relu(p / beta - q) (Eqs. 24, 28). KL(p || pi) and R
both decrease in alpha (alpha = 1 is speculative sampling, KL 0), so Algorithm 1 finds the
alpha whose KL meets the budget by binary search; the constraint is then saturated (Eq. 7).
When KL(p || q) <= D every draft is accepted. The target mass outside the draft vocabulary
has rho = inf: it is only reachable through s, spread in proportion to p.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from otlp.instance import Instance
from otlp.rules.base import DraftThenVerify, draft_ext
from otlp.rules.single import kernel_rows, kernel_verify
from otlp.solvers.arrays import FloatArray, IntArray

BISECTION_STEPS = 200
DEFAULT_KL_BUDGET = 0.05


@dataclass(frozen=True)
class MentoredSolution:
    """One point of the acceptance-KL frontier (all laws over the extended vocabulary)."""

    alpha: float
    beta: float
    accept: FloatArray  # r
    select: FloatArray  # s
    acceptance: float  # R
    kl: float  # KL(p || pi)
    output: FloatArray  # pi


@dataclass(frozen=True)
class MentoredFrontier:
    """Acceptance against KL(p || pi) along the optimal family, by increasing KL."""

    alpha: FloatArray
    acceptance: FloatArray
    kl: FloatArray


def kl_divergence(p: FloatArray, pi: FloatArray) -> float:
    """KL(p || pi) = sum_{p > 0} p ln(p / pi) (inf if pi = 0 where p > 0)."""
    support = p > 0
    if np.any(pi[support] <= 0):
        return float("inf")
    # log p - log pi, not log(p / pi): the ratio overflows when pi is subnormal.
    return max(0.0, float(np.sum(p[support] * (np.log(p[support]) - np.log(pi[support])))))


def mentored_solution(p: FloatArray, q: FloatArray, alpha: float) -> MentoredSolution:
    """The [Mentored] solution at ``alpha`` in ]0, 1] for target p and draft q."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # subnormal q, alpha
        rho = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.inf)
        accept = np.where(q > 0, np.minimum(rho / alpha, 1.0), 0.0)
        rejected = float(np.maximum(q - p / alpha, 0.0).sum())  # 1 - R, Eq. (24)
    if alpha == 1.0:
        # 1 - R is then TV(p, q), also sum relu(p - q): that side keeps target mass the draft
        # misses by less than an ulp of q (e.g. a 1e-301 outside row), which q - p loses.
        rejected = max(rejected, float(np.maximum(p - q, 0.0).sum()))
    beta = _beta_for(p, q, rho, rejected)
    select = np.maximum(p / beta - q, 0.0)  # Eq. (26), up to the factor 1 / rejected
    if not select.sum() > 0:
        # Nothing is rejected, or only rounding is (p and q equal up to the last bit).
        select = p.copy()
    select /= select.sum()
    output = q * accept + rejected * select
    return MentoredSolution(
        alpha, beta, accept, select, 1.0 - rejected, kl_divergence(p, output), output
    )


def _beta_for(p: FloatArray, q: FloatArray, rho: FloatArray, rejected: float) -> float:
    """The beta >= 1 with g(beta) = sum relu(p / beta - q) = ``rejected`` (Eq. 28), exactly.

    Sort tokens by decreasing rho and let S_m be the first m. g is continuous, decreasing and
    linear in 1 / beta between breakpoints: g(rho_(j)) = p(S_j) / rho_(j) - q(S_j). Where
    exactly S_m has rho >= beta, beta = p(S_m) / (rejected + q(S_m)) ([Mentored] Algorithm 1).
    """
    if rejected <= 0:
        return 1.0
    order = np.argsort(-rho, kind="stable")
    cp, cq = np.cumsum(p[order]), np.cumsum(q[order])
    sorted_rho = rho[order]
    finite = np.isfinite(sorted_rho)
    with np.errstate(divide="ignore", over="ignore"):  # rho = 0 (p = 0): g(0) = inf
        at_breakpoints = np.where(finite, cp / np.where(finite, sorted_rho, 1.0), 0.0) - cq
    m = max(int(np.count_nonzero(at_breakpoints <= rejected)), 1)
    return float(cp[m - 1] / (rejected + cq[m - 1]))


def solve_budget(p: FloatArray, q: FloatArray, kl_budget: float) -> MentoredSolution:
    """Algorithm 1 of [Mentored]: binary search on alpha for KL(p || pi) = ``kl_budget``.

    Returns the feasible end of the final bracket (KL <= budget, saturated to rounding).
    """
    if not kl_budget >= 0:
        raise ValueError(f"kl_budget: must be a nonnegative number, got {kl_budget!r}")
    if kl_divergence(p, q) <= kl_budget:  # accept every draft
        ones = np.ones_like(p)
        return MentoredSolution(0.0, np.inf, ones, p.copy(), 1.0, kl_divergence(p, q), q.copy())
    lo, hi = 0.0, 1.0
    best = mentored_solution(p, q, hi)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        trial = mentored_solution(p, q, mid)
        if trial.kl > kl_budget:
            lo = mid
        else:
            hi, best = mid, trial
    return best


class MentoredDecoding(DraftThenVerify):
    name = "mentored"
    lossless = False
    description = (
        "mentored decoding: lossy, the acceptance-maximising (r, s) under KL(p || output) <= D "
        "by binary search on alpha ([Mentored])"
    )
    joint_kind = "single"

    def __init__(self, kl_budget: float = DEFAULT_KL_BUDGET) -> None:
        super().__init__()
        if not (isinstance(kl_budget, (int, float)) and kl_budget >= 0):
            raise ValueError(f"kl_budget: must be a nonnegative number, got {kl_budget!r}")
        self.kl_budget = float(kl_budget)

    def __repr__(self) -> str:
        return f"<rule {self.name} (KL budget {self.kl_budget:g}): {self.description}>"

    def solution(self, inst: Instance, kl_budget: float | None = None) -> MentoredSolution:
        """The optimal (r, s), acceptance and KL for the budget (default: the rule's)."""
        if kl_budget is not None:
            return solve_budget(inst.target_rows, draft_ext(inst.q_local), kl_budget)
        return self._memo(inst, "solution", lambda: self.solution(inst, self.kl_budget))

    def frontier(
        self, inst: Instance, budgets: ArrayLike | None = None, num: int = 33
    ) -> MentoredFrontier:
        """The acceptance-KL frontier: the optimum at each KL budget in ``budgets``, or (by
        default) ``num`` points of the exact alpha family from 1 down to min rho, leaving out
        points of infinite KL (all drafts accepted while the draft misses target mass), in
        increasing KL. Points another point dominates (no more acceptance for at least as
        much KL) are left out: with p = q up to rounding every KL is rounding noise (1e-16)
        and acceptances differ by 1e-9 in no order (fuzz seed 45, case 47456)."""
        p, q = inst.target_rows, draft_ext(inst.q_local)
        if budgets is not None:
            points = [solve_budget(p, q, float(b)) for b in np.atleast_1d(budgets)]
        else:
            with np.errstate(over="ignore"):  # subnormal q: rho = inf is never the minimum
                rho = p[q > 0] / q[q > 0]
            smallest = float(rho[rho > 0].min()) if np.any(rho > 0) else 1.0
            alphas = np.geomspace(1.0, min(smallest, 1.0), num)
            points = [mentored_solution(p, q, float(a)) for a in alphas]
            points = [s for s in points if np.isfinite(s.kl)]
        points.sort(key=lambda s: (s.kl, -s.acceptance))
        kept: list[MentoredSolution] = []
        for point in points:
            if not kept or point.acceptance > kept[-1].acceptance:
                kept.append(point)
        points = kept
        return MentoredFrontier(
            np.array([s.alpha for s in points]),
            np.array([s.acceptance for s in points]),
            np.array([s.kl for s in points]),
        )

    def acceptance(self, inst: Instance) -> float:
        return self.solution(inst).acceptance

    def local_output(self, inst: Instance) -> FloatArray:
        return self.solution(inst).output

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        sol = self.solution(inst)
        return kernel_rows(sol.accept, sol.select, members[:, 0])

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        sol = self.solution(inst)
        return kernel_verify(sol.accept, sol.select, drafts[:, 0], rng)
