"""Guards before work: sizes are exact ints checked against otlp.limits before any O(size) work,
and small vocabularies stay fast for any n."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import otlp
import otlp.rules
from otlp.columns import _independent_set_mass, _without_replacement_mass
from otlp.combinatorics import colex_subsets


@pytest.mark.parametrize("n", [10**6, 10**9])
def test_huge_n_is_refused_at_once(n: int) -> None:
    start = time.perf_counter()
    with pytest.raises(otlp.ProblemTooLarge, match=r"^n: .*lower n.*max_drafts"):
        otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n)
    assert time.perf_counter() - start < 0.1


def test_columns_and_set_masses_are_refused_before_work() -> None:
    with otlp.limits.limited(max_drafts=10**6):
        inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 10**6)
        start = time.perf_counter()
        with pytest.raises(otlp.ProblemTooLarge, match="max_operations"):
            otlp.solve(inst, "maxflow")
        with pytest.raises(otlp.ProblemTooLarge, match="more than 2\\^256 variables"):
            inst.columns("tuples")
        assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize(("vocab", "n"), [(3, 12), (8, 10)])
def test_small_vocabularies_stay_fast_for_large_n(vocab: int, n: int) -> None:
    """V = 3, n = 12 took 35 s and V = 8, n = 10 over 60 s (enumerating j^n maps)."""
    rng = np.random.default_rng(0)
    inst = otlp.Instance(rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab)), n)
    start = time.perf_counter()
    plan = otlp.solve(inst, "maxflow-cs", strict=True)
    otlp.rules.get("kseq").acceptance(inst)
    assert time.perf_counter() - start < 1.0
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
    start = time.perf_counter()
    with pytest.raises(otlp.ProblemTooLarge, match="draft length"):
        expected_accepted(target, draft, 10**6, "block")
    assert time.perf_counter() - start < 0.1
