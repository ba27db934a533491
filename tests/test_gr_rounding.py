"""Global resolution's certificate covers the floating-point error of its series.

For i.i.d. drafts the receipts come from power series that alternate in sign; with n q >> pi
(n = 30 draws of a token of draft probability near 1) their terms exceed the receipts by up
to n! (q / pi)^n and cancel to garbage. Fuzz seed 14 found two such plans (n = 30 on V = 2
and 3) whose certified deviation was 0.0045 while the materialised target marginal was off
by 1.65 in L1. The certificate now adds the rounding estimate of
:func:`otlp.solvers.global_resolution.softmax_system.rounding_error`, so such a unit falls back
to its exact network instead of reporting a wrong plan as certified.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from otlp import verify_drafts
from otlp.api import solve
from otlp.fuzz.cases import REPRODUCERS
from otlp.instance import Instance
from otlp.solvers.global_resolution import GroupedObjective
from otlp.solvers.global_resolution.newton import UNRESOLVED, newton_kernel
from otlp.solvers.global_resolution.softmax_system import SoftmaxSystem, evaluate
from otlp.subset import optimal_acceptance

CASES = [
    (np.array([1.0]), 0.0),
    (np.array([0.5, 0.5]), 0.0),
    (np.array([0.25, 0.74]), 0.01),
    (np.array([0.9, 0.05, 0.05]), 0.0),
]


@pytest.mark.parametrize("n", [5, 10, 20, 25, 30, 35, 40])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("alpha", [-2.0, 0.0, 2.0, 4.77])
def test_error_bound_covers_enumeration(n: int, case: int, alpha: float) -> None:
    q, base = CASES[case]
    system = SoftmaxSystem(q, 0.5 * q, base, 1.0, n)
    ev = evaluate(system, np.full(q.size, alpha))
    exact = GroupedObjective(system).receipts(np.full(q.size, alpha))  # Σ over explicit sets
    error = np.abs(ev.receipts - exact).sum()
    assert error <= ev.quad_error, (error, ev.quad_error)


def test_rounding_estimate_stays_small_without_cancellation() -> None:
    """Many small q (an LLM's tail): the estimate adds nothing a budget would notice."""
    q = np.full(50, 0.02)
    ev = evaluate(SoftmaxSystem(q, 0.5 * q, 0.0, 1.0, 40), np.ones(50))
    assert ev.quad_error < 1e-7


def test_newton_stops_unresolved_instead_of_certifying_garbage() -> None:
    q, targets = np.array([1.0]), np.array([0.9916])
    _, _, _, _, deviation, status = newton_kernel(q, targets, 0.0, 1.0, 30, 5e-3, np.zeros(1), 50)
    assert status == UNRESOLVED
    assert deviation > 5e-3


# fuzz seed 14's two i.i.d. n = 30 cases (the other huge-n reproducers test partial resolution)
FOUND = [case for case in REPRODUCERS if case.get("shape") == "huge_n" and case["n"] == 30]


@pytest.mark.parametrize("case", FOUND, ids=["V2-q_peaked", "V3-tiny"])
@pytest.mark.parametrize("tau", [1e-3, 1e-6])
def test_fuzz_seed14_plans_verify(case: dict, tau: float) -> None:
    inst = Instance(np.array(case["p"]), np.array(case["q"]), case["n"], "iid")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a VerificationWarning fails the test
        result = solve(inst, method="global_resolution", tau=tau)
    assert result.status == "verified"
    alpha_star = optimal_acceptance(inst).alpha_star
    assert abs(result.acceptance - alpha_star) <= 10 * tau


def test_fuzz_seed14_decoder_law_on_the_likely_draft() -> None:
    """verify_drafts on V = 2, n = 30: the draft is all 1s with probability 1 - 1.5e-16, so
    the output must follow p itself (token 0 with probability 0.0084)."""
    case = FOUND[0]
    p, q = np.array(case["p"]), np.array(case["q"])
    rows = 4000
    out = verify_drafts(
        p, q, np.ones((rows, 30), dtype=np.int64), tau=1e-3, rng=7, method="global_resolution"
    )
    share = float(np.mean(np.asarray(out.tokens) == 0))
    assert abs(share - p[0]) < 5.0 * np.sqrt(p[0] / rows), share
