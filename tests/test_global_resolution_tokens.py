"""Global resolution per token: every token in bounded time, and the object API on the fused
path's compiled code (issue reproducers: peaked drafts without replacement, fallbacks that
built the whole outer network, runaway solves)."""

from __future__ import annotations

import numpy as np
import pytest

import otlp
import otlp.errors
from otlp.global_resolution import DEFAULT_TIME_BUDGET, GlobalResolutionPlan
from otlp.instances import dirichlet_pair
from otlp.instances.generators import softmax
from otlp.solvers.global_resolution import newton, token
from otlp.solvers.global_resolution.wor_system import WithoutReplacementSystem


def _peaked_without_replacement() -> otlp.Instance:
    """V = 31, q(top) = 1 - 8e-16, the other 30 draft probabilities in [1e-18, 1e-16]."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(31))
    q = np.exp(rng.uniform(np.log(1e-18), np.log(1e-16), 31))
    q[0] = 1 - 8e-16
    return otlp.Instance(p, q, 5, scheme="without_replacement", top_k=30)


def _plan(inst: otlp.Instance, **options: object) -> GlobalResolutionPlan:
    """Global resolution without a clock unless a test passes ``time_budget``: whether a unit
    falls back must depend on its iterations (bounded by ``max_iter``), never on the machine's
    speed or load."""
    options.setdefault("time_budget", None)
    plan = otlp.solve(inst, "global_resolution", check=False, **options)
    assert isinstance(plan, GlobalResolutionPlan)
    return plan


def _assert_distribution(values: np.ndarray) -> None:
    assert values.min() >= 0 and abs(values.sum() - 1) <= 1e-9


# ----- every token, in bounded time -----------------------------------------------------------
@pytest.mark.parametrize("omega", [[2, 0, 1, 3, 4], [2, 11, 18, 0, 22]])
def test_peaked_drafts_without_replacement_converge_without_fallback(omega: list[int]) -> None:
    """The inner Newton missed its budget (deviation 0.077 > 0.005 after 50 iterations) with
    the i.i.d. stand-in for its Hessian; with the exact pairwise part it converges."""
    plan = _plan(_peaked_without_replacement(), tau=1e-3)
    probs, report = plan.token_report(omega)
    assert plan.engine.time_budget is None  # a loaded machine cannot turn this into a fallback
    assert not report.fallback, report.message
    assert report.iterations <= plan.engine.max_iter and report.deviation <= 5e-3
    _assert_distribution(probs)


def test_a_unit_that_misses_its_budget_falls_back_on_its_own_network() -> None:
    """The whole system of this instance is too large to build (ProblemTooLarge): the
    fallback solves the unit omega needs over its own draft sets only, and gets its token."""
    inst = _peaked_without_replacement()
    with pytest.raises(otlp.errors.ProblemTooLarge):
        inst.columns("sets")
    plan = _plan(inst, tau=1e-3, max_iter=0)
    omega = [2, 0, 1, 3, 4]
    probs, report = plan.token_report(omega)
    assert report.fallback and report.system == "inner"
    assert "solved exactly by max-flow" in report.message
    _assert_distribution(probs)
    assert "_networks" not in vars(plan.engine)  # the whole outer/inner system was never built
    assert plan.sample(omega, rng=0) in plan.instance.tokens


@pytest.mark.parametrize("max_iter", [None, 0])
def test_fallback_slices_are_the_materialised_plan(max_iter: int | None) -> None:
    """A unit solved on its own columns is placed into the full plan at materialisation: every
    lazy slice equals the verified plan's column slice (1e-12)."""
    p, q = dirichlet_pair(7, seed=11)
    inst = otlp.Instance(p, q, 3, scheme="without_replacement")
    lazy = _plan(inst, tau=1e-4, max_iter=max_iter)
    slices = {}
    for column in inst.columns("sets").members:
        omega = inst.tokens[column[column >= 0]]
        slices[tuple(omega)] = lazy.local_slice(omega)
    assert any(r.fallback for r in lazy.token_reports) == (max_iter == 0)
    report = otlp.verify(lazy)
    assert report.ok, report.problems
    for omega, fast in slices.items():
        np.testing.assert_allclose(
            fast, lazy.column_slice(lazy.column_of(np.array(omega))), rtol=0, atol=1e-12
        )


def test_a_token_whose_stages_cannot_fit_its_budget_is_the_rules() -> None:
    """A 1 us budget fits no stage of a token's call (H* and the targets, Newton, the exact
    max-flow; issue 24: the clock starts at the call's entry): the token comes from rrs at
    once, no Newton iteration run, and the report says so. Newton alone stops at such a
    budget before its first iteration. The materialised plan (no call deadline) verifies."""
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.full(50, 0.1)), rng.dirichlet(np.full(50, 0.1))
    inst = otlp.Instance(p, q, 4)
    omega = [int(np.argmax(q))] * 4
    assert _plan(inst, tau=1e-6).token_report(omega)[1].iterations >= 2
    plan = _plan(inst, tau=1e-6, time_budget=1e-6)
    probs, report = plan.token_report(omega)
    assert report.fallback and report.fallback_rule == "rrs" and "skipped" in report.message
    assert report.time_budget == 1e-6 and report.iterations == 0
    expected = otlp.rules.get("rrs").local_conditionals(inst, inst.to_local(omega)[None, :])[0]
    np.testing.assert_array_equal(probs, expected)
    engine = plan.engine
    _, system = engine._system(engine.unit_of(inst.to_local(omega)))
    result = newton(system, 1e-6, time_budget=1e-6)
    assert result.message == "time budget exhausted" and result.iterations == 0
    assert otlp.verify(plan).ok
    default = otlp.solve(inst, "global_resolution", check=False)
    assert default.engine.time_budget == DEFAULT_TIME_BUDGET


def test_n64_on_two_tokens_falls_back_at_once() -> None:
    """n = 64 on V = 2: the series cancel (n q >> pi), so no Newton iterate can be certified;
    the unit stops before its first step and is solved exactly (it used to diverge for 50
    iterations, 2-5 s, with deviation 5.4e39)."""
    slow = otlp.Instance(
        [0.656348947218093, 0.343651052781907], [0.96393064118821, 0.03606935881179], 64
    )
    plan = _plan(slow)
    probs, report = plan.token_report([0] * 64)
    assert report.fallback and report.iterations == 0
    assert "rounding error exceeds the budget" in report.message
    _assert_distribution(probs)
    assert otlp.verify(plan).ok


def test_exact_pairwise_hessian_is_the_jacobian_of_the_receipts() -> None:
    p, q = dirichlet_pair(7, seed=5)
    inst = otlp.Instance(p, q, 3, scheme="without_replacement")
    engine = _plan(inst).engine
    tokens, system = engine._system(("inner", None))
    assert isinstance(system, WithoutReplacementSystem) and tokens.size >= 3
    alpha = np.random.default_rng(1).normal(size=system.size)
    ev = system.evaluate(alpha, hessian=True)
    assert ev.blocks is not None and ev.row_sums is not None
    pairs = ev.blocks[0]
    hessian = np.diag(ev.row_sums + pairs.sum(axis=1)) - pairs
    step, jacobian = 1e-6, np.empty((system.size, system.size))
    for j in range(system.size):
        shift = np.zeros(system.size)
        shift[j] = step
        up, down = system.evaluate(alpha + shift), system.evaluate(alpha - shift)
        jacobian[:, j] = (up.receipts - down.receipts) / (2 * step)
    np.testing.assert_allclose(hessian, jacobian, rtol=0, atol=1e-7 * np.abs(jacobian).max())


# ----- the object API on the fused path's code ------------------------------------------------
def test_object_api_fused_path_and_materialised_plan_agree_on_every_slice() -> None:
    """Three ways to pi(.|omega) for every draft set: the object API (lazy plan), the fused
    per-token kernel and the materialised plan's column (1e-12)."""
    p, q = dirichlet_pair(8, seed=3)
    inst = otlp.Instance(p, q, 3, top_k=6)
    lazy = _plan(inst, tau=1e-3)
    materialised = otlp.solve(inst, "global_resolution", tau=1e-3, strict=True)
    status, p_sum, q_sum = token.scan(p, q, 1e-6)
    assert status == token.OK
    p_local, q_local, outside = token.restrict(p, q, inst.tokens, p_sum, q_sum)
    for column in inst.columns("sets").members:
        local = column[column >= 0]
        omega = inst.tokens[np.resize(local, inst.n)]
        fused = token.token_slice(p_local, q_local, outside, inst.n, inst.to_local(omega), 1e-3, 50)
        obj = lazy.local_slice(omega)
        exact = materialised.column_slice(materialised.column_of(omega))
        np.testing.assert_allclose(obj, fused[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(obj, exact, rtol=0, atol=1e-12)


def test_object_api_solves_only_the_unit_omega_needs() -> None:
    """A peaked i.i.d. pair (V = k = 600, n = 8, q max ~0.99) with omega = n copies of the
    draft's top token: the object API solves the unit the fused path solves (same system,
    block and number of variables), and nothing else."""
    rng = np.random.default_rng(2)
    logits = rng.normal(0.0, 3.0, 600)
    p = softmax(logits / 0.1)
    q = softmax((0.8 * logits + 0.2 * rng.normal(0.0, 3.0, 600)) / 0.1)
    omega = np.full(8, int(np.argmax(q)))
    result = otlp.verify_drafts(p, q, omega[None], tau=1e-6, rng=0, method="global_resolution")
    plan = _plan(otlp.Instance(p, q, 8), tau=1e-6)
    _, report = plan.token_report(omega)
    fused = result.reports[0]
    assert (report.system, report.block, report.variables) == (
        fused.system,
        fused.block,
        fused.variables,
    )
    assert list(plan.engine.reports) == [(report.system, report.block)]


def test_tiny_tau_on_a_peaked_pair_takes_the_common_shift() -> None:
    """i.i.d., V = k = 5,000, n = 8, q max 0.99, omega = eight copies of the draft's top token,
    tau = 1e-6: the inner system has almost no slack (the residual needs ~5e-7 of mass) and
    Newton's steps along the common direction were +1 each, one iteration per factor e
    (8 iterations, 12x the time of tau = 1e-3); the common shift step needs 4."""
    rng = np.random.default_rng(2)
    logits = rng.normal(0.0, 3.0, 5000)
    p = softmax(logits / 0.1)
    q = softmax((0.8 * logits + 0.2 * rng.normal(0.0, 3.0, 5000)) / 0.1)
    omega = np.full(8, int(np.argmax(q)))
    _, report = _plan(otlp.Instance(p, q, 8), tau=1e-6).token_report(omega)
    fused = otlp.verify_drafts(
        p, q, omega[None], tau=1e-6, rng=0, time_budget=None, method="global_resolution"
    ).reports[0]
    assert report.system == "inner" and not report.fallback
    assert report.iterations <= 4 and fused.iterations == report.iterations
    assert report.deviation <= 5e-6
