"""Issue 24, items 1-2: every global-resolution token within its budget, and every valid row
gets a token (bounded Newton steps; exact fallback on omega's unit; the scheme's lossless rule
where even that is over ``otlp.limits``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import otlp
import otlp.limits
from otlp.global_resolution import GlobalResolutionPlan
from otlp.rules.rrs import RecursiveRejection, RecursiveRejectionWithoutReplacement
from otlp.solvers.global_resolution import direction as step


def _plan(inst: otlp.Instance, **options: object) -> GlobalResolutionPlan:
    plan = otlp.solve(inst, "global_resolution", check=False, **options)
    assert isinstance(plan, GlobalResolutionPlan)
    return plan


def _near_one_hot_without_replacement() -> tuple[np.ndarray, np.ndarray]:
    """The issue's second reproducer: V = 1,000, a near-one-hot q (top 1 - 1e-6)."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(1000))
    q = rng.dirichlet(np.ones(1000)) * 1e-6
    q[0] = 1 - q[1:].sum()
    return p, q


# ----- bounded Newton steps -------------------------------------------------------------------
def test_a_large_dense_step_is_matrix_free() -> None:
    """The issue's first reproducer spent 241 s in two dense steps on a 4,946-variable outer
    block (2 x rank >= variables, so no Woodbury): 4 * 4946^3 = 4.8e11 flops per step. Such a
    step is now conjugate gradients, capped at CG_WORK flops; small steps stay exact."""
    nodes, rank = 310, 8  # n = 8 at tau = 1e-6: R (n) columns of the low-rank part
    assert step.direction_method(4945, nodes, rank, 4946, True) == step.CONJUGATE_GRADIENTS
    assert step.direction_method(4945, 40, rank, 4946, True) == step.WOODBURY
    assert step.direction_method(300, nodes, rank, 301, True) == step.DENSE
    assert step.step_work(4945, nodes, rank, 4946) <= 2.0 * (step.EXACT_WORK + step.CG_WORK)


def test_conjugate_gradients_solve_the_laplacian_form() -> None:
    """CG on Hessian-vector products of diag(d) - W^T diag(sign) W solves the system."""
    rng = np.random.default_rng(0)
    size, k = 60, 40
    w = rng.normal(size=(k, size)) / np.sqrt(size)
    sign = np.where(np.arange(k) % 3 == 0, -1.0, 1.0)
    d = 5.0 + rng.random(size)
    hessian = np.diag(d) - (w.T * sign) @ w
    assert np.linalg.eigvalsh(hessian).min() > 0
    rhs = rng.normal(size=size)
    solution = step.conjugate_gradients(d, w, sign, rhs, size)
    np.testing.assert_allclose(hessian @ solution, rhs, rtol=0, atol=1e-8 * np.abs(rhs).max())
    few = step.conjugate_gradients(d, w, sign, rhs, 2)  # truncated: still a descent direction
    assert few @ rhs > 0


# ----- every valid row gets a token -----------------------------------------------------------
def test_without_replacement_row_over_the_limits_gets_the_rule_token() -> None:
    """The issue's second reproducer: without replacement, n = 8, k = 1,000, near-one-hot q. Its
    inner unit (857 tokens) misses its budget and its exact network (5.6e19 draft sets) is
    over the limits: token_report and verify_drafts raised ProblemTooLarge. The token now comes
    from rrs_without_replacement's exact conditional law; under a 10 ms budget the call does
    not even start H* (estimated at more than that) and no Newton iteration runs."""
    p, q = _near_one_hot_without_replacement()
    inst = otlp.Instance(p, q, 8, scheme="without_replacement")
    omega = np.argsort(-q, kind="stable")[:8]
    expected = RecursiveRejectionWithoutReplacement().local_conditionals(
        inst, inst.to_local(omega)[None, :]
    )[0]
    probs, report = _plan(inst, time_budget=None, max_iter=0).token_report(omega)
    assert report.fallback and report.fallback_rule == "rrs_without_replacement"
    assert "over the limit" in report.message
    np.testing.assert_array_equal(probs, expected)
    probs, report = _plan(inst, time_budget=0.01).token_report(omega)
    assert report.fallback_rule == "rrs_without_replacement" and report.iterations == 0
    assert "skipped" in report.message
    np.testing.assert_array_equal(probs, expected)
    result = otlp.verify_drafts(
        p, q, omega[None], scheme="without_replacement", time_budget=0.01, rng=0
    )
    row = result.reports[0]
    assert row.fallback and row.fallback_rule == "rrs_without_replacement"
    assert row.iterations == 0 and "skipped" in row.message
    position = np.flatnonzero(inst.tokens == result.tokens[0])  # empty: outside the draft
    assert probs[position[0] if position.size else -1] > 0


def test_iid_row_over_the_limits_gets_the_rrs_token_and_its_acceptance_loss() -> None:
    """i.i.d.: a unit that misses its budget (no iteration allowed) and whose exact network is
    over the (lowered) limits is served by rrs; the report gives alpha* minus rrs' exact
    acceptance. The same unit stays exact (max-flow) under the default limits."""
    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.full(30, 0.3)), rng.dirichlet(np.full(30, 0.3))
    inst = otlp.Instance(p, q, 4)
    omega = np.full(4, int(np.argmax(q)))
    exact = _plan(inst, tau=1e-6, max_iter=0).token_report(omega)[1]
    assert exact.fallback and exact.fallback_rule is None
    with otlp.limits.limited(max_variables=10_000):  # the solve fits, its exact unit not
        plan = _plan(inst, tau=1e-6, max_iter=0)
        probs, report = plan.token_report(omega)
        again = plan.token_report(omega)[1]
    assert report.fallback_rule == "rrs" and again.cached and again.fallback_rule == "rrs"
    rrs = RecursiveRejection()
    np.testing.assert_array_equal(
        probs, rrs.local_conditionals(inst, inst.to_local(omega)[None, :])[0]
    )
    alpha_star = otlp.optimal_acceptance(inst).alpha_star
    assert report.acceptance_lost == pytest.approx(alpha_star - rrs.acceptance(inst), abs=1e-12)
    assert report.acceptance_lost > 0


def test_iid_batch_rows_over_the_limits_report_the_rrs_token_and_its_acceptance_loss() -> None:
    """The same unit through verify_drafts' compiled i.i.d. batch, one (p, q) per row (the
    second row the first with its vocabulary reversed): each row falls back, its object API
    unit is over the limits, and its report names rrs and the acceptance it lost."""
    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.full(30, 0.3)), rng.dirichlet(np.full(30, 0.3))
    inst = otlp.Instance(p, q, 4)
    lost = otlp.optimal_acceptance(inst).alpha_star - RecursiveRejection().acceptance(inst)
    ps, qs = np.stack([p, p[::-1]]), np.stack([q, q[::-1]])
    drafts = np.array([[int(np.argmax(q))] * 4, [29 - int(np.argmax(q))] * 4])
    with otlp.limits.limited(max_variables=10_000):
        out = otlp.verify_drafts(
            ps, qs, drafts, method="global_resolution", tau=1e-6, max_iter=0, rng=0
        )
    for report in out.reports:
        assert report.fallback and report.fallback_rule == "rrs"
        assert report.acceptance_lost == pytest.approx(lost, abs=1e-12)


@pytest.mark.parametrize(
    ("scheme", "rule"), [("iid", "rrs"), ("without_replacement", "rrs_without_replacement")]
)
def test_rows_too_large_for_any_newton_step_are_the_rules_rows(scheme: str, rule: str) -> None:
    """A draft vocabulary whose one Newton evaluation is over the limits raised ProblemTooLarge
    for valid rows; every row of such a call is now the scheme's lossless rule's (the same
    tokens as that method with the same seed), reported as such."""
    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.ones(50), size=4), rng.dirichlet(np.ones(50), size=4)
    drafts = np.array([rng.choice(50, 3, replace=False, p=row) for row in q])
    with otlp.limits.limited(max_variables=5_000):  # 64 nodes x 2 x 50 = 6,400
        out = otlp.verify_drafts(p, q, drafts, scheme=scheme, rng=3, method="global_resolution")
    expected = otlp.verify_drafts(p, q, drafts, scheme=scheme, method=rule, rng=3)
    np.testing.assert_array_equal(out.tokens, expected.tokens)
    assert all(r.fallback and r.fallback_rule == rule for r in out.reports)
    assert "over the limit" in out.reports[0].message


def test_budget_fuzz_cases_give_every_row_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzz class of issue 24 (``budget:<scheme>``): a budget case on a small vocabulary
    runs its check, which fails on a row left without a token."""
    from otlp.errors import ProblemTooLarge
    from otlp.fuzz import checks
    from otlp.fuzz.cases import budget_case, make_case
    from otlp.fuzz.checks import components_for, run_case

    seeds = (np.random.default_rng([0, i]) for i in range(1000))
    case = next(c for c in (budget_case(r, 7) for r in seeds) if len(c["p"]) == 100)
    assert components_for(case) == [f"budget:{case['scheme']}"]
    # What is asserted is the token, not the machine's speed: the overrun allowance is lifted.
    monkeypatch.setattr(checks, "BOUNDED_STEP_S", 1e9)
    outcomes = run_case(case)
    assert [o.status for o in outcomes] == ["ok"], outcomes
    assert any(make_case(3, i)["kind"] == "budget" for i in range(10, 200))

    def no_token(*args: object, **kwargs: object) -> None:
        raise ProblemTooLarge("a valid row", 2, 0, 1)

    monkeypatch.setattr(checks, "verify_drafts", no_token)
    assert run_case(case)[0].status == "failed"  # a row without a token is a failure


# ----- issue 24: one deadline per call, stages estimated before they start -------------------
def test_independent_outer_max_flow_over_the_limits_gets_the_rrs_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two independent drafts whose removal chain is not certified take the outer targets from
    a max-flow over the whole outer system; over ``otlp.limits`` it raised ProblemTooLarge for
    a valid row. The token now comes from rrs (lossless for independent drafts, see below),
    in the object API and in verify_drafts."""
    import otlp.global_resolution.fused as fused
    import otlp.global_resolution.schemes as schemes

    monkeypatch.setattr(schemes, "independent_targets", lambda *args: None)
    monkeypatch.setattr(fused, "independent_targets", lambda *args: None)
    rng = np.random.default_rng(3)
    p, q1, q2 = (rng.dirichlet(np.ones(100)) for _ in range(3))
    with otlp.limits.limited(max_variables=8_000):  # one evaluation fits, the outer network not
        inst = otlp.Instance(p, [q1, q2], 2, scheme="independent")
        probs, report = _plan(inst).token_report([0, 1])
        again = _plan(inst)
        again.token_report([0, 1])
        second = again.token_report([2, 3])[1]
        out = otlp.verify_drafts(p, np.stack([q1, q2]), [[0, 1]], scheme="independent", rng=0)
    assert report.fallback_rule == "rrs" and "over the limit" in report.message
    assert second.cached and second.fallback_rule == "rrs"  # refused once, not rebuilt
    expected = RecursiveRejection().local_conditionals(inst, inst.to_local([0, 1])[None, :])[0]
    np.testing.assert_array_equal(probs, expected)
    row = out.reports[0]
    assert row.fallback_rule == "rrs" and "over the limit" in row.message


def test_rrs_is_lossless_for_two_independent_drafts() -> None:
    """The independent scheme's fallback rule: drafts x1 ~ q1, x2 ~ q2 verified by rrs (one
    draft row per draw) give output law p exactly (every pair enumerated on a toy V)."""
    rng = np.random.default_rng(7)
    p, q1, q2 = (rng.dirichlet(np.full(5, 0.7)) for _ in range(3))
    q2[1] = 0.0  # a token only the first drafter can draw
    q2 /= q2.sum()
    inst = otlp.Instance(p, [q1, q2], 2, scheme="independent")
    rows = inst.draft_rows
    pairs = np.array([[a, b] for a in range(inst.k) for b in range(inst.k)])
    weights = rows[0][pairs[:, 0]] * rows[1][pairs[:, 1]]
    laws = RecursiveRejection().local_conditionals(inst, pairs)
    np.testing.assert_allclose(weights @ laws, inst.target_rows, rtol=0, atol=1e-14)


def test_the_exact_max_flow_does_not_start_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without replacement, k = 1,000, n = 2: a unit whose Newton cannot certify goes to the
    exact max-flow on its own network, estimated at ~1 s (1e6 arcs; it took 0.3-0.5 s). Under
    a 0.3 s budget it is not started, the token is rrs_without_replacement's, and what the
    report says; with no budget the max-flow runs. (Asserted on the work done, not on time.)"""
    import otlp.global_resolution.iid as engine

    rng = np.random.default_rng(2)
    p, q = rng.dirichlet(np.ones(1000)), rng.dirichlet(np.ones(1000))
    inst = otlp.Instance(p, q, 2, scheme="without_replacement")
    omega = np.argsort(-q)[:2]
    calls = []

    def max_flow(network: object) -> np.ndarray:
        calls.append(network)
        return np.zeros(network.num_arcs)  # type: ignore[attr-defined]

    monkeypatch.setattr(engine, "max_flow_values", max_flow)
    plan = _plan(inst, tau=1e-6, max_iter=0, time_budget=0.3)
    probs, report = plan.token_report(omega)
    assert not calls and report.fallback_rule == "rrs_without_replacement"
    assert "the exact max-flow skipped" in report.message
    local = inst.to_local(omega)[None, :]
    expected = RecursiveRejectionWithoutReplacement().local_conditionals(inst, local)[0]
    np.testing.assert_array_equal(probs, expected)
    unit = plan.engine.unit_of(inst.to_local(omega))
    assert unit not in plan.engine.exact and unit not in plan.engine.over_limits
    plan.engine.solve(unit)  # no call deadline: the unit's exact fallback starts
    assert len(calls) == 1


def test_compilation_is_the_calls_time() -> None:
    """A kernel compiled (or loaded from numba's cache) during a call counts against its
    budget: the deadline does not move (a first call that compiles past its budget reports
    its rows out of time; otlp.warm_up compiles ahead)."""
    import numba

    from otlp.solvers.global_resolution.budget import Deadline, compile_seconds

    deadline = Deadline.after(10.0)
    before, compiled = deadline.now(), compile_seconds()
    numba.njit(lambda x: x + 1)(1)  # a fresh kernel: compiled now
    assert compile_seconds() > compiled and deadline.now() == before
    assert Deadline.after(None).now() == np.inf


# One fresh process per test (numba compiles or loads a kernel once per process). Child
# processes get this checkout first on their path (the venv's editable install may be another).
_CHILD_PRELUDE = """
import sys, time
import numpy as np
import otlp
from numba.core.dispatcher import Dispatcher
from otlp.solvers.global_resolution.budget import compile_seconds

def signatures():
    found = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "otlp":
            for obj in list(vars(module).values()):
                if isinstance(obj, Dispatcher):
                    found[obj.py_func.__module__ + "." + obj.py_func.__qualname__] = set(
                        map(str, obj.signatures))
    return found

def case(scheme, n, vocab, seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.full(vocab, 0.3)), rng.dirichlet(np.full(vocab, 0.3))
    order = np.argsort(-q)
    if scheme == "independent":
        q2 = rng.dirichlet(np.full(vocab, 0.3))
        second = np.argsort(-q2)
        return p, np.stack([q, q2]), np.array([[order[0], second[0]], [order[1], second[1]]])
    if scheme == "iid":
        return p, q, np.stack([order[:n], order[1 : n + 1]])
    return p, q, np.stack([order[:n], np.r_[order[: n - 1], order[n]]])

SCHEMES = (("iid", 1), ("iid", 2), ("iid", 3), ("without_replacement", 2),
           ("without_replacement", 3), ("independent", 2), ("greedy", 2), ("greedy", 3))
"""


def _child(script: str, *args: str) -> str:
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", _CHILD_PRELUDE + script, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        cwd=root,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


_AFTER_WARM_UP = """
otlp.warm_up()
before, compiled = signatures(), compile_seconds()
calls = 0
for scheme, n in SCHEMES:
    for vocab, seed in ((64, 1), (300, 2)):
        p, q, drafts = case(scheme, n, vocab, seed)
        for dtype in (np.float64, np.float32):
            for top_k in (None, 12):
                for budget in (None, 5e-3, 1e-4, 1e-9):
                    for max_iter in (50, 1, 0):
                        otlp.verify_drafts(p.astype(dtype), q.astype(dtype), drafts,
                                           method="global_resolution", scheme=scheme,
                                           top_k=top_k, time_budget=budget,
                                           max_iter=max_iter, rng=0)
                        calls += 1
after = signatures()
print(calls, compile_seconds() - compiled)
for name in sorted(after):
    if after[name] != before.get(name, set()):
        print("compiled:", name, sorted(after[name] - before.get(name, set())))
"""


def test_after_warm_up_no_verify_drafts_call_compiles() -> None:
    """Issue 39 (budgets in a fresh process): after ``otlp.warm_up()`` no verify_drafts call
    compiles or loads a kernel — every scheme and number of drafts, top-k or not, float32 or
    float64 inputs, every budget (none, partly spent, spent) and iteration limit (the object
    API's fallback and its max-flow) — so none spends its budget on numba. Read from numba's
    dispatchers (no new signature anywhere in otlp or solvers) and from its compiler lock
    (``compile_seconds``), not from a clock. Before the fix warm_up missed the object API's
    kernels (``token.budget_share``, the Newton kernels of ``newton()``, the independent
    drafts' H* search) and the float32 kernels of verify_tree's rows."""
    lines = _child(_AFTER_WARM_UP).strip().splitlines()
    calls, compiling = lines[0].split()
    assert int(calls) == 8 * 2 * 2 * 2 * 4 * 3
    assert float(compiling) == 0.0 and lines[1:] == [], lines


_COLD_FIRST_CALLS = """
budget = 5e-3
for scheme, n in SCHEMES:
    p, q, drafts = case(scheme, n, 64, 0)
    compiled = compile_seconds()
    result = otlp.verify_drafts(
        p, q, drafts, method="global_resolution", scheme=scheme, time_budget=budget, rng=0
    )
    compiling = compile_seconds() - compiled
    for report in result.reports:
        said = report.fallback_rule is not None or "past the time budget" in report.message
        print(scheme, n, compiling, said, repr(report.message))
"""


def test_a_cold_call_that_compiles_past_its_budget_says_so() -> None:
    """Issue 39: in a fresh process without warm_up, a first call per scheme with a 5 ms
    budget compiles or loads its kernels inside its own budget (counted from the call's
    entry). Every row of a call that spent more than its budget in numba's compiler reports
    it: the lossless rule's token (``fallback_rule``, "time budget exhausted" / "skipped"),
    or, for the greedy scheme's closed form (no stage to skip, no rule), a message saying it
    finished past the budget; never "converged". Before the fix a cold i.i.d. call that spent
    2.27 s loading kernels reported its rows converged: the compiled row read the clock only
    inside Newton, and rows whose unit needed no iteration never read it."""
    lines = _child(_COLD_FIRST_CALLS).strip().splitlines()
    assert len(lines) == 2 * 8
    first = lines[0].split()
    assert float(first[2]) > 5e-3, lines  # the first call of a process loads its kernels
    for line in lines:
        _scheme, _n, compiling, said, _message = line.split(maxsplit=4)
        if float(compiling) > 5e-3:
            assert said == "True", line


def _drafts_call(p: np.ndarray, q: np.ndarray, drafts: np.ndarray) -> None:
    otlp.verify_drafts(p, q, drafts, scheme="without_replacement", tau=1e-6, rng=0)


def _tree_call(p: np.ndarray, q: np.ndarray, drafts: np.ndarray) -> None:
    from otlp.decoding import verify_tree

    laws = (np.stack([p, p, p])[None], np.stack([q, q, q])[None])
    parents = np.array([-1, -1])  # a root with the two drafts as its children
    verify_tree(drafts, parents, *laws, method="global_resolution", scheme="without_replacement")


@pytest.mark.parametrize("call", [_drafts_call, _tree_call], ids=["verify_drafts", "verify_tree"])
def test_newton_steps_run_with_one_blas_thread(
    monkeypatch: pytest.MonkeyPatch, call: Callable[..., None]
) -> None:
    """Two OpenBLAS threads on two busy cores made a 100-variable dense Newton direction 100x
    slower (a without-replacement tree node: 650 ms instead of 10-30 ms): every direction of
    a decoder row's Newton, in verify_drafts and in a verify_tree node, runs with BLAS
    pinned to one thread (threadpoolctl), and small rows skip the pinning's ~10 us."""
    from threadpoolctl import threadpool_info

    import otlp.solvers.global_resolution.system_newton as system_newton
    from otlp.solvers.global_resolution.budget import BLAS_SIZE, blas_pinned

    seen: list[int] = []
    kernel = system_newton.system_newton_kernel  # the compiled loop: every direction inside

    def recording(*args: Any) -> Any:
        seen.extend(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")
        return kernel(*args)

    recording.overloads = kernel.overloads or {None: None}  # type: ignore[attr-defined]
    monkeypatch.setattr(system_newton, "system_newton_kernel", recording)
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(300)), rng.dirichlet(np.ones(300))
    drafts = np.argsort(-q)[:2][None, :]
    call(p, q, drafts)
    assert seen and set(seen) == {1}
    before = [info["num_threads"] for info in threadpool_info()]
    with blas_pinned(BLAS_SIZE - 1):
        assert [info["num_threads"] for info in threadpool_info()] == before


@pytest.mark.parametrize(
    ("scheme", "n", "double"),
    [
        ("without_replacement", 3, True),
        ("without_replacement", 2, False),
        ("independent", 2, False),
    ],
)
def test_a_scheme_row_whose_newton_cannot_fit_gets_the_rule_token(
    monkeypatch: pytest.MonkeyPatch, scheme: str, n: int, double: bool
) -> None:
    """The fused scheme row estimates one Newton evaluation (a double quadrature only for
    n >= 3 draws without replacement) before it starts; an estimate past the deadline sends
    the row straight to the scheme's lossless rule, reported out of time (no exact solve
    tried). The estimate is stubbed: no clock decides this test."""
    import otlp.global_resolution.fused as fused

    seen: list[bool] = []

    def too_slow(variables: int, draws: int, double_quadrature: bool) -> float:
        seen.append(double_quadrature)
        return 1e9

    monkeypatch.setattr(fused, "evaluation_seconds", too_slow)
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(40))
    q = (
        [rng.dirichlet(np.ones(40)), rng.dirichlet(np.ones(40))]
        if scheme == "independent"
        else rng.dirichlet(np.ones(40))
    )
    rows = np.stack(q) if scheme == "independent" else q
    inst = otlp.Instance(p, q, n, scheme)
    drafts = inst.sample_drafts(rng, 3)
    out = otlp.verify_drafts(
        p, rows, drafts, method="global_resolution", scheme=scheme, rng=1, time_budget=5.0
    )
    assert seen and set(seen) == {double}
    rule = "rrs_without_replacement" if scheme == "without_replacement" else "rrs"
    assert any(r.fallback for r in out.reports)
    lost = otlp.optimal_acceptance(inst).alpha_star - otlp.rules.get(rule).acceptance(inst)
    for report in out.reports:
        if report.fallback:  # a unit that needed Newton: the rule's token, out of time
            assert report.fallback_rule == rule and "Newton" in report.message
            # alpha* is the fused row's (for two independent drafts nothing else computes it)
            assert report.acceptance_lost == pytest.approx(max(lost, 0.0), abs=1e-9)
        else:  # a one-token outer block: exact without Newton
            assert report.variables <= 1 and report.message == "exact"


@pytest.mark.parametrize(("drafts", "pinned"), [(2, True), (1, False)])
def test_the_iid_batch_pins_blas_only_for_rows_with_a_newton_step(
    monkeypatch: pytest.MonkeyPatch, drafts: int, pinned: bool
) -> None:
    """The compiled i.i.d. batch runs inside ``blas_pinned(top_k or V)`` for n >= 2 drafts;
    one draft is the closed form, with no Newton step to pin BLAS for. A stand-in BLAS library
    on 4 threads (whatever this process's own BLAS runs on) records each change."""
    import otlp.solvers.global_resolution.budget as budget

    class Library:
        def __init__(self) -> None:
            self.threads = 4
            self.calls: list[int] = []

        def get_num_threads(self) -> int:
            return self.threads

        def set_num_threads(self, n: int) -> None:
            self.calls.append(n)
            self.threads = n

    library = Library()
    monkeypatch.setattr(budget, "_blas_libraries", lambda: (library,))
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(200)), rng.dirichlet(np.ones(200))
    drafted = np.argsort(-q)[:drafts][None, :]
    otlp.verify_drafts(p, q, drafted, method="global_resolution", rng=0)
    assert library.calls == ([1, 4] if pinned else [])


def test_the_first_iid_batch_of_a_dtype_pair_is_compiled_on_a_tiny_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a fresh process does (the set of compiled pairs emptied here): the batch kernel is
    first run on a two-token row of the call's (p, q) dtypes, the pair is recorded, and the
    call's own rows (float64, as verify_drafts reads them) are unchanged by it."""
    import otlp.global_resolution.iid_rows as iid_rows
    from otlp.solvers.global_resolution.token import batch

    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(20)), rng.dirichlet(np.ones(20))
    drafts = np.argsort(-q)[:2][None, :].repeat(5, axis=0)
    warm = otlp.verify_drafts(p, q, drafts, method="global_resolution", rng=2).tokens
    monkeypatch.setattr(iid_rows, "_COMPILED", set())
    cold = otlp.verify_drafts(p, q, drafts, method="global_resolution", rng=2).tokens
    assert {(batch, np.dtype(np.float64), np.dtype(np.float64))} == iid_rows._COMPILED
    np.testing.assert_array_equal(cold, warm)
