"""The compiled node kernels (otlp.solvers.node_rules) against the float64 procedures they replace.

verify_tree runs sps, rrs, rrs without replacement and SpecHub's one-child nodes on the
caller's rows as given (float32 or float64, never copied); the same uniforms must give the
same token as the float64 procedure on the renormalised rows
(otlp.verification.node_steps._rejection_token, whose law tests/test_verification_tree.py pins by
enumeration), and a bad row must be refused with check_distributions' message.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from otlp.solvers.node_rules import (
    KSEQ_RULE,
    SPECHUB_RULE,
    buckets_work,
    draw_scaled,
    node_token,
    path_token,
    rejection_token,
    row_total,
)
from otlp.verification import node_steps
from otlp.verification.laws import ContextLaws


def _pair(rng: np.random.Generator, vocab: int, sparse: bool) -> tuple[np.ndarray, np.ndarray]:
    p = rng.dirichlet(np.full(vocab, 0.3))
    q = rng.dirichlet(np.full(vocab, 0.3))
    if sparse:  # tokens of zero target or draft mass, and a nearly one-hot draft
        p[rng.integers(vocab, size=vocab // 3)] = 0.0
        q[rng.integers(vocab, size=vocab // 3)] = 0.0
        q[int(np.argmax(q))] += 50.0
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_rejection_kernel_equals_the_float64_procedure(dtype, scheme):
    rng = np.random.default_rng(5)
    mismatches = 0
    trials = 0
    for trial in range(300):
        vocab = int(rng.integers(2, 12))
        p, q = _pair(rng, vocab, sparse=trial % 2 == 1)
        p_in, q_in = p.astype(dtype), q.astype(dtype)
        support = np.flatnonzero(q_in > 0)
        n = int(rng.integers(1, min(4, support.shape[0]) + 1))
        replace = scheme == "iid"
        omega = rng.choice(support, size=n, replace=replace).astype(np.int64)
        u = rng.random(n + 1)
        work = np.empty((2, vocab))
        removed = np.zeros(vocab, dtype=bool)
        p_total, _ = row_total(p_in)
        q_total, _ = row_total(q_in)
        got = rejection_token(
            p_in, q_in, p_total, q_total, omega, scheme != "iid", u, work, removed
        )
        p64 = p_in.astype(np.float64)
        q64 = q_in.astype(np.float64)
        want = node_steps._rejection_token(p64 / p64.sum(), q64 / q64.sum(), omega, scheme, u)
        assert not removed.any()
        trials += 1
        mismatches += got != want
    assert mismatches == 0, f"{mismatches} of {trials} tokens differ"


def test_draw_scaled_is_the_inverse_cdf_draw():
    rng = np.random.default_rng(1)
    for _ in range(200):
        law = rng.random(7) * (rng.random(7) < 0.6)
        if not law.any():
            continue
        u = float(rng.random())
        assert draw_scaled(law.astype(np.float32), float(law.astype(np.float32).sum()), u) == (
            node_steps.draw(law.astype(np.float32).astype(np.float64), u)
        )
    assert draw_scaled(np.array([0.0, 0.5, 0.5, 0.0]), 1.0, 1.0 - 1e-17) == 2  # never a zero


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.nan, r"p\[1, 2\]: has a negative, NaN or infinite entry"),
        (-0.25, r"p\[1, 2\]: has a negative, NaN or infinite entry"),
        (np.inf, r"p\[1, 2\]: has a negative, NaN or infinite entry"),
        (0.75, r"p\[1, 2\]: does not sum to 1 within atol 0.0001"),
    ],
)
def test_a_bad_row_is_refused_naming_it(bad, match):
    values = np.full((2, 3, 4), 0.25, dtype=np.float32)
    values[1, 2, 3] = bad
    laws = ContextLaws("p", values, (2, 3), None)
    assert laws.total(0, 0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=match):
        laws.total(1, 2)


def test_rows_are_read_as_given_not_copied():
    values = np.full((1, 2, 8), 1 / 8, dtype=np.float32)
    laws = ContextLaws("q", values, (1, 2), None)
    assert np.shares_memory(laws.native(0, 1), values)
    assert laws.row(0, 1).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_block_kernel_equals_the_stop_law_draws(dtype):
    """path_token's (tau, correction) for one chain equals drawing tau from
    single_path.block's stop law and the correction from its law with the same two uniforms
    (tau drawn from the top, each excess computed only at levels >= tau)."""
    from otlp.multistep import single_path

    rng = np.random.default_rng(9)
    mismatches = 0
    for trial in range(300):
        vocab, steps = int(rng.integers(2, 9)), int(rng.integers(1, 5))
        pairs = [_pair(rng, vocab, sparse=trial % 2 == 1) for _ in range(steps + 1)]
        p = np.stack([a for a, _ in pairs]).astype(dtype)
        q = np.stack([b for _, b in pairs]).astype(dtype)
        path = np.array([rng.choice(np.flatnonzero(q[i] > 0)) for i in range(steps)])
        u = rng.random(2)
        rows = np.arange(steps)
        p_tot = p.astype(np.float64).sum(axis=1)
        q_tot = q.astype(np.float64).sum(axis=1)
        work = buckets_work(0)
        tau, token = path_token(p, q, rows, rows, p_tot, q_tot, path, 1, False, work, u[0], u[1])
        target = p.astype(np.float64) / p_tot[:, None]
        draft = q.astype(np.float64)[:steps] / q_tot[:steps, None]
        stops = single_path.block(target[None], draft[None], path[None])
        want_tau = node_steps.draw(stops.stop[0], u[0])
        if want_tau == steps:
            mismatches += tau != steps or token != -1
        else:
            mismatches += (tau, token) != (
                want_tau,
                node_steps.draw(stops.correction[0, tau], u[1]),
            )
    assert mismatches == 0


def test_block_reads_the_bonus_row_only_when_the_chain_is_accepted():
    """A chain rejected at its first token never reads the rows after it: NaN there (an
    engine's unused, never-computed row) is not an error."""
    from otlp.decoding import verify_chain

    p = np.full((1, 3, 4), np.nan, dtype=np.float32)
    q = np.full((1, 3, 4), np.nan, dtype=np.float32)
    p[0, 0] = [1.0, 0.0, 0.0, 0.0]  # the target never emits the drafted token 1
    q[0, 0] = [0.0, 1.0, 0.0, 0.0]
    p[0, 1] = q[0, 1] = 0.25  # read for the excess of prefix 1; prefix 2's bonus row unread
    result = verify_chain(np.array([[1, 2]]), p, q, method="block", rng=[0])
    assert result.num_accepted.tolist() == [0]
    assert result.bonus_token.tolist() == [0]


def _tree_case(rng: np.random.Generator, scheme: str, vocab: int = 5):
    from otlp.decoding import k_ary_tree, sample_children
    from otlp.verification import shapes

    parents = k_ary_tree([3, 2])
    rows = 6
    p = rng.dirichlet(np.full(vocab, 0.5), size=(rows, parents.shape[0] + 1))
    q = rng.dirichlet(np.full(vocab, 0.5), size=(rows, parents.shape[0] + 1))
    tokens = np.full((rows, parents.shape[0]), -1, dtype=np.int64)
    for context, kids in enumerate(shapes.children(parents)):
        if kids.shape[0]:
            tokens[:, kids] = sample_children(q[:, context], kids.shape[0], scheme, rng)
    tokens[0, 3:] = -1  # absent nodes (a suffix: their descendants are absent too)
    tokens[1, :] = -1  # a row without drafts
    return parents, tokens, p, q


@pytest.mark.parametrize(
    ("method", "scheme"),
    [("sps", "iid"), ("rrs", "iid"), ("rrs_without_replacement", "without_replacement")],
)
def test_compiled_walk_equals_the_row_by_row_walk(method, scheme):
    """The whole-batch compiled walk (C-contiguous float rows) and the row-by-row walk (the
    same values, strided, so not walkable) give the same outcome from the same seeds."""
    from otlp.decoding import verify_tree

    rng = np.random.default_rng(3)
    for seed in range(20):
        parents, tokens, p, q = _tree_case(rng, scheme)
        p32 = p.astype(np.float32)
        strided = np.repeat(p32, 2, axis=2)[:, :, ::2]
        assert not strided.flags.c_contiguous
        fast = verify_tree(tokens, parents, p32, q, method=method, rng=seed)
        slow = verify_tree(tokens, parents, strided, q, method=method, rng=seed)
        assert np.array_equal(fast.path_nodes, slow.path_nodes)
        assert np.array_equal(fast.bonus_token, slow.bonus_token)


@pytest.mark.parametrize("strided", [False, True])
def test_compiled_walk_refuses_bad_rows_as_the_row_walk(strided):
    from otlp.decoding import verify_tree

    parents, tokens, p, q = _tree_case(np.random.default_rng(4), "iid")
    p = p.copy()
    p[2, 0, 1] = -0.5
    if strided:
        p = np.repeat(p, 2, axis=2)[:, :, ::2]
    with pytest.raises(ValueError, match=r"^p\[2, 0\]: has a negative, NaN or infinite entry$"):
        verify_tree(tokens, parents, p, q, method="rrs", rng=0)
    q = q.copy()
    q[3, 0] *= 1.5
    with pytest.raises(ValueError, match=r"^q\[3, 0\]: does not sum to 1 within atol 1e-06"):
        verify_tree(tokens, parents, p[:, :, :] * 0 + 0.2, q, method="sps", rng=0)
    zero = np.where(tokens >= 0, tokens % 4, -1)
    q2 = np.full_like(q, 0.25)
    q2[:, :, 4] = 0.0
    zero[4, 0] = 4
    with pytest.raises(ValueError, match=r"^tokens\[4\]: token 4 was drafted at context 0"):
        verify_tree(zero, parents, np.full_like(q, 0.2), q2, method="rrs", rng=0)


def _sequential_token(candidates, accept, final, u):
    """Candidate j wins when u_j < accept_j (the first such), else a draw from ``final``
    (the procedure of otlp.rules.sequential.sequential_verify, one row)."""
    for j, x in enumerate(candidates):
        if u[j] < accept[j]:
            return int(x)
    return node_steps.draw(final, float(u[len(candidates)]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kseq_node_token_equals_the_parameters_procedure(dtype):
    """K-SEQ at a node reads acceptances at the drafts and the residual only after n
    rejections (otlp.solvers.node_rules.kseq_token), on the rows as given; the same uniforms give
    the token of the procedure on kseq_parameters' full vectors of the renormalised rows."""
    from otlp.rules.kseq import kseq_parameters

    rng = np.random.default_rng(12)
    mismatches = 0
    for trial in range(300):
        vocab = int(rng.integers(2, 10))
        p, q = _pair(rng, vocab, sparse=trial % 2 == 1)
        p_in, q_in = p.astype(dtype), q.astype(dtype)
        n = int(rng.integers(1, 5))
        omega = rng.choice(np.flatnonzero(q_in > 0), size=n).astype(np.int64)
        u = rng.random(n + 2)
        p_total, q_total = row_total(p_in)[0], row_total(q_in)[0]
        p64, q64 = p_in.astype(np.float64) / p_total, q_in.astype(np.float64) / q_total
        par = kseq_parameters(p64, q64, n)
        want = _sequential_token(omega, par.accept[omega], par.residual, u)
        got = node_token(KSEQ_RULE, p_in, q_in, p_total, q_total, omega, False, u, *_scratch(vocab))
        mismatches += got != want
    assert mismatches == 0


def _scratch(vocab):
    return np.empty((2, vocab)), np.zeros(vocab, dtype=bool)


def test_kseq_rho_is_the_smallest_valid_rho():
    """rho* from the closed form between breakpoints (a few passes) is valid and the
    smallest valid rho to rounding: 1e-9 below it is invalid (unless rho* = 1)."""
    from otlp.rules.kseq import any_accepted, kseq_beta, kseq_rho

    def valid(p, q, rho, n):
        beta, miss = kseq_beta(p, q, rho)
        return any_accepted(beta, miss, n) <= rho * beta * (1 + 1e-15)

    rng = np.random.default_rng(2)
    above_one = 0
    for trial in range(400):
        vocab = int(rng.integers(2, 80))
        p, q = _pair(rng, vocab, sparse=trial % 2 == 1)
        n = int(rng.integers(2, 9))
        rho = kseq_rho(p, q, n)
        assert 1.0 <= rho <= n and valid(p, q, rho, n)
        if rho > 1.0:
            above_one += 1
            assert not valid(p, q, rho * (1 - 1e-9), n)
    assert above_one > 100


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_spechub_node_token_equals_the_hub_procedure(dtype):
    """SpecHub's pair at a node (otlp.solvers.node_rules.hub_token, rows as given) gives, from the
    same uniforms, the token of Algorithm 3's procedure on hub_verification's full vectors
    (otlp.rules.spechub), pairs (x, a) and (a, x), one-hot and near-one-hot drafts."""
    from otlp.rules.spechub import hub_candidates, hub_verification

    rng = np.random.default_rng(8)
    mismatches = 0
    for trial in range(400):
        vocab = int(rng.integers(2, 10))
        p, q = _pair(rng, vocab, sparse=trial % 2 == 1)
        if trial % 7 == 0:
            q = np.zeros(vocab)
            q[int(rng.integers(vocab))] = 1.0
        p_in, q_in = p.astype(dtype), q.astype(dtype)
        p_total, q_total = row_total(p_in)[0], row_total(q_in)[0]
        p64, q64 = p_in.astype(np.float64) / p_total, q_in.astype(np.float64) / q_total
        hub = int(np.argmax(q64))
        other = int(rng.choice(np.flatnonzero(q64 > 0)))
        omega = np.array([other, hub] if trial % 2 else [hub, other], dtype=np.int64)
        u = rng.random(3)
        ver = hub_verification(p64, q64, hub)
        candidates, accept, final = hub_candidates(ver, omega[None])
        want = _sequential_token(candidates[0], accept[0], final, u)
        got = node_token(
            SPECHUB_RULE, p_in, q_in, p_total, q_total, omega, False, u, *_scratch(vocab)
        )
        mismatches += got != want
    assert mismatches == 0


def _gbv_case(rng: np.random.Generator, vocab: int, steps: int, sparse: bool):
    pairs = [_pair(rng, vocab, sparse) for _ in range(steps + 1)]
    p = np.stack([a for a, _ in pairs])
    q = np.stack([b for _, b in pairs])[:steps]
    tied = rng.integers(vocab, size=max(2, vocab // 4))  # equal keys p / q: ties by token id
    p[:steps, tied] = 0.5 * q[:, tied]
    p /= p.sum(axis=1, keepdims=True)
    path = np.array([rng.choice(np.flatnonzero(q[i] > 0)) for i in range(steps)])
    return p, q, path


@pytest.mark.parametrize("ranking", ["ratio", "inverse-ratio"])
def test_gbv_kernel_follows_the_skewed_block_law(ranking):
    """GBV on the selected path (path_token with K paths, the skewed draft's excess summed by
    key buckets, only the mixed ones sorted) against single_path.block on
    skewed_conditionals' full vectors: over a grid of uniforms, tau is the stop law's
    inverse-CDF draw, and each correction token takes its exact share of the grid (the draw
    runs in ranking order, not by token id). Vocabularies up to 3000 put tokens in positive,
    zero and mixed buckets."""
    from otlp.multistep import single_path
    from otlp.multistep.gbv import local_key, skewed_conditionals

    rng = np.random.default_rng(21)
    grid = (np.arange(1000) + 0.5) / 1000
    for trial in range(24):
        vocab = int(rng.choice([4, 9, 300, 3000]))
        steps, paths = int(rng.integers(1, 4)), int(rng.integers(2, 5))
        p, q, path = _gbv_case(rng, vocab, steps, sparse=trial % 3 == 0)
        keys = local_key(p[:steps], q, ranking)
        skewed, _ = skewed_conditionals(p[None], q[None], path[None], paths, ranking, keys[None])
        stops = single_path.block(p[None], skewed, path[None])
        rows = np.arange(steps)
        run = partial(
            path_token,
            p,
            q,
            rows,
            rows,
            p.sum(axis=1),
            q.sum(axis=1),
            path,
            paths,
            ranking == "inverse-ratio",
            buckets_work(vocab),
        )

        for u in grid:
            assert run(float(u), 0.5)[0] == node_steps.draw(stops.stop[0], u)
        upper = np.cumsum(stops.stop[0])
        for tau in range(steps):
            if stops.stop[0, tau] < 1e-9:
                continue
            u_stop = upper[tau] - 0.5 * stops.stop[0, tau]
            tokens = [run(float(u_stop), float(u))[1] for u in grid]
            counts = np.bincount(tokens, minlength=vocab)
            law = stops.correction[0, tau]
            assert np.all(counts[law <= 0] == 0)
            assert np.abs(counts / grid.shape[0] - law).max() <= 2.0 / grid.shape[0]


def test_compiled_block_walk_equals_the_row_by_row_path():
    """block_walk (C-contiguous float rows, the whole batch) and the per-row block path (the
    same values strided) give the same outcome from the same seeds, rows without drafts and
    short chains included; a zero-probability draft is refused with the same message."""
    from otlp.decoding import verify_chain

    rng = np.random.default_rng(6)
    for seed in range(20):
        p = rng.dirichlet(np.full(6, 0.4), size=(5, 5)).astype(np.float32)
        q = rng.dirichlet(np.full(6, 0.4), size=(5, 4))
        tokens = np.array([[rng.choice(6, p=q[b, i]) for i in range(4)] for b in range(5)])
        tokens[1, 2:] = -1
        tokens[2, :] = -1
        strided = np.repeat(p, 2, axis=2)[:, :, ::2]
        fast = verify_chain(tokens, p, q, method="block", rng=seed)
        slow = verify_chain(tokens, strided, q, method="block", rng=seed)
        assert np.array_equal(fast.output_ids, slow.output_ids)
    q[3, 1] = [0, 1, 0, 0, 0, 0]
    tokens[3, :3] = [int(tokens[3, 0]), 2, 1]
    for rows in (p, np.repeat(p, 2, axis=2)[:, :, ::2]):
        with pytest.raises(ValueError, match=r"^tokens\[3, 1\]: token 2 has draft probability 0"):
            verify_chain(tokens, rows, q, method="block", rng=0)


@pytest.mark.parametrize("method", ["kseq", "spechub", "block", "gbv"])
def test_16_bit_rows_give_the_outcome_of_their_float32_widening(method):
    """Rows the compiled walks cannot read as given (float16 numpy, bfloat16 torch) are
    widened one at a time on the per-row path; the outcome equals the walk's on the float32
    widening of the same values, from the same seeds."""
    torch = pytest.importorskip("torch")
    from otlp.decoding import chain, path_tree, sample_children, verify_tree
    from otlp.verification import shapes

    rng = np.random.default_rng(11)
    parents = {"kseq": path_tree(3, 2), "spechub": path_tree(2, 2), "block": chain(3)}.get(
        method, path_tree(3, 2)
    )
    scheme = "spechub" if method == "spechub" else "iid"
    rows = 6
    p = rng.dirichlet(np.full(7, 0.5), size=(rows, parents.shape[0] + 1))
    q = rng.dirichlet(np.full(7, 0.5), size=(rows, parents.shape[0] + 1))
    p16, q16 = p.astype(np.float16), q.astype(np.float16)
    q32 = q16.astype(np.float32)
    tokens = np.full((rows, parents.shape[0]), -1, dtype=np.int64)
    for context, kids in enumerate(shapes.children(parents)):
        if kids.shape[0]:
            kind = scheme if kids.shape[0] > 1 else "iid"
            tokens[:, kids] = sample_children(q32[:, context], kids.shape[0], kind, rng)
    for seed in range(5):
        want = verify_tree(
            tokens, parents, p16.astype(np.float32), q32, method=method, rng=seed, atol=1e-2
        )
        for p_in, q_in in [
            (p16, q16),
            (torch.from_numpy(p16).to(torch.bfloat16), torch.from_numpy(q16).to(torch.bfloat16)),
        ]:
            if isinstance(p_in, torch.Tensor):
                want = verify_tree(
                    tokens,
                    parents,
                    p_in.float().numpy(),
                    q_in.float().numpy(),
                    method=method,
                    rng=seed,
                    atol=2e-2,
                )
            got = verify_tree(tokens, parents, p_in, q_in, method=method, rng=seed)
            assert np.array_equal(np.asarray(got.output_ids), want.output_ids)
