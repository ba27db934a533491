"""Every exact method agrees with every other and with alpha*, and every plan verifies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import otlp
from otlp.api import VerificationError
from tests.strategies import instances

EXACT_METHODS = ("highs", "maxflow", "maxflow_cs", "networkx", "pot", "highs_full", "cvxpy")


@settings(max_examples=120, deadline=None)
@given(instances())
def test_all_methods_reach_alpha_star_and_verify(inst: otlp.Instance) -> None:
    alpha = otlp.optimal_acceptance(inst, "brute").alpha_star
    for method in EXACT_METHODS:
        if method == "cvxpy" and inst.k > 4:
            continue  # interior point through a modelling layer: slow; covered on small k
        plan = otlp.solve(inst, method)
        report = plan.info["verification"]
        tol = 1e-6 if method == "cvxpy" else 1e-9
        assert report.ok, (method, report.problems)
        assert plan.acceptance == pytest.approx(alpha, abs=tol), method


@settings(max_examples=40, deadline=None)
@given(instances(max_vocab=4, max_n=3))
def test_tuple_and_set_forms_agree(inst: otlp.Instance) -> None:
    alpha = otlp.optimal_acceptance(inst).alpha_star
    for method in ("maxflow", "highs", "pot"):
        plan = otlp.solve(inst, method, form="tuples", strict=True)
        assert plan.acceptance == pytest.approx(alpha, abs=1e-9)


def test_tiny_probabilities_on_the_degenerate_full_otlp() -> None:
    """HiGHS presolve has called such degenerate transportation problems infeasible."""
    p = np.array([1e-13, 0.5 - 1e-13, 0.25, 0.25 - 2e-13, 2e-13])
    q = np.array([0.4, 1e-13, 0.3, 0.3 - 2e-13, 1e-13])
    inst = otlp.Instance(p, q, 2)
    alpha = otlp.optimal_acceptance(inst).alpha_star
    for method in ("highs_full", "highs", "pot", "maxflow"):
        plan = otlp.solve(inst, method, strict=True)
        assert plan.acceptance == pytest.approx(alpha, abs=1e-9)


def test_a_corrupted_plan_fails_verification() -> None:
    rng = np.random.default_rng(3)
    inst = otlp.Instance(rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6)), 2)
    plan = otlp.solve(inst, "maxflow")
    plan.explicit.data[0] += 0.05
    plan.__dict__.pop("acceptance", None)
    report = otlp.verify(plan)
    assert not report.ok and report.problems
    with pytest.raises(VerificationError):
        otlp.solve(inst, "maxflow", strict=True, tolerances=otlp.Tolerances(target_l1=-1.0))


def test_one_token_vocabulary() -> None:
    inst = otlp.Instance([1.0], [1.0], 3)
    for method in EXACT_METHODS:
        plan = otlp.solve(inst, method, strict=True)
        assert plan.acceptance == pytest.approx(1.0)
        assert plan.slice([0, 0, 0]).tolist() == pytest.approx([1.0])


def test_unknown_method_is_rejected() -> None:
    inst = otlp.Instance([0.5, 0.5], [0.5, 0.5], 2)
    with pytest.raises(ValueError, match="method"):
        otlp.solve(inst, "simplex-by-hand")


@settings(max_examples=30, deadline=None)
@given(instances(schemes=("iid", "independent"), max_vocab=4, max_n=3))
def test_spechub_lp_on_the_scheme_joint_reaches_alpha_star(inst: otlp.Instance) -> None:
    """[SpecHub] Theorem 1: the simplified LP has the OTLP's optimal value."""
    from otlp.builders import spechub_lp
    from otlp.solvers import get_backend

    tuples = inst.columns("tuples")
    model = spechub_lp(inst.p_local, tuples.members, tuples.mass)
    result = get_backend("highs").solve(model.lp)
    alpha = otlp.optimal_acceptance(inst, "brute").alpha_star
    assert result.objective == pytest.approx(alpha, abs=1e-9)


def test_networkx_on_a_real_instance_that_broke_float_preflow_push() -> None:
    """SmolLM2 item 592 at (k, n) = (10, 5): networkx failed on float capacities."""
    import otlp.instances

    item = otlp.instances.load("smollm2").items[592]
    inst = otlp.Instance(item.p, item.q, 5, top_k=10)
    plan = otlp.solve(inst, "networkx", strict=True)
    assert plan.acceptance == pytest.approx(otlp.optimal_acceptance(inst).alpha_star, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(instances(schemes=("iid",), max_vocab=6, max_n=3))
def test_partial_resolution_agrees_with_the_exact_methods(inst: otlp.Instance) -> None:
    """The exact per-token method (i.i.d. drafts) verifies and reaches maxflow_cs's optimum."""
    plan = otlp.solve(inst, "partial_resolution")
    assert plan.info["verification"].ok, plan.info["verification"].problems
    exact = otlp.solve(inst, "maxflow_cs").acceptance
    assert plan.acceptance == pytest.approx(exact, abs=1e-10)
