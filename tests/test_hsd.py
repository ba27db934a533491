"""Hierarchical Speculative Decoding (Zhou et al., ICLR 2026, arXiv 2601.05724) on one chain.

By enumeration of every drafted path of tiny models: with every cap (the branches' and the full
draft's joint test) the running maximum of the prefix ratios, HSD is target-matching on the
first L + 1 tokens and its stop law is block verification's path by path, so its expected
accepted length equals block verification's ([GBV] Thm 3.4's optimum) and exceeds token-wise
verification's. Testing the full draft on the raw joint ratio min(1, r_L) instead (the public
repository's two readings) accepts more and is not lossless: the README's own toy pair is a
counterexample at L = 2. The sampler follows the exact law; one broken line is caught.
"""

from __future__ import annotations

import numpy as np
import pytest

from otlp.multistep import (
    expected_accepted,
    hsd,
    output_distribution,
    simulate,
    single_path,
    target_distribution,
)
from otlp.multistep.exact import _all_paths, _tables
from otlp.multistep.law import single_path_law
from otlp.multistep.models import markov_model, model_pair

CASES = [("markov", 3, 0), ("tree", 2, 1), ("ngram", 4, 2), ("tree", 4, 3), ("markov", 5, 4)]


def _models(kind: str, gamma: int, seed: int, distance: float = 0.7):
    return model_pair(kind, 3, seed=seed, distance=distance, depth=gamma + 1)


def _laws(target, draft, gamma: int, variant: str = "capped"):
    """(HSD's StopLaw, block's StopLaw, HSD's OutputLaw, L1 gap to the target, path mass)."""
    tgt, dft = _tables(target, draft, gamma, "hsd", 1, ())
    tokens = _all_paths(tgt.vocab_size, gamma)
    p, q = tgt.along_paths(tokens, gamma + 1), dft.along_paths(tokens, gamma)
    ours = hsd.chain(p, q, tokens, variant=variant)
    law = single_path_law(ours, dft.joint(gamma), tgt.vocab_size)
    gap = np.abs(law.output_distribution(tgt) - target_distribution(tgt, gamma + 1)).sum()
    return ours, single_path.block(p, q, tokens), law, float(gap), dft.joint(gamma)


def _toy(gamma: int = 2):
    """The public repository's toy pair: i.i.d. tokens, p = (1/3, 2/3), q = (2/3, 1/3)."""
    p, q = np.array([1 / 3, 2 / 3]), np.array([2 / 3, 1 / 3])
    return markov_model(p, [p, p]), markov_model(q, [q, q])


@pytest.mark.parametrize(("kind", "gamma", "seed"), CASES)
def test_lossless_by_enumeration(kind, gamma, seed):
    target, draft = _models(kind, gamma, seed)
    gap = output_distribution(target, draft, gamma, "hsd") - target_distribution(target, gamma + 1)
    assert np.abs(gap).max() < 1e-12


@pytest.mark.parametrize("sparsity", [0.3, 0.6])
def test_lossless_where_the_draft_cannot_produce_some_tokens(sparsity):
    target, draft = model_pair("markov", 3, seed=5, distance=0.9, sparsity=sparsity, depth=4)
    assert _laws(target, draft, 3)[3] < 1e-12


@pytest.mark.parametrize(("kind", "gamma", "seed"), CASES)
def test_the_stop_law_is_block_verifications_path_by_path(kind, gamma, seed):
    """(b) settled: on a chain, running-max-capped HSD *is* block verification (not < it)."""
    target, draft = _models(kind, gamma, seed)
    ours, block, _, _, mass = _laws(target, draft, gamma)
    live = mass > 0
    assert np.abs(ours.stop - block.stop)[live].max() < 1e-12
    reached = (ours.stop > 0) & live[:, None]
    assert np.abs(ours.correction - block.correction)[reached].max() < 1e-12


@pytest.mark.parametrize(("kind", "gamma", "seed"), CASES)
def test_expected_accepted_equals_block_and_exceeds_token_wise(kind, gamma, seed):
    target, draft = _models(kind, gamma, seed)
    ours = expected_accepted(target, draft, gamma, "hsd")
    assert abs(ours - expected_accepted(target, draft, gamma, "block")) < 1e-12
    assert ours > expected_accepted(target, draft, gamma, "token") + 1e-6


def test_the_toy_pair_numbers():
    """L = 2 on p = (1/3, 2/3), q = (2/3, 1/3): token-wise 10/9, block = HSD 11/9."""
    target, draft = _toy()
    assert abs(expected_accepted(target, draft, 2, "token") - 10 / 9) < 1e-12
    assert abs(expected_accepted(target, draft, 2, "hsd") - 11 / 9) < 1e-12
    assert abs(expected_accepted(target, draft, 2, "block") - 11 / 9) < 1e-12


@pytest.mark.parametrize("variant", ["joint", "clipped"])
def test_the_raw_joint_test_exceeds_block_and_is_not_lossless(variant):
    """Counterexample: the toy pair at L = 2. Draft B A (mass 2/9) has r_1 = 2, r_2 = 1: the
    raw joint test accepts it surely (block verification: w_2 = 1/2), and draft A A (mass 4/9)
    settles at level 0 on B with probability 3/4, followed by A with 1/3: BA comes out with
    2/9 + 1/9 = 1/3 instead of the target's 2/9. E[accepted] 4/3 > block's 11/9."""
    target, draft = _toy()
    _, _, law, gap, _ = _laws(target, draft, 2, variant)
    assert abs(law.expected_accepted - 4 / 3) < 1e-12
    tgt, _ = _tables(target, draft, 2, "hsd", 1, ())
    first_two = law.output_distribution(tgt).reshape(2, 2, 2).sum(axis=2)
    assert abs(first_two[1, 0] - 1 / 3) < 1e-12  # target: 2/9
    assert abs(gap - 2 / 9) < 1e-12
    for kind, gamma, seed in CASES[:3]:
        _, _, law, gap, _ = _laws(*_models(kind, gamma, seed), gamma, variant)
        assert gap > 1e-3
        block = expected_accepted(*_models(kind, gamma, seed), gamma, "block")
        assert law.expected_accepted > block + 1e-3


def test_one_level_is_token_wise_for_every_variant():
    target, draft = _models("markov", 1, 6)
    token = expected_accepted(target, draft, 1, "token")
    for variant in hsd.VARIANTS:
        _, _, law, gap, _ = _laws(target, draft, 1, variant)
        assert gap < 1e-12 and abs(law.expected_accepted - token) < 1e-12


def test_the_sampler_follows_the_exact_law():
    """(d) hsd.sample, drawn as a decoder runs it, against chain()'s law on fixed paths."""
    target, draft = _models("tree", 3, 7, distance=0.8)
    tgt, dft = _tables(target, draft, 3, "hsd", 1, ())
    rng = np.random.default_rng(0)
    tokens = _all_paths(3, 3)[[5, 13, 22]]
    p, q = tgt.along_paths(tokens, 4), dft.along_paths(tokens, 3)
    exact = hsd.chain(p, q, tokens)
    draws = 4000
    for k in range(tokens.shape[0]):
        expected = exact.stop[k][:, None] * exact.correction[k]  # (tau, emitted token)
        counts = np.zeros_like(expected)
        for _ in range(draws):
            out = hsd.sample(p[k], q[k], tokens[k], rng)
            counts[len(out) - 1, out[-1]] += 1
        sigma = np.sqrt(expected * (1 - expected) / draws)
        assert np.all(np.abs(counts / draws - expected) <= 5 * sigma + 1e-12)


def test_monte_carlo_decoding_matches_the_exact_mean():
    target, draft = _models("markov", 3, 8)
    run = simulate(target, draft, 3, "hsd", calls=3000, seed=1, restart=True)
    exact = expected_accepted(target, draft, 3, "hsd")
    assert abs(run.expected_accepted - exact) < 5 * run.stderr


def test_a_broken_branch_cap_is_caught(monkeypatch):
    """Mutation: the running-max cap taken 1% too large at every level is not lossless."""
    honest = hsd.caps

    def loose(ratios, variant="capped"):
        branch, accept = honest(ratios, variant)
        return np.minimum(1.01 * branch, 1.0), accept

    monkeypatch.setattr(hsd, "caps", loose)
    target, draft = _models("markov", 3, 0)
    assert _laws(target, draft, 3)[3] > 1e-6


def test_unknown_variants_are_refused():
    with pytest.raises(ValueError, match="variant"):
        hsd.caps(np.ones((1, 3)), "raw")


def test_a_subnormal_draft_probability_gives_a_finite_law_equal_to_blocks():
    """The referee's minimal case (issue 38): q = 6.4e-310 on the path overflowed the prefix
    ratio P / Q to inf and the branch caps to NaN; in logs the law stays block
    verification's."""
    target = np.array([[[0.09090909, 0.90909091], [0.9, 0.1], [0.9, 0.1]]])
    draft = np.array([[[1.0, 6.43469883e-310], [2.54375266e-310, 1.0]]])
    tokens = np.array([[1, 0]])
    got = hsd.chain(target, draft, tokens)
    want = single_path.block(target, draft, tokens)
    assert np.isfinite(got.stop).all() and np.isfinite(got.correction).all()
    np.testing.assert_allclose(got.stop, want.stop, atol=1e-12)
    np.testing.assert_allclose(got.correction, want.correction, atol=1e-12)
