"""Traversal Verification (Weng et al., NeurIPS 2025, arXiv 2505.12398), exactly.

By enumeration of every drafted tree of toy models (V = 3): the emitted tokens continued by the
target have the target's law (lossless) on chains, K paths and k-ary trees with i.i.d. and
without-replacement siblings, with absent nodes and a top-k draft; on one chain its law equals
block verification's call by call, so its expected accepted length does too (the paper's
optimality on chains, [GBV] Theorem 3.4). The sampler follows the exact law (chi^2), numpy and
torch alike; the referee's exact mode calls it lossless; a weakened residual update fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from otlp import decoding
from otlp.decoding import outcome_law, verify_chain, verify_tree
from otlp.multistep import expected_accepted, output_distribution, target_distribution, traversal
from otlp.multistep.models import model_pair
from otlp.referee import adapters, referee
from otlp.verification.tree_exact import call_law
from tests.test_verification_tree import SHAPES, lossless_gap, repeated_row_pvalue, target_law

TV = "traversal_verification"


def _models(seed: int = 0, distance: float = 0.6):
    return model_pair("tree", 3, seed=seed, distance=distance, depth=4)


def _lossless_gap(parents, scheme, seed=0, **options) -> float:
    return float(lossless_gap(parents, TV, scheme, seed, **options).max())


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_lossless_on_every_shape(shape, scheme):
    assert _lossless_gap(SHAPES[shape], scheme, seed=len(shape)) < 1e-12


@pytest.mark.parametrize(
    ("shape", "options"),
    [("tree2x2", {"top_k": 2}), ("paths2x2", {"absent": (3,)}), ("tree3x1", {"absent": (1, 4)})],
)
def test_lossless_under_top_k_and_absent_nodes(shape, options):
    assert _lossless_gap(SHAPES[shape], "iid", seed=3, **options) < 1e-12


def test_lossless_on_a_deeper_wider_tree_without_replacement():
    parents = decoding.k_ary_tree((2, 1, 1))
    target, draft = model_pair("markov", 3, seed=5, distance=0.8, depth=5)
    law = call_law(target, draft, parents, TV, scheme="without_replacement")
    assert np.abs(law.extended(target) - target_law(target, 4)).max() < 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_on_a_chain_each_call_is_block_verification(seed):
    """Call by call (every drafted chain), the emitted law is block verification's."""
    target, draft = _models(seed, distance=0.3 + 0.2 * seed)
    parents = decoding.chain(3)
    rng = np.random.default_rng(seed)
    for _ in range(10):
        tokens = rng.integers(0, 3, 3)
        prefixes = [tuple(tokens[:d]) for d in range(4)]
        p = np.array([target(c) for c in prefixes])
        q = np.array([draft(c) for c in prefixes])
        if np.any(q[np.arange(3), tokens] == 0):
            continue
        ours = outcome_law(tokens, parents, p, q, method=TV)
        block = outcome_law(tokens, parents, p, q, method="block")
        for seq in set(ours) | set(block):
            assert abs(ours.get(seq, 0.0) - block.get(seq, 0.0)) < 1e-12


@pytest.mark.parametrize(("kind", "gamma"), [("markov", 3), ("tree", 2), ("ngram", 4)])
def test_expected_accepted_equals_block_verification_on_chains(kind, gamma):
    """The paper's optimality on chains: E[accepted] = block verification's within 1e-12."""
    target, draft = model_pair(kind, 3, seed=7, distance=0.7, depth=gamma + 1)
    ours = expected_accepted(target, draft, gamma, "traversal")
    assert abs(ours - expected_accepted(target, draft, gamma, "block")) < 1e-12
    assert ours > expected_accepted(target, draft, gamma, "token")
    gap = output_distribution(target, draft, gamma, "traversal") - target_distribution(
        target, gamma + 1
    )
    assert np.abs(gap).max() < 1e-12


def test_tree_exact_and_multistep_chain_laws_agree():
    target, draft = _models(2)
    by_tree = call_law(target, draft, decoding.chain(2), TV).expected_accepted
    assert abs(by_tree - expected_accepted(target, draft, 2, "traversal")) < 1e-12


def test_a_weakened_residual_update_is_caught(monkeypatch):
    """Mutation: the parent's acceptance after a failed subtree 1% too high."""
    honest = traversal._residual

    def inflated(weight, p, q):
        a, owed = honest(weight, p, q)
        return min(1.0, 1.01 * a), owed

    monkeypatch.setattr(traversal, "_residual", inflated)
    assert _lossless_gap(SHAPES["tree2x2"], "iid", seed=1) > 1e-6


@pytest.mark.parametrize(
    ("shape", "scheme"), [("tree2x2", "iid"), ("paths2x2", "without_replacement")]
)
def test_sampler_follows_the_exact_law(shape, scheme):
    parents = SHAPES[shape]
    target, draft = _models(4)
    rng = np.random.default_rng(0)
    row = np.full(parents.shape[0], -1, dtype=np.int64)
    prefixes: list[tuple[int, ...]] = [()] * (parents.shape[0] + 1)
    for context, kids in enumerate(decoding.children(parents)):  # parents precede children
        if kids.shape[0]:
            law = np.array([draft(prefixes[context])])
            row[kids] = decoding.sample_children(law, kids.shape[0], scheme, rng)[0]
            for node in kids:
                prefixes[node + 1] = (*prefixes[context], int(row[node]))
    p = np.array([target(c) for c in prefixes])
    q = np.array([draft(c) for c in prefixes])
    law = outcome_law(row, parents, p, q, method=TV, scheme=scheme)
    assert repeated_row_pvalue(row, parents, p, q, law, method=TV, scheme=scheme, rng=0) > 1e-4


def test_torch_inputs_and_the_engine_chain_layout_give_numpy_outcomes():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(6), size=(4, 4))
    q = rng.dirichlet(np.ones(6), size=(4, 4))
    tokens = rng.integers(0, 6, (4, 3))
    ours = verify_chain(tokens, p, q, method=TV, rng=list(range(4)))
    theirs = verify_chain(
        torch.tensor(tokens), torch.tensor(p), torch.tensor(q[:, :3]), method=TV, rng=list(range(4))
    )
    assert np.array_equal(ours.output_ids, theirs.output_ids.numpy())
    tree = verify_tree(tokens, decoding.chain(3), p, q, method=TV, rng=list(range(4)))
    assert np.array_equal(ours.output_ids, tree.output_ids)


def test_schemes_it_does_not_verify_are_refused():
    p = np.full((3, 3), 1 / 3)
    with pytest.raises(ValueError, match="scheme"):
        outcome_law([0, 1], decoding.path_tree(2, 1), p, p, method=TV, scheme="spechub")


@pytest.mark.parametrize(("scheme", "shapes"), [("iid", None), ("without_replacement", None)])
def test_the_referee_calls_it_lossless_in_exact_mode(scheme, shapes):
    verdict = referee(adapters.tree(TV, scheme), cases=6, mode="exact", shapes=shapes)
    assert verdict.lossless and verdict.exact_cases == 6
