"""The compiled node kernels (otlp.solvers.node_rules) where the toy trees do not reach them.

tests/test_node_rules.py and tests/test_verify_tree_laws.py check the rejection, K-SEQ and
SpecHub kernels on vocabularies of at most 12 tokens with continuous uniforms, and GBV's
correction law to a grid's resolution. Four promises lie outside that: the inverse-CDF
draws sum whole chunks of 256 entries before scanning one (a real model's vocabulary spans
hundreds of chunks); a draft the target never emits is rejected whatever the uniform
(u = 0 included: acceptance is u q(x) < p(x), strict); SpecHub's hub is the first argmax
of q at ties (docs: "lowest id"); GBV's stop law, its excess summed by key buckets, is
exact to rounding. Each test here was checked to fail with a one-line mutant of the kernel
that breaks its promise (docs/mutation-testing.md, "Hand-made mutants of the tree
kernels").
"""

from __future__ import annotations

import numpy as np
import pytest

from otlp.solvers.node_rules import (
    KSEQ_RULE,
    REJECTION,
    SPECHUB_RULE,
    buckets_work,
    draw_scaled,
    node_token,
    path_token,
    row_total,
)
from otlp.verification import chain, node_steps, outcome_law, verify_chain

GRID = (np.arange(400) + 0.5) / 400


def _sparse_law(rng: np.random.Generator, vocab: int) -> np.ndarray:
    """A law over ``vocab`` tokens, a third of them at 0, its mass spread over every chunk."""
    law = rng.dirichlet(np.full(vocab, 0.5))
    law[rng.integers(vocab, size=vocab // 3)] = 0.0
    return law / law.sum()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chunked_inverse_cdf_draw_equals_the_plain_draw_on_large_vocabularies(dtype):
    """draw_scaled (whole chunks of 256 summed, one scanned) returns, for every uniform of a
    grid, the token of the plain inverse-CDF draw (otlp.verification.node_steps.draw) on rows of
    600 to 3,000 tokens: the chunks before the draw are skipped by their running sum."""
    rng = np.random.default_rng(31)
    for vocab in (600, 1500, 3000):
        row = _sparse_law(rng, vocab).astype(dtype)
        total = row_total(row)[0]
        want = [node_steps.draw(row.astype(np.float64), float(u)) for u in GRID]
        got = [draw_scaled(row, total, float(u)) for u in GRID]
        assert got == want
        assert len({token // 256 for token in got}) >= 3  # chunks skipped before the draw


def _sequential_token(candidates, accept, final, u):
    """Candidate j wins when u_j < accept_j (the first such), else a draw from ``final``."""
    for j, x in enumerate(candidates):
        if u[j] < accept[j]:
            return int(x)
    return node_steps.draw(final, float(u[len(candidates)]))


def test_kseq_and_spechub_final_residual_draws_on_a_large_vocabulary():
    """K-SEQ's and SpecHub's final residual draws (residual terms summed chunk by chunk, not
    stored; SpecHub's hub entry a special value) give, for every uniform of a grid after
    all candidates are rejected, the token of the procedure on the full float64 vectors
    (kseq_parameters; hub_verification), with 600 to 1,500 tokens and the hub in the first
    chunk."""
    from otlp.rules.kseq import kseq_parameters
    from otlp.rules.spechub import hub_candidates, hub_verification

    rng = np.random.default_rng(7)
    reached = 0
    for trial in range(12):
        vocab = int(rng.choice([600, 1500]))
        p = _sparse_law(rng, vocab)
        q = rng.dirichlet(np.full(vocab, 0.5))
        hub = int(rng.integers(0, 200))
        q[hub] = 0.2 + 0.3 * rng.random()  # the hub argmax q, in the first chunk
        p[hub] = rng.random() * 0.6
        p, q = p / p.sum(), q / q.sum()
        p_total, q_total = row_total(p)[0], row_total(q)[0]
        n = 2
        omega = rng.choice(np.flatnonzero(q > 0), size=n).astype(np.int64)
        par = kseq_parameters(p, q, n)
        other = int(rng.choice(np.setdiff1d(np.flatnonzero(q > 0), [hub])))
        pair = np.array([other, hub] if trial % 2 else [hub, other])
        candidates, accept, final = hub_candidates(hub_verification(p, q, hub), pair[None])
        for u_last in GRID:
            u = np.array([1 - 1e-12, 1 - 1e-12, u_last])
            want = _sequential_token(omega, par.accept[omega], par.residual, u)
            got = node_token(KSEQ_RULE, p, q, p_total, q_total, omega, False, u, *_scratch(vocab))
            assert got == want
            want = _sequential_token(candidates[0], accept[0], final, u)
            got = node_token(SPECHUB_RULE, p, q, p_total, q_total, pair, False, u, *_scratch(vocab))
            assert got == want
            reached += want not in pair
    assert reached > 1000  # the final residual draws, not the candidates, were compared


def _scratch(vocab):
    return np.empty((2, vocab)), np.zeros(vocab, dtype=bool)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("without_replacement", [False, True])
def test_a_draft_the_target_never_emits_is_rejected_at_u_0(dtype, without_replacement):
    """Acceptance is u q(x) < p(x), strict: a drafted token of target probability 0 is
    rejected even with the uniform 0 (a < that became <= would emit it), by speculative
    sampling, recursive rejection sampling (with or without replacement) and K-SEQ."""
    p = np.array([0.5, 0.0, 0.3, 0.2], dtype=dtype)
    q = np.array([0.1, 0.6, 0.1, 0.2], dtype=dtype)
    p_total, q_total = row_total(p)[0], row_total(q)[0]
    for omega in ([1], [1, 3]):
        drafts = np.array(omega, dtype=np.int64)
        u = np.zeros(len(omega) + 1)
        token = node_token(
            REJECTION, p, q, p_total, q_total, drafts, without_replacement, u, *_scratch(4)
        )
        assert token != 1
        assert p[token] > 0
    if not without_replacement:
        u = np.zeros(3)
        token = node_token(
            KSEQ_RULE, p, q, p_total, q_total, np.array([1, 1]), False, u, *_scratch(4)
        )
        assert token != 1 and p[token] > 0


def _spechub_walk(tokens, parents, p, q, *, rows, seed):
    """``rows`` copies of one SpecHub-drafted tree through the compiled walk (C-contiguous
    rows): the result and the set of outcomes seen, which lie among the exact law's."""
    from otlp.decoding import outcome_law, verify_tree

    law = outcome_law(tokens, parents, p, q, method="spechub", scheme="spechub")
    result = verify_tree(
        np.tile(tokens, (rows, 1)),
        parents,
        np.tile(p, (rows, 1, 1)),  # C-contiguous: the compiled walk
        np.tile(q, (rows, 1, 1)),
        method="spechub",
        scheme="spechub",
        rng=seed,
    )
    seen = {tuple(int(t) for t in result.tokens_out(b)) for b in range(rows)}
    assert seen <= set(law)
    return result, seen


def test_spechub_hub_is_the_first_argmax_at_ties():
    """SpecHub's hub is argmax q with ties going to the lowest token id (as in
    otlp.rules.spechub and the drafting docs): with q(1) = q(3) the maximum, a pair holding
    token 1 is verified, by the compiled walk, with the outcomes of its exact law, and a
    pair holding only token 3 is refused as lacking the hub."""
    from otlp.decoding import path_tree, verify_tree

    parents = path_tree(2, 1)
    p = np.array([[0.3, 0.1, 0.2, 0.4]] * 3)
    q = np.array([[0.1, 0.35, 0.2, 0.35]] * 3)
    for pair in ([2, 1], [1, 2], [1, 3]):
        _, seen = _spechub_walk(np.array(pair, dtype=np.int64), parents, p, q, rows=200, seed=5)
        assert len(seen) > 1
    with pytest.raises(ValueError, match=r"the SpecHub pair \[2, 3\] at context 0 lacks the hub"):
        verify_tree(np.array([[2, 3]]), parents, p[None], q[None], method="spechub", rng=0)


@pytest.mark.parametrize("ranking", ["ratio", "inverse-ratio"])
def test_gbv_stop_law_is_exact_at_its_boundaries_on_large_vocabularies(ranking):
    """GBV's stop law on its selected path (path_token, K paths: the skewed draft's excess
    r_i summed by key buckets, a bucket in closed form only where every term is positive)
    is exact to 1e-9, not only to a grid's resolution: a uniform 1e-9 below the stop law's
    CDF at level i gives tau = i, 1e-9 above it gives tau = i + 1 (single_path.block on
    skewed_conditionals' full vectors). With 3,000 tokens a few of them share a key bucket
    with the sign change of w p - q~; summing that bucket in closed form (its negative
    terms included) moves the CDF by more than 1e-9, less than a grid's resolution."""
    from otlp.multistep import single_path
    from otlp.multistep.gbv import local_key, skewed_conditionals

    rng = np.random.default_rng(41)
    checked = 0
    for _ in range(8):
        vocab, steps, paths = 3000, int(rng.integers(2, 4)), int(rng.integers(2, 5))
        p = rng.dirichlet(np.full(vocab, 0.5), size=steps + 1)
        q = rng.dirichlet(np.full(vocab, 0.5), size=steps)
        path = np.array([rng.choice(vocab, p=q[i]) for i in range(steps)])
        keys = local_key(p[:steps], q, ranking)
        skewed, _ = skewed_conditionals(p[None], q[None], path[None], paths, ranking, keys[None])
        stop = single_path.block(p[None], skewed, path[None]).stop[0]
        rows = np.arange(steps)
        work = buckets_work(vocab)
        inverse = ranking == "inverse-ratio"
        totals = (p.sum(axis=1), q.sum(axis=1))
        cdf = np.cumsum(stop)
        for i in range(steps):
            if min(stop[i], stop[i + 1]) < 1e-6:
                continue
            for u, want in ((cdf[i] - 1e-9, i), (cdf[i] + 1e-9, i + 1)):
                tau, _ = path_token(
                    p, q, rows, rows, *totals, path, paths, inverse, work, float(u), 0.5
                )
                assert tau == want
            checked += 1
    assert checked >= 8


def test_spechub_walk_follows_the_first_of_two_equal_children():
    """Under SpecHub drafting a one-hot draft (a greedy draft model) drafts the pair (a, a):
    both root children carry token a. Only i.i.d. drafts share a context, so the walk moves
    to the first child alone and verifies its pair next (otlp.verification.tree: "else the
    first of them"); its outcomes are those of outcome_law, node 1 is never on the path. A
    walk that followed both children would see four candidates at the next level."""
    from otlp.decoding import k_ary_tree

    parents = k_ary_tree((2, 2))  # root children 0, 1; node 0's children 2, 3; node 1's 4, 5
    vocab = 3
    p = np.full((7, vocab), 1 / 3)
    q = np.tile([0.45, 0.5, 0.05], (7, 1))
    p[0] = [0.2, 0.3, 0.5]
    q[0] = [0.0, 0.0, 1.0]  # one-hot: the hub pair is (2, 2)
    tokens = np.array([2, 2, 0, 1, 1, 2], dtype=np.int64)
    result, seen = _spechub_walk(tokens, parents, p, q, rows=300, seed=9)
    assert set(result.path_nodes[:, 0].tolist()) == {-1, 0}
    assert {len(key) for key in seen} == {1, 2, 3}


@pytest.mark.parametrize("total", [0.9, 0.99, 1.01, 1.1])
@pytest.mark.parametrize("name", ["p", "q"])
def test_compiled_walks_refuse_rows_summing_below_or_above_one(name, total):
    """The compiled walks (C-contiguous float32 rows: node_walk for the node rules,
    block_walk for block verification) check each row's sum once, both ways: a row off by
    0.01 or 0.1 above or below 1 is refused naming it, never silently renormalised
    (tests/test_tensors.py checks the same on broadcast rows, which take the row-by-row
    path and not these kernels)."""
    from otlp.decoding import path_tree, verify_chain, verify_tree

    rng = np.random.default_rng(3)
    laws = {
        "p": rng.dirichlet(np.ones(5), size=(2, 3)).astype(np.float32),
        "q": rng.dirichlet(np.ones(5), size=(2, 3)).astype(np.float32),
    }
    laws[name][1, 0] *= np.float32(total)
    assert laws[name].flags.c_contiguous
    tokens = np.array([[0, 1], [2, 3]])
    match = rf"^{name}\[1, 0\]: does not sum to 1 within atol"
    for method in ("sps", "rrs", "kseq", "spechub"):
        drafts = tokens.copy()
        if method == "spechub":  # the pair must hold the hub argmax q
            drafts[:, 1] = np.argmax(laws["q"][:, 0], axis=1)
            drafts[:, 0] = (drafts[:, 1] + 1) % 5
        with pytest.raises(ValueError, match=match):
            verify_tree(drafts, path_tree(2, 1), laws["p"], laws["q"], method=method, rng=0)
    with pytest.raises(ValueError, match=match):
        verify_chain(tokens, laws["p"], laws["q"], method="block", rng=0)


@pytest.mark.parametrize("method", ["block", "hsd", "gbv"])
def test_a_zero_weight_stays_zero_after_an_overflowing_ratio(method):
    """Block verification's weight chain w_{i+1} = min(w_i p/q, 1): a drafted token of target
    probability 0 (w = 0) followed by a subnormal draft probability (p/q overflows to inf)
    gave 0 * inf = NaN, and the compiled walk then accepted the whole chain, token of target
    probability 0 included (lossy); the exact law was NaN."""
    p = np.array([[0.0, 1.0], [0.5, 0.5], [0.5, 0.5]])
    q = np.array([[0.5, 0.5], [1.0, 6e-310], [0.5, 0.5]])
    tokens = np.array([0, 1])
    rows = 64
    result = verify_chain(
        np.tile(tokens, (rows, 1)),
        np.tile(p, (rows, 1, 1)),
        np.tile(q, (rows, 1, 1)),
        method=method,
        rng=list(range(rows)),
    )
    assert (np.asarray(result.output_ids)[:, :2] == [1, -1]).all()
    assert outcome_law(tokens, chain(2), p, q, method=method) == {(1,): 1.0}
