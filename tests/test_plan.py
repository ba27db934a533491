"""Transport plans: slices are conditionals, sampling follows them, outside mass is kept."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import otlp


def _instance(seed: int, vocab: int = 40, n: int = 2, top_k: int | None = 8) -> otlp.Instance:
    rng = np.random.default_rng(seed)
    return otlp.Instance(
        rng.dirichlet(np.ones(vocab) * 0.3), rng.dirichlet(np.ones(vocab) * 0.3), n, top_k=top_k
    )


def test_slices_mix_to_the_target() -> None:
    """sum_omega P(omega) pi(. | omega) = p over the whole vocabulary (Eq. 3)."""
    inst = _instance(0)
    plan = otlp.solve(inst, "maxflow_cs", strict=True)
    tuples = inst.columns("tuples")
    mixture = np.zeros(inst.vocab_size)
    for local, mass in zip(tuples.members, tuples.mass, strict=True):
        if mass > 0:
            mixture += mass * plan.slice(inst.tokens[local])
    assert mixture == pytest.approx(inst.p, abs=1e-12)


def test_acceptance_equals_probability_of_returning_a_draft() -> None:
    inst = _instance(1, n=3, top_k=6)
    plan = otlp.solve(inst, "highs", strict=True)
    tuples = inst.columns("tuples")
    accepted = sum(
        mass * plan.slice(inst.tokens[local])[np.unique(inst.tokens[local])].sum()
        for local, mass in zip(tuples.members, tuples.mass, strict=True)
        if mass > 0
    )
    assert accepted == pytest.approx(plan.acceptance, abs=1e-12)


def test_sampling_follows_the_slice() -> None:
    inst = _instance(2)
    plan = otlp.solve(inst, "maxflow", strict=True)
    rng = np.random.default_rng(7)
    omega = inst.sample_drafts(rng, 1)[0]
    probs = plan.slice(omega)
    draws = plan.sample(omega, rng, size=20_000)
    support = np.flatnonzero(probs > 0)
    assert np.isin(draws, support).all()
    big = support[probs[support] * 20_000 >= 20]
    observed = np.array([(draws == t).sum() for t in big] + [(~np.isin(draws, big)).sum()])
    expected = np.append(probs[big], 1 - probs[big].sum()) * 20_000
    keep = expected > 0
    assert stats.chisquare(observed[keep], expected[keep]).pvalue > 1e-4


def test_impossible_drafts_are_rejected() -> None:
    inst = _instance(3, top_k=5)
    plan = otlp.solve(inst, "maxflow")
    outside = int(np.setdiff1d(np.arange(inst.vocab_size), inst.tokens)[0])
    with pytest.raises(ValueError, match="omega"):
        plan.slice([outside, int(inst.tokens[0])])
    with pytest.raises(ValueError, match="omega"):
        plan.slice([int(inst.tokens[0])])


def test_without_replacement_plans() -> None:
    inst = otlp.Instance(
        *np.random.default_rng(4).dirichlet(np.ones(7), size=2), 3, "without_replacement"
    )
    plan = otlp.solve(inst, "maxflow_cs", strict=True)
    assert plan.acceptance == pytest.approx(otlp.optimal_acceptance(inst, "brute").alpha_star)
    with pytest.raises(ValueError, match="omega"):
        plan.slice([int(inst.tokens[0])] * 3)  # repeated tokens cannot be drawn
