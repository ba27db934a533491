"""Numerics at the extremes: one-hot, subnormal and 1e-300 masses, p = q, disjoint supports,
float32 input. Each reproducer found by the fuzz campaign of issue 9 is a test here."""

from __future__ import annotations

import numpy as np
import pytest

import otlp
import otlp.rules
from otlp.rules.couplings import gumbel_joint

LOSSLESS = [name for name in otlp.rules.names() if otlp.rules.get(name).lossless]
RNG = np.random.default_rng(1)
BASE = RNG.dirichlet(np.ones(4))
ONE_HOT = np.array([1.0, 0.0, 0.0, 0.0])
EXTREMES = {
    "q one-hot": (BASE, ONE_HOT),
    "p one-hot": (ONE_HOT, BASE),
    "both one-hot": (ONE_HOT, ONE_HOT),
    "q near one-hot": (BASE, np.array([1 - 3e-12, 1e-12, 1e-12, 1e-12])),
    "q 1e-20": (BASE, np.array([1.0, 1e-20, 1e-20, 1e-20])),
    "p subnormal": (np.array([0.6, 0.4, 1e-310, 5e-324]), BASE),
    "q subnormal": (BASE, np.array([0.6, 0.4, 1e-310, 5e-324])),
    "p = q subnormal": (np.array([0.6, 0.4, 1e-310, 5e-324]),) * 2,
    "1e-300": (np.array([0.5, 0.5, 1e-300, 1e-300]), BASE),
    "p = q": (BASE, BASE),
    "disjoint": (np.array([0.5, 0.5, 0, 0]), np.array([0, 0, 0.5, 0.5])),
    "float32": (BASE.astype(np.float32), RNG.dirichlet(np.ones(4)).astype(np.float32)),
}


@pytest.mark.parametrize("case", sorted(EXTREMES))
@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_lossless_rule_is_exact_at_the_extremes(case: str, n: int) -> None:
    p, q = EXTREMES[case]
    inst = otlp.Instance(p, q, n, renormalize=True)
    for name in LOSSLESS:
        rule = otlp.rules.get(name)
        if name == "spechub" and n != 2:
            continue
        try:
            output = rule.output_distribution(inst)
        except ValueError as exc:  # n distinct drafts from fewer draft tokens: refused
            assert "distinct drafts" in str(exc)
            continue
        assert np.abs(output - inst.p).sum() <= 1e-12, name
        acceptance = rule.acceptance(inst)
        assert np.isfinite(acceptance) and acceptance <= rule.alpha_star(inst) + 1e-12, name
        joint = rule.exact_joint(inst)
        rows = joint.out[joint.mass > 0]
        assert rows.min() >= 0 and np.abs(rows.sum(axis=1) - 1).max() <= 1e-12, name
        tokens, _ = rule.sample(inst, np.random.default_rng(0), 20)
        assert (inst.p[tokens] > 0).all(), name


@pytest.mark.parametrize("case", sorted(EXTREMES))
def test_every_method_verifies_at_the_extremes(case: str) -> None:
    p, q = EXTREMES[case]
    for scheme in ("iid", "without_replacement"):
        try:
            inst = otlp.Instance(p, q, 2, scheme, renormalize=True)
        except ValueError:
            continue  # fewer than two draft tokens cannot be drawn without replacement
        alpha = otlp.optimal_acceptance(inst, "brute").alpha_star
        for method in ("highs", "maxflow", "maxflow-cs", "pot", "highs-full"):
            plan = otlp.solve(inst, method, strict=True)
            assert plan.acceptance == pytest.approx(alpha, abs=1e-9), method
            assert plan.verification.slices.max_sum_error <= 1e-12, method


def test_spechub_near_one_hot_draft() -> None:
    """1 - q(hub) cancelled: sample raised IndexError, acceptance was NaN."""
    inst = otlp.Instance([0.5, 0.5], [1 - 1e-12, 1e-12], 2)
    rule = otlp.rules.get("spechub")
    tokens, _ = rule.sample(inst, np.random.default_rng(0), 1000)
    assert set(tokens.tolist()) <= {0, 1}
    inst = otlp.Instance([0.4, 0.3, 0.3], [1, 1e-20, 1e-20], 2)
    assert np.isfinite(rule.acceptance(inst))
    assert rule.output_distribution(inst) == pytest.approx(inst.p, abs=1e-15)


def test_gumbel_exact_law_with_subnormal_target() -> None:
    """q / p and C * C overflowed: the exact law summed to 0.58 instead of 1."""
    p = np.array([1.38277428e-309, 4.24818286e-001, 1.38274152e-319, 5.75181714e-001])
    q = np.array([0.24668093, 0.02215587, 0.29467821, 0.43648499])
    q /= q.sum()
    joint = gumbel_joint(p, q)
    assert np.abs(joint.sum(axis=0) - p).sum() < 1e-15
    assert np.abs(joint.sum(axis=1) - q).sum() < 1e-15


def test_without_replacement_set_mass_below_the_smallest_normal() -> None:
    """The finfo.tiny clamp gave set mass 0.0045 instead of 1 and every method failed."""
    inst = otlp.Instance([0.6, 0.4, 1e-310], [0.6, 0.4, 1e-310], 3, "without_replacement")
    assert inst.columns().mass.sum() == pytest.approx(1.0, abs=1e-15)
    for method in ("maxflow", "highs", "pot"):
        assert otlp.solve(inst, method, strict=True).acceptance == pytest.approx(1.0)
    assert otlp.rules.get("rrs-without-replacement").acceptance(inst) == pytest.approx(1.0)


def test_renormalize_huge_entries() -> None:
    """[1e308] * 3 overflowed to inf when summed and gave NaN."""
    inst = otlp.Instance([1e308] * 3, [1e308] * 3, 2, renormalize=True)
    assert inst.p == pytest.approx([1 / 3] * 3)


def test_highs_on_1e200_entries_gives_a_usable_plan() -> None:
    """HiGHS said "Optimal" with acceptance 3.1e167 on p ~ q with 1e-200 entries: its raw
    answer violates the 1e-200 bounds within its 1e-9 tolerance; polishing makes it exact."""
    p = [1.5852515184785638e-200, 0.14002286693222052, 1.5440828966044807e-200,
         0.16626753770761368, 2.933271488698415e-201, 0.40097653999272626,
         0.29273305536743965, 7.838045704498511e-201]  # fmt: skip
    q = [1.583754913458475e-200, 0.1395906715866413, 1.5423496500562703e-200,
         0.16648646780998774, 2.932315574982416e-201, 0.4013271514630454,
         0.2925957091403256, 7.852001305451316e-201]  # fmt: skip
    inst = otlp.Instance(p, q, 3)
    alpha = otlp.optimal_acceptance(inst).alpha_star
    for method in ("highs", "highs-full"):
        plan = otlp.solve(inst, method, strict=True)
        assert plan.acceptance == pytest.approx(alpha, abs=1e-12)
        assert plan.verification.slices.max_sum_error <= 1e-12
    assert any("polished" in m for m in otlp.solve(inst, "highs").messages)


FUZZ_ROUND_1 = {
    # highs: a column of mass 1.8e-10 summed to 0; pot: the same column summed to 0.99999966
    "tiny column": (
        [0.0005641537577406906, 0.9994358462422593],
        [0.0005641537577406906, 0.9994358462422593],
        3,
        "iid",
        None,
    ),
    # highs_full: a column of mass 1e-12 summed to 0
    "1e-12 draft": (
        [0.17275125138779882, 0.4522832131175784, 0.3097431243518213, 0.06522241114280136],
        [[1e-12, 1 - 3e-12, 1e-12, 1e-12]],
        1,
        "independent",
        3,
    ),
    # cvxpy: entries of -2.8e181 in a column of mass 7.7e-200
    "1e-200 draft": (
        [3.4e-299, 3.2e-299, 4.2e-299, 1.0],
        [[1.0e-199, 1.0, 6.1e-200, 7.7e-200]],
        1,
        "independent",
        4,
    ),
}


@pytest.mark.parametrize("case", sorted(FUZZ_ROUND_1))
def test_fuzz_round_1_slices_are_distributions(case: str) -> None:
    p, q, n, scheme, top_k = FUZZ_ROUND_1[case]
    inst = otlp.Instance(p, q, n, scheme, top_k, renormalize=True)
    for method in ("highs", "highs-full", "pot", "cvxpy", "maxflow"):
        plan = otlp.solve(inst, method, strict=True)
        slices = plan.verification.slices
        assert slices.max_sum_error <= 1e-12 and slices.min_entry >= 0, method
        for column in np.flatnonzero(plan.columns.mass > 0):
            omega = plan.instance.tokens[plan.columns.members[column, :1].repeat(n)]
            plan.sample(omega, 0)  # never meets an invalid slice


def test_spectr_traversal_with_highs_slices() -> None:
    """SpecTr traversal with highs raised on invalid slices of tiny-mass columns (optimal
    plans are not unique, so traversals with different exact methods may differ)."""
    from otlp.multistep import expected_accepted, model_pair

    for seed in range(3):
        target, draft = model_pair("markov", 3, seed=seed, distance=0.9, sparsity=0.6, depth=4)
        value = expected_accepted(target, draft, 3, "spectr", paths=2, rule="highs")
        assert 0.0 <= value <= 3.0


def test_mentored_frontier_with_target_mass_below_an_ulp() -> None:
    """The frontier was empty: with p = q up to a 2e-301 outside row, 1 - R computed as
    sum relu(q - p) is 0, so every point had KL = inf (lead's reproducer)."""
    inst = otlp.Instance([0.0, 0.6, 0.4, 2e-301, 0.0], [0.0, 0.6, 0.4, 2e-301, 0.0], 1, top_k=2)
    rule = otlp.rules.get("mentored")
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        frontier = rule.frontier(inst)
        assert frontier.kl.size > 0 and np.isfinite(frontier.kl).all()
        assert np.abs(rule.output_distribution(inst) - inst.p).sum() < 1e-15


def test_mentored_frontier_is_monotone_when_p_equals_q_up_to_rounding() -> None:
    """Fuzz seed 45, case 47456: p = q up to 1.4e-9 made every KL of the alpha family
    rounding noise (1e-16) and its acceptances differ by up to 1e-9 in no order; the frontier
    keeps only points no other point dominates, so both coordinates increase."""
    p = [4.07405315859791e-160, 0.5966190136900249, 0.4033809863099752]
    q = [4.074053161020141e-160, 0.5966190122981104, 0.4033809877018895]
    inst = otlp.Instance(p, q, 3, "greedy")
    frontier = otlp.rules.get("mentored").frontier(inst)
    assert frontier.kl.size > 0
    assert np.all(np.diff(frontier.kl) >= 0) and np.all(np.diff(frontier.acceptance) > 0)
    assert frontier.acceptance[0] == pytest.approx(otlp.rules.get("sps").acceptance(inst))


@pytest.mark.parametrize("backend", ["ortools-maxflow", "networkx-maxflow"])
def test_max_flow_with_a_subnormal_total_capacity(backend: str) -> None:
    """The integer scale 2^50 / total overflowed to inf below total ~ 1e-293 (flows 0 or NaN
    casts); capacities are now divided by total first."""
    from otlp.solvers.base import MaxFlowProblem
    from otlp.solvers.registry import get_backend

    tails, heads = np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3])
    caps = np.array([3e-310, 1e-310, np.inf, 0.5])
    problem = MaxFlowProblem(4, tails, heads, caps, 0, 3)
    with np.errstate(over="raise", invalid="raise"):
        result = get_backend(backend).solve(problem)
    assert result.objective == pytest.approx(4e-310, rel=1e-6)


@pytest.mark.parametrize(
    ("scheme", "n"), [("iid", 2), ("iid", 3), ("without_replacement", 2), ("independent", 2)]
)
def test_log_set_mass_is_the_set_mass_where_it_does_not_underflow(scheme: str, n: int) -> None:
    """The one rule for tuple masses (issue 27) agrees with the plain masses on ordinary
    instances, set by set and tuple by tuple."""
    from otlp.columns import build_columns, log_set_mass, log_tuple_mass

    rng = np.random.default_rng(n)
    rows = rng.dirichlet(np.full(5, 0.5), n if scheme == "independent" else 1)
    rows = rows if scheme == "independent" else np.repeat(rows, n, axis=0)
    sets = build_columns("sets", rows, n, scheme)
    for j in sets.set_sizes:
        block = sets.members[(sets.members >= 0).sum(axis=1) == j][:, :j]
        mass = sets.mass[(sets.members >= 0).sum(axis=1) == j]
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(
                log_set_mass(rows, n, scheme, block), np.log(mass), rtol=1e-12
            )
    tuples = build_columns("tuples", rows, n, scheme)
    with np.errstate(divide="ignore"):
        expected = np.log(tuples.mass)
    np.testing.assert_allclose(
        log_tuple_mass(rows, n, scheme, tuples.members), expected, rtol=1e-12
    )


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
@pytest.mark.parametrize("n", [2, 3])
def test_draft_tuples_whose_mass_underflows_are_verified_by_every_method(
    scheme: str, n: int
) -> None:
    """Issue 27: drafts of probability 1e-200 each form a tuple of mass 1e-400 (0 as a
    double); maxflow_cs refused it ("omega: has zero probability") while global resolution
    and rrs returned tokens. By the one rule (log_set_mass: finite log 2 + 2 log 1e-200),
    every method now returns a token, the plan's slice there is a probability vector, and a
    draft the scheme cannot produce is still refused."""
    from otlp.columns import log_set_mass

    tiny = 1e-200
    q = np.array([1 - 3 * tiny, tiny, tiny, tiny, 0.0, 0.0])
    p = np.full(6, 1 / 6)
    drafts = np.array([[1, 2, 3][:n], [3, 1, 2][:n]])
    inst = otlp.Instance(p, q, n, scheme)
    local = inst.to_local(drafts[0])
    logs = log_set_mass(inst.draft_rows, n, scheme, np.sort(local)[None, :])
    ways = 2.0 if n == 2 else 6.0  # n! orders of n distinct tokens (both schemes, to rounding)
    assert logs[0] == pytest.approx(np.log(ways) + n * np.log(tiny), rel=1e-12)
    methods = otlp.verification.position_schemes.SCHEME_METHODS.get(scheme, ())
    for method in (
        "global_resolution",
        "maxflow_cs",
        *(("rrs", "kseq") if scheme == "iid" else methods),
    ):
        out = otlp.verify_drafts(p, q, drafts, scheme=scheme, method=method, rng=0)
        assert (p[out.tokens] > 0).all()
    plan = otlp.solve(inst, "maxflow_cs")
    lazy = otlp.solve(inst, "global_resolution", check=False)  # its exact units divided by 0
    for omega in drafts:
        for probs in (plan.local_slice(omega), lazy.token_report(omega)[0]):
            assert np.isfinite(probs).all()
            assert probs.min() >= 0 and abs(probs.sum() - 1) <= 1e-12
    with pytest.raises(ValueError, match="omega"):
        plan.local_slice([4, 1, 2][:n])


@pytest.mark.parametrize("tiny", [1e-100, 1e-200])
@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_no_method_draws_a_token_of_target_probability_zero(scheme: str, tiny: float) -> None:
    """Issue 27's fuzz classes (seed 21: 8 of 3,000 cases): global resolution's slice for a
    column of negligible mass (drafts of probability 1e-100 whose p is 0) put all its mass on
    a drafted token of p = 0, and verify_drafts emitted it. No coupling of p can; every
    method's draw now skips such entries (and draws from p when nothing else is left)."""
    p = np.array([0.0, 0.0, 0.0, 1.0])
    q = np.array([tiny, 0.3, 0.7 - 2 * tiny, tiny])
    drafts = [[0, 1], [1, 0], [0, 2]] if scheme == "without_replacement" else [[0, 0], [0, 1]]
    methods = ("global_resolution", "maxflow_cs")
    for method in methods:
        out = otlp.verify_drafts(p, q, drafts, scheme=scheme, method=method, top_k=3, rng=1)
        assert (p[out.tokens] > 0).all(), (method, out.tokens)


def _underflowing_pair(scheme: str) -> otlp.Instance:
    """Two drafts of probability 1e-200: the pair's mass (2e-400) is 0 as a double."""
    tiny = 1e-200
    q = np.array([1 - 3 * tiny, tiny, tiny, tiny, 0.0, 0.0])
    return otlp.Instance(np.full(6, 1 / 6), q, 2, scheme)


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_ot_rule_conditional_of_an_underflowing_pair_is_the_plans_slice(scheme: str) -> None:
    """rules/transport.py by the one rule for tuple masses (issue 27): the ``ot`` rule's
    conditional of a possible pair whose mass underflowed is the plan's slice there (a
    probability vector), not a row of zeros."""
    inst = _underflowing_pair(scheme)
    rule = otlp.rules.get("ot")
    law = rule.conditional(inst, [1, 2])
    assert law.min() >= 0 and law.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(law, rule.plan(inst).slice([1, 2]), atol=1e-15)


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_the_verifier_checks_the_slice_of_an_underflowing_pair(scheme: str) -> None:
    """verify.py by the one rule for tuple masses (issue 27): every draft the scheme can
    produce has its conditional checked, also one whose mass underflowed to 0. A plan whose
    only defect is there (its residual rows, which only the underflowing pairs' slices use
    once the residual is folded into explicit entries, have a negative entry) is refused."""
    import dataclasses

    import scipy.sparse as sp

    inst = _underflowing_pair(scheme)
    plan = otlp.solve(inst, "maxflow_cs")
    report = otlp.verify(plan)
    assert report.ok and report.slices.columns == plan.columns.count  # every column possible
    rows = plan.row_residual / plan.row_residual.sum()
    dense = plan.explicit.toarray() + np.outer(rows, plan.col_residual)
    folded = dataclasses.replace(
        plan,
        explicit=sp.csc_matrix(dense),
        row_residual=np.array([0.5, -0.1, 0.0, 0.0, 0.0]),
        col_residual=np.zeros(plan.columns.count),
    )
    report = otlp.verify(folded)
    assert report.target_l1 < 1e-12 and report.draft_l1 < 1e-12 and report.min_entry == 0
    assert not report.ok
    assert report.slices.min_entry == pytest.approx(-0.25)
    assert plan.columns.mass[report.slices.worst_column] == 0
