"""Fuzzed seeding patterns (issue 35's goal: no false alarm on lossless samplers whose
randomness the exact mode cannot follow): every source of uniforms engines use passes, the
patterns are lossless (a lossy twin is caught), and the exact mode gives up on a loop of draws
without a bound within seconds (regression: it spent the 60 s budget of a case, case after
case)."""

from __future__ import annotations

import numpy as np
import pytest

from otlp.referee import referee
from otlp.referee.symbolic import MAX_CHOICES
from tests.referee_seeding import DRAWS, SOURCES, Pattern, _rule, fuzzed

pytest.importorskip("torch")


@pytest.mark.parametrize("source", list(SOURCES))
def test_every_source_passes(source):
    pattern = Pattern(source, 2**63, "first call", "variable")
    verdict = referee(pattern.sampler(), cases=4, epsilon=0.05)
    assert verdict.status == "lossless", verdict.summary()
    if source != "handed numpy":  # the only source the exact mode follows
        assert verdict.exact_cases == 0 and verdict.statistical_cases == 4
    kind = SOURCES[source][0]
    if kind != "numpy":  # handed by the referee: the exact mode says it does not follow it
        assert f"rng={kind!r}" in verdict.not_enumerable


@pytest.mark.parametrize("draws", DRAWS)
def test_the_rule_is_lossless_whatever_the_draws(draws):
    """The patterns' rule on numpy uniforms: its empirical law is the target's (so a flag on
    a pattern is the referee's false alarm), and the check sees a rule that accepts every
    draft."""
    rng = np.random.default_rng(0)
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])
    rows = 200_000
    drafts = rng.choice(3, size=(rows, 1), p=q)
    pattern = Pattern("handed numpy", draws=draws)
    out = pattern.sampler()(np.tile(p, (rows, 1)), np.tile(q, (rows, 1)), drafts, rng)
    assert np.abs(np.bincount(out, minlength=3) / rows - p).max() < 0.005
    always = np.zeros((rows, 2))  # u1 = 0: every draft accepted, the law is q's
    lossy = _rule(np.tile(p, (rows, 1)), np.tile(q, (rows, 1)), drafts, always, None, rng)
    assert np.abs(np.bincount(lossy, minlength=3) / rows - p).max() > 0.05


def test_a_loop_of_draws_is_given_up_at_the_decision_bound():
    """Rejection sampling from the referee's own Generator: an unbounded branch tree, which the
    exact mode leaves at its decision bound on the first case, not at a case's replay budget
    (runs or seconds: the old bound spent 60 s on each case). The reason is checked, not the
    clock."""
    verdict = referee(Pattern("handed numpy", draws="rejection").sampler(), cases=3, epsilon=0.05)
    assert verdict.status == "lossless", verdict.summary()
    assert verdict.exact_cases == 0
    assert f"more than {MAX_CHOICES:,} random decisions" in verdict.not_enumerable
    assert "replay budget" not in verdict.not_enumerable


def test_the_fuzz_covers_every_source_seeding_and_draw():
    patterns = list(fuzzed(60))
    assert {p.source for p in patterns} == set(SOURCES)
    assert {(p.seeding, p.draws) for p in patterns if not p.source.startswith("handed")} >= {
        (s, d) for s in ("every call", "first call", "every 7th call") for d in DRAWS
    }
    assert len({p.name for p in patterns}) > 40
