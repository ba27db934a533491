"""The scalable upper bound on the optimum (otlp.multistep.bound, docs/optimum.md).

* It is never below the exact optimum LP (otlp.multistep.optimal_block_efficiency) on random
  tiny models: K paths and k-ary trees, i.i.d. and without replacement, with and without
  zero-probability tokens, untruncated and at every expansion budget.
* On a chain it is the optimum, block verification's efficiency, to rounding.
* Its ingredients are checked against enumeration: a node's inclusion and hit probabilities
  (otlp.multistep.inclusion) against every ordered draw, and the probability that a prefix is
  a root path of the drafted tree against the law of drafted root paths of the optimum's LP
  (otlp.multistep.optimum.drafted_structures, copies of repeated i.i.d. tokens included).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from otlp.decoding import PrefixLM
from otlp.multistep import (
    block_efficiency_bound,
    expected_accepted,
    model_pair,
    optimal_block_efficiency,
    tabulate,
)
from otlp.multistep.bound import _Tree
from otlp.multistep.inclusion import hit, hit_one, inclusion
from otlp.multistep.lp import NodeSpace
from otlp.multistep.optimum import drafted_structures, tuple_probability

TOL = 1e-9
SCHEMES = ("iid", "without_replacement")


def tables(vocab: int, gamma: int, seed: int, distance: float = 0.9, sparsity: float = 0.0):
    target, draft = model_pair(
        "tree", vocab, seed=seed, distance=distance, sparsity=sparsity, depth=gamma + 1
    )
    return tabulate(target, gamma + 1), tabulate(draft, gamma)


CASES = [
    (vocab, gamma, shape, scheme)
    for vocab, gamma, shape in [
        (2, 1, "paths2"),
        (3, 1, "paths3"),
        (2, 2, "paths2"),
        (3, 2, "paths2"),
        (2, 2, "paths3"),
        (3, 2, "kary2"),
        (2, 2, "kary3"),
        (2, 3, "kary2"),
    ]
    for scheme in SCHEMES
    if scheme == "iid" or int(shape[-1]) <= vocab
]


@pytest.mark.parametrize(("vocab", "gamma", "shape", "scheme"), CASES)
def test_the_bound_is_never_below_the_optimum(vocab, gamma, shape, scheme) -> None:
    gaps = []
    for seed, (distance, sparsity) in itertools.product(
        range(4), [(0.5, 0.0), (0.9, 0.0), (0.9, 0.3)]
    ):
        tgt, dft = tables(vocab, gamma, seed, distance, sparsity)
        try:
            best = optimal_block_efficiency(tgt, dft, gamma, shape, scheme)
        except ValueError:  # too few draft tokens after some prefix to draft without replacement
            continue
        bound = block_efficiency_bound(tgt, dft, gamma, shape, scheme)
        assert bound.complete and bound.slack == 0.0
        assert bound.block_efficiency >= best - TOL, (seed, distance, sparsity)
        assert bound.prefix_min >= bound.block_efficiency - TOL
        assert np.all(np.diff(bound.depth_bounds) <= 0) and bound.depth_bounds[0] <= 1.0
        gaps.append(bound.block_efficiency - best)
    assert gaps and max(gaps) < 0.15  # a bound, but not a vacuous one


@pytest.mark.parametrize("shape", ["paths1", "kary1"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_on_a_chain_the_bound_is_the_optimum(shape: str, scheme: str) -> None:
    for vocab, gamma, seed, sparsity in itertools.product((2, 3), (1, 2, 3), range(3), (0.0, 0.3)):
        tgt, dft = tables(vocab, gamma, seed, sparsity=sparsity)
        block = 1.0 + expected_accepted(tgt, dft, gamma, "block")
        bound = block_efficiency_bound(tgt, dft, gamma, shape, scheme)
        assert abs(bound.block_efficiency - block) < 1e-12
        assert abs(bound.prefix_min - block) < 1e-12
        if gamma <= 2:
            assert abs(optimal_block_efficiency(tgt, dft, gamma, shape, scheme) - block) < TOL


@pytest.mark.parametrize(
    ("vocab", "shape", "scheme"),
    [(2, "kary2", "iid"), (3, "paths2", "iid"), (3, "paths2", "without_replacement")],
)
def test_every_budget_keeps_a_bound_and_the_slack_covers_the_truncation(
    vocab, shape, scheme
) -> None:
    gamma = 3
    tgt, dft = tables(vocab, gamma, seed=1)
    best = optimal_block_efficiency(tgt, dft, gamma, shape, scheme)
    full = block_efficiency_bound(tgt, dft, gamma, shape, scheme)
    previous = np.inf
    for budget in range(1, full.expanded + 1):
        cut = block_efficiency_bound(tgt, dft, gamma, shape, scheme, budget=budget, batch=2)
        assert cut.expanded == budget
        assert cut.block_efficiency >= best - TOL
        assert cut.prefix_min >= full.prefix_min - TOL
        assert cut.prefix_min - cut.slack <= full.prefix_min + TOL
        assert cut.slack <= previous + TOL  # best first: the slack never grows
        previous = cut.slack
        assert cut.complete == (budget == full.expanded)


@pytest.mark.parametrize(("vocab", "branching"), [(3, (2, 2)), (3, (3, 1)), (2, (2, 2, 2))])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_prefix_inclusion_matches_the_law_of_drafted_root_paths(vocab, branching, scheme) -> None:
    gamma = len(branching)
    if scheme == "without_replacement" and max(branching) > vocab:
        pytest.skip("more children than tokens")
    tgt, dft = tables(vocab, gamma, seed=2)
    law = drafted_structures(dft, branching, scheme)
    space = NodeSpace(vocab, gamma)
    tree = _Tree(branching, scheme)
    nodes = {(): tree.add(-1, 0, tgt.conditionals[0][0], dft.conditionals[0][0])}
    for d in range(1, gamma):
        for prefix in itertools.product(range(vocab), repeat=d):
            index = int(np.ravel_multi_index(prefix, (vocab,) * d))
            parent = nodes[prefix[:-1]]
            p_law, q_law = tgt.conditionals[d][index], dft.conditionals[d][index]
            nodes[prefix] = tree.add(parent, prefix[-1], p_law, q_law)
    for prefix, node in nodes.items():
        d = len(prefix) + 1
        base = (
            space.level(d).start
            + int(np.ravel_multi_index(prefix, (vocab,) * len(prefix)) if prefix else 0) * vocab
        )
        exact = [sum(p for m, p in law.items() if m >> (base + y) & 1) for y in range(vocab)]
        np.testing.assert_allclose(tree.child_in[node], exact, atol=1e-14)
        p_prefix = tgt.joint(d)[base - space.level(d).start : base - space.level(d).start + vocab]
        np.testing.assert_allclose(tree.child_p[node], p_prefix, atol=1e-15)


def _enumerated(
    q: np.ndarray, fire: np.ndarray, width: int, scheme: str
) -> tuple[np.ndarray, float]:
    """(inclusion of every token, hit probability) by summing over every ordered draw."""
    included, hits = np.zeros(q.shape[0]), 0.0
    for tokens in itertools.product(range(q.shape[0]), repeat=width):
        mass = tuple_probability(q, tokens, scheme)
        included[list(set(tokens))] += mass
        hits += mass * (1.0 - np.prod(1.0 - fire[list(tokens)]))
    return included, hits


@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_inclusion_and_hit_match_enumeration(width: int, scheme: str) -> None:
    rng = np.random.default_rng(width)
    for _ in range(20):
        q = rng.dirichlet(np.full(5, 0.4))
        q[rng.random(5) < 0.2] = 0.0
        if np.count_nonzero(q) < width:
            continue
        q /= q.sum()
        fire = rng.random(5) * (rng.random(5) < 0.7)
        included, hits = _enumerated(q, fire, width, scheme)
        # 1e-10: the reference sums 1 - q_a - q_b - ..., which cancels (inclusion does not)
        np.testing.assert_allclose(inclusion(q, width, scheme), included, atol=1e-10)
        assert abs(hit(q, fire, width, scheme) - hits) < 1e-10
        a = int(rng.integers(5))
        one = np.zeros(5)
        values = np.array([0.0, 0.3, 1.0])
        singles = hit_one(float(q[a]), float(included[a]), width, values, scheme)
        for value, single in zip(values, singles, strict=True):
            one[a] = value
            assert abs(single - _enumerated(q, one, width, scheme)[1]) < 1e-10


def test_a_concentrated_draft_keeps_inclusion_accurate() -> None:
    q = np.array([1.0 - 3e-12, 1e-12, 2e-12])
    included = inclusion(q, 2, "without_replacement")
    # the first draw is token 0 but for 3e-12; the second is then 1 or 2 in ratio 1 : 2
    np.testing.assert_allclose(included, [1.0, 1 / 3, 2 / 3], rtol=1e-11)
    fire = np.array([0.0, 1.0, 0.0])
    assert abs(hit(q, fire, 2, "without_replacement") - included[1]) < 1e-15


def test_tree_models_and_prefix_models_give_the_same_bound() -> None:
    target, draft = model_pair("ngram", 4, seed=3, distance=0.7, context=2)
    context = (1, 2)
    direct = block_efficiency_bound(target, draft, 3, "kary2", "iid", budget=9, context=context)
    trees = block_efficiency_bound(
        PrefixLM(target), PrefixLM(draft), 3, "kary2", "iid", budget=9, batch=4, context=context
    )
    tables_ = block_efficiency_bound(
        tabulate(target, 4, context=context),
        tabulate(draft, 3, context=context),
        3,
        "kary2",
        "iid",
        budget=9,
    )
    assert direct.expanded == trees.expanded == tables_.expanded == 9
    assert abs(direct.block_efficiency - trees.block_efficiency) < 1e-12
    assert abs(direct.block_efficiency - tables_.block_efficiency) < 1e-12


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget": 0}, "budget"),
        ({"batch": 0}, "batch"),
        ({"shape": "tree2"}, "shape"),
        ({"scheme": "greedy"}, "scheme"),
        ({"context": (-1,)}, "context"),
        ({"gamma": 0}, "gamma"),
    ],
)
def test_arguments_are_checked_by_name(kwargs, match) -> None:
    tgt, dft = tables(3, 2, seed=0)
    with pytest.raises(ValueError, match=match):
        block_efficiency_bound(tgt, dft, **{"gamma": 2, **kwargs})


def test_models_must_share_a_vocabulary_and_give_laws() -> None:
    tgt, _ = tables(3, 2, seed=0)
    _, dft = tables(2, 2, seed=0)
    with pytest.raises(ValueError, match="draft: vocabulary"):
        block_efficiency_bound(tgt, dft, 2)
    with pytest.raises(ValueError, match="draft: a next-token law"):
        block_efficiency_bound(tgt, lambda prefix: np.array([0.5, 0.6, 0.0]), 2)
    with pytest.raises(ValueError, match="target: expected a model"):
        block_efficiency_bound(3, dft, 2)
