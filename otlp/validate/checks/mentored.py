"""[Mentored] V. Tran-Thien, "Mentored decoding": the KL-budgeted acceptance maximiser, its
defining equations, optimality against a convex solver, and Algorithm 1's bracket updates.

Translation at the boundary: the note names the draft p and the target q; here p is the target
and q the draft, as everywhere in otlp.
"""

from __future__ import annotations

import numpy as np

import otlp
from otlp import rules
from otlp.rules.mentored import MentoredDecoding, kl_divergence, mentored_solution, solve_budget
from otlp.validate.registry import Case, Outcome, check


def _budget(case: Case, max_vocab: int = 8) -> tuple[np.ndarray, np.ndarray, float]:
    p, q = case.pair(max_vocab, degenerate=False)
    budget = float(case.rng.uniform(0.001, 0.9)) * kl_divergence(p, q)
    case.record(kl_budget=budget)
    return p, q, budget


@check(
    "mentored.kl_saturated",
    "Mentored",
    "§3 (constraint saturation)",
    "below full acceptance the solution saturates the KL budget: KL(p || output) = D, with "
    "0 <= r <= 1, s a distribution, acceptance >= speculative sampling",
)
def _saturated(case: Case) -> Outcome:
    p, q, budget = _budget(case)
    inst = otlp.Instance(p, q, 1)
    sol = MentoredDecoding(kl_budget=budget).solution(inst)
    margin = min(
        1e-9 + 1e-7 * budget - abs(sol.kl - budget),
        float(sol.accept.min()) + 1e-15,
        1 + 1e-15 - float(sol.accept.max()),
        1e-12 - abs(float(sol.select.sum()) - 1),
        sol.acceptance - rules.get("sps").acceptance(inst) + 1e-12,
    )
    return Outcome(margin, {"kl": sol.kl, "budget": budget})


@check(
    "mentored.eq24_eq28",
    "Mentored",
    "Eqs. 24, 26, 28",
    "1 - R = sum relu(q - p / alpha) = sum relu(p / beta - q) with beta >= 1; output sums to 1",
)
def _equations(case: Case) -> Outcome:
    p, q = case.pair(8)
    alpha = float(case.rng.uniform(0.05, 1.0))
    sol = mentored_solution(p, q, alpha)
    rejected = 1 - sol.acceptance
    errs = [abs(rejected - np.maximum(q - p / alpha, 0).sum()), abs(sol.output.sum() - 1)]
    if rejected > 1e-12:
        errs += [abs(rejected - np.maximum(p / sol.beta - q, 0).sum()), max(0.0, 1 - sol.beta)]
    return Outcome(1e-9 - max(errs))


@check(
    "mentored.optimal_vs_convex_solver",
    "Mentored",
    "Eq. 1 (optimality)",
    "no (r, s) with KL(p || q r + s (1 - R)) <= D accepts more: the exact convex program "
    "(x = q r, y = s (1 - R); CLARABEL via cvxpy) agrees to 1e-6",
    cost=0.25,
)
def _optimal(case: Case) -> Outcome:
    import cvxpy as cp

    p, q, budget = _budget(case, 6)
    ours = solve_budget(p, q, budget)
    x, y = cp.Variable(p.shape[0]), cp.Variable(p.shape[0])
    kl = cp.sum(cp.rel_entr(p, x + y))
    problem = cp.Problem(
        cp.Maximize(cp.sum(x)), [kl <= budget, x >= 0, x <= q, y >= 0, cp.sum(x + y) == 1]
    )
    problem.solve(solver="CLARABEL")
    reference = float(problem.value)
    return Outcome(
        min(ours.acceptance - reference + 1e-6, budget * (1 + 1e-7) + 1e-12 - ours.kl),
        {"ours": ours.acceptance, "convex": reference},
    )


@check(
    "mentored.frontier_monotone",
    "Mentored",
    "§5 (alpha family)",
    "acceptance and KL both decrease along alpha in ]0, 1]; alpha = 1 is speculative sampling",
)
def _frontier(case: Case) -> Outcome:
    p, q = case.pair(7)
    inst = otlp.Instance(p, q, 1)
    family = MentoredDecoding().frontier(inst)
    margin = min(
        float(np.diff(family.kl).min(initial=0)) + 1e-12,
        float(np.diff(family.acceptance).min(initial=0)) + 1e-12,
        1e-12 - abs(family.kl[0]),
        1e-9 - abs(family.acceptance[0] - rules.get("sps").acceptance(inst)),
    )
    return Outcome(margin)


def _algorithm_1(p, q, budget, literal: bool, tolerance: float = 0.01, cap: int = 200) -> int:
    """Seed note's Algorithm 1 bracket search; returns iterations used (cap + 1: no stop)."""
    lo, alpha, hi = 0.0, 0.5, 1.0
    for step in range(1, cap + 1):
        kl = mentored_solution(p, q, alpha).kl
        if kl < (1 - tolerance) * budget:  # too little divergence: accept more (smaller alpha)
            if literal:  # "alpha <- (alpha_min + alpha) / 2; alpha_max <- alpha" as printed
                alpha = (lo + alpha) / 2
                hi = alpha
            else:
                hi, alpha = alpha, (lo + alpha) / 2
        elif kl > (1 + tolerance) * budget:
            if literal:
                alpha = (alpha + hi) / 2
                lo = alpha
            else:
                lo, alpha = alpha, (alpha + hi) / 2
        else:
            return step
    return cap + 1


def _terminates(case: Case, literal: bool) -> Outcome:
    p, q, budget = _budget(case)
    steps = _algorithm_1(p, q, budget, literal)
    return Outcome(float(200 - steps), {"iterations": float(steps)})


@check(
    "mentored.alg1.terminates.printed",
    "Mentored",
    "Algorithm 1 (as printed)",
    "the bisection as printed (alpha updated before the bracket end) stops within 200 "
    "iterations at KL within (1 +- 1%) D",
    expect_fail=True,
)
def _alg1_printed(case: Case) -> Outcome:
    return _terminates(case, literal=True)


@check(
    "mentored.alg1.terminates.corrected",
    "Mentored",
    "Algorithm 1 (corrected)",
    "with the bracket end set from the old alpha, the bisection stops within 200 iterations",
)
def _alg1_fixed(case: Case) -> Outcome:
    return _terminates(case, literal=False)
