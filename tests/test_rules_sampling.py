"""Samplers run each rule's procedure; their draws must follow the exact laws.

Every goodness-of-fit test is a chi-square test at significance SIGNIFICANCE (cells with
expected count below 5 are pooled), on fixed seeds so the suite is deterministic. The
procedures (accept/reject with uniforms, shared Gumbel noise, MinHash's shared uniforms)
are implemented independently of the exact formulas they are tested against.
"""

from __future__ import annotations

import numpy as np
import pytest

import otlp
from otlp import rules
from tests.chi_square import chi_square_pvalue

SIGNIFICANCE = 1e-3
DRAWS = 20_000
SEEDS = (0, 1, 2)


def _instance(n: int) -> otlp.Instance:
    """V = 7 with top-k 4, so the target mass outside the draft vocabulary is sampled too."""
    rng = np.random.default_rng(11)
    p, q = rng.dirichlet(np.ones(7)), rng.dirichlet(np.ones(7))
    return otlp.Instance(p, q, n, top_k=4)


def _cases() -> list[tuple[str, int]]:
    return [
        (name, n) for name in rules.names() for n in (2, 3) if not (name == "spechub" and n == 3)
    ]


@pytest.mark.parametrize(("name", "n"), _cases())
def test_sampled_tokens_follow_the_output_law(name: str, n: int) -> None:
    """Tokens ~ p for every lossless rule (mentored: its own output law), over several seeds;
    the fraction of draws returning a draft matches the exact acceptance."""
    inst = _instance(n)
    rule = rules.get(name)
    law = rule.output_distribution(inst)
    acceptance = rule.acceptance(inst)
    for seed in SEEDS:
        tokens, accepted = rule.sample(inst, np.random.default_rng(seed), DRAWS)
        counts = np.bincount(tokens, minlength=inst.vocab_size)
        assert chi_square_pvalue(counts, DRAWS * law) > SIGNIFICANCE
        spread = np.sqrt(acceptance * (1 - acceptance) / DRAWS)
        assert abs(accepted.mean() - acceptance) <= 4.5 * spread + 1e-12


@pytest.mark.parametrize(("name", "n"), _cases())
def test_sampled_drafts_and_outputs_follow_the_exact_joint(name: str, n: int) -> None:
    """The pairs (drafted tuple, output token) follow P(omega) * conditional(omega)."""
    inst = _instance(n)
    rule = rules.get(name)
    members, mass = rule.draft_joint(inst).enumerate()
    tuples = inst.tokens[members]
    expected = np.array([m * rule.conditional(inst, t) for t, m in zip(tuples, mass, strict=True)])
    draw = rule.draw(inst, np.random.default_rng(100 + n), DRAWS)
    width = inst.vocab_size
    codes = tuples @ width ** np.arange(tuples.shape[1])
    lookup = {int(c): i for i, c in enumerate(codes)}
    column = np.array([lookup[int(c)] for c in draw.drafts @ width ** np.arange(tuples.shape[1])])
    observed = np.zeros_like(expected)
    np.add.at(observed, (column, draw.tokens), 1)
    assert chi_square_pvalue(observed, DRAWS * expected) > SIGNIFICANCE
    inside = (draw.tokens[:, None] == draw.drafts).any(axis=1)
    assert np.array_equal(inside, draw.accepted)
