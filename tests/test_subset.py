"""Subset selection ([GR] Theorem 3.1) against brute force and against each other."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otlp
from tests.profiles import examples
from tests.strategies import instances, weight_vectors

PSI_ROUNDING = 64 * np.finfo(float).eps  # 1.4e-14: V <= 8 terms of size <= 1, two orders


@settings(max_examples=150, deadline=None)
@given(instances())
def test_default_method_matches_brute_force(inst: otlp.Instance) -> None:
    fast = otlp.optimal_acceptance(inst)
    brute = otlp.optimal_acceptance(inst, "brute")
    assert fast.alpha_star == pytest.approx(brute.alpha_star, abs=1e-12)
    # psi(H) recomputed vs the search's running value: two summation orders of the same
    # O(1) terms, each within a few V ulps (5.9e-15 was seen for n = 1 without replacement)
    assert otlp.psi(inst, fast.H_mask) == pytest.approx(fast.psi_min, abs=PSI_ROUNDING)


@settings(max_examples=examples(200), deadline=None)
@given(instances())
def test_min_cut_of_relaxed_network_gives_alpha_star(inst: otlp.Instance) -> None:
    exact = otlp.optimal_acceptance(inst, "brute").alpha_star
    assert otlp.optimal_acceptance(inst, "maxflow").alpha_star == pytest.approx(exact, abs=1e-12)


@settings(max_examples=examples(300), deadline=None)
@given(instances(schemes=("without_replacement",), max_vocab=7, max_n=4))
def test_prefix_search_is_exact_without_replacement(inst: otlp.Instance) -> None:
    """The q/p prefix rule is only trusted for sampling without replacement after this check."""
    prefix = otlp.optimal_acceptance(inst, "prefix").alpha_star
    assert prefix == pytest.approx(otlp.optimal_acceptance(inst, "brute").alpha_star, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6).flatmap(lambda v: st.tuples(*(weight_vectors(v) for _ in range(3)))))
def test_qpbo_min_cut_for_two_independent_drafts(vectors: tuple[np.ndarray, ...]) -> None:
    p, q1, q2 = vectors
    inst = otlp.Instance(p, [q1, q2], 2, "independent")
    cut = otlp.optimal_acceptance(inst, "mincut")
    assert cut.alpha_star == pytest.approx(otlp.optimal_acceptance(inst, "brute").alpha_star)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8).flatmap(lambda v: st.tuples(weight_vectors(v), weight_vectors(v))))
def test_single_draft_is_sum_of_minimums(pair: tuple[np.ndarray, np.ndarray]) -> None:
    p, q = pair
    inst = otlp.Instance(p, q, 1)
    assert otlp.optimal_acceptance(inst).alpha_star == pytest.approx(np.minimum(p, q).sum())


def test_top_k_keeps_target_mass_outside_the_draft_vocabulary() -> None:
    p = np.array([0.1, 0.2, 0.3, 0.4])
    q = np.array([0.5, 0.3, 0.15, 0.05])
    inst = otlp.Instance(p, q, 2, top_k=2)
    assert inst.tokens.tolist() == [0, 1]
    assert inst.p_local.tolist() == [0.1, 0.2]  # sliced, not renormalised
    assert inst.q_local == pytest.approx([0.625, 0.375])
    assert inst.p_outside == pytest.approx(0.7)
    # psi(H) = p(H) - q(H)^2 over subsets of {0, 1}: the best is H = {0, 1}.
    assert otlp.optimal_acceptance(inst).alpha_star == pytest.approx(1 + 0.3 - 1.0)


def test_identical_distributions_accept_everything() -> None:
    p = np.array([0.5, 0.25, 0.25])
    for n in (1, 2, 3):
        assert otlp.optimal_acceptance(otlp.Instance(p, p, n)).alpha_star == pytest.approx(1.0)


def test_disjoint_supports_accept_nothing() -> None:
    inst = otlp.Instance([0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], 3)
    assert otlp.optimal_acceptance(inst).alpha_star == pytest.approx(0.0)


def test_unknown_method_is_rejected() -> None:
    inst = otlp.Instance([1.0], [1.0], 1)
    with pytest.raises(ValueError, match="method"):
        otlp.optimal_acceptance(inst, "magic")
