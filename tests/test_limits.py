"""Guards before work: sizes are exact ints checked against otlp.limits before any O(size) work,
and small vocabularies stay cheap for any n. Work is counted (function calls, peak memory:
tests/work.py), never timed, so a loaded machine cannot fail these tests."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import otlp
import otlp.rules
from otlp.columns import _independent_set_mass, _without_replacement_mass
from otlp.combinatorics import colex_subsets
from tests.work import work_done


@pytest.mark.parametrize("n", [10**6, 10**9])
def test_huge_n_is_refused_at_once(n: int) -> None:
    with work_done() as work, pytest.raises(otlp.ProblemTooLarge, match=r"^n: .*max_drafts"):
        otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n)
    assert work.calls < 500 and work.peak_bytes < 2**20  # measured: 27 calls, < 6 kB


def test_columns_and_set_masses_are_refused_before_work() -> None:
    with otlp.limits.limited(max_drafts=10**6):
        inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 10**6)
        with work_done() as work:
            with pytest.raises(otlp.ProblemTooLarge, match="max_operations"):
                otlp.solve(inst, "maxflow")
            with pytest.raises(otlp.ProblemTooLarge, match="more than 2\\^256 variables"):
                inst.columns("tuples")
        # measured: 79 calls, 3 MB peak; the refused work is 1.2e13 operations
        assert work.calls < 2_000 and work.peak_bytes < 2**25


@pytest.mark.parametrize(("vocab", "n"), [(3, 12), (8, 10)])
def test_small_vocabularies_stay_fast_for_large_n(vocab: int, n: int) -> None:
    """V = 3, n = 12 took 35 s and V = 8, n = 10 over 60 s (enumerating j^n maps)."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))
    inst = otlp.Instance(p, q, n)
    small = otlp.Instance(p, q, 2)  # warm-up: compiled kernels and imports are not counted
    otlp.solve(small, "maxflow-cs", strict=True)
    otlp.rules.get("kseq").acceptance(small)
    with work_done() as work:
        plan = otlp.solve(inst, "maxflow-cs", strict=True)
        otlp.rules.get("kseq").acceptance(inst)
    # measured: about 2,550 calls and 85 kB; V^n maps would be 531,441 (V = 3) or 10^9 (V = 8)
    assert work.calls < 25_000 and work.peak_bytes < 2**24
    assert plan.acceptance == pytest.approx(otlp.optimal_acceptance(inst).alpha_star)


def _brute_set_mass(rows: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    index = {tuple(s): i for i, s in enumerate(subsets.tolist())}
    mass = np.zeros(len(subsets))
    n, k = rows.shape
    for draw in itertools.product(range(k), repeat=n):
        key = tuple(sorted(set(draw)))
        if key in index:
            mass[index[key]] += np.prod(rows[np.arange(n), list(draw)])
    return mass


@pytest.mark.parametrize("equal_rows", [True, False])
def test_set_masses_match_enumeration(equal_rows: bool) -> None:
    rng = np.random.default_rng(2)
    rows = rng.dirichlet(np.ones(5), size=4)
    if equal_rows:
        rows[:] = rows[0]
    for j in (1, 2, 3, 4):
        subsets = colex_subsets(5, j)
        expected = _brute_set_mass(rows, subsets)
        assert _independent_set_mass(rows, subsets) == pytest.approx(expected, abs=1e-16)


def test_without_replacement_masses_match_enumeration() -> None:
    q = np.random.default_rng(3).dirichlet(np.ones(5))
    subsets = colex_subsets(5, 3)
    expected = np.zeros(len(subsets))
    for i, members in enumerate(subsets):
        for order in itertools.permutations(members):
            left, prob = 1.0, 1.0
            for token in order:
                prob *= q[token] / left
                left -= q[token]
            expected[i] += prob
    assert _without_replacement_mass(q, subsets) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    "changes",
    [{"max_variables": -1}, {"max_variables": 2.5}, {"max_operations": 0}, {"unknown": 3}],
)
def test_configure_validates(changes: dict[str, object]) -> None:
    before = otlp.limits.current()
    with pytest.raises(ValueError, match=next(iter(changes))):
        otlp.limits.configure(**changes)
    assert otlp.limits.current() == before


def test_multistep_draft_length_is_refused_before_work() -> None:
    from otlp.multistep import expected_accepted, model_pair

    target, draft = model_pair("markov", 4, seed=0, depth=4)
    with work_done() as work, pytest.raises(otlp.ProblemTooLarge, match="draft length"):
        expected_accepted(target, draft, 10**6, "block")
    assert work.calls < 1_000 and work.peak_bytes < 2**20  # measured: 98 calls, 10 kB
