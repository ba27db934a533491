"""Global resolution without replacement and for two independent drafts ([GR] Appendix S)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import otlp
from otlp.builders import outer_system
from otlp.global_resolution.constants import INNER
from otlp.global_resolution.schemes import SchemeGlobalResolution
from otlp.instances import zipf_llm_pair
from otlp.solvers.global_resolution.explicit_system import ExplicitSystem
from otlp.solvers.global_resolution.pair_system import PairSystem
from otlp.solvers.registry import get_backend
from tests.strategies import instances

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMES = ("without_replacement", "independent")


def _all_psi(inst: otlp.Instance) -> np.ndarray:
    """psi of every subset of the draft vocabulary (bit b of the index = token b), exactly."""
    cols = inst.columns("sets")
    bits = np.zeros(cols.count, dtype=np.int64)
    np.bitwise_or.at(bits, cols.inc_col, np.int64(1) << cols.inc_token)
    subsets = np.arange(1 << inst.k)
    members = (subsets[:, None] >> np.arange(inst.k)) & 1
    inside = (bits[None, :] & ~subsets[:, None]) == 0
    return members @ inst.p_local - inside.astype(float) @ cols.mass


def _wor(seed: int, k: int, n: int) -> otlp.Instance:
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.full(k, 0.5)), rng.dirichlet(np.full(k, 0.5))
    return otlp.Instance(p, q, n, "without_replacement")


# ----- Theorem 6.2 carries over to sampling without replacement -------------------------------
@pytest.mark.parametrize("seed", range(40))
def test_psi_without_replacement_is_submodular(seed: int) -> None:
    inst = _wor(seed, 6, 2 + seed % 3)
    psi = _all_psi(inst)
    a, b = np.meshgrid(np.arange(psi.size), np.arange(psi.size))
    assert (psi[a] + psi[b] >= psi[a | b] + psi[a & b] - 1e-14).all()


@pytest.mark.parametrize("seed", range(30))
def test_cumulative_minimums_are_the_minima_over_supersets(seed: int) -> None:
    """Lemma 6.3's prefix reduction: min_{T ⊇ H_i} psi(T), by brute force, equals the
    cumulative minimum that the targets use, and the targets are Theorem 6.2's."""
    inst = _wor(seed, 6, 2 + seed % 3)
    engine = SchemeGlobalResolution(inst, 1e-3)
    outer = engine.outer
    psi = _all_psi(inst)
    subsets = np.arange(psi.size)
    chain = [int(engine.selection.H_mask @ (1 << np.arange(inst.k)))]
    for token in outer.order[::-1]:  # H_{K+1} = H*, then add v_K, ..., v_1
        chain.append(chain[-1] | (1 << int(token)))
    minima = np.array([psi[(subsets & h) == h].min() for h in chain[::-1]])  # H_1 .. H_{K+1}
    expected = inst.p_local[outer.order] + minima[1:] - minima[:-1]
    assert outer.targets == pytest.approx(expected, abs=1e-12)


@PROPERTY
@given(instances(schemes=("without_replacement",), max_vocab=7, max_n=4))
def test_targets_are_feasible_and_optimal_against_max_flow(inst: otlp.Instance) -> None:
    """Theorem 6.1: with the targets as source capacities the outer network's max-flow
    saturates every source and every column; every block end is a tight prefix."""
    engine = SchemeGlobalResolution(inst, 1e-3)
    mask, outer = engine.selection.H_mask, engine.outer
    network = outer_system(inst, mask)
    if network.num_arcs == 0:
        return
    x = np.zeros(inst.k)
    x[outer.order] = outer.targets
    capped = type(network)(
        network.columns,
        network.left,
        x[network.left],
        network.right,
        network.right_cap,
        network.arc_left,
        network.arc_right,
    )
    flow = get_backend("ortools-maxflow").solve(capped.to_maxflow()).objective
    assert flow == pytest.approx(network.right_cap.sum(), abs=1e-12)
    assert x.sum() == pytest.approx(network.right_cap.sum(), abs=1e-12)
    assert (x <= inst.p_local + 1e-15).all()
    cols = inst.columns("sets")
    for end in outer.ends:
        prefix = np.zeros(inst.k, dtype=bool)
        prefix[outer.order[:end]] = True
        meets = ~cols.contained_in(~prefix)
        assert x[prefix].sum() == pytest.approx(cols.mass[meets].sum(), abs=1e-12)


# ----- the convex systems ---------------------------------------------------------------------
@pytest.mark.parametrize("slack", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(4))
def test_pair_receipts_and_hessian_match_explicit_sums(slack: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = 7
    a, b, d = rng.random(m), rng.random(m), rng.random(m) * (seed % 2)
    base_a, base_b = 0.3 * seed, 0.2
    targets = rng.random(m)
    pair = PairSystem(b, targets, base_b, slack, 2, a, b, d, base_a, base_b)
    groups, weights = [], []
    for i, j in itertools.combinations(range(m), 2):
        groups.append([i, j])
        weights.append(a[i] * b[j] + b[i] * a[j])
    for i in range(m):
        groups.append([i, -1])
        weights.append(d[i] + a[i] * base_b + b[i] * base_a)
    explicit = ExplicitSystem(
        b, targets, base_b, slack, 2, np.array(groups, dtype=np.int64), np.array(weights)
    )
    alpha = rng.normal(size=m) * 3
    fast, exact = pair.evaluate(alpha, hessian=True), explicit.evaluate(alpha, hessian=True)
    assert fast.receipts == pytest.approx(exact.receipts, rel=2e-8)
    assert fast.row_sums == pytest.approx(exact.row_sums, rel=1e-6, abs=1e-300)
    w = fast.low_rank.T
    m_fast = sum(
        w[:, 2 * r : 2 * r + 2] @ fast.blocks[r] @ w[:, 2 * r : 2 * r + 2].T
        for r in range(fast.nodes)
    )
    m_fast = m_fast - np.diag(np.diag(m_fast))
    assert m_fast == pytest.approx(exact.blocks[0], rel=1e-6, abs=1e-12)
    assert fast.quad_error >= np.abs(fast.receipts - exact.receipts).sum()


# ----- plans against the exact backends -------------------------------------------------------
def _check_plan(plan: otlp.TransportPlan, tau: float) -> None:
    inst = plan.instance
    report = plan.info["verification"]
    assert report.ok, report.problems
    exact = otlp.solve(inst, "maxflow", strict=True)
    assert abs(plan.acceptance - exact.acceptance) <= 10 * tau
    assert np.abs(plan.target_marginal() - inst.target_rows).sum() <= 15 * tau
    assert np.abs(plan.draft_marginal() - plan.columns.mass).sum() <= 1e-9
    assert plan.min_entry() >= 0.0
    bounds = plan.info["deviation_bounds"]
    assert report.target_l1 <= bounds["target_l1"] + 1e-9
    assert abs(report.acceptance_gap) <= bounds["acceptance"] + 1e-9
    for column in np.flatnonzero(plan.columns.mass > 0):  # every slice is a distribution
        pi = plan.column_slice(int(column))
        assert pi.min() >= 0.0 and pi.sum() == pytest.approx(1.0, abs=1e-9)


@st.composite
def scheme_instances(draw: st.DrawFn) -> otlp.Instance:
    inst = draw(instances(schemes=SCHEMES, max_vocab=7, max_n=4))
    if inst.scheme == "independent" and inst.n > 2:
        rows = inst.q[:2]
        inst = otlp.Instance(inst.p, rows, 2, "independent", inst.top_k)
    return inst


@PROPERTY
@given(scheme_instances(), st.sampled_from((1e-3, 1e-4)), st.integers(0, 2**32 - 1))
def test_plans_meet_the_guarantees_and_lazy_slices_match(
    inst: otlp.Instance, tau: float, seed: int
) -> None:
    lazy = otlp.solve(inst, "global_resolution", tau=tau, check=False)
    plan = otlp.solve(inst, "global_resolution", tau=tau)
    _check_plan(plan, tau)
    for omega in inst.sample_drafts(np.random.default_rng(seed), 4):
        assert lazy.local_slice(omega) == pytest.approx(plan.local_slice(omega), abs=1e-12)


@pytest.mark.parametrize(
    ("scheme", "n", "top_k", "tau"),
    [
        ("without_replacement", 2, 50, 1e-4),
        ("without_replacement", 3, 12, 1e-3),
        ("without_replacement", 5, 10, 1e-4),
        ("independent", 2, 50, 1e-4),
    ],
)
def test_llm_like_instances_succeed_without_fallback(
    scheme: str, n: int, top_k: int, tau: float
) -> None:
    p, q = zipf_llm_pair(2000, seed=3)
    draft = [q, zipf_llm_pair(2000, similarity=0.5, seed=4)[1]] if scheme == "independent" else q
    inst = otlp.Instance(p, draft, n, scheme, top_k=top_k)
    plan = otlp.solve(inst, "global_resolution", tau=tau, strict=True, time_budget=None)
    assert not any(report.fallback for report in plan.engine.reports.values())
    _check_plan(plan, tau)


@pytest.mark.parametrize("seed", range(12))
def test_double_quadrature_matches_exact_set_sums_within_its_bound(seed: int) -> None:
    """n >= 3 without replacement: clock-quadrature receipts and Hessian diagonal parts
    against the explicit sums of exact set masses, unit by unit."""
    rng = np.random.default_rng(seed)
    k, n = 5 + seed % 4, 3 + seed % 2
    p, q = rng.dirichlet(np.full(k, 0.5)), rng.dirichlet(np.full(k, 0.5))
    if seed % 3 == 0:
        q[0] += 20.0  # one token holds almost all the draft mass
    inst = otlp.Instance(p, q / q.sum(), n, "without_replacement")
    fast = SchemeGlobalResolution(inst, 1e-3)
    exact = SchemeGlobalResolution(inst, 1e-3, explicit_sets=True)
    for unit in fast.units():
        _, system = fast._system(unit)
        _, reference = exact._system(unit)
        alpha = 2.0 * rng.normal(size=system.size)
        got, want = system.evaluate(alpha, hessian=True), reference.evaluate(alpha, hessian=True)
        assert np.abs(got.receipts - want.receipts).sum() <= got.quad_error + 1e-15
        assert got.row_sums == pytest.approx(want.row_sums, rel=1e-6, abs=1e-300)
        assert system.reachable == pytest.approx(reference.reachable, rel=1e-8)


# ----- the compiled Newton loop of the scheme systems keeps its clock ---------------------------
@pytest.mark.parametrize("n", [2, 3])
def test_scheme_system_solve_stops_at_its_deadline(monkeypatch, n: int) -> None:
    """The compiled loop (pair system at n = 2, the double quadrature at n = 3) reads its
    deadline: a solve of several iterations with a deadline already passed starts none (its
    first iteration's predicted seconds do not fit, as in the i.i.d. loop) and says why."""
    from otlp.solvers.global_resolution.system_newton import NEWTON, system_newton

    engine = SchemeGlobalResolution(_wor(3, 12, n), 1e-6)
    _, system = engine._system((INNER, None))
    free = system_newton(system, 1e-6, time_budget=None)
    assert free.iterations >= 2 and free.converged
    monkeypatch.setattr(NEWTON, "FIRST_CHUNK", 1)
    late = system_newton(system, 1e-6, time_budget=1e-9)
    assert late.message == "time budget exhausted" and late.iterations == 0


@pytest.mark.parametrize("explicit_sets", [False, True])
def test_units_of_exact_set_masses_solve_in_the_compiled_loop(explicit_sets: bool) -> None:
    """k = n without replacement (one set holds all the draft mass: an ``ExplicitSystem``
    unit), and every n >= 3 unit with ``explicit_sets``: solved by the compiled Newton loop
    to a plan the verifier accepts, at alpha* (fuzz seed 41 found the loop refusing them)."""
    rng = np.random.default_rng(3)
    for k, n in ((3, 3), (5, 3), (6, 4)):
        p, q = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k))
        inst = otlp.Instance(p, q, n, "without_replacement")
        engine = SchemeGlobalResolution(inst, 1e-6, explicit_sets=explicit_sets)
        kinds = {type(engine._system(unit)[1]) for unit in engine.units()}
        if k == n or explicit_sets:
            assert ExplicitSystem in kinds
        for unit in engine.units():
            report = engine.solve(unit)
            assert not report.fallback and report.deviation <= 5e-6, report.message
        if not explicit_sets:
            plan = otlp.solve(inst, "global_resolution", tau=1e-6)
            exact = otlp.solve(inst, "maxflow_cs")
            assert plan.acceptance == pytest.approx(exact.acceptance, abs=1e-5)
            assert otlp.verify(plan).ok


def test_subnormal_drafts_beside_a_one_hot_draft_give_a_plan_the_verifier_accepts() -> None:
    p = np.array([0.052947748928820114, 0.5163854739503235, 0.4306667771208563, 1.79432e-310])
    q = np.array([3.16070101754009e-309, 2.03819894847703e-309, 2.452122710257705e-309, 1.0])
    inst = otlp.Instance(p, q, 2, "without_replacement")
    plan = otlp.solve(inst, "global_resolution", tau=1e-6, check=False)
    assert otlp.verify(plan).ok
    # second draw after the one-hot token 3: q[:3] / q[:3].sum(); tokens 1, 2 always kept
    assert plan.slice((3, 0))[0] == pytest.approx(p[0] / (q[0] / q[:3].sum()), rel=1e-6)
