"""``verify_drafts(..., scheme=)``: the fused per-row paths against the object API and the
exact plans, and every scheme's sampled tokens against its exact law (chi^2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otlp
import otlp.rules
from otlp.global_resolution.fused import row_slice
from otlp.instances import dirichlet_pair, zipf_llm_pair
from otlp.solvers.row_status import OK
from otlp.verification.position_schemes import SCHEME_METHODS as SCHEME_METHODS_OF
from tests.test_verification_position import _law_test


def _pair(vocab: int, seed: int, zipf: bool) -> tuple[np.ndarray, np.ndarray]:
    pair = (
        zipf_llm_pair(vocab, similarity=0.6, seed=seed)
        if zipf
        else dirichlet_pair(vocab, seed=seed)
    )
    return tuple(np.asarray(a, dtype=np.float64) for a in pair)  # type: ignore[return-value]


def _case(scheme: str, seed: int, n: int, vocab: int, top_k: int | None, zipf: bool):
    """(p, q rows for the fused path, q for the call, instance)."""
    p, q = _pair(vocab, seed, zipf)
    top = None if top_k is None else min(top_k, vocab)
    if scheme == "independent":
        q2 = dirichlet_pair(vocab, seed=seed + 1)[1]
        rows = np.stack([q, q2])
        return p, rows, rows, otlp.Instance(p, [q, q2], 2, scheme, top)
    return p, q[None, :], q, otlp.Instance(p, q, n, scheme, top)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    scheme=st.sampled_from(["without_replacement", "independent"]),
    seed=st.integers(0, 10**6),
    n=st.integers(2, 4),
    vocab=st.sampled_from([6, 12, 60]),
    top_k=st.sampled_from([None, 5, 9]),
    zipf=st.booleans(),
)
def test_fused_slice_agrees_with_the_object_api(
    scheme: str, seed: int, n: int, vocab: int, top_k: int | None, zipf: bool
) -> None:
    n = 2 if scheme == "independent" else n
    p, rows, _, inst = _case(scheme, seed, n, vocab, top_k, zipf)
    plan = otlp.solve(
        inst, "global_resolution", tau=1e-3, max_iter=50, time_budget=None, check=False
    )
    for omega in inst.sample_drafts(np.random.default_rng(seed), 4):
        report, fused, tokens = row_slice(p, rows, omega, scheme, inst.top_k or 0, 1e-3, 50, 1e-6)
        expected, token_report = plan.token_report(omega)
        if fused is None:  # this path's own certificate failed: the object API is exact
            assert report.status != OK
            continue
        np.testing.assert_array_equal(tokens, inst.tokens)
        assert report.system == token_report.system and report.block == token_report.block
        assert report.iterations == token_report.iterations
        np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-12)
        assert fused.min() >= 0 and abs(fused.sum() - 1) <= 1e-12


def _assert_greedy_plan_optimal(p: np.ndarray, q: np.ndarray, n: int, top_k: int | None) -> None:
    """Every greedy column's fused slice, weighted by its mass: the marginal is p (1e-12)
    and the acceptance is alpha* (= the exact OT's)."""
    inst = otlp.Instance(p, q, n, "greedy", top_k)
    members, mass = otlp.rules.joints.DraftJoint.of(inst, "greedy").enumerate()
    marginal = np.zeros(inst.k + 1)
    acceptance = 0.0
    for column, weight in zip(members, mass, strict=True):
        omega = inst.tokens[column]
        report, probs, _ = row_slice(p, q[None, :], omega, "greedy", top_k or 0, 1e-3, 50, 1e-6)
        assert report.status == OK and probs is not None
        assert probs.min() >= 0 and abs(probs.sum() - 1) <= 1e-12
        marginal += weight * probs
        acceptance += weight * probs[np.unique(column)].sum()
    np.testing.assert_allclose(marginal, inst.target_rows, rtol=0, atol=1e-12)
    assert abs(acceptance - otlp.optimal_acceptance(inst).alpha_star) <= 1e-12
    exact = otlp.solve(inst, "maxflow-cs")
    assert abs(acceptance - exact.acceptance) <= 1e-9


@pytest.mark.parametrize(
    ("seed", "n", "top_k"), [(s, 2 + s % 3, [None, 4, 7][s % 3]) for s in range(12)]
)
def test_greedy_closed_form_is_an_optimal_plan(seed: int, n: int, top_k: int | None) -> None:
    p, q = _pair(9, seed, seed % 2 == 0)
    _assert_greedy_plan_optimal(p, q, n, top_k)


GREEDY_Q = np.array([0.2, 0.1, 0.4, 0.1, 0.2])  # top token 2: T = {2} for n = 2


@pytest.mark.parametrize(
    ("p", "n"),
    [
        (np.eye(5)[3], 2),  # temperature 0: p one-hot on a token the draft can produce
        (np.eye(5)[3], 3),
        (np.array([0.0, 0.5, 0.0, 0.5, 0.0]), 2),  # p = 0 on T = {2} and on drafts 0 and 4
        (np.array([0.0, 0.0, 0.0, 1.0, 0.0]), 4),
    ],
)
def test_greedy_with_zero_target_mass_on_the_fixed_tokens(p: np.ndarray, n: int) -> None:
    """p(T) = 0 (issue 27: greedy_slice divided by p(T)): T receives nothing, keeps its p
    (0), and every rejected column's mass goes to the residual target; the plan stays an
    optimal coupling, and verify_drafts returns a token of p's support for every column."""
    _assert_greedy_plan_optimal(p, GREEDY_Q, n, None)
    inst = otlp.Instance(p, GREEDY_Q, n, "greedy")
    members, _ = otlp.rules.joints.DraftJoint.of(inst, "greedy").enumerate()
    drafts = inst.tokens[members]
    for method in ("global_resolution", "maxflow_cs"):
        out = otlp.verify_drafts(p, GREEDY_Q, drafts, scheme="greedy", method=method, rng=0)
        assert (p[out.tokens] > 0).all()


def test_greedy_slice_when_p_on_the_fixed_tokens_and_q_on_the_last_draft_are_tiny() -> None:
    """Fuzz seed 31, case 2872: p(T) = 1.9e-300 and the last draft's q = 2.7e-200; their
    product underflowed in greedy_slice (ZeroDivisionError). The plan stays optimal, and every
    column's slice is a distribution."""
    p = np.array([2.2e-300, 0.269, 0.0828, 0.1137, 1.5e-300, 1.9e-300, 0.2792, 0.2553])
    q = np.array([2.7e-200, 0.3314, 2.3e-200, 2.2e-200, 2.8e-200, 0.5298, 0.0039, 0.1349])
    p, q = p / p.sum(), q / q.sum()
    _assert_greedy_plan_optimal(p, q, 2, 8)


SCHEME_CASES = [
    ("without_replacement", "global_resolution", 3),
    ("without_replacement", "rrs_without_replacement", 3),
    ("without_replacement", "maxflow_cs", 2),
    ("independent", "global_resolution", 2),
    ("independent", "maxflow_cs", 2),
    ("greedy", "global_resolution", 3),
    ("greedy", "maxflow_cs", 3),
    ("iid", "spechub", 2),
]


@pytest.mark.parametrize(("scheme", "method", "n"), SCHEME_CASES)
def test_sampled_tokens_follow_the_exact_law(scheme: str, method: str, n: int) -> None:
    p, q = dirichlet_pair(9, seed=3)
    q2 = dirichlet_pair(9, seed=5)[1]
    draft = np.stack([q, q2]) if scheme == "independent" else q
    inst = (
        otlp.Instance(p, [q, q2], 2, scheme, 6)
        if scheme == "independent"
        else otlp.Instance(p, q, n, scheme, 6)
    )
    omega = inst.sample_drafts(np.random.default_rng(1), 1)[0]
    if method == "spechub":  # SpecHub's own hub joint draws the pair
        rule = otlp.rules.get("spechub")
        omega = inst.tokens[rule.draft_joint(inst).sample(np.random.default_rng(1), 1)[0]]
    rows = 6000
    result = otlp.verify_drafts(
        p,
        draft,
        np.tile(omega, (rows, 1)),
        method=method,
        top_k=6,
        rng=7,
        scheme=scheme,
        time_budget=None,
    )
    if method == "maxflow_cs":
        law = otlp.solve(inst, "maxflow-cs").slice(omega)
    elif method == "global_resolution" and scheme == "greedy":
        probs = row_slice(p, q[None, :], omega, "greedy", 6, 1e-3, 50, 1e-6)[1]
        assert probs is not None
        law = inst.global_law(probs)
    elif method == "global_resolution":
        law = otlp.solve(inst, "global_resolution", check=False).slice(omega)
    else:
        law = otlp.rules.get(method).conditional(inst, omega)
    counts = np.bincount(result.tokens, minlength=p.size)
    if (law > 0).sum() == 1:  # a deterministic output
        assert counts[law > 0].item() == rows
    else:
        assert _law_test(counts, law) > 1e-4
    np.testing.assert_array_equal(result.accepted, np.isin(result.tokens, omega))
    assert not any(report.fallback for report in result.reports)


def test_batched_rows_and_fallback_rows() -> None:
    """Per-row (B, 2, V) drafts; a row over its budget (max_iter = 0) is solved exactly by
    the object API and reported as a fallback."""
    rows = [zipf_llm_pair(300, similarity=0.6, seed=s) for s in range(4)]
    p = np.array([r[0] for r in rows])
    q = np.stack(
        [
            np.array([r[1], zipf_llm_pair(300, similarity=0.4, seed=9 + s)[1]])
            for s, r in enumerate(rows)
        ]
    )
    drafts = np.array(
        [
            otlp.Instance(p[b], list(q[b]), 2, "independent", 20).sample_drafts(
                np.random.default_rng(b), 1
            )[0]
            for b in range(4)
        ]
    )
    result = otlp.verify_drafts(
        p, q, drafts, top_k=20, rng=3, scheme="independent", time_budget=None
    )
    assert result.tokens.shape == (4,) and result.fallbacks == 0
    assert all(r.deviation <= r.budget for r in result.reports)
    forced = otlp.verify_drafts(p, q, drafts, top_k=20, rng=3, scheme="independent", max_iter=0)
    solved = [r for r in forced.reports if r.variables > 1]
    assert solved and all(r.fallback and "exact" in r.message for r in solved)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scheme": "nosuch"}, "scheme"),
        ({"scheme": "independent", "q": np.full((3, 6), 1 / 6)}, "q:"),
        ({"scheme": "independent", "drafts": [[0, 1, 2]]}, "drafts"),
        ({"scheme": "without_replacement", "drafts": [[1, 1]]}, r"drafts\[0\]"),
        ({"scheme": "greedy", "drafts": [[4, 5]]}, r"drafts\[0\]"),
        ({"scheme": "without_replacement", "method": "kseq"}, "method"),
        ({"scheme": "without_replacement", "parallel": True}, "parallel"),
        ({"scheme": "iid", "method": "spechub", "drafts": [[4, 5]]}, "hub"),
        ({"scheme": "without_replacement", "p": np.full(6, 0.2)}, r"p\[0\]"),
    ],
)
def test_bad_arguments_name_themselves(kwargs: dict, match: str) -> None:
    p = np.array([0.3, 0.2, 0.2, 0.1, 0.1, 0.1])
    q = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    call = {"p": p, "q": np.stack([q, q[::-1]]) if kwargs.get("scheme") == "independent" else q}
    call["drafts"] = [[0, 1]]
    call.update(kwargs)
    with pytest.raises(ValueError, match=match):
        otlp.verify_drafts(call.pop("p"), call.pop("q"), call.pop("drafts"), **call)


@pytest.mark.parametrize("top_k", [None, 1, 2, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_independent_pairs_are_ordered_in_every_method(seed: int, top_k: int | None) -> None:
    """Issue 27: drafts[b, d] comes from drafter q[d] ([GR] Appendix C). For every ordered
    pair over both drafters' vocabularies, every method (fused global resolution, maxflow_cs,
    and the object API through Instance.to_local) accepts it exactly when each token has
    positive top-k probability under its own drafter, and a pair possible in both orders
    gets one slice (the optimal plan depends on the set only)."""
    rng = np.random.default_rng(seed)
    vocab = 6
    p = rng.dirichlet(np.ones(vocab))
    rows = rng.dirichlet(np.ones(vocab), 2)
    rows[0, :2] = 0.0  # drafter 0 cannot draw tokens 0, 1; drafter 1 cannot draw 4, 5
    rows[1, 4:] = 0.0
    rows /= rows.sum(axis=1, keepdims=True)
    inst = otlp.Instance(p, list(rows), 2, "independent", top_k)
    plan = otlp.solve(inst, "global_resolution", tau=1e-3, check=False)
    possible = [set(np.flatnonzero(inst.draft_rows[d] > 0)) for d in range(2)]
    for a in inst.tokens:
        for b in inst.tokens:
            local = inst.tokens.tolist()
            ok = local.index(a) in possible[0] and local.index(b) in possible[1]
            for method in ("global_resolution", "maxflow_cs"):
                options = {"scheme": "independent", "method": method, "top_k": top_k}
                if ok:
                    otlp.verify_drafts(p, rows, [[a, b]], **options)
                    continue
                bad = 0 if local.index(a) not in possible[0] else 1
                with pytest.raises(ValueError, match=rf"drafts\[0, {bad}\]: .* q\[0, {bad}\]"):
                    otlp.verify_drafts(p, rows, [[a, b]], **options)
            if not ok:
                with pytest.raises(ValueError, match=r"omega\[[01]\]: token"):
                    inst.to_local([a, b])
            elif local.index(b) in possible[0] and local.index(a) in possible[1]:
                forward, _ = plan.token_report([a, b])
                backward, _ = plan.token_report([b, a])
                np.testing.assert_allclose(forward, backward, rtol=0, atol=1e-12)


@pytest.mark.parametrize("q", [np.eye(5)[0], np.array([1 - 1e-300, 1e-300, 0.0, 0.0, 0.0])])
@pytest.mark.parametrize("top_k", [None, 1])
@pytest.mark.parametrize(
    ("scheme", "method"),
    [(s, m) for s in ("without_replacement", "greedy") for m in SCHEME_METHODS_OF[s]],
)
def test_impossible_drafts_are_named_as_the_caller_passed_them(
    scheme: str, method: str, top_k: int | None, q: np.ndarray
) -> None:
    """Issue 27: near-one-hot drafts without replacement were refused as ``n[0]: ...`` (an
    argument verify_drafts does not have) or ``omega: ...``; every method now names the
    first impossible draft, ``drafts[b, d]``, as the fused path does."""
    p = np.full(5, 0.2)
    for drafts in ([[0, 2]], [[2, 3], [0, 1]], [[0, 1, 2]]):
        with pytest.raises(ValueError, match=r"^drafts\[[01], [0-2]\]: token \d cannot be"):
            otlp.verify_drafts(p, q, drafts, scheme=scheme, method=method, top_k=top_k)


def test_greedy_share_sent_to_the_fixed_tokens_is_at_most_one() -> None:
    """The share of the fixed tokens T's target mass that the rejected columns receive is
    capped at 1. Mathematically p(T) <= the columns' excess; here p <= r on the other tokens
    and p(T) is 2e-16, so the two are equal and rounding leaves the excess 3x below p(T):
    uncapped, column (0, 3)'s slice would put 3.1 on token 0."""
    p = np.array([2.0734634663802175e-16, 0.8680975014044215, 0.1319024985955783, 0.0])
    q = np.array([0.5685756825407897, 0.37451837203144844, 0.05690594542776181, 2.85e-17])
    _assert_greedy_plan_optimal(p, q, 2, None)
