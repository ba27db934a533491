"""What every verify_drafts path shares (:mod:`otlp.decoder_rows`) and global resolution's row
modules (:mod:`otlp.global_resolution.row_fallback`, ``scheme_rows``, ``rows``): the input
checks by argument name and row, the stricter array's sum check when p and q differ in
precision, the reports of exact rows and of rows a too-large unit sends to the rule, and the
fallback chain's arguments (the call's tau, top_k and scheme reach the object API) (issue
39's mutation rounds)."""

from __future__ import annotations

import numpy as np
import pytest

import otlp


def test_bad_atol_and_q_shapes_are_refused_by_name():
    p = np.array([0.5, 0.3, 0.2])
    drafts = np.array([[0, 1]])
    with pytest.raises(ValueError, match=r"^atol: must be at least 0, got -1$"):
        otlp.verify_drafts(p, p, drafts, atol=-1.0)
    with pytest.raises(
        ValueError, match=r"^q: expected shape \(V,\) or \(B, V\), got \(1, 1, 3\)$"
    ):
        otlp.verify_drafts(p, p[None, None], drafts)


def test_the_second_independent_drafter_is_checked_at_q_s_own_precision():
    """p in float32 (sums to 1 within 1e-4), q in float64 (within 1e-6): q is checked here at
    its stricter tolerance, both drafters' rows of it; a second drafter summing to 1 + 1e-5
    is refused, not passed to the compiled scan at float32's tolerance."""
    p = np.array([0.4, 0.3, 0.2, 0.1], dtype=np.float32)
    q = np.array([[0.25, 0.25, 0.25, 0.25], [0.4, 0.3, 0.2, 0.1 + 1e-5]])
    drafts = np.array([[0, 1]])
    with pytest.raises(ValueError, match=r"^q.*does not sum to 1"):
        otlp.verify_drafts(p, q, drafts, scheme="independent", method="maxflow_cs", rng=0)
    q[1, 3] = 0.1
    result = otlp.verify_drafts(p, q, drafts, scheme="independent", method="maxflow_cs", rng=0)
    assert result.tokens.shape == (1,)


def test_exact_rows_report_no_system_and_no_fallback():
    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    drafts = np.array([[0, 1], [2, 3], [4, 5]])
    result = otlp.verify_drafts(p, q, drafts, method="rrs", rng=1)
    assert result.method == "rrs" and result.fallbacks == 0
    for report in result.reports:
        assert report.message == "exact" and report.fallback is False
        assert report.system is None and report.block is None and report.variables == 0
        assert report.iterations == 0 and report.deviation == 0.0 and report.budget == 0.0


def test_rows_of_a_unit_over_the_limits_are_the_rules_and_say_so():
    """Global resolution's unit over otlp.limits: every row is verified by the scheme's
    lossless rule; the result still names global_resolution, and every report is a fallback
    naming the rule and why."""
    rng = np.random.default_rng(21)
    p, q = rng.dirichlet(np.ones(60)), rng.dirichlet(np.ones(60))
    drafts = np.tile(np.argsort(q)[::-1][:3], (8, 1))
    with otlp.limits.limited(max_variables=5_000):
        refused = otlp.verify_drafts(p, q, drafts, top_k=50, rng=3, method="global_resolution")
    assert refused.method == "global_resolution"
    assert refused.fallbacks == 8
    for report in refused.reports:
        assert report.fallback is True and report.fallback_rule == "rrs"
        assert report.message.endswith("; every row verified by rrs")


def test_a_float64_p_is_checked_at_its_own_precision_beside_a_float32_q():
    """p in float64 (within 1e-6), q in float32 (within 1e-4): p is the stricter array and
    is checked here at 1e-6, not passed to the compiled scan at float32's tolerance."""
    p = np.array([0.4, 0.3, 0.2, 0.1 + 1e-5])
    q = np.array([0.25, 0.25, 0.25, 0.25], dtype=np.float32)
    with pytest.raises(ValueError, match=r"^p.*does not sum to 1"):
        otlp.verify_drafts(p, q, np.array([[0, 1]]), method="rrs", rng=0)


def test_independent_drafts_take_one_draft_law_per_drafter():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    for q in (p, np.tile(p, (1, 3, 1))):
        with pytest.raises(
            ValueError, match=r"^q: scheme 'independent' takes one row per draft, shape \(2, V\)"
        ):
            otlp.verify_drafts(p, q, np.array([[0, 1]]), scheme="independent", method="maxflow_cs")


@pytest.mark.parametrize("method", ["maxflow_cs", "global_resolution"])
@pytest.mark.parametrize("shared", [True, False])
def test_an_impossible_independent_draft_names_its_row_and_drafter(method, shared):
    """Two independent drafters, drafter 1 of which cannot draft token 1: row 1's pair (1, 1)
    is refused naming that row's drafter, q[0, 1] for a q shared by every row, q[1, 1] for
    one q per row (a bad draft is the row's own, whichever row of q it was drawn from)."""
    p = np.full(4, 0.25)
    q = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    q_arg = q if shared else np.stack([q, q])
    drafter = "q\\[0, 1\\]" if shared else "q\\[1, 1\\]"
    with pytest.raises(
        ValueError, match=rf"^drafts\[1, 1\]: token 1 cannot be drafted by its drafter {drafter} "
    ):
        otlp.verify_drafts(
            p, q_arg, np.array([[0, 2], [1, 1]]), scheme="independent", method=method, rng=0
        )


@pytest.mark.parametrize(
    ("scheme", "method"),
    [
        ("iid", "global_resolution"),
        ("iid", "rrs"),
        ("without_replacement", "maxflow_cs"),
        ("without_replacement", "global_resolution"),
        ("greedy", "global_resolution"),
    ],
)
def test_a_bad_target_row_is_named_by_its_own_row(scheme, method):
    """p of two rows, the second with a NaN (or summing to 1.1): named p[1], not p[0] (the
    i.i.d. rules' rows by their Instance's message, the others' by the kernels' check)."""
    p = np.array([[0.4, 0.3, 0.2, 0.1], [0.4, np.nan, 0.2, 0.1]])
    drafts = np.array([[0, 1], [2, 3]])
    kwargs = {"scheme": scheme, "method": method, "rng": 0}
    with pytest.raises(ValueError, match=r"^p\[1\]: .*NaN"):
        otlp.verify_drafts(p, np.full(4, 0.25), drafts, **kwargs)
    p[1] = [0.5, 0.3, 0.2, 0.1]
    with pytest.raises(ValueError, match=r"^p\[1\]: .*sum"):
        otlp.verify_drafts(p, np.full(4, 0.25), drafts, **kwargs)


@pytest.mark.parametrize("method", ["global_resolution", "maxflow_cs"])
def test_a_tuple_greedy_drafting_cannot_produce_is_named_with_its_top_count(method):
    """Three greedy drafts are the top two draft tokens plus one other: the message says
    "the top 2"."""
    q = np.array([0.1, 0.4, 0.2, 0.3])
    with pytest.raises(
        ValueError,
        match=r"^drafts\[0\]: \[1, 2, 0\] is not a greedy draft tuple \(the top 2 draft tokens "
        r"plus one other token of positive probability\)$",
    ):
        otlp.verify_drafts(
            np.full(4, 0.25), q, np.array([[1, 2, 0]]), scheme="greedy", method=method, rng=0
        )


def test_a_one_token_vocabulary_is_verified():
    """V = 1 is a valid (if trivial) vocabulary: the one token is drafted and emitted."""
    result = otlp.verify_drafts(np.array([1.0]), np.array([1.0]), np.array([[0], [0]]), rng=0)
    np.testing.assert_array_equal(result.tokens, [0, 0])
    assert result.accepted.all()


def test_batch_shape_errors_name_the_array_and_its_row_count():
    p = np.array([0.5, 0.3, 0.2])
    drafts = np.array([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"^q: expected a float16, .* array, got dtype <U1$"):
        otlp.verify_drafts(p, np.array(["a", "b", "c"]), drafts)
    with pytest.raises(ValueError, match=r"^p: 3 rows for 2 rows of drafts$"):
        otlp.verify_drafts(np.tile(p, (3, 1)), p, drafts)
    with pytest.raises(ValueError, match=r"^q: 3 rows for 2 rows of drafts$"):
        otlp.verify_drafts(p, np.tile(p, (3, 1)), drafts)


def test_a_calls_deadline_counts_from_its_start_less_the_rules_reserve():
    """call_deadline: time_budget seconds after the call's start (a perf_counter value),
    less the seconds reserved for the rows' rule tokens; no budget, no deadline."""
    from otlp.global_resolution.rows import call_deadline

    assert call_deadline(2.0, 10.0, 0.5).at == 11.5
    assert not call_deadline(None, 10.0, 0.5).limited


def test_a_row_sent_to_the_object_api_is_solved_with_the_calls_tau(monkeypatch):
    """Rows the fused path cannot certify (forced here) go to the object API with the call's
    options: one Newton iteration certifies every unit at tau = 0.2 (budget 1), and leaves
    a unit short of tau = 1e-4 (budget 5e-4), which is then solved exactly by max-flow."""
    from otlp.global_resolution import scheme_rows
    from otlp.global_resolution.fused import RowResult
    from otlp.solvers.row_status import FALLBACK

    monkeypatch.setattr(
        scheme_rows, "scheme_row", lambda *a, **k: RowResult(FALLBACK, -1, message="forced")
    )
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12))
    drafts = np.argsort(-q)[:3][None, :]
    kwargs = {"scheme": "without_replacement", "max_iter": 1, "rng": 0, "time_budget": None}
    loose = otlp.verify_drafts(p, q, drafts, tau=0.2, **kwargs).reports[0]
    tight = otlp.verify_drafts(p, q, drafts, tau=1e-4, **kwargs).reports[0]
    assert loose.fallback and loose.message.startswith("forced; object API: ")
    assert "max-flow" not in loose.message and "max-flow" in tight.message


@pytest.mark.parametrize("scheme", ["without_replacement", "independent"])
def test_a_row_sent_to_the_object_api_gets_the_fused_rows_token(monkeypatch, scheme):
    """The object API solves a row the fused path cannot certify (forced here) on the same
    top-k restricted instance: with the same uniforms, the same token as the fused path
    gives every row of 300 (top_k = 4 of V = 10)."""
    from otlp.global_resolution import scheme_rows
    from otlp.global_resolution.fused import RowResult
    from otlp.solvers.row_status import FALLBACK

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(10))
    q = rng.dirichlet(np.ones(10), size=2 if scheme == "independent" else None)
    pair = np.argmax(q, axis=1) if scheme == "independent" else np.argsort(-q)[:2]
    drafts = np.tile(pair, (300, 1))
    kwargs = {"scheme": scheme, "top_k": 4, "rng": 5, "time_budget": None}
    fused = otlp.verify_drafts(p, q, drafts, **kwargs)
    monkeypatch.setattr(
        scheme_rows, "scheme_row", lambda *a, **k: RowResult(FALLBACK, -1, message="forced")
    )
    forced = otlp.verify_drafts(p, q, drafts, **kwargs)
    assert all(r.fallback and r.message == "forced; object API: converged" for r in forced.reports)
    np.testing.assert_array_equal(forced.tokens, fused.tokens)


def test_a_tree_node_sent_to_the_object_api_gets_the_fused_nodes_token(monkeypatch):
    """verify_tree's node of two drafts without replacement under top_k = 4: where the fused
    row cannot certify it (forced here), the object API solves the same scheme on the same
    top-k restricted instance, and the same uniforms give the same token on all 200 rows."""
    from otlp.decoding import path_tree, verify_tree
    from otlp.global_resolution import scheme_rows
    from otlp.global_resolution.fused import RowResult
    from otlp.solvers.row_status import FALLBACK

    parents = path_tree(2, 1)
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(10), size=(200, 3))
    q = rng.dirichlet(np.ones(10), size=(200, 3))
    tokens = np.argsort(-q[:, 0], axis=-1)[:, :2]
    kwargs = {"method": "global_resolution", "scheme": "without_replacement", "top_k": 4}
    fused = verify_tree(tokens, parents, p, q, rng=7, **kwargs)
    monkeypatch.setattr(
        scheme_rows, "scheme_row", lambda *a, **k: RowResult(FALLBACK, -1, message="forced")
    )
    hows: list[str] = []
    real_fallback_token = scheme_rows.fallback_token

    def spy(*args, **kw):
        found = real_fallback_token(*args, **kw)
        hows.append(found[1])
        return found

    monkeypatch.setattr(scheme_rows, "fallback_token", spy)
    forced = verify_tree(tokens, parents, p, q, rng=7, **kwargs)
    assert len(hows) == 200 and all(how.startswith("object API: ") for how in hows)
    np.testing.assert_array_equal(forced.output_ids, fused.output_ids)


def test_a_node_row_the_fused_path_refuses_raises_on_checked_rows_and_defers_on_raw_ones():
    """scheme_row_token: on rows the caller checked (top_k None) a row the fused path refuses
    raises the row's message; on rows as given (top_k k) it returns -1 for the caller's
    checked path to name."""
    from otlp.decoder_rows.inputs import DecoderBatch
    from otlp.global_resolution.row_fallback import fallback_token
    from otlp.global_resolution.rows import GlobalResolutionRows
    from otlp.global_resolution.scheme_rows import scheme_row_token
    from otlp.solvers.global_resolution.budget import Deadline

    options = GlobalResolutionRows.checked()
    q = np.array([[0.5, 0.3, 0.2, 0.0]])
    u = np.array([0.3, 0.6])
    args = ("without_replacement", u, 1e-9)
    bad_p = np.array([0.4, np.nan, 0.2, 0.4])
    fine_p = np.array([0.4, 0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match=r"^p\[0\]: has a negative, NaN or infinite entry$"):
        scheme_row_token(options, bad_p, q, np.array([0, 1]), *args)
    with pytest.raises(
        ValueError, match=r"^drafts\[0, 1\]: token 3 cannot be drafted \(draft probability 0"
    ):
        scheme_row_token(options, fine_p, q, np.array([0, 3]), *args)
    assert scheme_row_token(options, fine_p, q, np.array([0, 3]), *args, top_k=0) == -1
    two = np.stack([q[0], np.full(4, 0.25)])
    with pytest.raises(ValueError, match=r"^drafts\[0, 0\]: .* by its drafter q\[0, 0\] "):
        scheme_row_token(options, fine_p, two, np.array([3, 0]), "independent", u, 1e-9)
    # the object API on the same row and uniforms is the exact reference (tokens 0, 1, 3)
    for first in (0.3, 0.6, 0.99):
        u = np.array([first, 0.6])
        batch = DecoderBatch.of_row(
            fine_p, q, np.array([0, 1]), u, scheme="without_replacement", top_k=3, atol=1e-9
        )
        found = fallback_token(
            options,
            batch,
            0,
            Deadline.after(None),
            out_of_time=False,
            alpha_star=None,
            iteration_limit=False,
        )
        assert found[1] == "object API: converged"
        token = scheme_row_token(options, fine_p, q, np.array([0, 1]), args[0], u, args[2])
        assert token == found[0], first


def test_greedy_rows_are_closed_form_whatever_the_limits():
    """The greedy plan has no Newton evaluation to refuse: under limits that send the other
    schemes to their rules, greedy rows stay exact, with no fallback."""
    rng = np.random.default_rng(21)
    p, q = rng.dirichlet(np.ones(60)), rng.dirichlet(np.ones(60))
    drafts = np.tile(np.argsort(-q)[:3], (4, 1))
    with otlp.limits.limited(max_variables=100):
        out = otlp.verify_drafts(p, q, drafts, scheme="greedy", rng=0)
    assert out.fallbacks == 0
    assert all(r.message == "closed form (exact)" for r in out.reports)


@pytest.mark.parametrize(
    ("scheme", "message"),
    [("iid", r"^p\[1\]: sums to 1\.1"), ("without_replacement", r"^p\[1\]: does not sum to 1")],
)
def test_rule_rows_refuse_a_bad_row_as_the_schemes_rule_does(scheme, message):
    """Rows sent to the scheme's rule by a unit over the limits are checked as that rule's own
    rows are: i.i.d. ones by their Instance (whose message gives the sum), the other schemes'
    by the kernels' check."""
    rng = np.random.default_rng(21)
    p, q = rng.dirichlet(np.ones(60)), rng.dirichlet(np.ones(60))
    ps = np.stack([p, p * 1.1])
    drafts = np.tile(np.argsort(-q)[:2], (2, 1))
    with otlp.limits.limited(max_variables=100), pytest.raises(ValueError, match=message):
        otlp.verify_drafts(ps, q, drafts, scheme=scheme, method="global_resolution", rng=0)


def test_independent_rule_rows_keep_both_drafters():
    """Two independent drafters over the limits: each row is rrs on both draft laws, so a
    token only the second drafter can draft is a valid second draft."""
    rng = np.random.default_rng(22)
    p = rng.dirichlet(np.ones(60))
    q = rng.dirichlet(np.ones(60), size=2)
    q[0, 7] = 0.0  # token 7: the second drafter's only
    q[0] /= q[0].sum()
    drafts = np.array([[int(np.argmax(q[0])), 7]] * 3)
    with otlp.limits.limited(max_variables=100):
        out = otlp.verify_drafts(p, q, drafts, scheme="independent", rng=0)
    assert all(r.fallback_rule == "rrs" for r in out.reports)
