"""The referee (issue 26) refereed: its exact mode against laws computed by hand, its planned
test's formulas and error rates, detection of samplers at known TV distances, otlp's own rules
passing, shrinking, reproducers and the command line.

The samplers below are module-level so that ``tests.test_referee:NAME`` loads them from the CLI.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from otlp.cli import main
from otlp.referee import adapters, assert_lossless, referee, replay, stats
from otlp.referee.cases import PositionCase, TreeCase
from otlp.referee.generate import position_cases, tree_cases
from otlp.referee.symbolic import NotEnumerable, exact_law


# ----- samplers of the position protocol ----------------------------------------------------
def draw_from_target(p, q, drafts, rng):
    """Lossless: ignores the drafts."""
    return int(rng.choice(p.shape[0], p=p))


def recursive_rejection(p, q, drafts, rng):
    """Lossless: SpecInfer's recursive rejection with replacement ([SpecHub] Algorithm 1)."""
    for x in drafts:
        if rng.random() * q[x] < p[x]:
            return int(x)
        residual = np.maximum(p - q, 0.0)
        if residual.sum() <= 0:
            return int(x)  # p = q: accepted with probability 1 above
        p = residual / residual.sum()
    return int(rng.choice(p.shape[0], p=p))


def rejection_without_residual_update(p, q, drafts, rng):
    """Lossy: every draft against the same p, one residual at the end."""
    for x in drafts:
        if rng.random() * q[x] < p[x]:
            return int(x)
    residual = np.maximum(p - q, 0.0)
    if residual.sum() <= 0:
        return int(rng.choice(p.shape[0], p=p))
    return int(rng.choice(p.shape[0], p=residual / residual.sum()))


def mixed(tv):
    """A sampler at TV exactly ``tv`` from p wherever p(last) <= 1 - tv: with probability tv
    it emits the last token, else it draws from p ... with the last token's excess removed."""

    def sampler(p, q, drafts, rng):
        if rng.random() < tv:
            return p.shape[0] - 1
        return int(rng.choice(p.shape[0], p=p))

    return sampler


def gumbel_max(p, q, drafts, rng):
    """Lossless but not enumerable: numpy ufuncs on the uniforms."""
    with np.errstate(divide="ignore"):
        return int(np.argmax(np.log(p) - np.log(-np.log(rng.random(p.shape[0])))))


def gumbel_mixed(p, q, drafts, rng):
    """Not enumerable and at TV 0.05 from p on most cases (last token boosted)."""
    if rng.random(1)[0] < 0.05:
        return p.shape[0] - 1
    return gumbel_max(p, q, drafts, rng)


def out_of_range(p, q, drafts, rng):
    return p.shape[0]


# ----- samplers of the tree protocol --------------------------------------------------------
def target_only_tree(tokens, parents, p, q, rng):
    """Lossless: sample the target at the node, move to a child carrying the sample."""
    node, path = -1, []
    while True:
        y = int(rng.choice(p.shape[1], p=p[node + 1]))
        kids = [i for i in range(parents.shape[0]) if parents[i] == node and tokens[i] == y]
        if not kids:
            return path, y
        node = kids[0]
        path.append(node)


def first_child_ratio_test(tokens, parents, p, q, rng):
    """Lossy: accept a child with min(1, p/q), the bonus from p without a residual."""
    node, path = -1, []
    while True:
        for child in [i for i in range(parents.shape[0]) if parents[i] == node]:
            x = tokens[child]
            if rng.random() * q[node + 1][x] < p[node + 1][x]:
                node = child
                path.append(child)
                break
        else:
            return path, int(rng.choice(p.shape[1], p=p[node + 1]))


def not_a_path(tokens, parents, p, q, rng):
    return [parents.shape[0] - 1], 0


FOREIGN = np.random.default_rng(0)  # randomness the referee does not hand out


@dataclass(frozen=True)
class Entry:
    """A registry entry like :class:`otlp.referee.subjects.Subject`."""

    sampler: Callable[..., object]
    protocol: str
    scheme: str
    max_children: int | None = None


REGISTRY = {
    "tree_lossy": Entry(first_child_ratio_test, "tree", "iid"),
    "chain_only": Entry(target_only_tree, "tree", "iid", 1),
}


# ----- exact mode ---------------------------------------------------------------------------
def test_exact_law_of_comparisons_and_affine_maps():
    assert exact_law(lambda g: int(g.random() < 0.3)) == pytest.approx({1: 0.3, 0: 0.7})
    # 2U - 0.5 > 0.9 <=> U > 0.7; -U < -0.25 <=> U > 0.25; 1 - U <= 0.4 <=> U >= 0.6
    assert exact_law(lambda g: int(2 * g.random() - 0.5 > 0.9))[1] == pytest.approx(0.3)
    assert exact_law(lambda g: int(-g.random() < -0.25))[1] == pytest.approx(0.75)
    assert exact_law(lambda g: int(1 - g.random() <= 0.4))[1] == pytest.approx(0.4)

    def nested(g):  # the same uniform compared twice: intervals are refined, not redrawn
        u = g.random()
        return 0 if u < 0.5 and u < 0.2 else 1

    assert exact_law(nested)[0] == pytest.approx(0.2)
    # comparisons with nan are False both ways, as numpy's (0/0 thresholds)
    nan = float("nan")
    assert exact_law(lambda g: int(g.random() < nan) + 2 * int(g.random() >= nan)) == {0: 1.0}


def test_exact_law_of_discrete_draws():
    law = exact_law(lambda g: int(g.choice(3, p=[0.2, 0.0, 0.8])))
    assert law == pytest.approx({0: 0.2, 2: 0.8})
    assert exact_law(lambda g: int(g.integers(1, 5))) == pytest.approx(
        {k: 0.25 for k in range(1, 5)}
    )
    # two draws without replacement from (0.5, 0.3, 0.2): P(first two = {0, 1}) in order
    law = exact_law(
        lambda g: tuple(int(x) for x in g.choice(3, size=2, replace=False, p=[0.5, 0.3, 0.2])),
        key=lambda t: t,
    )
    assert law[(0, 1)] == pytest.approx(0.5 * 0.3 / 0.5)
    assert law[(1, 0)] == pytest.approx(0.3 * 0.5 / 0.7)
    assert sum(law.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "sampler",
    [
        lambda g: int(np.log(g.random()) < -1),  # a numpy ufunc
        lambda g: int(float(g.random()) < 0.5),  # a float conversion
        lambda g: int(g.normal() < 0),  # another distribution
        lambda g: int(g.random() < 0.5) + int(FOREIGN.integers(1000)),  # foreign randomness
    ],
)
def test_what_the_exact_mode_cannot_follow_is_refused(sampler):
    with pytest.raises(NotEnumerable):
        exact_law(sampler, max_runs=200)


def test_exact_position_law_equals_the_rejection_formula():
    """SpS on (p, q) = ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)): exact, law p, acceptance Σ min(p, q)."""
    case = PositionCase(np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5]), 1, "iid")
    verdict = referee(recursive_rejection, cases=[case])
    assert verdict.lossless and verdict.exact_cases == 1
    assert verdict.gap[0].acceptance == pytest.approx(0.2 + 0.3 + 0.2)
    assert verdict.gap[0].alpha_star == pytest.approx(0.7)


# ----- the planned test ---------------------------------------------------------------------
@pytest.mark.parametrize(("epsilon", "bins"), [(0.01, 8), (0.005, 16), (0.05, 2), (0.001, 4)])
def test_plan_meets_both_error_bounds_and_is_the_smallest(epsilon, bins):
    plan = stats.plan(epsilon, 1e-6, 1e-3, bins)
    t = plan.threshold
    assert stats.events(bins) * math.exp(-2 * plan.samples * t * t) <= 1e-6 * (1 + 1e-9)
    assert math.exp(-2 * plan.samples * (epsilon - t) ** 2) <= 1e-3 * (1 + 1e-9)
    fewer = plan.samples - 1
    t_fewer = stats.threshold(fewer, 1e-6, bins)
    assert math.exp(-2 * fewer * (epsilon - t_fewer) ** 2) > 1e-3  # one draw less misses


def test_tv_is_the_largest_event_deviation():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
        events = [np.array(mask) for mask in np.ndindex(*(2,) * 5)]
        largest = max(float(a[m.astype(bool)].sum() - b[m.astype(bool)].sum()) for m in events)
        assert stats.tv_statistic(a, b) == pytest.approx(largest)


def test_false_alarm_and_power_of_the_planned_test_on_multinomials():
    """Simulated multinomials: at a loose false-alarm level the observed rate stays below it;
    at TV = epsilon the observed miss rate stays below the planned one."""
    rng = np.random.default_rng(1)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    plan = stats.plan(0.05, 0.05, 0.05, 4)
    null = rng.multinomial(plan.samples, p, size=4000) / plan.samples
    alarms = np.mean(0.5 * np.abs(null - p).sum(axis=1) >= plan.threshold)
    s = p + np.array([0.05, 0.0, 0.0, -0.05])  # TV 0.05
    alt = rng.multinomial(plan.samples, s, size=4000) / plan.samples
    misses = np.mean(0.5 * np.abs(alt - p).sum(axis=1) < plan.threshold)
    assert alarms <= 0.05 and misses <= 0.05


def test_binning_keeps_the_target_mass_and_merges_the_rest():
    target = np.array([0.5, 0.0, 0.2, 0.1, 0.1, 0.1])
    bin_of, binned = stats.binning(target, max_bins=3)
    assert binned.sum() == pytest.approx(1.0) and binned.shape == (3,)
    assert bin_of[0] == 0 and bin_of[2] == 1 and bin_of[1] == 2  # zero mass: the rest bin


# ----- verdicts -----------------------------------------------------------------------------
@pytest.mark.parametrize("tv", [0.005, 0.01, 0.05])
def test_known_deviations_are_found_exactly(tv):
    verdict = referee(mixed(tv), cases=5)
    assert not verdict.lossless
    assert verdict.failure.kind == "exact"
    case = verdict.failure.case
    assert verdict.failure.tv == pytest.approx(tv * (1 - case.p[-1]))


def test_a_deviation_is_found_statistically_at_the_stated_power():
    verdict = referee(gumbel_mixed, cases=4, epsilon=0.05, screen_samples=300, seed=3)
    assert verdict.statistical_cases == 4 and not verdict.lossless
    assert verdict.failure.kind == "statistical" and verdict.failure.p_value <= 1e-6


def test_lossless_non_enumerable_sampler_passes_statistically():
    verdict = referee(gumbel_max, cases=4, epsilon=0.05, screen_samples=300)
    assert verdict.lossless and verdict.statistical_cases == 4 and verdict.exact_cases == 0
    assert verdict.confirm_plan is not None and verdict.samples >= verdict.confirm_plan.samples


@pytest.mark.parametrize(
    ("method", "scheme", "max_n"),
    [
        ("sps", "iid", 1),
        ("rrs", "iid", 3),
        ("kseq", "iid", 2),
        ("maxflow_cs", "iid", 2),
        ("rrs_without_replacement", "without_replacement", 3),
        ("maxflow_cs", "independent", 2),
    ],
)
def test_otlps_exact_rules_pass_in_exact_mode(method, scheme, max_n):
    verdict = referee(adapters.position(method, scheme), cases=8, max_n=max_n, mode="exact")
    assert verdict.lossless and verdict.exact_cases == 8
    assert all(row.acceptance <= row.alpha_star + 1e-9 for row in verdict.gap)


@pytest.mark.parametrize(
    ("method", "shapes"),
    [
        ("rrs", None),
        ("sps", None),
        ("block", ("chain2",)),
        ("hsd", ("chain2",)),
        ("traversal_verification", None),
    ],
)
def test_otlps_tree_rules_pass_in_exact_mode(method, shapes):
    verdict = referee(adapters.tree(method), cases=6, mode="exact", shapes=shapes)
    assert verdict.lossless and verdict.exact_cases == 6


def test_tree_samplers_exactly():
    assert referee(target_only_tree, protocol="tree", cases=6).lossless
    verdict = referee(first_child_ratio_test, protocol="tree", cases=6)
    assert not verdict.lossless and verdict.failure.kind == "exact"
    minimal = verdict.failure.case
    assert isinstance(minimal, TreeCase) and minimal.parents.tolist() == [-1]


def test_the_decoder_path_agrees_with_the_exact_law_statistically():
    """The adapters' real-generator path (otlp.verify_drafts) passes the planned test."""
    case = position_cases(1, "iid", seed=5)[0]
    verdict = referee(adapters.position("rrs"), cases=[case], mode="statistical", epsilon=0.05)
    assert verdict.lossless and verdict.samples > 0


def test_failures_shrink_to_a_minimal_case_and_replay(tmp_path):
    out = tmp_path / "repro.json"
    verdict = referee(
        rejection_without_residual_update,
        reproducer=out,
        name="tests.test_referee:rejection_without_residual_update",
    )
    case = verdict.failure.case
    assert (case.vocab, case.n) == (2, 2)  # one draft is always right; so is one token
    assert len(str(case.p[0])) <= 4 and len(str(case.q[0])) <= 4  # one or two decimals
    again = replay(out)
    assert not again.lossless and again.failure.tv == pytest.approx(verdict.failure.tv)
    assert replay(out, recursive_rejection).lossless


def test_broken_outputs_are_failures():
    verdict = referee(out_of_range, cases=2)
    assert verdict.failure.kind == "error" and "outside" in verdict.failure.message
    verdict = referee(not_a_path, protocol="tree", cases=2, shapes=("chain2",))
    assert verdict.failure.kind == "error" and "path" in verdict.failure.message


def test_assert_lossless_fails_with_the_case():
    assert_lossless(recursive_rejection, cases=3)
    with pytest.raises(AssertionError, match="case JSON"):
        assert_lossless(rejection_without_residual_update, cases=3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"protocol": "beam"}, "protocol"),
        ({"scheme": "spechub"}, "scheme"),
        ({"epsilon": 0.9}, "epsilon"),
        ({"false_alarm": 0.0}, "false_alarm"),
        ({"cases": 0}, "cases"),
        ({"mode": "exact", "cases": 1}, "mode"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, match):
    sampler = gumbel_max if kwargs.get("mode") == "exact" else draw_from_target
    with pytest.raises(ValueError, match=match):
        referee(sampler, **kwargs)


def test_cases_round_trip_through_json():
    from otlp.referee.cases import case_from_json

    for case in [*position_cases(3, "independent"), *tree_cases(2, "without_replacement")]:
        again = case_from_json(json.loads(json.dumps(case.to_json())))
        assert np.array_equal(again.target, case.target)


# ----- the command line ---------------------------------------------------------------------
def test_cli_exit_statuses(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        main(
            ["referee", "tests.test_referee:recursive_rejection", "--cases", "3", "--out", str(out)]
        )
        == 0
    )
    assert "LOSSLESS" in capsys.readouterr().out
    bad = "tests.test_referee:rejection_without_residual_update"
    assert main(["referee", bad, "--cases", "3", "--out", str(out), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["lossless"] is False and data["reproducer"] == str(out)
    assert main(["referee", "--replay", str(out)]) == 1
    capsys.readouterr()
    for argv, flag in [
        (["referee", "nocolon"], "sampler"),
        (["referee", "tests.test_referee:nothing"], "sampler"),
        (["referee", "tests.test_referee:draw_from_target", "--epsilon", "2"], "epsilon"),
        (["referee"], "MODULE:FUNCTION"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0]


def test_a_large_vocabulary_failure_shrinks_to_an_exact_small_one():
    """V = 30, n = 3: too many drafted tuples to enumerate, so the failure is statistical;
    shrinking restricts the vocabulary to its likeliest tokens, where the exact mode judges."""
    rng = np.random.default_rng(4)
    case = PositionCase(rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(30)), 3, "iid")
    verdict = referee(rejection_without_residual_update, cases=[case], epsilon=0.05)
    assert verdict.original.kind == "statistical" and verdict.statistical_cases == 1
    assert verdict.failure.kind == "exact" and verdict.failure.case.vocab <= 16


def test_the_module_examples_run():
    import doctest

    import otlp.referee
    import otlp.referee.adapters
    import otlp.referee.clock
    import otlp.referee.judge

    for module in (otlp.referee, otlp.referee.adapters, otlp.referee.clock, otlp.referee.judge):
        assert doctest.testmod(module).failed == 0


def test_cli_reads_a_registry_entrys_protocol_and_shapes(tmp_path, capsys):
    out = str(tmp_path / "r.json")
    entry = "tests.test_referee:REGISTRY.tree_lossy"
    assert main(["referee", entry, "--cases", "3", "--out", out, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["protocol"] == "tree" and data["failure"]["kind"] == "exact"
    chain = "tests.test_referee:REGISTRY.chain_only"
    assert main(["referee", chain, "--cases", "4", "--out", out, "--json"]) == 0
    cases = [row["label"] for row in json.loads(capsys.readouterr().out)["gap"]]
    assert cases and all("chain" in label for label in cases)


def test_the_searched_shapes_are_the_named_else_chains_for_one_child_else_the_default():
    from otlp.referee.generate import CHAIN_SHAPES, DEFAULT_SHAPES, TREE_SHAPES, searched_shapes

    assert [s for s in TREE_SHAPES if s not in DEFAULT_SHAPES] == ["fork3", "fork3x2"]
    assert len(DEFAULT_SHAPES) == 8 and set(DEFAULT_SHAPES) < set(TREE_SHAPES)
    assert searched_shapes(None, None) == searched_shapes((), 1) == DEFAULT_SHAPES
    assert searched_shapes(None, 1) == CHAIN_SHAPES
    assert searched_shapes(["fork3", "root2"], 1) == ("fork3", "root2")
    known = ", ".join(TREE_SHAPES)
    for bad in (
        lambda: searched_shapes(["root2", "x", "y"], None),
        lambda: referee(target_only_tree, protocol="tree", cases=1, shapes=["root2", "x", "y"]),
    ):
        with pytest.raises(ValueError) as refused:
            bad()
        assert str(refused.value) == f"shapes: unknown ['x', 'y']; known: {known}"


def test_tree_samplers_statistically():
    """The tree protocol's statistical path (completion laws averaged per draw)."""
    cases = tree_cases(2, "iid", seed=2, shapes=("root2", "chain2"))
    good = referee(target_only_tree, protocol="tree", cases=cases, mode="statistical", epsilon=0.05)
    assert good.lossless and good.statistical_cases == 2 and good.samples > 0
    bad = referee(
        first_child_ratio_test, protocol="tree", cases=cases, mode="statistical", epsilon=0.05
    )
    assert not bad.lossless and bad.original.kind == "statistical"


def test_the_gap_on_smollm2_states():
    """Monte Carlo acceptance on SmolLM2 states: a lossless rule stays below alpha* (within
    four standard errors); the references are alpha* and otlp's rrs."""
    from otlp.referee.gap import smollm2_gap

    pos = smollm2_gap(recursive_rejection, "position", "iid", states=2, draws=100)
    assert pos.cases == 2 and 0 < pos.acceptance <= pos.reference + 4 * pos.stderr + 1e-9
    tree = smollm2_gap(target_only_tree, "tree", "iid", states=2, draws=100)
    assert 1 <= tree.acceptance <= 2 and 1 <= tree.reference <= 2
