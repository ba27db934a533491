"""P(all drafts in H) without replacement by the exponential-clock quadrature ([GR] App. S)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otlp
import otlp.rules
from otlp.columns import build_columns
from otlp.solvers.global_resolution.clocks import discretisation_bound, prefix_complements, step
from tests.profiles import examples


@st.composite
def degenerate_drafts(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """Draft vectors with ties, 1e-300 masses and nearly one-hot rows, and a draft count n."""
    k = draw(st.integers(1, 8))
    kind = draw(st.sampled_from(["ties", "tiny", "one-hot", "random"]))
    if kind == "ties":
        q = np.array(draw(st.lists(st.integers(1, 3), min_size=k, max_size=k)), float)
    elif kind == "tiny":
        q = np.array(draw(st.lists(st.sampled_from([1.0, 1e-12, 1e-300]), min_size=k, max_size=k)))
        q[0] = 1.0
    elif kind == "one-hot":
        q = np.full(k, draw(st.sampled_from([1e-9, 1e-15, 1e-300])))
        q[draw(st.integers(0, k - 1))] = 1.0
    else:
        seed = draw(st.integers(0, 2**31))
        q = np.random.default_rng(seed).dirichlet(np.full(k, draw(st.sampled_from([0.1, 1.0]))))
        q = np.maximum(q, 1e-300)
    n = draw(st.integers(1, min(k, 5)))
    return q / q.sum(), n


@settings(max_examples=examples(300), deadline=None)
@given(degenerate_drafts())
def test_prefix_complements_match_exact_set_masses_within_their_bound(
    case: tuple[np.ndarray, int],
) -> None:
    q, n = case
    k = q.shape[0]
    cols = build_columns("sets", np.repeat(q[None, :], n, axis=0), n, "without_replacement")
    result = prefix_complements(q, n)
    for i in range(k + 1):
        mask = np.arange(k) < i
        exact = float(cols.mass[~cols.contained_in(mask)].sum())  # a sum of positive terms
        assert abs(result.values[i] - exact) <= result.error[i] + 1e-14 * exact  # its own rounding
        assert result.error[i] <= 1e-11 * exact


@settings(max_examples=examples(200), deadline=None)
@given(degenerate_drafts(), st.integers(0, 2**31))
def test_alpha_star_without_replacement_matches_brute_force(
    case: tuple[np.ndarray, int], seed: int
) -> None:
    q, n = case
    p = np.random.default_rng(seed).dirichlet(np.ones(q.shape[0]))
    if seed % 4 == 0:
        p = q.copy()  # ties in q/p everywhere
    inst = otlp.Instance(p, q, n, "without_replacement")
    fast = otlp.optimal_acceptance(inst, "prefix")
    brute = otlp.optimal_acceptance(inst, "brute")
    assert fast.alpha_star == pytest.approx(brute.alpha_star, abs=1e-12)
    assert otlp.psi(inst, fast.H_mask) == pytest.approx(fast.psi_min, abs=1e-13)


@pytest.mark.parametrize(
    ("p", "q"),
    [  # fuzz seed 42, cases 15662 and 16247: alpha* was 1 (the pair closed form overflowed)
        ([1.6e-310, 0.0725336, 0.9274664], [1.0, 1.28e-309, 9.22e-310]),
        ([1.36e-309, 2.6e-309, 1.0], [4.26e-310, 1.0, 2.72e-310]),
    ],
)
def test_alpha_star_of_two_draws_when_all_but_a_subnormal_mass_is_one_draft(
    p: list[float], q: list[float]
) -> None:
    inst = otlp.Instance(np.array(p), np.array(q), 2, "without_replacement")
    fast = otlp.optimal_acceptance(inst, "prefix")
    brute = otlp.optimal_acceptance(inst, "brute")
    assert fast.alpha_star == pytest.approx(brute.alpha_star, abs=1e-12)
    assert fast.alpha_star < 0.6  # the second draw is one of the two subnormal tokens
    assert otlp.solve(inst, "maxflow_cs").acceptance == pytest.approx(fast.alpha_star, abs=1e-9)


def test_large_instances_are_no_longer_refused() -> None:
    """(k, n) = (1000, 8) has C(1000, 8) ~ 2.4e19 draft sets; the quadrature needs none."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.full(1000, 0.3)), rng.dirichlet(np.full(1000, 0.3))
    wor = otlp.optimal_acceptance(otlp.Instance(p, q, 8, "without_replacement"))
    iid = otlp.optimal_acceptance(otlp.Instance(p, q, 8))
    assert iid.alpha_star <= wor.alpha_star <= 1.0


def test_step_meets_the_error_target_and_shrinks_with_n() -> None:
    steps = [step(n) for n in range(1, 11)]
    assert all(discretisation_bound(n, h) <= 1e-13 for n, h in enumerate(steps, start=1))
    assert steps == sorted(steps, reverse=True)


def test_subnormal_draft_masses_fall_back_to_exact_set_masses() -> None:
    """otlp fuzz: the third draw without replacement lands on one of two subnormal tokens with
    probability ~1; the quadrature clamped their clocks and returned alpha* 0.38 (true 0.91)."""
    p = [0.6204118411006295, 0.11668738558635822, 0.26290077331301226, 1.725381851975e-310]
    q = [1.08707184956037e-309, 0.9560944817299354, 0.04390551827006474, 9.7203774087777e-310]
    inst = otlp.Instance(p, q, 3, "without_replacement", renormalize=True)
    brute = otlp.optimal_acceptance(inst, "brute").alpha_star
    assert otlp.optimal_acceptance(inst).alpha_star == pytest.approx(brute, abs=1e-12)
    assert otlp.rules.get("rrs_without_replacement").acceptance(inst) <= brute + 1e-12
    plan = otlp.solve(inst, "global_resolution")  # exact H*; units fall back where needed
    assert plan.verification.ok and plan.acceptance == pytest.approx(brute, abs=1e-9)
