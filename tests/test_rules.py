"""Verification rules: exact output laws equal p, closed forms equal the enumerated joints,
acceptance respects alpha* of the rule's own draft joint, and the API rejects bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import otlp
from otlp import rules
from otlp.rules.couplings import gumbel_joint, minhash_joint
from tests.strategies import instances, weight_vectors

LOSSLESS = [name for name in rules.names() if rules.get(name).lossless]
EXACT = 1e-9
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _applicable(rule: rules.Rule, inst: otlp.Instance) -> bool:
    try:
        rule.draft_joint(inst)
    except ValueError:
        return False
    return True


def test_registry_lists_every_rule_of_the_issue() -> None:
    expected = {
        "sps",
        "gumbel",
        "minhash",
        "rrs",
        "rrs_without_replacement",
        "kseq",
        "spechub",
        "canonical",
        "ot",
        "mentored",
    }
    assert set(rules.names()) == expected
    for name, line in rules.describe().items():
        rule = rules.get(name)
        assert rule.name == name and re.search(r"\[(GR|SpecHub|GBV|Mentored|Musco)\]", line)
    assert [n for n in rules.names() if not rules.get(n).lossless] == ["mentored"]


def test_registry_errors_name_the_argument() -> None:
    with pytest.raises(ValueError, match="name: unknown rule 'nope'"):
        rules.get("nope")
    with pytest.raises(ValueError, match="options"):
        rules.get("sps", method="highs")
    with pytest.raises(ValueError, match="method: unknown"):
        rules.get("ot", method="simplex-by-hand")
    with pytest.raises(ValueError, match="kl_budget"):
        rules.get("mentored", kl_budget=-1.0)


@FAST
@given(instances(max_vocab=6, max_n=3), st.sampled_from(LOSSLESS))
def test_lossless_rules_output_exactly_p(inst: otlp.Instance, name: str) -> None:
    """The exact output law over the whole vocabulary equals p; closed forms equal the joint."""
    rule = rules.get(name)
    if not _applicable(rule, inst):
        return
    joint = rule.exact_joint(inst)
    assert joint.mass.sum() == pytest.approx(1.0, abs=EXACT)
    assert np.all(joint.out >= -EXACT)
    assert joint.out.sum(axis=1) == pytest.approx(np.ones(joint.mass.shape[0]), abs=EXACT)
    assert np.abs(rule.output_distribution(inst) - inst.p).max() <= EXACT
    assert np.abs(rule.local_output(inst) - joint.output()).max() <= EXACT
    assert rule.acceptance(inst) == pytest.approx(joint.acceptance(), abs=EXACT)


@FAST
@given(instances(max_vocab=6, max_n=3), st.sampled_from(LOSSLESS))
def test_acceptance_never_exceeds_alpha_star_of_the_own_joint(
    inst: otlp.Instance, name: str
) -> None:
    rule = rules.get(name)
    if not _applicable(rule, inst):
        return
    assert rule.acceptance(inst) <= rule.alpha_star(inst) + EXACT


@FAST
@given(instances(max_vocab=6, max_n=3))
def test_ot_canonical_and_sps_reach_alpha_star(inst: otlp.Instance) -> None:
    """OT and the canonical decomposition reach alpha* of the instance ([GR] Thm 4.1);
    speculative sampling reaches alpha* of one draft ([Musco])."""
    alpha = otlp.optimal_acceptance(inst).alpha_star
    for name in ("ot", "canonical"):
        assert rules.get(name).acceptance(inst) == pytest.approx(alpha, abs=EXACT)
    single = otlp.Instance(inst.p, inst.q if inst.q.ndim == 1 else inst.q[0], 1, top_k=inst.top_k)
    sps = rules.get("sps")
    assert sps.acceptance(single) == pytest.approx(otlp.optimal_acceptance(single).alpha_star)
    assert sps.acceptance(inst) == pytest.approx(sps.alpha_star(inst), abs=EXACT)


@pytest.mark.parametrize("method", ["highs", "pot", "maxflow_cs"])
def test_plan_rules_work_with_any_solve_method(method: str) -> None:
    inst = _instance(3, vocab=12, n=2, top_k=5)
    alpha = otlp.optimal_acceptance(inst).alpha_star
    for name in ("ot", "canonical"):
        rule = rules.get(name, method=method)
        assert rule.acceptance(inst) == pytest.approx(alpha, abs=1e-7)
        assert np.abs(rule.output_distribution(inst) - inst.p).max() <= 1e-7


@FAST
@given(weight_vectors(5), weight_vectors(5))
def test_coupling_joints_have_marginals_q_and_p(p: np.ndarray, q: np.ndarray) -> None:
    """Drafter-invariant couplings ([Musco]): rows sum to the draft, columns to the target."""
    for joint in (gumbel_joint(p, q), minhash_joint(p, q)):
        assert np.all(joint >= 0)
        assert joint.sum(axis=1) == pytest.approx(q, abs=EXACT)
        assert joint.sum(axis=0) == pytest.approx(p, abs=EXACT)


def test_gumbel_acceptance_matches_numerical_integration() -> None:
    """P(a = b) = sum_x int_0^inf exp(-t sum_i max(q_i / q_x, p_i / p_x)) dt by quadrature of
    the defining integral, independent of the closed form."""
    from scipy.integrate import quad

    p = np.array([0.45, 0.3, 0.15, 0.1])
    q = np.array([0.1, 0.2, 0.3, 0.4])

    def same(x: int) -> float:
        rate = np.maximum(q / q[x], p / p[x])
        return quad(lambda t: np.exp(-t * rate.sum()), 0, np.inf)[0]

    integral = sum(same(x) for x in range(4))
    assert np.trace(gumbel_joint(p, q)) == pytest.approx(integral, abs=1e-10)


def _instance(seed: int, vocab: int = 10, n: int = 2, top_k: int | None = 6) -> otlp.Instance:
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(vocab) * 0.5), rng.dirichlet(np.ones(vocab) * 0.5)
    return otlp.Instance(p, q, n, top_k=top_k)


@pytest.mark.parametrize("name", rules.names())
def test_conditionals_mix_to_the_output_law_over_the_vocabulary(name: str) -> None:
    """sum_omega P(omega) conditional(omega) = output law, with global token ids and the
    target mass outside the draft vocabulary spread in proportion to p."""
    inst = _instance(4, vocab=9, n=2, top_k=4)
    rule = rules.get(name)
    members, mass = rule.draft_joint(inst).enumerate()
    mixture = sum(
        m * rule.conditional(inst, inst.tokens[row]) for row, m in zip(members, mass, strict=True)
    )
    assert mixture == pytest.approx(rule.output_distribution(inst), abs=1e-12)
    assert inst.p_outside > 0


def test_conditional_rejects_drafts_outside_the_joint() -> None:
    inst = _instance(5, vocab=8, n=2, top_k=5)
    hub = rules.get("spechub")
    a = inst.tokens[hub.draft_joint(inst).hub]
    others = [t for t in inst.tokens if t != a]
    with pytest.raises(ValueError, match="omega: has zero probability under the hub"):
        hub.conditional(inst, others[:2])
    with pytest.raises(ValueError, match="omega: has zero probability"):
        rules.get("rrs_without_replacement").conditional(inst, [others[0], others[0]])
    with pytest.raises(ValueError, match="omega: contains a token the draft cannot produce"):
        rules.get("rrs").conditional(inst, [int(inst.tokens[0]), 10_000])
    with pytest.raises(ValueError, match="omega: expected 2"):
        rules.get("kseq").conditional(inst, inst.tokens[:3])
    assert rules.get("sps").conditional(inst, inst.tokens[:2]).sum() == pytest.approx(1.0)


def test_rules_refuse_instances_they_do_not_cover() -> None:
    with pytest.raises(ValueError, match="n: SpecHub's hub joint has two drafts"):
        rules.get("spechub").acceptance(_instance(6, n=3))
    narrow = otlp.Instance([0.5, 0.5, 0.0], [0.5, 0.5, 0.0], 3)
    with pytest.raises(ValueError, match="n: drawing 3 distinct drafts"):
        rules.get("rrs_without_replacement").acceptance(narrow)
    with pytest.raises(ValueError, match="rng"):
        rules.get("sps").sample(_instance(6), "seed", 10)
    with pytest.raises(ValueError, match="inst"):
        rules.get("kseq").acceptance((0.5, 0.5))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size"):
        rules.get("sps").sample(_instance(6), np.random.default_rng(0), 0)


def test_rrs_without_replacement_tree_refuses_oversized_problems() -> None:
    inst = _instance(7, vocab=12, n=3, top_k=12)
    with otlp.limits.limited(max_variables=100), pytest.raises(otlp.ProblemTooLarge):
        rules.get("rrs_without_replacement").acceptance(inst)


def test_rrs_matches_seed_001_figure_4_example() -> None:
    """[SpecHub] Figure 4: q = [0.5, 0.3, 0.2], p = [0.1, 0.6, 0.3]; RRSw leaves a transport
    cost of 0.06, the optimum (OTMw) none; SpecHub (Figure 5) accepts everything."""
    p, q = [0.1, 0.6, 0.3], [0.5, 0.3, 0.2]
    wr = otlp.Instance(p, q, 2, "without_replacement")
    assert rules.get("rrs_without_replacement").acceptance(wr) == pytest.approx(0.94)
    assert rules.get("ot").acceptance(wr) == pytest.approx(1.0)
    assert rules.get("spechub").acceptance(otlp.Instance(p, q, 2)) == pytest.approx(1.0)
