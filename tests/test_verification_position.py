"""The fused per-token path of global resolution and the batched decoder API."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import otlp
import otlp.rules
from otlp.instances import dirichlet_pair, zipf_llm_pair
from otlp.solvers.global_resolution import token

newton = importlib.import_module("otlp.solvers.global_resolution.newton")  # the package shadows it


@settings(deadline=None)
@given(
    row=st.lists(st.sampled_from([0.0, 1e-300, 0.1, 0.25, 0.5, 1.0]), min_size=1, max_size=40),
    top_k=st.integers(0, 45),
)
def test_compiled_top_k_matches_the_full_sort(row: list[float], top_k: int) -> None:
    values = np.array(row)
    positive = np.flatnonzero(values > 0)
    expected = positive[np.lexsort((positive, -values[positive]))][: top_k or None]
    np.testing.assert_array_equal(token.top_tokens(values, top_k), expected)


def _fused_slice(inst: otlp.Instance, p: np.ndarray, q: np.ndarray, omega: np.ndarray):
    tokens = token.top_tokens(q, inst.top_k or 0)
    np.testing.assert_array_equal(tokens, inst.tokens)
    status, p_sum, q_sum = token.scan(p, q, 1e-6)
    assert status == token.OK
    p_local, q_local, outside = token.restrict(p, q, tokens, p_sum, q_sum)
    local = token.local_drafts(tokens, omega)
    return token.token_slice(p_local, q_local, outside, inst.n, local, 1e-3, 50)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(1, 4),
    vocab=st.sampled_from([5, 12, 60]),
    top_k=st.sampled_from([None, 3, 8]),
    zipf=st.booleans(),
)
def test_fused_slice_agrees_with_the_object_api(
    seed: int, n: int, vocab: int, top_k: int | None, zipf: bool
) -> None:
    pair = (
        zipf_llm_pair(vocab, similarity=0.6, seed=seed)
        if zipf
        else dirichlet_pair(vocab, seed=seed)
    )
    p, q = (np.asarray(a, dtype=np.float64) for a in pair)
    inst = otlp.Instance(p, q, n, top_k=None if top_k is None else min(top_k, vocab))
    plan = otlp.solve(inst, "global_resolution", tau=1e-3, time_budget=None, check=False)
    rng = np.random.default_rng(seed)
    for omega in inst.sample_drafts(rng, 4):
        fused, system, _, variables, iterations, deviation, budget, _ = _fused_slice(
            inst, p, q, omega
        )
        fallback = not deviation <= budget
        expected, report = plan.token_report(omega)
        if n == 1:  # closed form: speculative sampling's law, exact
            assert system == token.SINGLE_DRAFT and not fallback
            assert variables == 0 and iterations == 0 and deviation == 0.0
            sps = otlp.rules.get("sps").conditional(inst, omega)
            np.testing.assert_allclose(inst.global_law(fused), sps, rtol=0, atol=1e-12)
            np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-2)  # GR to its tau
            continue
        assert fallback == report.fallback
        if fallback:
            continue
        assert (system == token.INNER) == (report.system == "inner")
        assert variables == report.variables and iterations == report.iterations
        np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-12)
        assert fused.min() >= 0 and abs(fused.sum() - 1) <= 1e-12


def _law_test(counts: np.ndarray, law: np.ndarray) -> float:
    """Chi-square p-value of ``counts`` against ``law`` (cells of tiny expectation pooled)."""
    assert counts[law <= 0].sum() == 0
    expected = law * counts.sum()
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue)


@pytest.mark.parametrize("method", ["global_resolution", "sps", "rrs", "kseq", "maxflow_cs"])
def test_batched_tokens_follow_the_exact_law(method: str) -> None:
    n = 1 if method == "sps" else 2
    p, q = dirichlet_pair(9, seed=3)
    inst = otlp.Instance(p, q, n, top_k=6)
    omega = inst.sample_drafts(np.random.default_rng(1), 1)[0]
    rows = 6000
    drafts = np.tile(omega, (rows, 1))
    # no time budget: a first call that compiles (a fresh clone, no numba cache) may spend
    # a 5 s budget and serve its rows by the lossless rule, whose law is not this slice's
    result = otlp.verify_drafts(p, q, drafts, method=method, top_k=6, rng=7, time_budget=None)
    assert all(report.fallback_rule is None for report in result.reports)
    if method == "global_resolution":
        law = otlp.solve(inst, "global_resolution", check=False).slice(omega)
    elif method == "maxflow_cs":
        law = otlp.solve(inst, "maxflow-cs").slice(omega)
    else:
        law = otlp.rules.get(method).conditional(inst, omega)
    counts = np.bincount(result.tokens, minlength=p.size)
    assert _law_test(counts, law) > 1e-4
    np.testing.assert_array_equal(result.accepted, np.isin(result.tokens, omega))


def test_draws_outside_the_top_k_follow_the_law_across_chunks() -> None:
    """A rejected draft's token outside the draft's top-k is drawn from p over the outside
    tokens, whole chunks of 256 summed before one is scanned: over 1,000 tokens (four
    chunks) with most of p outside the top 3, the outside tokens follow the plan's slice."""
    p, q = zipf_llm_pair(1000, similarity=0.2, seed=4)
    inst = otlp.Instance(p, q, 2, top_k=3)
    omega = inst.tokens[[0, 1]]
    rows = 6000
    result = otlp.verify_drafts(p, q, np.tile(omega, (rows, 1)), top_k=3, rng=11)
    law = otlp.solve(inst, "global_resolution", check=False).slice(omega)
    outside = ~np.isin(np.arange(p.size), inst.tokens)
    assert law[outside].sum() > 0.5
    counts = np.bincount(result.tokens, minlength=p.size)
    assert _law_test(counts, law) > 1e-4
    # the cumulative mass by chunk, where a skipped chunk's miscount would show
    chunk_counts = np.add.reduceat(counts, np.arange(0, p.size, 256))
    chunk_law = np.add.reduceat(law, np.arange(0, p.size, 256))
    assert _law_test(chunk_counts, chunk_law) > 1e-4


def test_batch_rows_match_the_single_token_path_and_parallel_run() -> None:
    rows = []
    for seed in range(6):
        p, q = zipf_llm_pair(400, similarity=0.7, seed=seed)
        rows.append((p, q))
    p = np.array([r[0] for r in rows])
    q = np.array([r[1] for r in rows])
    drafts = np.array(
        [
            otlp.Instance(p[b], q[b], 3, top_k=30).sample_drafts(np.random.default_rng(b), 1)[0]
            for b in range(6)
        ]
    )
    # Budgets count numba's compiling (issue 39): a first parallel call that compiles its
    # threaded batch past the default 5 s budget serves its rows by rrs. Compile ahead.
    otlp.warm_up(parallel=True)
    serial = otlp.verify_drafts(p, q, drafts, top_k=30, rng=5)
    parallel = otlp.verify_drafts(p, q, drafts, top_k=30, rng=5, parallel=True)
    np.testing.assert_array_equal(serial.tokens, parallel.tokens)
    single32 = otlp.verify_drafts(
        p.astype(np.float32), q.astype(np.float32), drafts, top_k=30, rng=5
    )
    assert single32.tokens.shape == (6,)
    for b in range(6):
        assert serial.reports[b].deviation <= serial.reports[b].budget
        one = otlp.verify_drafts(
            p[b], q[b], drafts[b : b + 1], top_k=30, rng=np.random.default_rng(0)
        )
        assert one.tokens.shape == (1,)


def test_fallback_rows_are_exact_and_reported() -> None:
    p, q = dirichlet_pair(12, seed=4)
    inst = otlp.Instance(p, q, 2)
    drafts = inst.sample_drafts(np.random.default_rng(0), 200)
    result = otlp.verify_drafts(
        p, q, drafts, tau=1e-9, max_iter=0, rng=1, method="global_resolution"
    )
    solved = [r for r in result.reports if r.variables > 1 or r.system == "inner"]
    assert solved and all(r.fallback for r in solved)
    assert result.fallbacks == len(solved)
    assert all("max-flow" in r.message for r in solved)
    assert np.all(p[result.tokens] > 0)


P3 = np.array([0.5, 0.3, 0.2])
Q3 = np.array([0.2, 0.3, 0.5])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"p": P3.astype(np.int64)}, "p: expected a float16, bfloat16, float32 or float64"),
        ({"p": np.ones((2, 2, 3)) / 3}, r"p: expected shape \(V,\) or \(B, V\)"),
        ({"q": np.array([0.5, 0.5])}, "q: vocabulary size 2"),
        ({"drafts": np.array([[0.0, 1.0]])}, "drafts: expected integer"),
        ({"drafts": np.array([0, 1])}, r"drafts: expected shape \(B, n\)"),
        ({"drafts": np.array([[0, 3]])}, r"drafts\[0, 1\]: token id 3 outside"),
        ({"q": np.array([0.5, 0.5, 0.0])}, r"drafts\[0, 1\]: token 2 cannot be drafted"),
        ({"top_k": 1}, r"drafts\[0, 0\]: token 1 cannot be drafted"),
        ({"p": np.array([0.5, np.nan, 0.5])}, r"p\[0\]: has a negative, NaN"),
        ({"q": np.array([0.5, 0.6, 0.2])}, r"q\[0\]: does not sum to 1"),
        ({"method": "rrs_without_replacement"}, "method: expected one of"),
        ({"method": "sps"}, "method: 'sps' verifies one draft"),
        ({"method": "global_resolution", "tau": "small"}, "tau: expected a real number"),
        ({"method": "global_resolution", "tau": 1e-300}, "tau: must be at least"),
        ({"tau": 1e-3}, "tau: the default method for scheme 'iid', 'partial_resolution', is exact"),
        ({"top_k": 0}, "top_k: must be at least 1"),
        ({"rng": "x"}, "rng: expected an int seed"),
        ({"parallel": 1}, "parallel: expected True or False"),
        ({"max_iter": 2.5}, "max_iter: expected an integer"),
        ({"p": np.tile(P3, (3, 1))}, "p: 3 rows for 1 rows of drafts"),
    ],
)
def test_bad_arguments_name_themselves(kwargs: dict, match: str) -> None:
    args = {"p": P3, "q": Q3, "drafts": np.array([[1, 2]])} | kwargs
    with pytest.raises(ValueError, match=match):
        otlp.verify_drafts(args.pop("p"), args.pop("q"), args.pop("drafts"), **args)


@pytest.mark.parametrize("method", ["rrs", "kseq", "maxflow_cs"])
def test_rules_name_bad_rows(method: str) -> None:
    q = np.array([[0.2, 0.3, 0.5], [0.2, 0.3, 0.6]])
    with pytest.raises(ValueError, match=r"q\[1\]: sums to"):
        otlp.verify_drafts(P3, q, np.array([[1, 2], [0, 1]]), method=method)
    with pytest.raises(ValueError, match=r"drafts\[0\]"):
        otlp.verify_drafts(P3, Q3, np.array([[1, 2]]), method=method, top_k=1)


def test_bench_decoder_cells_time_end_to_end() -> None:
    """`otlp bench` decoder cells: floors, the fused path, a batch and the object API."""
    from otlp.bench.cells import Catalog, plan_grid
    from otlp.bench.config import parse_config
    from otlp.bench.decoder_cells import DECODE, decode_tables
    from otlp.bench.tables import Slice
    from otlp.bench.worker import OK, run_group

    known = [
        "argpartition",
        "sps_numpy",
        "global_resolution",
        "global_resolution@4",
        "global_resolution@4:parallel",
        "maxflow_cs",
        "highs",
    ]
    config = parse_config(
        {
            "run": {"suites": ["dirichlet"], "items": 2},
            "sweep": [{"decoders": [*known, "nonsense", "highs@4"], "kn": [[6, 2]]}],
        }
    )
    grid = plan_grid(config, Catalog.current())
    decoders = [cell for cell in grid.cells if cell.kind == DECODE]
    assert {cell.name for cell in decoders} == set(known)
    assert any("nonsense" in note for note in grid.notes)
    assert any("highs@4" in note for note in grid.notes)
    records = run_group([c for c in grid.cells if c.kind == DECODE or c.kind == "alpha"])
    from otlp.bench.aggregate import summarize_all

    rows = summarize_all(records)
    for record in records:
        assert all(t["status"] == OK and t["time_s"] > 0 for t in record["tokens"])
    text = "\n".join(decode_tables(Slice("dirichlet", "", "iid", tuple(rows))))
    assert "global_resolution@4" in text and "[1×]" in text


def _hard_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows whose Newton cannot certify tau = 1e-10 (the quadrature bound alone is above it):
    without a clock they run 9 iterations into a failed line search."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.full(50, 0.3)), rng.dirichlet(np.full(50, 0.3))
    return p, q, rng.choice(50, size=(2, 4), p=q)


def test_compiled_rows_stop_at_their_time_budget() -> None:
    """verify_drafts' clock (the call's, from its entry): a row whose next Newton iteration is
    predicted to end past the budget does not start it; its token comes from rrs at once
    (issue 24: no exact max-flow after the time is spent) and its report says why."""
    p, q, drafts = _hard_rows()
    free = otlp.verify_drafts(
        p, q, drafts, tau=1e-10, rng=0, time_budget=None, method="global_resolution"
    )
    assert all(r.iterations > newton.FIRST_CHUNK for r in free.reports)
    assert not any("time budget" in r.message for r in free.reports)
    timed = otlp.verify_drafts(
        p, q, drafts, tau=1e-10, rng=0, time_budget=1e-9, method="global_resolution"
    )
    for report in timed.reports:
        assert report.fallback and report.iterations == 0 and report.fallback_rule == "rrs"
        assert report.message.startswith("compiled row: time budget exhausted")
    assert np.all(p[timed.tokens] > 0)
    fast = otlp.verify_drafts(
        p, q, drafts, tau=1e-3, rng=0, time_budget=None, method="global_resolution"
    )
    assert not any(r.fallback for r in fast.reports)


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
@pytest.mark.parametrize("bad", [0, -1.0, "a", float("nan")])
def test_time_budget_is_checked(scheme: str, bad: object) -> None:
    p, q, _ = _hard_rows()
    with pytest.raises(ValueError, match="time_budget"):
        otlp.verify_drafts(p, q, [[0, 1], [2, 3]], scheme=scheme, time_budget=bad)


def test_the_unit_size_is_judged_on_the_top_k_draft_and_its_refusal_keeps_top_k():
    """Under limits where global resolution fits the top 10 of 60 tokens with n = 3 but not
    the top 50: the first call's rows are global resolution's own (no fallback rule); the
    second's come from rrs on the same top-50 draft, token for token with the same seed."""
    rng = np.random.default_rng(21)
    p = rng.dirichlet(np.ones(60))
    q = rng.dirichlet(np.ones(60))
    drafts = np.tile(np.argsort(q)[::-1][:3], (40, 1))
    with otlp.limits.limited(max_variables=5_000):  # 64 nodes x 2 x k: fits k = 10, not 50
        fitted = otlp.verify_drafts(p, q, drafts, top_k=10, rng=3, method="global_resolution")
        refused = otlp.verify_drafts(p, q, drafts, top_k=50, rng=3, method="global_resolution")
    assert fitted.method == "global_resolution"
    assert all(r.fallback_rule is None for r in fitted.reports)
    assert all(r.fallback_rule == "rrs" for r in refused.reports)
    rrs = otlp.verify_drafts(p, q, drafts, method="rrs", top_k=50, rng=3)
    np.testing.assert_array_equal(refused.tokens, rrs.tokens)
    unrestricted = otlp.verify_drafts(p, q, drafts, method="rrs", rng=3)
    assert not np.array_equal(rrs.tokens, unrestricted.tokens)


def test_decoder_arguments_are_refused_with_their_whole_message():
    p = np.array([0.5, 0.3, 0.2])
    drafts = np.array([[0, 1]])
    with pytest.raises(ValueError, match=r"^method: expected a string, got 3$"):
        otlp.verify_drafts(p, p, drafts, method=3)
    with pytest.raises(ValueError, match=r"^method: expected one of global_resolution, \w+, "):
        otlp.verify_drafts(p, p, drafts, method="nosuch")
    with pytest.raises(ValueError, match=r"^top_k: must be at most 3, got 4$"):
        otlp.verify_drafts(p, p, drafts, top_k=4)


@pytest.mark.parametrize(
    ("method", "scheme", "drafts"),
    [
        ("sps", "iid", [[0]]),
        ("rrs", "iid", [[0, 1]]),
        ("kseq", "iid", [[0, 1]]),
        ("maxflow_cs", "iid", [[0, 1]]),
        ("spechub", "iid", [[0, 1]]),
        ("rrs_without_replacement", "without_replacement", [[0, 1]]),
        ("maxflow_cs", "greedy", [[0, 1]]),
    ],
)
def test_tau_is_refused_for_a_method_without_an_error_threshold(method, scheme, drafts):
    """Issue 39 leftover: as verify_tree, verify_drafts refuses a tau given to an exact method
    (the caller thinks it changes something), naming tau and the method, for every scheme;
    leaving it out is fine, and global resolution still takes one."""
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.4, 0.35, 0.25])
    match = rf"^tau: method '{method}' is exact and takes no error threshold"
    with pytest.raises(ValueError, match=match):
        otlp.verify_drafts(p, q, drafts, method=method, scheme=scheme, tau=2.0, rng=0)
    with pytest.raises(ValueError, match=match):  # spelled as the caller likes
        otlp.verify_drafts(p, q, drafts, method=method.upper(), scheme=scheme, tau=1e-3, rng=0)
    otlp.verify_drafts(p, q, drafts, method=method, scheme=scheme, rng=0)
    otlp.verify_drafts(p, q, drafts, scheme=scheme, tau=1e-3, rng=0, method="global_resolution")


@pytest.mark.parametrize("method", ["rrs", "kseq", "maxflow_cs", "global_resolution"])
@pytest.mark.parametrize("rows", [2, 5])
def test_each_row_is_verified_against_its_own_target(method, rows):
    """p one-hot at a different token per row (temperature 0), q shared: a lossless rule
    emits each row's own target token, so no row may take another row's p or its plan."""
    p = np.eye(5)[np.arange(rows) % 5]
    q = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
    drafts = np.tile(np.array([[0, 1]]), (rows, 1))
    result = otlp.verify_drafts(p, q, drafts, method=method, rng=0)
    np.testing.assert_array_equal(result.tokens, np.arange(rows) % 5)


def test_row_reports_carry_their_unit_and_bad_rows_name_their_own_row():
    """The reports of Newton rows (unit, block of an outer unit, deviation, budget) and of
    closed-form rows; a bad row named by its index in a per-row law, by 0 in a shared one."""
    p = np.array([0.5, 0.3, 0.2])
    newton = otlp.verify_drafts(
        np.tile(p, (2, 1)), p, np.array([[0, 1], [2, 2]]), rng=0, method="global_resolution"
    )
    for report in newton.reports:
        assert report.system in ("outer", "inner")
        assert (report.block is not None) == (report.system == "outer")
        assert isinstance(report.deviation, float) and isinstance(report.budget, float)
        assert 0.0 <= report.deviation <= report.budget
    assert any(r.system == "outer" and r.block == 0 for r in newton.reports)
    closed = otlp.verify_drafts(p, p, np.array([[0], [2]]), rng=0, method="global_resolution")
    for report in closed.reports:
        assert report.system == "single draft (closed form)" and report.block is None
        assert report.message == (
            "closed form: one draft's optimal plan is speculative sampling's law"
        )
    rows = np.tile(p, (3, 1))
    bad = rows.copy()
    bad[2] = [0.5, 0.3, 0.3]
    drafts = np.array([[0, 1]] * 3)
    cases = (
        ((p, bad), "q[2]"),
        ((bad, p), "p[2]"),
        ((bad[2], rows), "p[0]"),
        ((p, bad[1:]), "q[1]"),
    )
    for args, name in cases:
        with pytest.raises(
            ValueError, match=rf"^{re.escape(name)}: does not sum to 1 within atol$"
        ):
            otlp.verify_drafts(
                *args,
                drafts[: args[1].shape[0] if args[1].ndim == 2 else 3],
                method="global_resolution",
            )
    zero = np.array([0.5, 0.5, 0.0])
    with pytest.raises(
        ValueError,
        match=r"^drafts\[1, 1\]: token 2 cannot be drafted \(draft probability 0, or outside the "
        r"top-k draft\)$",
    ):
        otlp.verify_drafts(p, zero, np.array([[0, 1], [0, 2]]), method="global_resolution")


def test_fallback_rows_solve_the_top_k_draft():
    """Newton given no iteration (max_iter=0): every row falls back to the object API, which
    must solve the top-k draft the rows were drawn from: the same tokens as the same call
    on q restricted to its top 4 by hand."""
    from otlp.verification.drafting import restrict_top_k

    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8))
    restricted = restrict_top_k(q[None, :], 4)[0]
    top = np.flatnonzero(restricted)
    drafts = rng.choice(top, size=(300, 2), p=restricted[top])
    fallback = otlp.verify_drafts(
        p, q, drafts, top_k=4, max_iter=0, rng=1, method="global_resolution"
    )
    assert all(report.fallback for report in fallback.reports)
    by_hand = otlp.verify_drafts(
        p, restricted, drafts, max_iter=0, rng=1, method="global_resolution"
    )
    np.testing.assert_array_equal(fallback.tokens, by_hand.tokens)


def test_a_row_at_its_iteration_limit_is_not_run_to_the_limit_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fuzz seed 52: a row whose compiled Newton stops at its 50-iteration limit falls back
    to the object API, which solved the same unit with the same Newton to the same limit
    before its exact max-flow (3 x 0.6 s of a 5 s budget at n = 30, V = 4). Every fused row
    (i.i.d. here, the scheme rows below) now hands the object API no iteration: the unit is
    solved exactly at once, losslessly."""
    limits = _object_api_newton_limits(monkeypatch)
    p = np.array([0.0, 0.2021737654241953, 0.5149948539230955, 0.28283138065270924])
    p /= p.sum()
    q = np.array(
        [0.25776568835068897, 0.10690069785038997, 0.21119419345732157, 0.4241394203415995]
    )
    drafts = np.random.default_rng(0).choice(4, size=(2, 30), p=q)
    result = otlp.verify_drafts(p, q, drafts, rng=1, method="global_resolution")
    assert all(r.fallback and r.iterations == 50 for r in result.reports)
    _assert_solved_exactly_without_newton(result, limits, p)


def test_a_scheme_row_at_its_iteration_limit_is_not_run_to_the_limit_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same for the fused scheme row (three drafts without replacement, one Newton
    iteration allowed)."""
    limits = _object_api_newton_limits(monkeypatch)
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12))
    drafts = np.array([rng.choice(12, 3, replace=False, p=q) for _ in range(6)])
    result = otlp.verify_drafts(p, q, drafts, scheme="without_replacement", max_iter=1, rng=0)
    assert all(r.fallback and r.iterations == 1 for r in result.reports)
    _assert_solved_exactly_without_newton(result, limits, p)


def _object_api_newton_limits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The iteration limits the object API's Newton is called with (the i.i.d. engine's and
    the scheme engines'), recorded."""
    from otlp.global_resolution import iid as engine
    from otlp.global_resolution import schemes

    limits: list[int] = []
    for module, name in ((engine, "newton"), (schemes, "system_newton")):
        real = getattr(module, name)

        def counted(*args, real=real, **kwargs):
            limits.append(kwargs["max_iter"])
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return limits


def _assert_solved_exactly_without_newton(result, limits: list[int], p: np.ndarray) -> None:
    assert all("iteration limit" in r.message and "max-flow" in r.message for r in result.reports)
    assert limits and set(limits) == {0}
    assert np.all(p[result.tokens] > 0)


@pytest.mark.parametrize(
    ("scheme", "expected"),
    [
        ("iid", "partial_resolution"),
        ("IID", "partial_resolution"),
        ("without_replacement", "global_resolution"),
        ("greedy", "global_resolution"),
        ("independent", "global_resolution"),
    ],
)
def test_the_default_method_is_the_schemes_optimal_rule(scheme: str, expected: str) -> None:
    """Issue 37: with no method named, i.i.d. drafts get partial resolution (exact optimal
    transport) and the schemes it does not reach get global resolution; the default call is
    the named call, token for token."""
    p, q = dirichlet_pair(12, seed=4)
    q_rows = np.stack([q, dirichlet_pair(12, seed=6)[1]]) if scheme == "independent" else q
    inst = (
        otlp.Instance(p, list(q_rows), 2, "independent")
        if scheme == "independent"
        else otlp.Instance(p, q, 2, scheme.lower())
    )
    drafts = inst.sample_drafts(np.random.default_rng(2), 50)
    assert otlp.verification.default_method(scheme) == expected
    default = otlp.verify_drafts(p, q_rows, drafts, scheme=scheme, rng=9, time_budget=None)
    named = otlp.verify_drafts(
        p, q_rows, drafts, scheme=scheme, method=expected, rng=9, time_budget=None
    )
    assert default.method == named.method == expected
    np.testing.assert_array_equal(default.tokens, named.tokens)
    with pytest.raises(ValueError, match=r"^scheme: expected one of iid, "):
        otlp.verification.default_method("beam")
