"""Tests that pin the promised tolerances, bounds and tie rules (issue 17, item "tests that do
not pin what they claim"): each fails under a one-line mutant of the number or rule it names.

Global resolution is tested through its public API where it can be (``otlp.solve`` options,
the plan's reports and ``plan.engine``); the rounding repair and the empty-H* tie rule are
called directly from ``otlp.global_resolution``, and a numerical failure is injected by
replacing the engine's ``newton``."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import otlp
import otlp.rules
import otlp.validate
from otlp.rules.kseq import KSeq


# ----- the verifier ----------------------------------------------------------------------------
def _plan() -> otlp.TransportPlan:
    inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2)
    return otlp.solve(inst, "maxflow", check=False)


def _with_entry(plan: otlp.TransportPlan, value: float) -> otlp.TransportPlan:
    """``plan`` with one more explicit entry ``value`` at (outside row, first column)."""
    explicit = plan.explicit.tolil()
    explicit[plan.instance.k, 0] = value
    plan.explicit = explicit.tocsc()
    return plan


@pytest.mark.parametrize(("value", "flagged"), [(-2e-8, True), (-0.5e-8, False)])
def test_verifier_negative_entry_tolerance_is_1e_8(value: float, flagged: bool) -> None:
    """Tolerances.negative = 1e-8: an entry of -2e-8 is reported, -5e-9 is not."""
    report = otlp.verify(_with_entry(_plan(), value))
    assert any(p.startswith("negative entry") for p in report.problems) is flagged


@pytest.mark.parametrize("damage", [1e-25, -1e-25])
def test_verifier_flags_slices_summing_above_and_below_one(damage: float) -> None:
    """A slice summing to 0.9 fails like one summing to 1.1 (|sum - 1|, not sum - 1)."""
    p = np.random.default_rng(5).dirichlet(np.ones(5))
    inst = otlp.Instance(p, [0.5, 0.3, 0.2 - 1e-12, 1e-12, 0.0], 2)
    plan = otlp.solve(inst, "maxflow", strict=True)
    column = int(plan.columns.indices_of(np.array([[3, 3]]))[0])  # mass 1e-24
    plan.col_residual[column] += damage
    report = otlp.verify(plan)
    assert not report.ok and report.slices.worst_omega == (3,)
    assert report.slices.worst_sum == pytest.approx(1 + damage / 1e-24)
    assert report.slices.max_sum_error == pytest.approx(0.1)


def test_verifier_tolerances_are_inclusive() -> None:
    """ "Within tolerance" includes equality: tolerances set to the measured errors pass, and a
    hair below each of them fails with that check's own message."""
    plan = _with_entry(_plan(), -2e-8)
    measured = otlp.verify(plan)
    alpha = otlp.optimal_acceptance(plan.instance).alpha_star
    assert (measured.acceptance, measured.alpha_star) == (plan.acceptance, alpha)
    assert measured.acceptance_gap == alpha - plan.acceptance
    assert measured.tolerances == otlp.Tolerances()
    errors = {
        "target_l1": measured.target_l1,
        "draft_l1": measured.draft_l1,
        "negative": -measured.min_entry,
        "acceptance": abs(measured.acceptance_gap),
    }
    assert min(errors.values()) > 0
    loose = {"slice_sum": 1.0, "slice_negative": 1.0}
    assert otlp.verify(plan, otlp.Tolerances(**errors, **loose)).ok
    slices = measured.slices
    at_slices = {"slice_sum": slices.max_sum_error, "slice_negative": -slices.min_entry}
    assert min(at_slices.values()) > 0
    assert otlp.verify(plan, otlp.Tolerances(**errors, **at_slices)).ok
    messages = {
        "target_l1": "target marginal off by",
        "draft_l1": "draft marginal off by",
        "negative": "negative entry",
        "acceptance": "acceptance",
    }
    plan_below = _with_entry(_plan(), -2e-8)  # acceptance short of alpha* by exactly a tolerance
    alpha = plan_below.acceptance + 0.25
    gap = alpha - plan_below.acceptance
    at_gap = otlp.Tolerances(**{**errors, "acceptance": gap}, **loose)
    assert otlp.verify(plan_below, at_gap, alpha_star=alpha).ok
    for name, message in messages.items():
        tight = otlp.Tolerances(**{**errors, name: errors[name] * (1 - 1e-9)}, **loose)
        problems = otlp.verify(plan, tight).problems
        assert len(problems) == 1 and problems[0].startswith(message), (name, problems)
    exact = _plan()  # max-flow: every error exactly 0, so zero tolerances pass
    zero = otlp.Tolerances(**dict.fromkeys(errors, 0.0), **loose)
    assert otlp.verify(exact, zero, alpha_star=exact.acceptance).ok


def test_verifier_reports_non_finite_entries_by_name() -> None:
    """A NaN entry is a problem named as such, without numpy warnings along the way."""
    plan = _with_entry(_plan(), float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = otlp.verify(plan)
    assert report.problems[0] == "plan has non-finite entries"
    assert report.as_dict()["problems"] == list(report.problems) or report.as_dict()[
        "problems"
    ] == tuple(report.problems)


def test_slice_report_names_the_worst_column_and_the_mean_defect() -> None:
    """Every field of the slice report against a column-by-column recomputation, on a plan with
    one column pushed above 1 and another given a negative entry that leaves its sum at 1 (it
    is the worst by its sign alone); the worst omegas include the local token 0."""
    inst = otlp.Instance([0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], 2)
    plan = otlp.solve(inst, "maxflow", check=False)
    live = np.flatnonzero(plan.columns.mass > 0)
    top = int(inst.tokens[0])  # local id 0
    first = plan.column_of([top, top])
    second = plan.column_of([int(inst.tokens[1]), top])
    plan.col_residual[first] += 1e-3 * plan.columns.mass[first]  # sums to 1.001
    explicit = plan.explicit.tolil()
    explicit[inst.k, second] = -0.5 * plan.columns.mass[second]  # outside row: -0.5 ...
    explicit[1, second] += 0.5 * plan.columns.mass[second]  # ... and the sum stays 1
    plan.explicit = explicit.tocsc()
    slices = [plan.column_slice(c) for c in live]
    sums = np.array([s.sum() for s in slices])
    negative = np.array([-s[s < 0].sum() for s in slices])
    report = otlp.verify(plan).slices
    assert report.columns == live.size
    assert report.worst_column == second
    assert sorted(report.worst_omega) == sorted([top, int(inst.tokens[1])])
    assert report.worst_sum == pytest.approx(1.0, abs=1e-12)
    assert report.worst_min == pytest.approx(min(s.min() for s in slices))
    assert report.worst_min < -0.4 and report.min_entry == report.worst_min
    assert report.max_sum_error == pytest.approx(np.abs(sums - 1).max())
    defect = plan.columns.mass[live] @ (np.abs(sums - 1) + negative)
    assert report.mean_defect == pytest.approx(defect, rel=1e-9)
    repaired = plan.explicit.tolil()
    repaired[:, second] = 0.0  # that column now comes from the residual term alone: fine
    plan.explicit = repaired.tocsc()
    plan.col_residual[second] = plan.columns.mass[second]
    report = otlp.verify(plan).slices
    assert report.worst_column == first and report.worst_omega == (top,)
    assert report.worst_sum == pytest.approx(1.001) and report.min_entry == 0.0


def test_verifier_bad_arguments_name_themselves() -> None:
    plan = _plan()
    with pytest.raises(ValueError, match=r"^plan: expected an otlp.TransportPlan, got str$"):
        otlp.verify("plan")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^tolerances: expected an otlp.Tolerances, got int$"):
        otlp.verify(plan, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^alpha_star: "):
        otlp.verify(plan, alpha_star=float("nan"))
    with pytest.raises(ValueError, match=r"^negative: "):
        otlp.Tolerances(negative=float("nan"))
    assert otlp.verify(plan, otlp.Tolerances()).ok


def test_global_resolution_tolerances_are_the_papers() -> None:
    """[GR] §6.3: target within 15 tau (L1), acceptance within 10 tau; the draft marginal and
    the sign are exact up to rounding (the plan's columns are fitted to their masses)."""
    tol = otlp.Tolerances.global_resolution(1e-3)
    assert (tol.target_l1, tol.acceptance) == (pytest.approx(15e-3), pytest.approx(10e-3))
    assert (tol.draft_l1, tol.negative) == (1e-9, 1e-12)
    assert (tol.slice_sum, tol.slice_negative) == (1e-9, 1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_slice_statistics_match_a_dense_column_by_column_oracle(seed: int) -> None:
    """The verifier's vectorised slice figures equal the dense conditionals of each column,
    on raw plans with negative entries, residual vectors of both signs, a full column and an
    empty one (the verifier trusts nobody, so it must read unpolished plans right)."""
    rng = np.random.default_rng(seed)
    inst = otlp.Instance(rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4)), 2)
    plan = otlp.solve(inst, "maxflow", check=False)
    shape = plan.explicit.shape
    dense = rng.normal(0, 0.05, shape) * (rng.random(shape) < 0.5)
    dense[:, 0] = rng.normal(0, 0.05, shape[0])  # a column with every row explicit
    dense[:, 1] = 0.0  # and one with none
    plan.explicit = sp.csc_matrix(dense)
    plan.row_residual = rng.normal(0.1, 0.2, shape[0])
    plan.col_residual = rng.normal(0.05, 0.1, shape[1])
    stats = plan.slice_statistics()
    live = np.flatnonzero(plan.columns.mass > 0)
    assert np.array_equal(stats.columns, live)
    slices = np.array([plan.column_slice(c) for c in live])
    np.testing.assert_allclose(stats.sums, slices.sum(axis=1), rtol=1e-12, atol=1e-12)
    negative = -np.minimum(slices, 0).sum(axis=1)
    # Exact where every row is explicit or none is; elsewhere conservative (the residual term's
    # extremes are taken over all rows): never a smaller defect than the dense truth.
    exact = np.isin(live, [0, 1])
    assert exact.sum() == 2
    np.testing.assert_allclose(stats.mins[exact], slices.min(axis=1)[exact], rtol=1e-12)
    np.testing.assert_allclose(stats.negative[exact], negative[exact], rtol=1e-12)
    assert (stats.mins <= slices.min(axis=1) + 1e-12).all()
    assert (stats.negative >= negative - 1e-12).all()


def test_a_zero_mass_column_has_no_conditional() -> None:
    inst = otlp.Instance([0.5, 0.5], [[1.0, 0.0], [0.5, 0.5]], 2, "independent")
    plan = otlp.solve(inst, "maxflow", strict=True)
    # Independent pairs are ordered (issue 27): (1, 1) needs drafter 0 to draft token 1.
    with pytest.raises(ValueError, match=r"^omega\[0\]: token 1 cannot be drafted"):
        plan.column_of([1, 1])
    (column,) = np.flatnonzero(plan.columns.mass == 0)
    assert column not in plan.slice_statistics().columns
    with pytest.raises(ValueError, match=r"^omega: has zero probability under the draft scheme$"):
        plan.column_slice(column)


# ----- polishing ------------------------------------------------------------------------------
def test_polishing_refuses_a_primal_that_is_no_near_solution() -> None:
    """A primal far from feasible is never turned into a plan: unchanged, flagged, failing."""
    inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2)
    raw = otlp.solve(inst, "maxflow", check=False)
    good = raw.explicit.copy()
    bad = raw.explicit.copy()
    bad.data = bad.data * 1e6  # a solver answer off by six orders of magnitude
    raw.explicit = bad
    refused = raw.polished()
    assert refused.explicit is raw.explicit
    assert "exceeds 1e-06" in refused.info["polish"]["refused"]
    assert any("not polished" in m for m in refused.messages)
    assert not otlp.verify(refused).ok
    nan = raw.explicit.copy()
    nan.data[0] = np.nan
    raw.explicit = nan
    assert "NaN" in raw.polished().info["polish"]["refused"]
    # Within the limit it repairs; the limit is the caller's to set, validated.
    slightly = good.copy()
    slightly.data = slightly.data + 1e-7
    raw.explicit = slightly
    assert "refused" not in raw.polished().info["polish"]
    assert "refused" in raw.polished(limit=1e-9).info["polish"]
    with pytest.raises(ValueError, match="limit"):
        raw.polished(limit=-1.0)


def test_polishing_measures_and_repairs_exactly_the_infeasibility() -> None:
    """The violation is negative mass + row excess + column excess (L1); rows over p and
    columns over their mass are scaled down to them, entries elsewhere are left alone; the
    input plan is not modified; the limit is inclusive."""
    inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2)
    raw = otlp.solve(inst, "maxflow", check=False)
    target, mass = inst.target_rows, raw.columns.mass
    explicit = raw.explicit.toarray()
    explicit[0] *= 1 + 1e-7  # row 0 above its target
    full = np.flatnonzero(np.isclose(explicit.sum(axis=0), mass) & (explicit[0] == 0))[0]
    explicit[:, full] *= 1 + 1e-7  # a column above its mass
    negative_at = (1, int(np.flatnonzero(explicit[1] == 0)[0]))
    explicit[negative_at] = -3e-9
    raw.explicit = sp.csc_matrix(explicit)
    before = raw.explicit.toarray()
    clipped = np.maximum(before, 0)
    row_excess = np.maximum(clipped.sum(axis=1) - target, 0)
    col_excess = np.maximum(clipped.sum(axis=0) - mass, 0)
    assert row_excess.sum() > 0 and col_excess.sum() > 0
    expected = 3e-9 + row_excess.sum() + col_excess.sum()
    polished = raw.polished()
    assert polished.info["polish"]["violation"] == pytest.approx(expected, rel=1e-12)
    assert polished.info["polish"]["clipped_negative"] == pytest.approx(3e-9)
    assert polished.info["polish"]["rows_scaled"] == np.count_nonzero(row_excess)
    assert polished.info["polish"]["columns_scaled"] == 1  # the full one; row 0 fixed the rest
    assert polished.messages[-1] == (
        f"polished: clipped 3e-09 of negative mass, scaled down {np.count_nonzero(row_excess)} "
        "rows and 1 columns; the residual term of Eq. (3) carries the rest"
    )
    assert (polished.method, polished.wall_time) == (raw.method, raw.wall_time)
    assert np.array_equal(raw.explicit.toarray(), before)  # the input is untouched
    after = polished.explicit.toarray()
    assert after.dtype == np.float64 and after.min() >= 0
    assert (after.sum(axis=1) <= target * (1 + 1e-15)).all()
    assert after[0].sum() == pytest.approx(target[0], rel=1e-15)
    assert (after.sum(axis=0) <= mass * (1 + 1e-15)).all()
    assert after[:, full].sum() == pytest.approx(mass[full], rel=1e-15)
    keep = (row_excess == 0)[:, None] & (col_excess == 0)[None, :] & (before > 0)
    assert keep.sum() >= 3 and np.array_equal(after[keep], before[keep])
    assert otlp.verify(polished).ok
    at_limit = raw.polished(limit=polished.info["polish"]["violation"])
    assert "refused" not in at_limit.info["polish"]
    assert "refused" in raw.polished(limit=expected * (1 - 1e-6)).info["polish"]


# ----- global resolution's tolerances, budget and fallback (black box) ------------------------
_GR_RNG = np.random.default_rng(4)
GR_INSTANCE = otlp.Instance(_GR_RNG.dirichlet(np.ones(8)), _GR_RNG.dirichlet(np.ones(8)), 3)


def _gr_plan(
    tau: float, max_iter: int | None = None, inst: otlp.Instance = GR_INSTANCE
) -> otlp.TransportPlan:
    plan = otlp.solve(
        inst, "global_resolution", tau=tau, max_iter=max_iter, time_budget=None, check=False
    )  # no clock: fallbacks follow from iterations, never from the machine's load
    assert plan.columns.count > 0  # materialised: every unit solved, reports in info["units"]
    return plan


def _inner(plan: otlp.TransportPlan) -> object:
    (report,) = [r for unit, r in plan.info["units"].items() if unit[0] == "inner"]
    return report


def test_global_resolution_acceptance_tolerance_is_10_tau() -> None:
    """[GR] §6.3: acceptance within 10 tau of alpha*; 9 tau below passes, 11 tau fails."""
    tau = 1e-4
    plan = _gr_plan(tau)
    assert otlp.verify(plan).ok
    close = otlp.verify(plan, alpha_star=plan.acceptance + 9 * tau)
    far = otlp.verify(plan, alpha_star=plan.acceptance + 11 * tau)
    assert close.ok and not far.ok
    assert any("below alpha*" in p for p in far.problems)
    assert otlp.Tolerances.global_resolution(tau).target_l1 == pytest.approx(15 * tau)


def _deviation_after(iterations: int) -> float:
    """The inner Newton solve's certified deviation after ``iterations`` steps (the iterates
    do not depend on tau; only the stopping rule does). tau = 1e-8 keeps two steps short of
    the budget; a tau near TAU_MIN would stop at step 0, below the series' rounding error."""
    report = _inner(_gr_plan(1e-8, max_iter=iterations))
    assert report.iterations == iterations and report.fallback
    return float(report.deviation)


def test_global_resolution_budget_is_5_tau() -> None:
    """A unit stops only once its certified deviation is within 5 tau (its whole budget for
    the inner system): with tau = d2 / 5.5 the second iterate (deviation d2 = 5.5 tau) is not
    good enough, the third is. A budget of 6 tau would stop at d2."""
    d2 = _deviation_after(2)
    tau = d2 / 5.5
    plan = _gr_plan(tau)
    report = _inner(plan)
    assert not report.fallback and report.deviation <= 5 * tau
    assert report.iterations >= 3
    bounds = plan.info["deviation_bounds"]
    assert bounds["target_l1"] <= 15 * tau and bounds["acceptance"] <= 10 * tau
    assert otlp.verify(plan).ok


def test_a_unit_that_misses_its_budget_falls_back_to_the_exact_solve() -> None:
    """Deviation 2x the budget after the iteration limit: the unit is solved exactly, its
    report says so and the plan verifies (a 3x-budget trigger would keep the inexact one)."""
    d2 = _deviation_after(2)
    tau = d2 / 10  # budget 5 tau = d2 / 2
    plan = _gr_plan(tau, max_iter=2)
    report = _inner(plan)
    assert report.fallback and report.deviation == pytest.approx(d2)
    assert ("inner", None) in plan.info["fallback"]
    assert plan.info["deviation_bounds"]["target_l1"] == 0.0  # exact units add nothing
    assert otlp.verify(plan).ok


def _four_outer_blocks() -> otlp.Instance:
    """Nine tokens, n = 2, whose outer system has tight-set blocks of 1, 1, 2 and 3 tokens."""
    rng = np.random.default_rng(4000)
    vocab, n = int(rng.integers(5, 10)), int(rng.integers(2, 4))
    p = rng.dirichlet(np.ones(vocab) * rng.choice([0.3, 1, 3]))
    q = rng.dirichlet(np.ones(vocab) * rng.choice([0.3, 1, 3]))
    return otlp.Instance(p, q, n)


def _budget_shares(plan: otlp.TransportPlan) -> dict[int, float]:
    """[GR] §6.3 split of the outer system's 5 tau: half by the block's target mass, half
    evenly over the blocks that need solving (more than one token)."""
    outer = plan.engine.outer
    sizes = outer.ends - outer.starts
    total = float(outer.targets.sum())
    solving = int((sizes > 1).sum())
    return {
        b: 0.5 * (float(outer.targets[s:e].sum()) / total + 1.0 / solving)
        for b, (s, e) in enumerate(zip(outer.starts, outer.ends, strict=True))
    }


def test_each_outer_block_meets_its_share_of_the_5_tau_budget() -> None:
    """An outer block stops only within 5 tau times its share, not the whole 5 tau: tau is set
    so that block 3's first Newton iterate is within 5 tau but not within its share."""
    inst = _four_outer_blocks()
    first = _gr_plan(1e-8, max_iter=1, inst=inst).info["units"][("outer", 3)]
    assert first.iterations == 1 and first.fallback
    probe = _gr_plan(1e-3, inst=inst)
    shares = _budget_shares(probe)
    assert [b for b, r in probe.info["units"].items() if r.message == "exact"] == [
        ("outer", 0),
        ("outer", 1),
    ]
    assert shares[2] + shares[3] <= 1.0  # the outer system deviates by at most 5 tau
    tau = first.deviation / (5.0 * np.sqrt(shares[3]))  # 5 tau share < d1 < 5 tau
    plan = _gr_plan(tau, inst=inst)
    units = plan.info["units"]
    assert units[("outer", 3)].iterations >= 2  # the first iterate was not good enough
    for block in (2, 3):
        report = units[("outer", block)]
        assert not report.fallback and report.deviation <= 5 * tau * shares[block]
        assert report.block == block and 0.0 < report.grad_norm < np.inf
    # Lemma 6.6 from the certified deviations: outer + 2 inner in L1, outer + inner in alpha
    outer = sum(r.deviation for u, r in units.items() if u[0] == "outer")
    inner = units[("inner", None)].deviation
    bounds = plan.info["deviation_bounds"]
    assert bounds["target_l1"] == pytest.approx(outer + 2 * inner, rel=1e-12)
    assert bounds["acceptance"] == pytest.approx(outer + inner, rel=1e-12)
    assert inner > 0 and outer > 0
    assert otlp.verify(plan).ok


def test_single_token_blocks_are_reported_exact() -> None:
    plan = _gr_plan(1e-3, inst=_four_outer_blocks())
    for block in (0, 1):
        report = plan.info["units"][("outer", block)]
        assert report.variables == 1 and report.iterations == 0 and report.deviation == 0.0
        assert report.fallback is False and report.message == "exact"
        assert report.truncation_error == 0.0 and report.grad_norm == 0.0
        assert report.seconds == 0.0 and report.block == block


def test_the_budget_comparison_is_inclusive() -> None:
    """A unit whose certified deviation equals its budget exactly (5 tau = d2) is accepted."""
    d2 = _deviation_after(2)
    tau = d2 / 5.0
    while 5.0 * tau != d2:  # the tau whose budget rounds to d2 exactly
        tau = float(np.nextafter(tau, np.inf if 5.0 * tau < d2 else 0.0))
    report = _inner(_gr_plan(tau, max_iter=2))
    assert report.deviation == 5.0 * tau and report.iterations == 2
    assert not report.fallback


def test_a_numerical_failure_falls_back_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A convex solve that hits a numerical failure is solved exactly; its report says why."""
    import otlp.global_resolution.iid as engine

    def singular(*args: object, **kwargs: object) -> None:
        raise np.linalg.LinAlgError("singular Hessian")

    monkeypatch.setattr(engine, "newton", singular)
    plan = _gr_plan(1e-3)
    report = _inner(plan)
    assert report.fallback and report.iterations == 0
    assert report.deviation == np.inf and report.grad_norm == np.inf
    assert report.message.startswith("numerical failure: singular Hessian; deviation inf")
    assert ("inner", None) in plan.info["fallback"] and otlp.verify(plan).ok


def test_tuple_form_units_fall_back_to_their_own_exact_networks() -> None:
    """Over tuple columns a unit's exact fallback uses its part of the full outer or inner
    network (block by block): the plan is exact and every lazy slice is the plan's."""
    inst = _four_outer_blocks()
    options = {"form": "tuples", "tau": 1e-7, "max_iter": 0}
    plan = otlp.solve(inst, "global_resolution", **options)
    assert plan.info["fallback"] == [("outer", 2), ("outer", 3), ("inner", None)]
    assert otlp.verify(plan).ok and plan.info["deviation_bounds"]["target_l1"] == 0.0
    assert plan.acceptance == pytest.approx(otlp.optimal_acceptance(inst).alpha_star, abs=1e-12)
    lazy = otlp.solve(inst, "global_resolution", check=False, **options)
    for column in inst.columns("tuples").members:
        omega = inst.tokens[column]
        want = plan.column_slice(plan.column_of(omega))
        assert lazy.local_slice(omega) == pytest.approx(want, abs=1e-12)


def test_wall_time_and_unit_seconds_add_up() -> None:
    """The plan's wall time is the sum of its units' (fallbacks included), each non-negative
    and within the time the call took (no clock thresholds)."""
    start = time.perf_counter()
    plan = otlp.solve(_four_outer_blocks(), "global_resolution", tau=1e-7, max_iter=1)
    elapsed = time.perf_counter() - start
    seconds = [r.seconds for r in plan.info["units"].values()]
    assert all(0.0 <= s <= elapsed for s in seconds)
    assert plan.wall_time == pytest.approx(sum(seconds), rel=1e-9)
    lazy = otlp.solve(_four_outer_blocks(), "global_resolution", tau=1e-7, max_iter=1, check=False)
    start = time.perf_counter()
    _, report = lazy.token_report(lazy.instance.tokens[[2, 3]])
    assert 0.0 <= report.seconds <= time.perf_counter() - start


def test_the_seed_minimizer_honours_max_iter() -> None:
    inst = _four_outer_blocks()
    plan = otlp.solve(inst, "global_resolution", tau=1e-9, minimizer="seed", max_iter=1)
    solved = [r for r in plan.info["units"].values() if r.message != "exact"]
    assert solved and all(r.iterations <= 1 and r.fallback for r in solved)


def test_engine_defaults_are_the_documented_ones() -> None:
    """tau = 1e-3, Newton with at most 50 iterations, the seed's L-BFGS-B with at most 25
    (Appendix K), exact fallback on; the i.i.d. engine refuses other schemes (n > 1)."""
    from otlp.global_resolution import GlobalResolution, make_engine

    inst = _four_outer_blocks()
    engine = GlobalResolution(inst)
    assert engine.tau == 1e-3 and engine.minimizer == "newton" and engine.max_iter == 50
    assert engine.allow_fallback is True and engine.seconds == 0.0
    assert GlobalResolution(inst, minimizer="seed").max_iter == 25
    assert GlobalResolution(inst, max_iter=7).max_iter == 7
    wor = otlp.Instance(inst.p, inst.q, 2, "without_replacement")
    with pytest.raises(ValueError, match="GlobalResolution handles schemes"):
        GlobalResolution(wor)
    single = GlobalResolution(otlp.Instance(inst.p, inst.q, 1, "without_replacement"))
    assert single.instance.n == 1  # one draft is one draw from q under every scheme
    assert make_engine(inst).tau == 1e-3 and make_engine(wor).tau == 1e-3


def _seed_truncation_oracle(q: np.ndarray, base: float, n: int, tau: float, inner: bool):
    """The seed's T by its definition: the fewest largest-q variables whose truncation error
    (outer eps_T = 1 - (q(H*) + q(T))^n, inner gamma_T = q(H*)^n - q(T)^n) is <= tau."""
    q = np.sort(q)[::-1]
    for size in range(q.size + 1):
        kept = float(q[:size].sum())
        if inner:
            error = (base + float(q.sum())) ** n - kept**n
        else:
            error = 1.0 - min(base + kept, 1.0) ** n
        if max(error, 0.0) <= tau:
            return size, max(error, 0.0)
    raise AssertionError("no truncation meets tau")


@pytest.mark.parametrize(("n", "zeros"), [(2, 0), (3, 0), (2, 1)])
def test_seed_truncation_keeps_the_fewest_largest_q_tokens_within_tau(n: int, zeros: int) -> None:
    """Appendix K: the seed truncates each system to the fewest tokens, by decreasing q, whose
    eps_T (outer) or gamma_T (inner) is at most tau; the report gives |T| and that error."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.full(30, 0.5)), rng.dirichlet(np.full(30, 0.5))
    p[np.argsort(q)[:zeros]] = 0.0  # tokens of H* with p = 0: the inner system's base
    inst = otlp.Instance(p / p.sum(), q, n)
    tau = 1e-3
    plan = otlp.solve(
        inst, "global_resolution", tau=tau, minimizer="seed", time_budget=None, check=False
    )
    assert plan.columns.count > 0
    inside = plan.info["H"]
    mask = np.isin(inst.tokens, inside)
    p, q = inst.p_local, inst.q_local
    units = plan.info["units"]
    outer = units[("outer", 0)]
    size, error = _seed_truncation_oracle(q[~mask], float(q[mask].sum()), n, tau, inner=False)
    assert 0 < size < int((~mask).sum()) or zeros  # a real truncation
    assert outer.variables == size
    assert outer.truncation_error == pytest.approx(error, rel=1e-9, abs=1e-15)
    inner = units[("inner", None)]
    variables = mask & (p > 0)
    size, error = _seed_truncation_oracle(
        q[variables], float(q[mask & (p <= 0)].sum()), n, tau, inner=True
    )
    assert inner.variables == size
    assert inner.truncation_error == pytest.approx(error, rel=1e-9, abs=1e-15)
    # Theorem 6.4 with eps = eps_T: L-BFGS-B stops at ||grad||_1 <= 2 tau and the certified
    # deviation is ||grad||_1 + 3 eps_T (<= 5 tau: no fallback here)
    for report in (outer, inner):
        assert report.grad_norm <= 2 * tau and not report.fallback
        expected = report.grad_norm + 3 * report.truncation_error
        assert report.deviation == pytest.approx(expected, rel=1e-12)
        assert report.deviation <= 5 * tau
    assert otlp.verify(plan).ok


def _seed_outer_errors(inst: otlp.Instance) -> np.ndarray:
    """eps_T of the seed's outer system for |T| = 0, 1, ... (H* does not depend on tau)."""
    plan = otlp.solve(inst, "global_resolution", minimizer="seed", check=False)
    mask = np.isin(inst.tokens, plan.engine.selection.H)
    q = np.sort(inst.q_local[~mask])[::-1]
    kept = float(inst.q_local[mask].sum()) + np.concatenate([[0.0], np.cumsum(q)])
    return np.maximum(1.0 - np.minimum(kept, 1.0) ** inst.n, 0.0)


@pytest.mark.parametrize(("n", "limit"), [(4, 10), (6, 10)])
def test_the_seeds_limit_on_t_is_inclusive(n: int, limit: int) -> None:
    """Appendix K caps |T| at 50/20/10/10 for n = 2..5 and at 10 beyond: |T| = limit is
    solved, |T| = limit + 1 is refused (and solved exactly instead)."""
    from otlp.global_resolution import GlobalResolution

    rng = np.random.default_rng(1)
    inst = otlp.Instance(rng.dirichlet(np.full(40, 0.3)), rng.dirichlet(np.full(40, 0.3)), n)
    errors = _seed_outer_errors(inst)
    assert errors.size > limit + 2 and errors[limit + 1] > 0
    for size in (limit, limit + 1):
        tau = float(errors[size])  # the fewest tokens within tau: exactly ``size``
        assert errors[size - 1] > tau
        engine = GlobalResolution(inst, tau, minimizer="seed", fallback=False, time_budget=None)
        refused = size > limit
        if refused:  # without the (here large) exact fallback, a refused unit raises
            with pytest.raises(RuntimeError, match="missed its budget"):
                engine.solve(("outer", 0))
        report = engine.solve(("outer", 0)) if not refused else engine.reports[("outer", 0)]
        assert report.variables == size
        message = f"|T| = {size} exceeds the seed's limit {limit}"
        assert (message in report.message) == refused
        assert report.fallback == refused and (report.iterations == 0) == refused


def test_an_empty_h_star_is_used_when_min_psi_ties_0_within_psi_tie() -> None:
    """H* is replaced by the empty set (alpha* = 1, psi 0) exactly when min psi > -PSI_TIE;
    the comparison is strict, and the method that found H* is kept."""
    from otlp.global_resolution import PSI_TIE
    from otlp.global_resolution.scheme_parts import tie_to_empty

    mask = np.array([True, False, True])
    tied = tie_to_empty(mask, -0.5 * PSI_TIE, "prefix")
    assert not tied.H_mask.any() and tied.psi_min == 0.0 and tied.method == "prefix"
    for value in (-PSI_TIE, -2.0 * PSI_TIE):
        kept = tie_to_empty(mask, value, "branch and bound")
        assert kept.H_mask.tolist() == mask.tolist() and kept.psi_min == value
        assert kept.method == "branch and bound"
    empty = tie_to_empty(np.zeros(3, dtype=bool), -0.5 * PSI_TIE, "prefix")
    assert empty.psi_min == -0.5 * PSI_TIE  # nothing to replace


def test_rounding_shortfall_is_restored_up_to_1e_12_inclusive() -> None:
    """An outer column short of its mass by 0 < s <= ROUNDING_SHORTFALL (1e-12) gets s back,
    split over its arcs in proportion to their target rows (equally when those are all 0);
    a larger shortfall or an excess is left alone."""
    import dataclasses

    from otlp.builders import outer_system
    from otlp.global_resolution import ROUNDING_SHORTFALL, restore_rounded_outer_flow

    assert ROUNDING_SHORTFALL == 1e-12
    inst = otlp.Instance(np.full(6, 1 / 6), np.full(6, 1 / 6), 2)
    mask = np.array([False, False, False, False, True, True])
    network = outer_system(inst, mask)  # the last column, {4, 5}, has no outer arc
    members = [tuple(int(t) for t in m if t >= 0) for m in network.columns.members]
    cols, tokens = network.arc_columns(), network.arc_tokens()
    mass = np.full(len(members), 0.1)
    values = np.zeros(cols.size)
    for c in range(len(members)):  # every column transported in full, split equally
        arcs = np.flatnonzero(cols == c)
        values[arcs] = mass[c] / max(arcs.size, 1)

    def arc(column: tuple[int, ...], token: int) -> int:
        return int(np.flatnonzero((cols == members.index(column)) & (tokens == token))[0])

    values[arc((0, 1), 1)] -= 3e-13  # short 3e-13: back in proportion 0.5 : 0.3
    shortfalls = (((2, 3), 1e-12), ((0, 2), 4e-13), ((2, 4), 2e-13), ((1, 3), 3e-12))
    for column, total in shortfalls:
        mass[members.index(column)] = total  # nothing transported: short by exactly total
        values[cols == members.index(column)] = 0.0
    values[arc((0, 3), 3)] += 1e-13  # an excess is not a shortfall
    network = dataclasses.replace(network, columns=dataclasses.replace(network.columns, mass=mass))
    rows = np.array([0.5, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0])
    restored = restore_rounded_outer_flow(network, values, rows)
    expected = values.copy()
    short = mass[members.index((0, 1))] - values[cols == members.index((0, 1))].sum()
    assert 0 < short <= ROUNDING_SHORTFALL
    expected[arc((0, 1), 0)] += short * 0.5 / 0.8
    expected[arc((0, 1), 1)] += short * 0.3 / 0.8
    expected[arc((2, 3), 2)] += 0.5e-12  # rows all 0: equal split
    expected[arc((2, 3), 3)] += 0.5e-12
    expected[arc((0, 2), 0)] += 4e-13  # all to the one arc with a positive row
    expected[arc((2, 4), 2)] += 2e-13  # one arc (4 is in H*), row 0: all to it
    assert restored == pytest.approx(expected, rel=0.0, abs=1e-17)
    sums = np.bincount(cols, weights=restored, minlength=len(members))
    for column in ((0, 1), (2, 3), (0, 2), (2, 4)):
        assert sums[members.index(column)] == pytest.approx(mass[members.index(column)], abs=1e-17)
    assert restore_rounded_outer_flow(network, np.zeros(0), rows).size == 0


# ----- subset selection's tie rule --------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_prefix_search_takes_the_shortest_optimal_prefix_on_ties(scheme: str) -> None:
    """p = q: psi(empty set) = psi(everything) = 0 = min psi; ties go to the shorter prefix,
    so H* is empty (alpha* = 1) rather than the whole draft vocabulary."""
    inst = otlp.Instance([0.5, 0.5], [0.5, 0.5], 2, scheme)
    selection = otlp.optimal_acceptance(inst, "prefix")
    assert selection.alpha_star == pytest.approx(1.0)
    assert selection.H.size == 0
    inst = otlp.Instance([0.25, 0.25, 0.5], [0.25, 0.25, 0.5], 2, scheme)
    assert otlp.optimal_acceptance(inst, "prefix").H.size == 0


def _asymmetric_pairs(count: int) -> list[otlp.Instance]:
    rng = np.random.default_rng(11)
    found = []
    for _ in range(count):
        size = int(rng.integers(2, 7))
        p, q1, q2 = (rng.dirichlet(np.full(size, 0.5)) for _ in range(3))
        found.append(otlp.Instance(p, [q1, q2], 2, "independent"))
    return found


def test_min_cut_for_two_independent_drafts_is_exact() -> None:
    """[GR] Appendix D's s-t cut equals brute force on 40 pairs with distinct draft rows."""
    for inst in _asymmetric_pairs(40):
        cut = otlp.optimal_acceptance(inst, "mincut")
        brute = otlp.optimal_acceptance(inst, "brute")
        assert cut.alpha_star == pytest.approx(brute.alpha_star, abs=1e-12), inst
        assert cut.psi_min == pytest.approx(brute.psi_min, abs=1e-12)


@pytest.mark.parametrize("n", [2, 3])
def test_prefix_search_from_exact_set_masses_below_the_smallest_normal(n: int) -> None:
    """Without replacement with subnormal draft masses the quadrature is out of range and the
    prefix values come from the exact set masses: they equal brute force."""
    rng = np.random.default_rng(n)
    for _ in range(6):
        p = rng.dirichlet(np.ones(5))
        q = rng.dirichlet(np.ones(5))
        q[rng.integers(5)] = 1e-310
        q /= q.sum()
        inst = otlp.Instance(p, q, n, "without_replacement")
        prefix = otlp.optimal_acceptance(inst, "prefix")
        brute = otlp.optimal_acceptance(inst, "brute")
        assert prefix.alpha_star == pytest.approx(brute.alpha_star, abs=1e-12)
        assert prefix.psi_min == pytest.approx(otlp.psi(inst, prefix.H_mask), abs=1e-15)
    tie = otlp.Instance([0.6, 0.4, 1e-310], [0.6, 0.4, 1e-310], 2, "without_replacement")
    selection = otlp.optimal_acceptance(tie, "prefix")  # psi(empty) = psi(all) = 0: a tie
    assert selection.alpha_star == pytest.approx(1.0) and selection.H.size == 0


def test_greedy_scheme_uses_its_closed_form_and_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    for _ in range(8):
        p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
        inst = otlp.Instance(p, q, 2, "greedy")
        brute = otlp.optimal_acceptance(inst, "brute")
        for method in ("auto", "prefix", "greedy"):
            fast = otlp.optimal_acceptance(inst, method)
            assert fast.method == "greedy"
            assert fast.alpha_star == pytest.approx(brute.alpha_star, abs=1e-12)
        cols = inst.columns("sets")
        for mask in rng.random((4, inst.k)) < 0.5:  # psi from the exact set masses
            inside = cols.mass[cols.contained_in(mask)].sum()
            expected = inst.p_local[mask].sum() - inside
            assert otlp.psi(inst, mask) == pytest.approx(expected, abs=1e-15)
    with pytest.raises(ValueError, match="greedy"):
        otlp.optimal_acceptance(otlp.Instance(p, q, 2), "greedy")


def test_subset_selection_refuses_methods_that_are_not_exact_for_the_scheme() -> None:
    """The prefix rule is exact only for i.i.d. or exchangeable drafts, the min cut only for
    n = 2 independent drafts, the greedy closed form only for the greedy scheme: anything
    else is refused (a wrong alpha* would pass silently)."""
    p, q2 = [0.5, 0.3, 0.2], [[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]
    for n in (2, 3):
        independent = otlp.Instance(p, (q2 + q2)[:n], n, "independent")
        with pytest.raises(
            ValueError, match=r"^method: 'prefix' is exact only for i\.i\.d\. or exch"
        ):
            otlp.optimal_acceptance(independent, "prefix")
    three = otlp.Instance(p, [q2[0], q2[1], q2[0]], 3, "independent")
    for inst in (otlp.Instance(p, q2[0], 2), three):
        with pytest.raises(
            ValueError, match=r"^method: 'mincut' applies to n = 2 independent drafts$"
        ):
            otlp.optimal_acceptance(inst, "mincut")
    with pytest.raises(
        ValueError, match=r"^method: 'greedy' is the closed form of the greedy draft scheme$"
    ):
        otlp.optimal_acceptance(otlp.Instance(p, q2[0], 2), "greedy")
    single = otlp.Instance(p, [q2[0]], 1, "independent")  # one draft: the prefix rule holds
    assert otlp.optimal_acceptance(single, "prefix").method == "prefix"
    assert otlp.optimal_acceptance(otlp.Instance(p, q2[0], 2), "prefix").method == "prefix"


def test_every_exact_method_gives_the_same_h_star_beyond_brute_forces_reach() -> None:
    """maxflow (any scheme) and mincut (independent n = 2) on 20 tokens, where brute force
    refuses: the same alpha* and H* (global ids) as the prefix rule or each other."""
    rng = np.random.default_rng(3)
    p, q1, q2 = (rng.dirichlet(np.ones(20)) for _ in range(3))
    iid = otlp.Instance(p, q1, 2)
    prefix, flow = (otlp.optimal_acceptance(iid, m) for m in ("prefix", "maxflow"))
    assert flow.method == "maxflow" and flow.alpha_star == pytest.approx(prefix.alpha_star)
    assert sorted(flow.H.tolist()) == sorted(prefix.H.tolist()) and prefix.H.size > 0
    independent = otlp.Instance(p, [q1, q2], 2, "independent")
    cut, flow = (otlp.optimal_acceptance(independent, m) for m in ("mincut", "maxflow"))
    assert cut.method == "mincut" and cut.alpha_star == pytest.approx(flow.alpha_star)
    assert sorted(cut.H.tolist()) == sorted(flow.H.tolist()) and cut.H.size > 0


def test_brute_force_is_limited_to_16_draft_tokens() -> None:
    flat = np.full(16, 1 / 16)
    inst = otlp.Instance(flat, flat, 1)
    assert otlp.optimal_acceptance(inst, "brute").alpha_star == pytest.approx(1.0)
    wide = otlp.Instance(np.full(17, 1 / 17), np.full(17, 1 / 17), 1)
    with pytest.raises(
        ValueError, match=r"^method: 'brute' enumerates 2\^k subsets; k=17 exceeds 16$"
    ):
        otlp.optimal_acceptance(wide, "brute")


# ----- the rules' exact laws ----------------------------------------------------------------


def _law_instances() -> list[otlp.Instance]:
    """Random pairs plus one-hot, near-one-hot and disjoint drafts, n = 2, two schemes."""
    rng = np.random.default_rng(23)
    pairs = [(rng.dirichlet(np.full(5, a)), rng.dirichlet(np.full(5, a))) for a in (0.3, 1, 3)]
    pairs += [(rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))) for _ in range(5)]
    base = rng.dirichlet(np.ones(4))
    pairs += [
        (base, np.array([1.0, 0, 0, 0])),
        (base, np.array([1 - 3e-12, 1e-12, 1e-12, 1e-12])),
        (np.array([1.0, 0, 0, 0]), base),
        (np.array([0.5, 0.5, 0, 0]), np.array([0, 0, 0.5, 0.5])),
        (np.array([0.1, 0.6, 0.3, 0]), np.array([0.7, 0.1, 0.1, 0.1])),
        (np.array([1.0, 0, 0, 0]), np.array([1.0, 0, 0, 0])),  # nothing left after the hub
    ]
    return [otlp.Instance(p, q, 2, renormalize=True) for p, q in pairs]


@pytest.mark.parametrize("name", ["spechub", "kseq", "rrs", "rrs_without_replacement", "sps"])
def test_exact_laws_of_the_sequential_rules(name: str) -> None:
    """Lossless exact law, closed-form acceptance = the exact joint's, never above alpha* of
    the rule's own joint, and each rule's own guarantee: SpecHub reaches it and outputs the
    hub with probability p(hub) ([SpecHub] Thm 1, Cor. 1), K-SEQ reaches (1 - 1/e) alpha*."""
    rule = otlp.rules.get(name)
    for inst in _law_instances():
        try:
            joint = rule.exact_joint(inst)
        except ValueError:  # n distinct drafts from a one-token draft
            continue
        assert np.abs(rule.output_distribution(inst) - inst.p).max() <= 1e-12, inst
        assert np.abs(joint.output() - rule.local_output(inst)).max() <= 1e-12, inst
        acceptance = rule.acceptance(inst)
        assert acceptance == pytest.approx(joint.acceptance(), abs=1e-12), inst
        own = rule.alpha_star(inst)
        assert acceptance <= own + 1e-12, inst
        if name == "spechub":
            assert acceptance == pytest.approx(own, abs=1e-12), inst
            ver = rule.verification(inst)
            assert ver.accepted[ver.hub] == pytest.approx(inst.target_rows[ver.hub], abs=1e-15)
            assert ver.accepted.sum() == pytest.approx(acceptance, abs=1e-15)
        if name == "kseq":
            alpha = otlp.optimal_acceptance(inst).alpha_star
            assert rule.procedural_acceptance(inst) >= (1 - np.exp(-1)) * alpha - 1e-12


# ----- validate's bounds --------------------------------------------------------------------------
KSEQ_CHECK = "rules.kseq.one_minus_1_over_e"


@pytest.mark.parametrize(("ratio", "holds"), [(0.62, False), (0.64, True)])
def test_kseq_check_enforces_exactly_1_minus_1_over_e(
    monkeypatch: pytest.MonkeyPatch, ratio: float, holds: bool
) -> None:
    """The check fails a K-SEQ that accepts 0.62 alpha* (< 1 - 1/e = 0.632) and passes one at
    0.64 alpha*: the bound is neither weakened (1 - e^-0.9 = 0.593) nor strengthened."""

    def procedural(self: KSeq, inst: otlp.Instance) -> float:
        return ratio * otlp.optimal_acceptance(inst).alpha_star

    monkeypatch.setattr(KSeq, "procedural_acceptance", procedural)
    for index in range(3):
        outcome = otlp.validate.replay(KSEQ_CHECK, seed=0, index=index)
        assert outcome.passed is holds, (index, outcome)


def test_kseq_check_passes_at_its_equality_cases() -> None:
    """p = q makes rho* = 1, c = 1, acceptance = procedural acceptance = 1 and p_res = 0:
    every side condition of the check sits exactly at its rounding slack, which must keep it
    passing; so must random pairs."""
    from otlp.validate.checks.rules import kseq_bound

    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 5):
        q = rng.dirichlet(np.ones(6))
        equal = otlp.Instance(q, q, n)
        assert KSeq().parameters(equal).rho == 1.0
        assert kseq_bound(equal).passed
        assert kseq_bound(otlp.Instance(rng.dirichlet(np.ones(6)), q, n)).passed
