"""The LPs of [GBV] and the theorems checked with them.

The LP formulas were reconstructed (the seed lost its equations); the definition-level
coupling LP below is built straight from Definition 4.1 (prefix- and target-matching over
K-tuples of paths), so agreement confirms the reconstruction of Theorem 4.3.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import otlp
from otlp.multistep import (
    NodeSpace,
    antichain_violations,
    budget_violation,
    enumerate_antichains,
    expected_accepted,
    model_pair,
    multi_path_lp,
    output_distribution,
    output_law,
    single_path_lp,
    skewed_table,
    tabulate,
    target_distribution,
)
from otlp.multistep.lp import best_antichain, phi
from otlp.multistep.models import prefix_digits
from otlp.multistep.table import PrefixTable
from otlp.solvers.base import LinearProgram
from otlp.solvers.registry import get_backend
from tests.strategies import model_pairs

LP_TOL = 1e-7


# ----- single path: Theorem 3.3 / 3.4 ----------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(model_pairs(sparsities=(0.0, 0.4), distances=(0.5,), max_gamma=4))
def test_block_verification_attains_the_single_path_lp_optimum(pair: tuple) -> None:
    """[GBV] Theorem 3.4; BV's node budgets are an optimal LP solution."""
    target, draft, gamma = pair
    lp = single_path_lp(target, draft, gamma)
    law = output_law(target, draft, gamma, "block")
    assert abs(law.expected_accepted - lp.expected_accepted) < LP_TOL
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    assert budget_violation(law.node_budgets(tgt), tgt, dft, 1) < 1e-12
    token = output_law(target, draft, gamma, "token")
    assert budget_violation(token.node_budgets(tgt), tgt, dft, 1) < 1e-12


# ----- multi path: Theorem 4.3, Lemma 4.5 -------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(model_pairs(sparsities=(0.0, 0.4), distances=(0.5,), max_gamma=3), st.integers(2, 3))
def test_lossless_multi_path_methods_are_feasible_and_below_the_optimum(
    pair: tuple, paths: int
) -> None:
    """GBV's and the traversal's node budgets are feasible in the K-path LP (Theorem 4.3), so
    their block efficiency never exceeds its optimum; GBV's skewed draft satisfies the
    antichain inequalities (Lemma 4.5)."""
    target, draft, gamma = pair
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    lp = multi_path_lp(tgt, dft, gamma, paths)
    assert lp.max_violation < 1e-7
    for method in ("gbv", "spectr"):
        law = output_law(tgt, dft, gamma, method, paths)
        assert law.expected_accepted <= lp.expected_accepted + LP_TOL, method
        assert budget_violation(law.node_budgets(tgt), tgt, dft, paths) < 1e-9, method
    space = NodeSpace(tgt.vocab_size, gamma)
    skewed = space.masses(skewed_table(tgt, dft, gamma, paths))
    worst = antichain_violations(skewed, space.masses(dft), space, paths)[0][1]
    assert worst < 1e-12


@pytest.mark.parametrize(("vocab", "gamma"), [(2, 3), (3, 2)])
def test_skewed_draft_satisfies_every_enumerated_antichain(vocab: int, gamma: int) -> None:
    """Lemma 4.5 by brute force over all antichains, and tight on full levels."""
    target, draft = model_pair("tree", vocab, seed=2, sparsity=0.3, depth=gamma + 1)
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    space = NodeSpace(vocab, gamma)
    masks = enumerate_antichains(space)
    for paths in (2, 3):
        skewed = space.masses(skewed_table(tgt, dft, gamma, paths))
        slack = phi(masks @ space.masses(dft), paths) - masks @ skewed
        assert slack.min() > -1e-12
        for d in range(1, gamma + 1):
            assert abs(skewed[space.level(d)].sum() - 1.0) < 1e-12


@pytest.mark.parametrize(("vocab", "gamma"), [(2, 3), (3, 2)])
def test_antichain_enumeration_and_separation_oracle(vocab: int, gamma: int) -> None:
    """Counts of antichains; the oracle's worst violation is the exact maximum."""
    space = NodeSpace(vocab, gamma)
    masks = enumerate_antichains(space)
    # Antichains of a complete V-ary tree: a(h) = 1 + a(h - 1)^V per subtree, a(0) = 2.
    per_subtree = 2
    for _ in range(gamma - 1):
        per_subtree = 1 + per_subtree**vocab
    assert masks.shape[0] == per_subtree**vocab - 1
    assert len({m.tobytes() for m in masks}) == masks.shape[0]
    for m in masks[:: max(1, masks.shape[0] // 50)]:
        chosen = np.flatnonzero(m)
        assert all(not _is_prefix(a, b, space) for a in chosen for b in chosen if a != b)
    rng = np.random.default_rng(0)
    signs = set()
    for trial in range(40):
        _, model = model_pair("tree", vocab, seed=trial, sparsity=0.3, depth=gamma)
        draft = space.masses(tabulate(model, gamma))
        paths = 1 + trial % 3
        # Near the boundary: node weights are a random fraction of their singleton bound.
        weights = phi(draft, paths) * rng.uniform(0.3, 1.0 + 0.2 * (trial % 2), size=space.size)
        brute = float((masks @ weights - phi(masks @ draft, paths)).max())
        oracle = antichain_violations(weights, draft, space, paths)[0][1]
        assert abs(max(brute, 0.0) - max(oracle, 0.0)) < 1e-12
        signs.add(brute > 0)
        values = weights - 0.3 * draft
        best = best_antichain(values, space)
        assert abs(max(0.0, (masks @ values).max()) - values[best].sum()) < 1e-12
    assert signs == {True, False}


def _is_prefix(a: int, b: int, space: NodeSpace) -> bool:
    """Whether node a is a proper prefix of node b (global node ids)."""

    def locate(node: int) -> tuple[int, int]:
        for d in range(1, space.gamma + 1):
            if space.level(d).start <= node < space.level(d).stop:
                return d, node - space.level(d).start
        raise AssertionError(node)

    (da, ia), (db, ib) = locate(a), locate(b)
    return da < db and ib // space.vocab_size ** (db - da) == ia


@pytest.mark.parametrize(
    ("vocab", "gamma", "paths", "seed"), [(2, 3, 2, 3), (2, 3, 3, 4), (3, 2, 2, 4), (3, 2, 3, 3)]
)
def test_lazy_constraint_generation_matches_all_antichains(
    vocab: int, gamma: int, paths: int, seed: int
) -> None:
    """Seeds chosen so that the singleton rows alone are not enough (several rounds)."""
    target, draft = model_pair("tree", vocab, seed=seed, depth=gamma + 1)
    full = multi_path_lp(target, draft, gamma, paths, constraints="all")
    for mode in ("slopes", "antichains"):
        lazy = multi_path_lp(target, draft, gamma, paths, constraints=mode)
        assert abs(lazy.expected_accepted - full.expected_accepted) < LP_TOL
        assert lazy.cuts < full.cuts and lazy.rounds > 1


def _definition_lp(target: PrefixTable, draft: PrefixTable, gamma: int, paths: int) -> float:
    """Best block efficiency over all valid K-path algorithms, straight from Definition 4.1:
    a coupling pi(omega, s) of K i.i.d. draft paths omega and outputs s whose s[:-1] is a
    prefix of a drafted path (prefix-matching) and whose output, continued by the target,
    has the target's law on V**(L+1) (target-matching)."""
    vocab = target.vocab_size
    tuples = list(itertools.product(range(vocab**gamma), repeat=paths))
    tokens = prefix_digits(np.arange(vocab**gamma), vocab, gamma)
    outputs = [
        tuple(s) for n in range(1, gamma + 2) for s in itertools.product(range(vocab), repeat=n)
    ]
    pairs = [
        (i, j)
        for i, tup in enumerate(tuples)
        for j, s in enumerate(outputs)
        if any(tuple(tokens[t][: len(s) - 1]) == s[:-1] for t in tup)
    ]
    rows, cols = np.array(pairs).T
    mass = draft.joint(gamma)
    a_draft = sp.csr_matrix((np.ones(len(pairs)), (rows, np.arange(len(pairs)))))
    b_draft = np.array([np.prod(mass[list(t)]) for t in tuples])
    # Target matching: sum_s sigma(s) * M_b(x | s) = M_b(x) for every x in V^(L+1).
    full = prefix_digits(np.arange(vocab ** (gamma + 1)), vocab, gamma + 1)
    coef = np.zeros((full.shape[0], len(outputs)))
    for j, s in enumerate(outputs):
        start = np.zeros(vocab ** len(s))
        start[int(np.ravel_multi_index(s, (vocab,) * len(s)))] = 1.0
        coef[:, j] = target.extend(start, len(s), gamma + 1)
    a_target = sp.csr_matrix(coef[:, cols])
    lp = LinearProgram(
        c=np.array([len(outputs[j]) for j in cols], dtype=float),
        A_eq=sp.vstack([a_draft, a_target]).tocsr(),
        b_eq=np.concatenate([b_draft, target.joint(gamma + 1)]),
    )
    result = get_backend("highs").solve(lp)
    assert result.success
    return result.objective


@pytest.mark.parametrize(("vocab", "gamma", "paths"), [(2, 2, 2), (2, 1, 3), (3, 1, 2), (2, 2, 1)])
def test_antichain_lp_equals_the_definition_level_lp(vocab: int, gamma: int, paths: int) -> None:
    """Theorem 4.3 (as reconstructed) against Definition 4.1 built directly."""
    target, draft = model_pair("tree", vocab, seed=4, sparsity=0.2, depth=gamma + 1)
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    lp = multi_path_lp(tgt, dft, gamma, paths)
    assert abs(lp.block_efficiency - _definition_lp(tgt, dft, gamma, paths)) < LP_TOL


@pytest.mark.parametrize("paths", [1, 2, 3])
def test_one_step_lp_optimum_is_the_single_step_alpha_star(paths: int) -> None:
    """For L = 1 the K-path LP is the single-step OTLP: optimum alpha*(p, q, K)."""
    target, draft = model_pair("context-free", 5, seed=6, sparsity=0.3)
    p, q = np.asarray(target(())), np.asarray(draft(()))
    alpha = otlp.optimal_acceptance(otlp.Instance(p, q, paths)).alpha_star
    assert abs(multi_path_lp(target, draft, 1, paths).expected_accepted - alpha) < LP_TOL
    assert abs(expected_accepted(target, draft, 1, "spectr", paths) - alpha) < LP_TOL


def test_lp_arguments_are_checked() -> None:
    target, draft = model_pair("markov", 2)
    with pytest.raises(ValueError, match="constraints"):
        multi_path_lp(target, draft, 2, 2, constraints="some")
    with pytest.raises(ValueError, match="paths"):
        multi_path_lp(target, draft, 2, 0)
    with pytest.raises(otlp.ProblemTooLarge), otlp.limits.limited(max_variables=10):
        multi_path_lp(target, draft, 4, 2)


# ----- global resolution inside tree traversal: [GR] Theorem R.1 ----------------------
@pytest.mark.parametrize(("tau", "paths"), [(1e-2, 3), (1e-3, 2)])
def test_global_resolution_traversal_is_within_15_l_tau(tau: float, paths: int) -> None:
    pytest.importorskip("otlp.global_resolution")  # registers the "global_resolution" method
    gamma = 3
    target, draft = model_pair("markov", 4, seed=3, sparsity=0.2)
    out = output_distribution(
        target, draft, gamma, "spectr", paths, rule="global_resolution", tau=tau
    )
    error = np.abs(out - target_distribution(target, gamma + 1)).sum()
    assert error <= 15 * gamma * tau
