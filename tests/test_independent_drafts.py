"""Two independent drafts without max-flow: H* and the outer targets against brute force.

:mod:`otlp.solvers.global_resolution.independent` certifies H* by branch and bound and the outer
targets by a removal chain with per-phase checks. Here every certified answer is compared
with the exhaustive one on thousands of small instances (a seeded sweep over instance
classes and a hypothesis property), and the targets at larger k with the exact max-flow.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otlp
from otlp.builders import outer_system
from otlp.instances import zipf_llm_pair
from otlp.solvers.global_resolution.independent import (
    CERTIFIED,
    REFUTED,
    certify,
    certify_chain,
    chain_blocks,
    chain_psi,
    independent_outer,
    minimise_psi,
)
from otlp.solvers.registry import get_backend

TOL = 1e-13


def _all_psi(p: np.ndarray, q1: np.ndarray, q2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """psi of every subset (bit j of the index = token j) and the subset masks."""
    k = p.shape[0]
    members = ((np.arange(1 << k)[:, None] >> np.arange(k)) & 1).astype(float)
    return members @ p - (members @ q1) * (members @ q2), members.astype(bool)


def _instance(seed: int, k: int, kind: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Instance classes: Dirichlet, correlated drafts, q1 = p, flat p with ties, peaked."""
    rng = np.random.default_rng(seed)
    if kind == 0:
        return rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k))
    if kind == 1:
        q1 = rng.dirichlet(np.full(k, 0.3))
        q2 = 0.5 * q1 + 0.5 * rng.dirichlet(np.full(k, 0.3))
        return rng.dirichlet(np.full(k, 0.3)), q1, q2
    if kind == 2:
        p = rng.dirichlet(np.ones(k))
        return p, p.copy(), rng.dirichlet(np.ones(k))
    if kind == 3:
        q1 = np.round(rng.dirichlet(np.ones(k)) * 8) + 1
        q1 /= q1.sum()
        return np.full(k, 1.0 / k), q1, q1[::-1].copy()
    p, q1, q2 = (rng.dirichlet(np.full(k, 0.1)) for _ in range(3))
    return p, q1, q2


def _check(p: np.ndarray, q1: np.ndarray, q2: np.ndarray) -> None:
    """H* and the chain targets equal the exhaustive ones (Theorem 6.2 by brute force)."""
    k = p.shape[0]
    psi, members = _all_psi(p, q1, q2)
    certified, mask, value = minimise_psi(p, q1, q2)
    assert certified
    assert abs(value - psi.min()) <= TOL
    assert abs(value - psi[int(mask @ (1 << np.arange(k)))]) <= TOL
    good, order, chain = independent_outer(p, q1, q2, mask)
    assert good
    targets, _starts, ends, block_of = chain_blocks(order, p[order], chain, k)
    removed = np.ones(k, dtype=bool)
    minima = []
    for step in range(order.shape[0] + 1):  # min over T ⊇ H_i, exhaustively
        minima.append(psi[members[:, removed].all(axis=1)].min())
        if step < order.shape[0]:
            removed[order[step]] = False
    minima_arr = np.array(minima)
    expected = p[order] + minima_arr[1:] - minima_arr[:-1]
    assert np.abs(targets - expected).max(initial=0.0) <= TOL
    assert (block_of[order] >= 0).all() and (block_of[mask] == -1).all()
    assert ends[-1:].tolist() == ([order.shape[0]] if order.shape[0] else [])


@pytest.mark.parametrize("chunk", range(5))
def test_sweep_against_brute_force(chunk: int) -> None:
    """2,500 seeded instances, k = 1..10, five classes (500 per chunk)."""
    for seed in range(chunk * 500, (chunk + 1) * 500):
        k = 1 + seed % 10
        _check(*_instance(seed, k, seed % 5))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.integers(1, 9),
    st.integers(0, 2**32 - 1),
    st.floats(0.05, 3.0),
    st.sampled_from([0.0, 1e-300, 1e-12]),
)
def test_property_against_brute_force(k: int, seed: int, conc: float, tiny: float) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.dirichlet(np.full(k, conc), size=3) + tiny
    p, q1, q2 = (row / row.sum() for row in rows)
    _check(p, q1, q2)


def test_certify_never_passes_a_negative_subset() -> None:
    """The phase certificate's three answers against enumeration, on random (w, q1, q2)."""
    rng = np.random.default_rng(7)
    answers = set()
    for _ in range(400):
        m = int(rng.integers(1, 9))
        q1, q2 = rng.dirichlet(np.ones(m)), rng.dirichlet(np.ones(m))
        w = rng.normal(0.0, 0.05, m) + q1 * q2 * rng.uniform(0, 3)
        psi, _members = _all_psi(w, q1, q2)
        status, found = certify(w, q1, q2, np.arange(m), 1e-14)
        answers.add(status)
        if status == CERTIFIED:
            assert psi.min() >= -1e-12
        elif status == REFUTED:
            assert w[found].sum() - q1[found].sum() * q2[found].sum() < 0
    assert {CERTIFIED, REFUTED} <= answers


@pytest.mark.parametrize(("k", "similarity"), [(60, 0.5), (200, 0.2), (200, 0.9)])
def test_targets_saturate_the_outer_network(k: int, similarity: float) -> None:
    """At larger k: H* is the min cut's, and the targets are row capacities that the outer
    max-flow fills exactly (the max-flow's own row sums are another such vector)."""
    p, q1 = zipf_llm_pair(4000, similarity=similarity, seed=k)
    q2 = zipf_llm_pair(4000, similarity=0.5, seed=k + 1)[1]
    inst = otlp.Instance(p, [q1, q2], 2, "independent", top_k=k)
    pl, a, b = inst.p_local, inst.draft_rows[0], inst.draft_rows[1]
    certified, mask, value = minimise_psi(pl, a, b)
    assert certified
    exact = otlp.optimal_acceptance(inst, method="mincut")
    assert abs(value - exact.psi_min) <= 1e-13
    good, order, chain = independent_outer(pl, a, b, mask)
    assert good
    targets = chain_blocks(order, pl[order], chain, inst.k)[0]
    network = outer_system(inst, mask)
    position = np.full(inst.k, -1)
    position[network.left] = np.arange(network.left_count)
    caps = np.zeros(network.left_count)
    caps[position[order]] = targets
    flow = get_backend("ortools-maxflow").solve(network.to_maxflow())
    assert abs(flow.objective - targets.sum()) <= 1e-12
    capped = get_backend("ortools-maxflow").solve(
        dataclasses.replace(network, left_cap=caps).to_maxflow()
    )
    assert abs(capped.objective - targets.sum()) <= 1e-12


def test_chain_certificate_on_random_orders() -> None:
    """Any removal order through the phase checks: a certified chain has every min over
    supersets equal to the cumulative minimum (no false pass); wrong chains exist and fail."""
    rng = np.random.default_rng(11)
    outcomes = {True: 0, False: 0}
    for seed in range(600):
        k = 3 + seed % 6
        p, q1, q2 = _instance(seed, k, seed % 5)
        psi, members = _all_psi(p, q1, q2)
        mask = minimise_psi(p, q1, q2)[1]
        order = rng.permutation(np.flatnonzero(~mask)).astype(np.int64)
        chain, a, b = chain_psi(p, q1, q2, mask, order)
        good = certify_chain(p, q1, q2, order, chain, a, b)
        present = np.ones(k, dtype=bool)
        exact = []
        for step in range(order.shape[0] + 1):
            exact.append(psi[members[:, present].all(axis=1)].min())
            if step < order.shape[0]:
                present[order[step]] = False
        truly_good = bool(np.allclose(np.minimum.accumulate(chain), exact, rtol=0, atol=TOL))
        if good:
            assert truly_good
        outcomes[truly_good] += 1
    assert outcomes[False] > 0 and outcomes[True] > 0


def test_certify_beyond_enumeration_against_brute_force() -> None:
    """18 candidates (more than the Gray-code limit) with w_j a share theta_j of the
    elimination threshold q1_j q2(S) + q2_j q1(S) - q1_j q2_j: elimination keeps them all,
    the pairwise bound fails where theta_j < 1/2, and the branch and bound decides; every
    answer checked by enumeration."""
    rng = np.random.default_rng(5)
    answers = []
    for trial in range(24):
        m = 18
        q1, q2 = rng.dirichlet(np.ones(m)) * 0.9, rng.dirichlet(np.ones(m)) * 0.9
        theta = rng.uniform(0.02 * trial, 1.0, m)
        w = theta * (q1 * q2.sum() + q2 * q1.sum() - q1 * q2)
        psi, _ = _all_psi(w, q1, q2)
        status, found = certify(w, q1, q2, np.arange(m), 1e-14)
        answers.append(status)
        if status == CERTIFIED:
            assert psi.min() >= -1e-12
        else:
            assert status == REFUTED
            assert w[found].sum() - q1[found].sum() * q2[found].sum() < 0
    assert CERTIFIED in answers and REFUTED in answers


def test_certify_refutes_what_the_pairwise_bound_cannot_certify() -> None:
    """18 candidates (beyond the Gray-code limit), every w_j between a quarter and a half of
    the elimination threshold q1_j q2(S) + q2_j q1(S) - q1_j q2_j: f(S) = w(S) - q1(S) q2(S)
    is about -0.4 q1(S) q2(S) < 0, so the answer must be REFUTED with a negative subset. The
    pairwise bound q1(X) q2(X) <= (q1(X) q2(S) + q2(X) q1(S)) / 2 does not hold for these w;
    a bound taken at a quarter instead of a half would certify them."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        m = 18
        q1, q2 = rng.dirichlet(np.ones(m)) * 0.9, rng.dirichlet(np.ones(m)) * 0.9
        theta = rng.uniform(0.27, 0.45, m)
        w = theta * (q1 * q2.sum() + q2 * q1.sum() - q1 * q2)
        assert w.sum() - q1.sum() * q2.sum() < -0.1 * q1.sum() * q2.sum()
        status, found = certify(w, q1, q2, np.arange(m), 1e-14)
        assert status == REFUTED
        assert w[found].sum() - q1[found].sum() * q2[found].sum() < 0
