"""The optimum over every valid verification algorithm (otlp.multistep.optimum, docs/optimum.md).

* K i.i.d. paths: it equals [GBV] Theorem 4.6's optimal path selection and Theorem 4.3's
  antichain LP (and the K-tuple LP of tests/test_multistep_lp.py built from Definition 4.1).
* k-ary trees, i.i.d. and without replacement: it equals the same LP built over every
  drafted tree without merging trees of equal root paths, and no exact tree rule of otlp
  (outcome_law summed over the drafted trees) exceeds it; on a chain it is block
  verification's efficiency (Theorem 3.4).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import otlp
from otlp.decoding import children_probability, k_ary_tree
from otlp.multistep import (
    expected_accepted,
    model_pair,
    multi_path_lp,
    optimal_block_efficiency,
    optimal_path_selection,
    tabulate,
    tree_optimum,
)
from otlp.multistep.optimum import drafted_structures
from otlp.multistep.table import PrefixTable
from otlp.solvers.base import LinearProgram
from otlp.solvers.registry import get_backend
from otlp.validate.checks.optimum import TAU, tree_rules
from otlp.verification import rule_block_efficiency
from tests.test_multistep_lp import _definition_lp

TOL = 1e-9


def tables(vocab: int, gamma: int, seed: int, distance: float = 0.9, sparsity: float = 0.0):
    target, draft = model_pair(
        "tree", vocab, seed=seed, distance=distance, sparsity=sparsity, depth=gamma + 1
    )
    return tabulate(target, gamma + 1), tabulate(draft, gamma)


PATH_CASES = [
    (vocab, gamma, paths)
    for vocab in (2, 3)
    for gamma in (1, 2)
    for paths in (1, 2, 3)
    if vocab**gamma * paths <= 27
]


@pytest.mark.parametrize(("vocab", "gamma", "paths"), PATH_CASES)
def test_paths_equal_theorem_4_6_and_the_antichain_lp(vocab: int, gamma: int, paths: int) -> None:
    worst = 0.0
    for seed, (distance, sparsity) in enumerate(itertools.product((0.5, 0.9), (0.0, 0.3))):
        tgt, dft = tables(vocab, gamma, seed, distance, sparsity)
        value = optimal_block_efficiency(tgt, dft, gamma, f"paths{paths}")
        selection = optimal_path_selection(tgt, dft, gamma, paths).block_efficiency
        antichain = multi_path_lp(tgt, dft, gamma, paths).block_efficiency
        worst = max(worst, abs(value - selection), abs(value - antichain))
        assert 1.0 <= value <= gamma + 1 + TOL
    assert worst < TOL, worst


@pytest.mark.parametrize(("vocab", "gamma", "paths"), [(2, 2, 2), (3, 1, 3), (2, 2, 3)])
def test_paths_equal_the_k_tuple_definition_lp(vocab: int, gamma: int, paths: int) -> None:
    """Merging trees with equal root paths changes nothing: the K-tuple LP agrees."""
    tgt, dft = tables(vocab, gamma, seed=7)
    value = tree_optimum(tgt, dft, gamma, shape=f"paths{paths}").block_efficiency
    assert abs(value - _definition_lp(tgt, dft, gamma, paths)) < 1e-8


def tree_definition_lp(
    tgt: PrefixTable, dft: PrefixTable, branching: tuple[int, ...], scheme: str
) -> float:
    """The optimum LP over every drafted tree omega of k_ary_tree(branching) (no merging):
    pi(omega, s) with s[:-1] a root path of omega, drafting and target-matching rows."""
    parents = k_ary_tree(branching)
    gamma, vocab = len(branching), tgt.vocab_size
    outputs = [s for n in range(1, gamma + 2) for s in itertools.product(range(vocab), repeat=n)]
    cols, rows, masses = [], [], []
    for combo in itertools.product(range(vocab), repeat=parents.shape[0]):
        paths: list[tuple[int, ...]] = []
        mass = 1.0
        for context in range(parents.shape[0] + 1):
            prefix = () if context == 0 else paths[context - 1]
            kids = np.flatnonzero(parents == context - 1)
            if kids.shape[0] and len(prefix) < gamma:
                law = dft.conditionals[len(prefix)][_index(prefix, vocab)]
                mass *= children_probability(law, np.array([combo[i] for i in kids]), scheme)
            if context < parents.shape[0]:
                parent = parents[context]
                paths.append((() if parent < 0 else paths[parent]) + (combo[context],))
        if mass == 0.0:
            continue
        present = {(), *paths}
        for j, s in enumerate(outputs):
            if s[:-1] in present:
                rows.append(len(masses))
                cols.append(j)
        masses.append(mass)
    full = vocab ** (gamma + 1)
    coef = np.zeros((full, len(outputs)))
    for j, s in enumerate(outputs):
        start = np.zeros(vocab ** len(s))
        start[_index(s, vocab)] = 1.0
        coef[:, j] = tgt.extend(start, len(s), gamma + 1)
    a_draft = sp.csr_matrix((np.ones(len(cols)), (rows, np.arange(len(cols)))))
    program = LinearProgram(
        c=np.array([len(outputs[j]) for j in cols], dtype=float),
        A_eq=sp.vstack([a_draft, sp.csr_matrix(coef[:, cols])]).tocsr(),
        b_eq=np.concatenate([masses, tgt.joint(gamma + 1)]),
    )
    result = get_backend("highs").solve(program)
    assert result.success
    return result.objective


def _index(prefix: tuple[int, ...], vocab: int) -> int:
    return int(np.ravel_multi_index(prefix, (vocab,) * len(prefix))) if prefix else 0


@pytest.mark.parametrize(
    ("vocab", "branching", "scheme"),
    [
        (2, (2, 2), "iid"),
        (3, (2, 2), "without_replacement"),
        (3, (3,), "iid"),
        (2, (1, 2), "iid"),
        (3, (2, 1), "without_replacement"),
    ],
)
def test_kary_equals_the_lp_over_every_drafted_tree(vocab, branching, scheme) -> None:
    tgt, dft = tables(vocab, len(branching), seed=0)
    value = tree_optimum(tgt, dft, len(branching), shape=branching, scheme=scheme)
    assert abs(value.block_efficiency - tree_definition_lp(tgt, dft, branching, scheme)) < 1e-8
    assert abs(sum(drafted_structures(dft, branching, scheme).values()) - 1.0) < 1e-12
    assert abs(value.accepted_law.sum() - 1.0) < 1e-9


# (vocab, gamma, k): every tree small enough to enumerate a rule's law quickly
RULE_CASES = [(3, 3, 1), (2, 2, 2), (3, 2, 2), (3, 1, 3), (3, 1, 2)]


@pytest.mark.parametrize(("vocab", "gamma", "width"), RULE_CASES)
@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_no_tree_rule_exceeds_the_optimum(vocab: int, gamma: int, width: int, scheme: str) -> None:
    if scheme == "without_replacement" and width > vocab:
        pytest.skip("a node drafts at most V children without replacement")
    tgt, dft = tables(vocab, gamma, seed=vocab + gamma + width, distance=0.9)
    shape = f"kary{width}"
    optimum = optimal_block_efficiency(tgt, dft, gamma, shape, scheme)
    if scheme == "iid":
        assert optimum < gamma + 1 - 1e-3  # not saturated: the bound has something to say
    elif width == vocab:  # V distinct children hold every path: everything is accepted
        assert abs(optimum - (gamma + 1)) < TOL
    values = {}
    for method in tree_rules(scheme, (width,) * gamma):
        options = {"tau": TAU} if method == "global_resolution" else {}
        values[method] = rule_block_efficiency(
            tgt, dft, gamma, method, shape=shape, scheme=scheme, **options
        )
    for method, value in values.items():
        slack = 15 * TAU * gamma if method == "global_resolution" else TOL
        assert value <= optimum + slack, (method, value, optimum)
        assert value >= 1.0
    if width == 1:  # a chain: every node rule is speculative sampling, block verification is
        block = expected_accepted(tgt, dft, gamma, "block") + 1.0  # the optimum (Thm 3.4)
        assert abs(optimum - block) < TOL
        assert abs(rule_block_efficiency(tgt, dft, gamma, "block", shape=shape) - block) < TOL


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_path_rules_stay_below_the_optimum(scheme: str) -> None:
    vocab, gamma = 3, 2
    tgt, dft = tables(vocab, gamma, seed=5)
    optimum = optimal_block_efficiency(tgt, dft, gamma, "paths2", scheme)
    methods = tree_rules(scheme, paths=2)
    assert ("gbv" in methods) == (scheme == "iid")
    for method in methods:
        options = {"tau": TAU} if method == "global_resolution" else {}
        value = rule_block_efficiency(
            tgt, dft, gamma, method, shape="paths2", scheme=scheme, **options
        )
        slack = 15 * TAU * gamma if method == "global_resolution" else TOL
        assert value <= optimum + slack, (method, value, optimum)
    if scheme == "iid":  # GBV's optimum (Theorem 4.6) is this LP's
        assert abs(optimum - optimal_path_selection(tgt, dft, gamma, 2).block_efficiency) < TOL


def test_chain_shapes_agree_and_more_drafts_never_hurt() -> None:
    tgt, dft = tables(3, 2, seed=2)
    chain = optimal_block_efficiency(tgt, dft, 2, "paths1")
    assert abs(chain - optimal_block_efficiency(tgt, dft, 2, "kary1")) < TOL
    assert abs(chain - optimal_block_efficiency(tgt, dft, 2, (1, 1))) < TOL
    paths = optimal_block_efficiency(tgt, dft, 2, "paths2")
    tree = optimal_block_efficiency(tgt, dft, 2, "kary2")
    assert chain <= paths + TOL <= tree + 2 * TOL  # a 2-ary tree holds two i.i.d. paths


def test_models_and_context_are_accepted() -> None:
    target, draft = model_pair("markov", 2, seed=1)
    direct = optimal_block_efficiency(target, draft, 2, "kary2", context=(1,))
    tgt = tabulate(target, 3, context=(1,))
    dft = tabulate(draft, 2, context=(1,))
    assert abs(direct - optimal_block_efficiency(tgt, dft, 2, "kary2")) < TOL


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"shape": "paths0"}, "shape"),
        ({"shape": "tree2"}, "shape"),
        ({"shape": (2,)}, "shape"),
        ({"scheme": "spechub"}, "scheme"),
        ({"shape": "kary4", "scheme": "without_replacement"}, "shape"),
        ({"gamma": 0}, "gamma"),
        ({"backend": 3}, "backend"),
    ],
)
def test_arguments_are_checked_by_name(kwargs, match) -> None:
    tgt, dft = tables(3, 2, seed=0)
    args = {"gamma": 2, "shape": "kary2"} | kwargs
    with pytest.raises(ValueError, match=match):
        optimal_block_efficiency(tgt, dft, **args)


def test_without_replacement_needs_enough_draft_tokens() -> None:
    tgt, _ = tables(3, 1, seed=0)
    one_hot = PrefixTable((np.array([[0.0, 1.0, 0.0]]),))
    with pytest.raises(ValueError, match="scheme"):
        optimal_block_efficiency(tgt, one_hot, 1, "kary2", "without_replacement")


def test_large_trees_are_refused_before_allocating() -> None:
    tgt, dft = tables(3, 2, seed=0)
    with pytest.raises(otlp.ProblemTooLarge), otlp.limits.limited(max_variables=100):
        optimal_block_efficiency(tgt, dft, 2, "kary2")
    with pytest.raises(otlp.ProblemTooLarge), otlp.limits.limited(max_operations=100):
        optimal_block_efficiency(tgt, dft, 2, "kary3")
