"""The papers' statements, checked through the otlp.validate registry (one copy of each check),
plus the deterministic examples that show a check can fail."""

from __future__ import annotations

import numpy as np
import pytest

import otlp
import otlp.validate
from otlp import rules
from otlp.instances.generators import spechub_toy_pair
from otlp.rules.mentored import kl_divergence

CHECKS = sorted(otlp.validate.checks())


@pytest.mark.parametrize("name", CHECKS)
def test_every_registered_statement_behaves_as_expected(name: str) -> None:
    """Each statement holds on its quick instances; each printed error is refuted."""
    report = otlp.validate.run([name], quick=True, seed=1)
    (result,) = report.results
    assert result.ok, (result.status, result.worst_margin, result.worst_values, result.first_error)


def test_registry_covers_at_least_forty_statements_of_five_papers() -> None:
    registry = otlp.validate.checks().values()
    assert len(registry) >= 40
    papers = {paper for c in registry for paper in c.paper.split("/")}
    assert {"GR", "SpecHub", "GBV", "Mentored", "Musco"} <= papers
    assert sum(c.expect_fail for c in registry) >= 5


def test_gumbel_strictly_beats_minhash_somewhere() -> None:
    """[Musco]: 'there exist distributions where the inequality is strict'."""
    inst = otlp.Instance([0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], 1)
    gumbel, minhash = rules.get("gumbel").acceptance(inst), rules.get("minhash").acceptance(inst)
    assert gumbel > minhash + 1e-3


def test_theorem_3_condition_matters() -> None:
    """Without its condition SpecHub can lose to RRS (so the registered check can fail)."""
    found = False
    for seed in range(200):
        p, q = spechub_toy_pair(20, temperature=1.0, similarity=0.2, seed=seed)
        inst = otlp.Instance(p, q, 2)
        if rules.get("spechub").acceptance(inst) < rules.get("rrs").acceptance(inst) - 1e-6:
            q_a = inst.q_local.max()
            alpha = float(np.minimum(inst.p_local, inst.q_local).sum())
            assert q_a / (1 - q_a) <= 1 - alpha
            found = True
    assert found


def test_mentored_limits() -> None:
    """D = 0 is speculative sampling; D >= KL(p || q) accepts every draft."""
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    inst = otlp.Instance(p, q, 1)
    lossless = rules.get("mentored", kl_budget=0.0)
    assert lossless.acceptance(inst) == pytest.approx(0.7)
    assert lossless.output_distribution(inst) == pytest.approx(p)
    greedy = rules.get("mentored", kl_budget=kl_divergence(p, q))
    assert greedy.acceptance(inst) == 1.0
    assert greedy.output_distribution(inst) == pytest.approx(q)


def test_spechub_is_lossless_when_the_hub_holds_almost_all_draft_mass() -> None:
    """Found by `otlp validate` (rules.lossless_output_is_p, 200 instances): 1 - q(a) cancelled
    when q(a) = 1 - 2e-12 and the output law was off by 2.2e-5 in L1."""
    p = np.array([1 / 3, 1 / 12, 1 / 4, 1 / 3])
    q = np.array([2e-12, 0.0, 1 - 2e-12, 0.0])
    inst = otlp.Instance(p, q, 2)
    hub = rules.get("spechub")
    assert np.abs(hub.output_distribution(inst) - inst.p).sum() < 1e-14
    assert hub.acceptance(inst) == pytest.approx(hub.lp_optimum(inst), abs=1e-12)


def test_spechub_toy_suite_reproduces_a_table_4_cell() -> None:
    """[SpecHub] Table 4, T = 0.25, lambda = 0.7 (RRS, OTM, SpecHub): the shipped suite's 100
    pairs land within 3 standard errors; Appendix E's literal U(0, 1) logits do not."""
    import otlp.instances

    paper = np.array([0.7354, 0.7846, 0.8113])
    items = [
        it for it in otlp.instances.load("spechub-toy") if it.name.startswith("toy-T0.25-l0.7-")
    ]
    assert len(items) == 100

    def rates(p: np.ndarray, q: np.ndarray) -> list[float]:
        inst = otlp.Instance(p, q, 2)
        return [
            rules.get("rrs").acceptance(inst),
            otlp.optimal_acceptance(inst).alpha_star,
            rules.get("spechub").acceptance(inst),
        ]

    normal = np.array([rates(it.p, it.q) for it in items])
    se = normal.std(axis=0, ddof=1) / 10
    assert np.all(np.abs(normal.mean(axis=0) - paper) < 3 * se)
    uniform = np.array(
        [rates(*spechub_toy_pair(50, 0.25, 0.7, s, logits="uniform")) for s in range(100)]
    )
    assert np.abs(uniform.mean(axis=0) - paper).mean() > 0.1  # the N(0, 1) pairs: 0.035
