"""Columns of tiny and subnormal draft mass (issue 17): every positive-mass column of every
materialised plan, of the verifier's view and of every rule's exact joint has a conditional
pi(. | omega) that is a distribution to 1e-9, whatever the column's mass.

The rule (docs/tiny-columns.md): conditionals are judged relative to the column's mass for
every column and every method; plans meet it because column sums are fitted to the mass
exactly (subnormal subtraction does not round) and rules because an empty residual falls
back to p."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import otlp
import otlp.rules
from otlp.plan import fit_columns

SLICE = 1e-9
# Issue 17: the global-resolution plan's column [0, 2, 1, 5] (mass 2.47e-322) summed to 1.02.
GR_P = [0.93549541169811889, 2.2303647070117674e-12, 2.2303647070117674e-12,
        0.06450468829519021, 2.2303647070117674e-12, 2.2303647070117673e-300]  # fmt: skip
GR_Q = [0.93549541168032668, 2.2303647085042888e-12, 2.2303647116879369e-12,
        0.064504688312982464, 2.2303647064956370e-12, 2.2303647080803042e-300]  # fmt: skip
# The cvxpy plan on a similar instance (n = 5): column [0, 2, 1, 5] of mass 5.83e-322 summed to
# 1.0085 after polishing scaled its entries down and rounding took them back up.
CVXPY_P = [0.9354953181409106, 2.2303644844756657e-12, 2.2303644842411693e-12,
           0.06450468185239835, 2.230364483452031e-12, 2.2303644838310115e-300]  # fmt: skip
CVXPY_Q = [0.9354953181200346, 2.2303644856967446e-12, 2.2303644882532703e-12,
           0.06450468187327422, 2.2303644838072533e-12, 2.230364484863535e-300]  # fmt: skip


def _assert_slices_are_distributions(plan: otlp.TransportPlan) -> None:
    report = otlp.verify(plan)
    assert report.ok, report.problems
    assert report.slices.max_sum_error <= SLICE and report.slices.min_entry >= -SLICE


@pytest.mark.parametrize("tau", [1e-3, 1e-6])
def test_global_resolution_plan_with_a_subnormal_column(tau: float) -> None:
    inst = otlp.Instance(GR_P, GR_Q, 4)
    plan = otlp.solve(inst, "global_resolution", tau=tau, check=False)
    omega = [0, 2, 1, 5]
    assert 0 < plan.columns.mass[plan.column_of(omega)] < 1e-320
    _assert_slices_are_distributions(plan)
    assert plan.slice(omega).sum() == pytest.approx(1.0, abs=SLICE)
    assert plan.column_slice(plan.column_of(omega)).sum() == pytest.approx(1.0, abs=SLICE)


@pytest.mark.parametrize("method", ["cvxpy", "highs", "maxflow", "pot", "highs-full"])
def test_materialised_plans_with_subnormal_columns(method: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cvxpy's solver chatter
        for p, q, n in ((CVXPY_P, CVXPY_Q, 5), (GR_P, GR_Q, 4)):
            inst = otlp.Instance(p, q, n)
            plan = otlp.solve(inst, method, check=False)
            assert (plan.columns.mass[plan.columns.mass > 0] < 1e-320).any()
            _assert_slices_are_distributions(plan)


def test_fit_columns_makes_a_subnormal_column_sum_to_its_mass() -> None:
    """Entries rounded up past a subnormal mass (2 units of 4.9e-324 over 154) are trimmed
    off the largest entry, exactly; normal columns over their mass by rounding likewise."""
    mass = np.array([7.61e-322, 0.5, 0.25, 0.0])
    entries = np.array([[3.0e-322, 0.3, 0.25, 0.0], [2.5e-322, 0.2 + 1e-16, 0.0, 0.0],
                        [2.2e-322, 0.0, 0.0, 0.0]])  # fmt: skip
    explicit = sp.csc_matrix(entries)
    assert explicit[:, 0].sum() > mass[0]
    residual = fit_columns(explicit, mass)
    sums = np.asarray(explicit.sum(axis=0)).ravel()
    assert (sums <= mass).all() and (residual >= 0).all()
    assert sums[0] + residual[0] == mass[0]  # exact below the smallest normal
    excess = entries[:, 0].sum() - mass[0]
    assert explicit[0, 0] == entries[0, 0] - excess  # the largest entry took it all
    assert explicit[1, 0] == 2.5e-322 and explicit[0, 2] == 0.25  # others untouched
    assert explicit[1, 1] == entries[1, 1] < explicit[0, 1]  # column 1: only its largest
    np.testing.assert_allclose((sums + residual)[:3] / mass[:3], 1.0, rtol=1e-15)


def test_spechub_row_of_a_tiny_draft_pair_is_a_distribution() -> None:
    """Issue 17: p = e_2, drafts q1 = [1e-12, 0, 1 - 1e-12, 0], q2 = e_0: the hub step's
    p(a) - sum Q'(a, .) cancelled to 0.99998e-12 and the empty residual dropped 2.2e-5 of the
    row of mass 1e-12."""
    inst = otlp.Instance(
        [0, 0, 1.0, 0], [[1e-12, 0, 1 - 1e-12, 0], [1.0, 0, 0, 0]], 2, "independent"
    )
    joint = otlp.rules.get("spechub").exact_joint(inst)
    rows = joint.out[joint.mass > 0]
    assert np.abs(rows.sum(axis=1) - 1).max() <= 1e-15 and rows.min() >= 0
    assert otlp.rules.get("spechub").conditional(inst, [0, 2]) == pytest.approx([0, 0, 1, 0])


def _adversarial(rng: np.random.Generator, size: int) -> np.ndarray:
    """A vector with tiny, subnormal and zero entries, often nearly one-hot."""
    scale = rng.choice([1.0, 1e-12, 1e-20, 1e-300, 1e-310, 0.0], size=size,
                       p=[0.45, 0.15, 0.1, 0.1, 0.1, 0.1])  # fmt: skip
    w = rng.dirichlet(np.ones(size)) * scale
    if rng.random() < 0.3:
        w = rng.choice([1e-12, 1e-16, 1e-300, 0.0], size=size)
        w[rng.integers(size)] = 1.0
    if not w.sum() > 0:
        w[0] = 1.0
    return w / w.sum()


def _adversarial_instances(count: int, seed: int = 17) -> list[otlp.Instance]:
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        size, n = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        scheme = str(rng.choice(["iid", "independent", "without_replacement"]))
        p = _adversarial(rng, size)
        q = [_adversarial(rng, size) for _ in range(n)] if scheme == "independent" else None
        try:
            found.append(otlp.Instance(p, q or _adversarial(rng, size), n, scheme))
        except ValueError:  # fewer draft tokens than distinct drafts
            continue
    return found


@pytest.mark.parametrize("name", otlp.rules.names())
def test_every_rules_exact_joint_has_distributions_for_rows(name: str) -> None:
    """Near-one-hot, 1e-12, 1e-300 and subnormal drafts in every scheme (spechub failed 5 of
    300 such instances before the fix, with a row summing to 0)."""
    rule = otlp.rules.get(name)
    checked = 0
    for inst in _adversarial_instances(60):
        try:
            joint = rule.exact_joint(inst)
        except ValueError:  # a joint this instance cannot have (n, scheme)
            continue
        rows = joint.out[joint.mass > 0]
        assert rows.min() >= -SLICE, (name, inst)
        assert np.abs(rows.sum(axis=1) - 1).max() <= SLICE, (name, inst)
        checked += 1
    assert checked >= 10, name


def test_global_resolution_column_of_subnormal_mass_without_residual_rows() -> None:
    """otlp fuzz (seed 12, case 2170): without replacement, every row of p transported, and a
    column of mass 1.64e-319 one subnormal unit (5e-324) short of its mass. With no residual
    row to carry that unit, pi(. | omega = [7, 8, 1]) summed to 0.99975."""
    p = [0.28047671525642154, 2.0556805181565042e-160, 0.6022274828189214,
         3.8370500713963914e-12, 3.837050071584229e-12, 3.837050075623421e-12,
         0.0715835259937409, 0.0457122759194049, 3.289098978720039e-160]  # fmt: skip
    q = [0.280476715251699, 2.0556805190813905e-160, 0.6022274828205688,
         3.837050075188854e-12, 3.837050074946696e-12, 3.837050075082251e-12,
         0.07158352599092814, 0.045712275925292783, 3.2890989809260417e-160]  # fmt: skip
    inst = otlp.Instance(p, q, 3, "without_replacement")
    plan = otlp.solve(inst, "global_resolution", tau=1e-4, check=False)
    report = otlp.verify(plan)
    assert report.ok, report.problems
    assert report.slices is not None and report.slices.max_sum_error <= 1e-9
