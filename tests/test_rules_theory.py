"""The seeds' stated properties of the rules, checked numerically on random instances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import otlp
from instances.generators import spechub_toy_pair
from otlp import rules
from otlp.rules.couplings import communication_free_bound
from otlp.rules.mentored import kl_divergence, mentored_solution
from tests.strategies import instances, weight_vectors

EXACT = 1e-9
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def smooth_pairs(draw: st.DrawFn, vocab: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Dense (p, q) pairs from Dirichlet draws (no exact ties or zeros)."""
    seed = draw(st.integers(0, 2**32 - 1))
    concentration = draw(st.sampled_from([0.2, 0.5, 1.0, 3.0]))
    rng = np.random.default_rng(seed)
    return tuple(rng.dirichlet(np.full(vocab, concentration)) for _ in range(2))


# ----- seed 004: communication-free couplings ------------------------------------------------
@FAST
@given(instances(schemes=("iid",), max_vocab=7, max_n=1))
def test_gumbel_beats_minhash_beats_the_tv_bound(inst: otlp.Instance) -> None:
    """sps = 1 - TV >= Gumbel >= MinHash >= (1 - TV) / (1 + TV) (seed 004)."""
    sps, gumbel, minhash = (rules.get(n).acceptance(inst) for n in ("sps", "gumbel", "minhash"))
    assert sps + EXACT >= gumbel >= minhash - EXACT
    assert minhash >= communication_free_bound(inst) - EXACT


def test_gumbel_strictly_beats_minhash_somewhere() -> None:
    """Seed 004: 'there exist distributions where inequality is strict'."""
    inst = otlp.Instance([0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], 1)
    gumbel, minhash = rules.get("gumbel").acceptance(inst), rules.get("minhash").acceptance(inst)
    assert gumbel > minhash + 1e-3


# ----- K-SEQ --------------------------------------------------------------------------------
@FAST
@given(instances(schemes=("iid",), max_vocab=7, max_n=4))
def test_kseq_reaches_a_1_minus_1_over_e_fraction_of_alpha_star(inst: otlp.Instance) -> None:
    kseq = rules.get("kseq")
    par = kseq.parameters(inst)
    assert 1.0 <= par.rho <= inst.n
    q = np.append(inst.q_local, 0.0)
    p = np.append(inst.p_local, inst.p_outside)
    assert np.all(p - par.c * q * par.accept >= -1e-12)  # p_res >= 0: rho is valid
    if par.rho > 1.0:  # rho* is the root: a slightly smaller rho is invalid
        assert par.c == pytest.approx(par.rho, rel=1e-9)
    alpha = otlp.optimal_acceptance(inst).alpha_star
    procedural = kseq.procedural_acceptance(inst)
    assert kseq.acceptance(inst) + EXACT >= procedural >= (1 - 1 / np.e) * alpha - EXACT


# ----- seed 001: SpecHub --------------------------------------------------------------------
def _pair_instance(p: np.ndarray, q: np.ndarray) -> otlp.Instance:
    return otlp.Instance(p, q, 2)


@FAST
@given(smooth_pairs())
def test_spechub_is_optimal_for_its_own_joint(pair: tuple[np.ndarray, np.ndarray]) -> None:
    """Theorem 1: its acceptance equals the optimum of the simplified LP over the hub joint
    (built with otlp.builders.spechub_lp, solved by HiGHS); Corollary 1: the hub token is
    accepted with probability p(a)."""
    inst = _pair_instance(*pair)
    hub = rules.get("spechub")
    acceptance = hub.acceptance(inst)
    assert acceptance == pytest.approx(hub.lp_optimum(inst), abs=1e-8)
    ver = hub.verification(inst)
    assert ver.accepted[ver.hub] == pytest.approx(inst.p_local[ver.hub], abs=EXACT)


@FAST
@given(smooth_pairs())
def test_spechub_theorem_3_beats_rrs_when_the_hub_is_heavy(
    pair: tuple[np.ndarray, np.ndarray],
) -> None:
    """Theorem 3: q(a) / (1 - q(a)) > 1 - alpha (alpha = sum min(p, q)) => SpecHub >= RRS."""
    inst = _pair_instance(*pair)
    q_a = inst.q_local.max()
    alpha = float(np.minimum(inst.p_local, inst.q_local).sum())
    assume(q_a / (1 - q_a) > 1 - alpha)
    assert rules.get("spechub").acceptance(inst) >= rules.get("rrs").acceptance(inst) - EXACT


@FAST
@given(st.floats(0.51, 0.95), smooth_pairs(vocab=6))
def test_spechub_theorem_4_beats_the_iid_optimum_when_q_a_exceeds_half(
    hub_mass: float, pair: tuple[np.ndarray, np.ndarray]
) -> None:
    """Theorem 4: q(a) > 1/2 => SpecHub >= alpha* of two i.i.d. drafts (OTM)."""
    p, q = pair
    q = np.append(q * (1 - hub_mass), hub_mass)
    p = np.append(p * 0.7, 0.3)
    inst = _pair_instance(p, q)
    alpha_iid = otlp.optimal_acceptance(inst).alpha_star
    assert rules.get("spechub").acceptance(inst) >= alpha_iid - EXACT


def test_theorem_3_condition_matters() -> None:
    """Without the condition SpecHub can lose to RRS (so the property test can fail)."""
    found = False
    for seed in range(200):
        p, q = spechub_toy_pair(20, temperature=1.0, similarity=0.2, seed=seed)
        inst = _pair_instance(p, q)
        if rules.get("spechub").acceptance(inst) < rules.get("rrs").acceptance(inst) - 1e-6:
            q_a = inst.q_local.max()
            alpha = float(np.minimum(inst.p_local, inst.q_local).sum())
            assert q_a / (1 - q_a) <= 1 - alpha
            found = True
    assert found


# ----- seed 003: mentored decoding ------------------------------------------------------------
@FAST
@given(smooth_pairs(), st.floats(0.001, 0.9))
def test_mentored_saturates_the_kl_budget(
    pair: tuple[np.ndarray, np.ndarray], fraction: float
) -> None:
    p, q = pair
    inst = otlp.Instance(p, q, 1)
    budget = fraction * kl_divergence(p, q)
    rule = rules.get("mentored", kl_budget=budget)
    sol = rule.solution(inst)
    assert sol.kl == pytest.approx(budget, abs=1e-9, rel=1e-7)
    assert kl_divergence(inst.p, rule.output_distribution(inst)) == pytest.approx(sol.kl)
    assert np.all((0 <= sol.accept) & (sol.accept <= 1)) and sol.select.sum() == pytest.approx(1)
    assert sol.acceptance >= rules.get("sps").acceptance(inst) - EXACT


@FAST
@given(smooth_pairs(vocab=5), st.floats(0.01, 0.5), st.integers(0, 2**32 - 1))
def test_mentored_beats_random_feasible_rules(
    pair: tuple[np.ndarray, np.ndarray], fraction: float, seed: int
) -> None:
    """No (r, s) with KL(p || q r + s (1 - R)) <= D accepts more than the solution (Eq. 1)."""
    p, q = pair
    budget = fraction * kl_divergence(p, q)
    best = rules.get("mentored", kl_budget=budget).solution(otlp.Instance(p, q, 1))
    rng = np.random.default_rng(seed)
    r = rng.random((2000, 5)) ** 0.3
    s = rng.dirichlet(np.ones(5), size=2000)
    accept = r @ q
    pi = q * r + s * (1 - accept)[:, None]
    kl = (p * np.log(p / pi)).sum(axis=1)
    assert np.all(accept[kl <= budget] <= best.acceptance + 1e-9)


def test_mentored_limits() -> None:
    """D = 0 is speculative sampling; D >= KL(p || q) accepts every draft."""
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    inst = otlp.Instance(p, q, 1)
    lossless = rules.get("mentored", kl_budget=0.0)
    assert lossless.acceptance(inst) == pytest.approx(0.7)
    assert lossless.output_distribution(inst) == pytest.approx(p)
    greedy = rules.get("mentored", kl_budget=kl_divergence(p, q))
    assert greedy.acceptance(inst) == 1.0
    assert greedy.output_distribution(inst) == pytest.approx(q)


@FAST
@given(instances(schemes=("iid",), max_vocab=6, max_n=1))
def test_mentored_frontier_is_monotone(inst: otlp.Instance) -> None:
    """Acceptance never decreases as the KL allowance grows, along the exact alpha family and
    along the budget solutions; alpha = 1 is speculative sampling."""
    rule = rules.get("mentored")
    family = rule.frontier(inst)
    assert np.all(np.diff(family.kl) >= -1e-12)
    assert np.all(np.diff(family.acceptance) >= -1e-12)
    assert family.kl[0] == pytest.approx(0.0, abs=1e-12)
    assert family.acceptance[0] == pytest.approx(rules.get("sps").acceptance(inst), abs=EXACT)
    finite = family.kl[np.isfinite(family.kl)]
    budgets = np.linspace(0.0, finite.max() if finite.size else 1.0, 7)
    by_budget = rule.frontier(inst, budgets=budgets)
    assert np.all(np.diff(by_budget.acceptance) >= -1e-9)
    assert np.all(by_budget.kl <= budgets + 1e-9)


@given(weight_vectors(6), weight_vectors(6), st.floats(0.05, 1.0))
@settings(max_examples=40, deadline=None)
def test_mentored_solution_matches_its_defining_equations(
    p: np.ndarray, q: np.ndarray, alpha: float
) -> None:
    """1 - R = sum relu(q - p / alpha) = sum relu(p / beta - q) (seed 003, Eqs. 24 and 28)."""
    sol = mentored_solution(p, q, alpha)
    rejected = 1 - sol.acceptance
    assert rejected == pytest.approx(np.maximum(q - p / alpha, 0).sum(), abs=EXACT)
    if rejected > 1e-12:
        assert rejected == pytest.approx(np.maximum(p / sol.beta - q, 0).sum(), abs=1e-9)
        assert sol.beta >= 1 - 1e-12
    assert sol.output.sum() == pytest.approx(1.0, abs=EXACT)
