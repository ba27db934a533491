"""The fused scheme row (:mod:`otlp.global_resolution.fused`) on every drafted tuple of
small fixed instances: its slice, unit and report against the object API's, and its token
against a draw from that slice (a fast selection for mutation testing of the module)."""

from __future__ import annotations

import numpy as np
import pytest

import otlp
from otlp.global_resolution.constants import BUDGET_FACTOR
from otlp.global_resolution.fused import row_slice, scheme_row
from otlp.rules.joints import DraftJoint
from otlp.solvers.global_resolution.budget import Deadline
from otlp.solvers.global_resolution.clocks import QuadratureRangeError
from otlp.solvers.global_resolution.newton import MESSAGES, OUT_OF_TIME
from otlp.solvers.global_resolution.token import draw
from otlp.solvers.row_status import BAD_DRAFT, FALLBACK, OK
from tests.test_decode_schemes import _case

TAU = 1e-3

# (scheme, seed, n, vocab, top_k, zipf): inner units and outer blocks, Newton-solved and
# exact (closed form) units, one and three draws without replacement, a top-k restriction
CASES = [
    ("without_replacement", 1, 2, 12, None, True),
    ("without_replacement", 2, 2, 12, None, True),
    ("without_replacement", 0, 3, 12, None, False),
    ("without_replacement", 0, 3, 6, None, True),
    ("without_replacement", 2, 4, 6, None, False),
    ("without_replacement", 1, 3, 12, 5, True),
    ("independent", 1, 2, 6, None, False),
    ("independent", 2, 2, 6, None, True),
    ("independent", 0, 2, 12, None, True),
    ("independent", 0, 2, 12, 5, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}")
def test_every_drafted_tuple_gets_the_object_api_slice_and_report(case: tuple) -> None:
    scheme, seed, n, vocab, top_k, zipf = case
    p, rows, _, inst = _case(scheme, seed, n, vocab, top_k, zipf)
    plan = otlp.solve(
        inst, "global_resolution", tau=TAU, max_iter=50, time_budget=None, check=False
    )
    alpha_star = otlp.optimal_acceptance(inst).alpha_star
    members, _ = DraftJoint.of(inst, scheme).enumerate()
    rng = np.random.default_rng(seed)
    for column in members:
        omega = inst.tokens[column]
        report, fused, tokens = row_slice(p, rows, omega, scheme, inst.top_k or 0, TAU, 50, 1e-6)
        expected, token_report = plan.token_report(omega)
        assert report.status == OK and fused is not None and tokens is not None
        np.testing.assert_array_equal(tokens, inst.tokens)
        assert report.system == token_report.system and report.block == token_report.block
        assert report.variables == token_report.variables
        assert report.iterations == token_report.iterations
        assert report.message == token_report.message
        assert report.deviation == pytest.approx(token_report.deviation, rel=1e-9, abs=1e-15)
        assert not report.out_of_time and report.detail == 0 and report.token == -1
        assert report.alpha_star == pytest.approx(alpha_star, rel=0, abs=1e-12)
        if report.block is None:  # the inner system: the whole 5 tau
            assert report.system == "inner" and report.budget == BUDGET_FACTOR * TAU
        else:  # an outer block: its share of 5 tau
            share = plan.engine._budget_share(report.block)
            assert report.system == "outer" and report.budget == pytest.approx(
                BUDGET_FACTOR * TAU * share, rel=1e-12
            )
        assert report.deviation <= report.budget
        np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-12)
        assert fused.min() >= 0 and abs(fused.sum() - 1) <= 1e-12
        # the row's token is the draw from that slice with the row's two uniforms
        u = rng.random(2)
        row = scheme_row(p, rows, omega, scheme, inst.top_k or 0, TAU, 50, 1e-6, u)
        assert row.status == OK and row.iterations == report.iterations
        assert row.token == draw(expected, p, inst.tokens, u[0], u[1])


def _random_case(trial: int) -> tuple[np.ndarray, np.ndarray, otlp.Instance, str]:
    """(p, q rows, instance, scheme) of a small random instance: seeds found by a search
    over instances of 2-6 tokens for the rows below (an outer block 0 that needs Newton with a
    share below 1, a unit whose set masses the quadrature cannot give)."""
    rng = np.random.default_rng(trial)
    scheme = ["without_replacement", "independent"][trial % 2]
    vocab = int(rng.integers(2, 7))
    n = 2 if scheme == "independent" else int(rng.integers(2, min(vocab, 4) + 1))
    concentration = [0.3, 1.0, 3.0][trial % 3]
    p = rng.dirichlet(np.full(vocab, concentration))
    q = rng.dirichlet(np.full(vocab, concentration))
    if scheme == "independent":
        q2 = rng.dirichlet(np.full(vocab, concentration))
        return p, np.stack([q, q2]), otlp.Instance(p, [q, q2], 2, scheme), scheme
    return p, q[None, :], otlp.Instance(p, q, n, scheme), scheme


def test_an_outer_block_gets_the_object_api_share_of_5_tau() -> None:
    """Rows of outer block 0 solved by Newton, its share of 5 tau below 1 (0.94; found among
    2,000 random instances): the row's budget is 5 tau times the share (the object API's
    ``budget_share``), its slice the object API's."""
    p, rows, inst, scheme = _random_case(751)
    plan = otlp.solve(
        inst, "global_resolution", tau=TAU, max_iter=50, time_budget=None, check=False
    )
    members, _ = DraftJoint.of(inst, scheme).enumerate()
    seen = 0
    for column in members:
        omega = inst.tokens[column]
        report, fused, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)
        expected, token_report = plan.token_report(omega)
        assert report.status == OK and report.block == token_report.block
        np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-12)
        if report.block is not None:
            share = plan.engine._budget_share(report.block)
            assert report.budget == pytest.approx(BUDGET_FACTOR * TAU * share, rel=1e-12)
            seen += report.block == 0 and report.iterations > 0 and share < 1
    assert seen


def test_a_unit_without_certified_set_masses_falls_back_to_the_object_api() -> None:
    """Three draws without replacement from three tokens: every drafted set is the whole
    vocabulary, which the quadrature does not give; the row falls back (not out of time),
    reporting its unit, and ``verify_drafts`` serves it by the object API."""
    p, rows, inst, scheme = _random_case(56)
    omega = np.array([0, 1, 2])
    report, fused, tokens = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)
    _, token_report = otlp.solve(inst, "global_resolution", tau=TAU, check=False).token_report(
        omega
    )
    assert report.status == FALLBACK and fused is None and tokens is None
    assert report.message == "unit needs exact set masses" and not report.out_of_time
    assert report.token == -1
    assert (report.system, report.block) == (token_report.system, token_report.block)
    assert report.alpha_star == pytest.approx(otlp.optimal_acceptance(inst).alpha_star, abs=1e-12)
    out = otlp.verify_drafts(p, rows[0], omega[None, :], scheme=scheme, rng=0, tau=TAU)
    (row,) = out.reports
    assert row.fallback and row.fallback_rule is None
    assert row.message.startswith("unit needs exact set masses; object API")
    assert (row.system, row.block) == (token_report.system, token_report.block)


# rows whose unit needs Newton iterations: an inner unit, an outer block
NEWTON_CASES = {
    "inner": ("without_replacement", 0, 3, 12, None, False),
    "outer": ("without_replacement", 1, 3, 6, None, True),
}
SCHEME = "without_replacement"


def _newton_row(unit: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, otlp.Instance]:
    """(p, q rows, drafts, instance) of a row whose ``unit`` needs Newton iterations."""
    p, rows, _, inst = _case(*NEWTON_CASES[unit])
    members, _ = DraftJoint.of(inst, SCHEME).enumerate()
    for column in members:
        omega = inst.tokens[column]
        report, _, _ = row_slice(p, rows, omega, SCHEME, 0, TAU, 50, 1e-6)
        if report.iterations > 1 and report.system == unit:
            return p, rows, omega, inst
    raise AssertionError(f"no {unit} row needs Newton")


@pytest.mark.parametrize("unit", NEWTON_CASES)
def test_a_row_over_its_budget_reports_its_unit_and_falls_back(unit: str) -> None:
    """Newton stopped after one iteration: the row keeps its unit's report (system, block,
    variables, iterations, deviation, budget, alpha*) and falls back, not out of time,
    as the object API's unit does with the same iteration limit."""
    p, rows, omega, inst = _newton_row(unit)
    scheme = SCHEME
    solved, _, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)
    report, fused, _ = row_slice(p, rows, omega, scheme, 0, TAU, 1, 1e-6)
    plan = otlp.solve(inst, "global_resolution", tau=TAU, max_iter=1, time_budget=None, check=False)
    _, token_report = plan.token_report(omega)
    assert report.status == FALLBACK and fused is None and not report.out_of_time
    assert token_report.fallback and report.token == -1
    assert (report.system, report.block, report.variables) == (
        token_report.system,
        token_report.block,
        token_report.variables,
    )
    assert report.iterations == token_report.iterations == 1
    assert report.deviation == pytest.approx(token_report.deviation, rel=1e-9)
    assert report.budget == solved.budget and report.deviation > report.budget
    assert report.alpha_star == solved.alpha_star
    assert report.message.startswith(f"{token_report.message.split(';')[0]}; deviation ")
    assert f"> budget {report.budget:.3g}" in report.message


@pytest.mark.parametrize("unit", NEWTON_CASES)
def test_newton_out_of_time_sends_the_row_to_the_rule(
    monkeypatch: pytest.MonkeyPatch, unit: str
) -> None:
    """Newton gets what is left of the call's deadline as its time budget; a solve that
    runs out of it and misses its budget is reported out of time, and ``verify_drafts``
    gives the row the scheme's lossless rule's token with its acceptance loss."""
    import otlp.global_resolution.fused as fused

    p, rows, omega, _ = _newton_row(unit)
    scheme = SCHEME
    real = fused.system_newton
    seen: list[float | None] = []

    def out_of_time(system, tol, *, max_iter, time_budget):
        seen.append(time_budget)
        return real(system, tol, max_iter=max_iter, time_budget=0.0)

    monkeypatch.setattr(fused, "system_newton", out_of_time)
    solved, _, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)
    report, probs, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6, Deadline.after(60.0))
    assert seen[0] is None and 0 < seen[1] <= 60.0
    assert report.status == FALLBACK and probs is None and report.out_of_time
    assert report.token == -1 and report.iterations >= 0
    assert report.message.startswith(f"{MESSAGES[OUT_OF_TIME]}; deviation ")
    assert (report.system, report.block, report.variables) == (
        solved.system,
        solved.block,
        solved.variables,
    )
    assert report.budget == solved.budget and report.deviation > report.budget
    assert report.alpha_star == solved.alpha_star
    out = otlp.verify_drafts(p, rows[0], omega[None, :], scheme=scheme, rng=0, time_budget=60.0)
    (row,) = out.reports
    assert row.fallback and row.fallback_rule == "rrs_without_replacement"
    assert row.acceptance_lost is not None and row.acceptance_lost > 0


@pytest.mark.parametrize("unit", NEWTON_CASES)
def test_setup_out_of_time_sends_the_row_to_the_rule(
    monkeypatch: pytest.MonkeyPatch, unit: str
) -> None:
    """H* and the outer targets are estimated for the row's scheme, vocabulary and draws
    before they start; an estimate past the deadline skips them, out of time."""
    import otlp.global_resolution.fused as fused

    p, rows, omega, inst = _newton_row(unit)
    scheme = SCHEME
    seen: list[tuple[str, int, int]] = []

    def too_slow(scheme: str, k: int, n: int) -> float:
        seen.append((scheme, k, n))
        return 1e9

    monkeypatch.setattr(fused, "setup_seconds", too_slow)
    report, probs, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6, Deadline.after(60.0))
    assert seen == [(scheme, inst.k, omega.shape[0])]
    assert report.status == FALLBACK and probs is None and report.out_of_time
    assert report.token == -1
    assert report.message.startswith("H* and the outer targets skipped: estimated 1e+09 s")
    out = otlp.verify_drafts(p, rows[0], omega[None, :], scheme=scheme, rng=0, time_budget=60.0)
    (row,) = out.reports
    assert row.fallback and row.fallback_rule == "rrs_without_replacement"
    assert row.message.startswith("H* and the outer targets skipped")


@pytest.mark.parametrize("error", [np.linalg.LinAlgError("singular"), FloatingPointError("nan")])
@pytest.mark.parametrize("unit", NEWTON_CASES)
def test_a_numerical_failure_falls_back_and_says_so(
    monkeypatch: pytest.MonkeyPatch, error: Exception, unit: str
) -> None:
    import otlp.global_resolution.fused as fused

    p, rows, omega, _ = _newton_row(unit)
    scheme = SCHEME
    solved, _, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)

    def failing(*args, **kwargs):
        raise error

    monkeypatch.setattr(fused, "system_newton", failing)
    report, probs, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)
    assert report.status == FALLBACK and probs is None and not report.out_of_time
    assert report.token == -1 and report.message == f"numerical failure: {error}"
    assert (report.system, report.block) == (solved.system, solved.block)
    assert report.alpha_star == solved.alpha_star
    out = otlp.verify_drafts(p, rows[0], omega[None, :], scheme=scheme, rng=0)
    (row,) = out.reports
    assert row.fallback and row.fallback_rule is None
    assert row.message.startswith(f"numerical failure: {error}; object API")
    assert (row.system, row.block) == (solved.system, solved.block)


@pytest.mark.parametrize("method", ["global_resolution", "maxflow_cs"])
def test_every_method_refuses_a_tuple_greedy_drafting_cannot_produce(method: str) -> None:
    """Greedy drafts the top n - 1 tokens plus one other: (1, 2, 0) lacks token 3 of the top
    two, and is refused by every
    method (the fused path's own check, shared by the exact rows)."""
    q = np.array([0.1, 0.4, 0.2, 0.3])
    p = np.full(4, 0.25)
    with pytest.raises(ValueError, match=r"^drafts\[0\]: \[1, 2, 0\] is not a greedy draft tuple"):
        otlp.verify_drafts(p, q, np.array([[1, 2, 0]]), scheme="greedy", method=method, rng=0)


def test_independent_rows_are_renormalised_each_by_its_own_sum() -> None:
    """Two draft rows off 1 by +-5e-7 (inside atol = 1e-6): each is renormalised by its own
    sum, so every slice is the object API's on the renormalised instance to 1e-12."""
    p, rows, _, _ = _case("independent", 0, 2, 12, None, True)
    scaled = rows * np.array([[1 + 5e-7], [1 - 5e-7]])
    inst = otlp.Instance(p, [rows[0], rows[1]], 2, "independent")
    plan = otlp.solve(
        inst, "global_resolution", tau=TAU, max_iter=50, time_budget=None, check=False
    )
    members, _ = DraftJoint.of(inst, "independent").enumerate()
    for column in members:
        omega = inst.tokens[column]
        report, fused, _ = row_slice(p, scaled, omega, "independent", 0, TAU, 50, 1e-6)
        expected, _ = plan.token_report(omega)
        assert report.status == OK
        np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-12)


GREEDY_P = np.full(4, 0.25)
GREEDY_Q = np.array([0.1, 0.4, 0.2, 0.3])  # T = {1, 3} for n = 3


@pytest.mark.parametrize("method", ["global_resolution", "maxflow_cs"])
def test_greedy_tuples_are_accepted_in_any_order(method: str) -> None:
    """T in any order plus the drawn token, wherever it stands (first, middle, last): the
    same token from the same uniforms."""
    tokens = [
        otlp.verify_drafts(
            GREEDY_P, GREEDY_Q, np.array([omega]), scheme="greedy", method=method, rng=3
        ).tokens[0]
        for omega in ([0, 1, 3], [1, 0, 3], [1, 3, 0], [3, 1, 2])
    ]
    assert tokens[0] == tokens[1] == tokens[2]


def test_a_greedy_row_is_closed_form() -> None:
    report, probs, tokens = row_slice(
        GREEDY_P, GREEDY_Q[None, :], np.array([1, 3, 0]), "greedy", 0, TAU, 50, 1e-6
    )
    assert report.status == OK and report.token == -1 and report.message == "closed form (exact)"
    assert report.system is None and report.iterations == 0 and probs is not None
    np.testing.assert_array_equal(tokens, [1, 3, 2, 0])
    u = np.array([0.3, 0.6])
    row = scheme_row(
        GREEDY_P, GREEDY_Q[None, :], np.array([1, 3, 0]), "greedy", 0, TAU, 50, 1e-6, u
    )
    assert row.status == OK and row.token == draw(probs, GREEDY_P, tokens, u[0], u[1])
    assert row.message == "closed form (exact)"


def test_a_bad_row_names_its_draft_row_and_gets_no_token() -> None:
    p, rows, _, inst = _case("independent", 0, 2, 6, None, False)
    omega = inst.tokens[DraftJoint.of(inst, "independent").enumerate()[0][0]]
    bad = rows.copy()
    bad[1, 2] = -0.1
    report, probs, tokens = row_slice(p, bad, omega, "independent", 0, TAU, 50, 1e-6)
    assert report.status not in (OK, FALLBACK, BAD_DRAFT) and report.detail == 1
    assert report.token == -1 and probs is None and tokens is None


@pytest.mark.parametrize(
    ("scheme", "name", "replacement", "message"),
    [
        (
            "without_replacement",
            "without_replacement_analysis",
            "quadrature",
            "set masses below the quadrature's certified range",
        ),
        ("independent", "independent_selection", None, "H* search not certified"),
        ("independent", "independent_targets", None, "outer chain not certified"),
    ],
)
def test_an_uncertified_analysis_falls_back_and_says_why(
    monkeypatch: pytest.MonkeyPatch, scheme: str, name: str, replacement: object, message: str
) -> None:
    """H* or the outer targets that this path cannot certify (the certificate stubbed to
    fail): the row falls back to the object API, not out of time, and says which."""
    import otlp.global_resolution.fused as fused

    def failed(*args: object) -> object:
        if replacement == "quadrature":
            raise QuadratureRangeError("below range")
        return None

    monkeypatch.setattr(fused, name, failed)
    p, rows, _, inst = _case(scheme, 0, 2, 6, None, False)
    omega = inst.tokens[DraftJoint.of(inst, scheme).enumerate()[0][0]]
    report, probs, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)
    assert report.status == FALLBACK and report.message == message and report.token == -1
    assert not report.out_of_time and probs is None
    q_arg = rows if scheme == "independent" else rows[0]
    out = otlp.verify_drafts(p, q_arg, omega[None, :], scheme=scheme, rng=0, tau=TAU)
    assert out.reports[0].message.startswith(f"{message}; object API")


@pytest.mark.parametrize("unit", NEWTON_CASES)
def test_newton_skipped_reports_the_unit(monkeypatch: pytest.MonkeyPatch, unit: str) -> None:
    """A Newton estimate past the deadline: the row keeps its unit's system, block, size
    and alpha*, out of time, no token."""
    import otlp.global_resolution.fused as fused

    p, rows, omega, _ = _newton_row(unit)
    scheme = SCHEME
    solved, _, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6)
    monkeypatch.setattr(fused, "evaluation_seconds", lambda *args: 1e9)
    report, probs, _ = row_slice(p, rows, omega, scheme, 0, TAU, 50, 1e-6, Deadline.after(60.0))
    assert report.status == FALLBACK and probs is None and report.out_of_time
    assert report.token == -1 and report.message.startswith("Newton skipped: estimated 1e+09 s")
    assert (report.system, report.block, report.variables) == (
        solved.system,
        solved.block,
        solved.variables,
    )
    assert report.alpha_star == solved.alpha_star and report.iterations == 0
