"""The fused decoder row of partial resolution against the object API's exact slices.

``verify_drafts(method="partial_resolution")`` runs one compiled pass per row
(:mod:`otlp.solvers.partial_resolution_row`): top k, H*, the accepted masses, gap filling only
as far as the drafted tokens and the clock race. Two checks of its emitted law:

* exact: the set conditional of the row's own (partially filled) partition (Lemma 5 on the
  pieces the row built) equals ``plan.local_slice`` of ``otlp.solve(inst,
  "partial_resolution")`` for every drafted set of small instances, with and without top-k,
  and for sampled sets at V = 32,000, (k, n) = (100, 2);
* sampled: tokens decoded by the fused race for one drafted pair (n = 2: the tuple law is the
  set law) pass a chi-square test against ``plan.slice``, from float32 numpy rows and from
  torch bfloat16 rows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

import otlp
from otlp.instances.generators import zipf_llm_pair
from otlp.solvers.global_resolution.sorting import top_tokens
from otlp.solvers.global_resolution.token import local_drafts, restrict, scan
from otlp.solvers.partial_resolution import accepted_mass, cover_coefficient
from otlp.solvers.partial_resolution_row import batch, drafted_partition


def fused_set_law(
    p: np.ndarray, q: np.ndarray, omega: np.ndarray, top_k: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The fused row's exact law given the drafted set of ``omega`` (global ids), over the
    draft vocabulary plus the outside row, and its accepted shares a(S, .) / Q(S) of the
    set's members (sorted local ids): the row's own steps (checks, top k, restriction,
    :func:`drafted_partition` filled only for ``omega``), then Lemma 5 on those pieces."""
    n = omega.shape[0]
    status, p_sum, q_sum = scan(p, q, 1e-6)
    assert status == 0
    tokens = top_tokens(q, top_k or 0)
    local = local_drafts(tokens, omega)
    p_local, q_local, p_outside = restrict(p, q, tokens, p_sum, q_sum)
    accepted, starts, ends, first, last, cut = drafted_partition(p_local, q_local, n, local[None])
    members = np.unique(local)
    lengths = np.array(
        [(ends[first[x] : last[x]] - starts[first[x] : last[x]]).sum() for x in members]
    )
    scale = lengths.sum() * math.e / n
    raw = accepted_mass(members, starts, ends, first, last, n, cut, scale)
    raw[accepted[members] == 0] = 0.0
    shares = raw / cover_coefficient(lengths / scale, n)
    residual = np.append(np.maximum(p_local - accepted, 0.0), p_outside)
    residual = residual / residual.sum() if residual.sum() > 0 else np.append(p_local, p_outside)
    law = residual * max(1.0 - shares.sum(), 0.0)
    law[members] += shares
    return law, shares


def _instances(seed: int):
    rng = np.random.default_rng(seed)
    for index in range(24):
        vocab = int(rng.integers(2, 11))
        n = int(rng.integers(1, 5))
        p = rng.dirichlet(np.full(vocab, rng.choice([0.2, 1.0])))
        q = p.copy() if index % 7 == 0 else rng.dirichlet(np.full(vocab, rng.choice([0.2, 1.0])))
        top_k = int(rng.integers(1, vocab + 1)) if index % 3 == 0 else None
        yield p, q, n, top_k


def test_the_fused_rows_set_law_is_the_object_apis_slice_on_every_drafted_set() -> None:
    """Every drafted set of 24 small instances (V <= 10, n <= 4, with and without top-k).

    Where the rejection mass 1 - alpha* is at least 1e-9, the fused row's partition, filled
    only as far as the set needs, gives the object API's accepted shares and conditional to
    1e-12 in L1 per set. Below that, H* itself is a tie at rounding: the row's restricted q
    differs from the Instance's by 1e-16, which here turns psi(H*) = 6.7e-16 (H* = every
    token, cut 1.6e-4 from 1) into psi = 0 (H* empty, cut at 1): two different optimal
    plans. Always, summed over the sets with their masses, the fused row's law is the target
    within 1e-12 and its acceptance alpha* within 1e-12: it is an exact plan of its own."""
    checked = 0
    for p, q, n, top_k in _instances(7):
        inst = otlp.Instance(p, q, n, top_k=top_k)
        plan = otlp.solve(inst, method="partial_resolution", check=False)
        rejection = 1.0 - plan.partition.alpha_star
        cols = inst.columns("sets")
        total = np.zeros(inst.k + 1)
        acceptance = 0.0
        for c in range(cols.count):
            members = cols.members[c][cols.members[c] >= 0]
            omega = inst.tokens[np.resize(members, n)]
            fused, fused_shares = fused_set_law(p, q, omega, top_k)
            if rejection >= 1e-9:
                shares, _ = plan.partition.set_accepted(np.sort(members))
                assert np.abs(fused_shares - shares).sum() <= 1e-12, (p, q, n, top_k, omega)
                expected = plan.local_slice(omega)
                assert np.abs(fused - expected).sum() <= 1e-12, (p, q, n, top_k, omega)
            total += cols.mass[c] * fused
            acceptance += cols.mass[c] * fused[members].sum()
            checked += 1
        assert np.abs(total - inst.target_rows).sum() <= 1e-12, (p, q, n, top_k)
        assert abs(acceptance - plan.partition.alpha_star) <= 1e-12, (p, q, n, top_k)
    assert checked > 100


def _zipf_rows(vocab: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.permutation(np.arange(1, vocab + 1) ** -1.1)
    q = p * np.exp(rng.normal(0.0, 1.0, vocab))
    return p / p.sum(), q / q.sum()


def test_the_fused_row_is_exact_at_full_vocabulary_scale() -> None:
    """V = 32,000, (k, n) = (100, 2): 300 sampled drafted sets, the fused row's set law is the
    object API's slice within 1e-12 in L1."""
    p, q = _zipf_rows(32_000, 4)
    inst = otlp.Instance(p, q, 2, top_k=100)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    for omega in inst.sample_drafts(5, 300):
        fused, _ = fused_set_law(p, q, omega, 100)
        assert np.abs(fused - plan.local_slice(omega)).sum() <= 1e-12, omega


def test_runs_of_undrafted_tokens_leave_the_partition_token_by_token_filling_builds() -> None:
    """The whole vocabulary as one segment of gap filling (Zipf, V = 32,000, similarity 0.9),
    n = 8: the fused row fills runs of undrafted tokens as one stretch each (Lemma 3 on their
    union), so its partition gives pieces to a few hundred of the 32,000 tokens; the set law
    of each of 20 sampled drafted tuples is the object API's slice (token by token) within
    1e-9 in L1, the float64 rounding of a partition this long (the stopping rule of the
    stretch's solve alone moves it by 1e-10)."""
    p, q = zipf_llm_pair(32_000, similarity=0.9, seed=0)
    inst = otlp.Instance(p, q, 8)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    assert plan.partition.ends.shape[0] > inst.k  # token by token: every token has pieces
    for omega in inst.sample_drafts(2, 20):
        local = local_drafts(inst.tokens, omega)
        _, _, _, first, last, _ = drafted_partition(inst.p_local, inst.q_local, 8, local[None])
        assert (last > first).sum() < inst.k / 10
        fused, _ = fused_set_law(p, q, omega, None)
        assert np.abs(fused - plan.local_slice(omega)).sum() <= 1e-9, omega


def _pair_with_a_spread_law(plan: otlp.TransportPlan, inst: otlp.Instance) -> np.ndarray:
    """A drafted pair of distinct tokens whose slice puts >= 5% on at least three tokens."""
    for omega in inst.sample_drafts(3, 400):
        if omega[0] != omega[1] and (plan.slice(omega) > 0.05).sum() >= 3:
            return omega
    raise AssertionError("no drafted pair with a spread law")


@pytest.mark.parametrize("top_k", [100, None])
def test_the_fused_race_emits_the_slice_chi_square(top_k: int | None) -> None:
    """20,000 rows drafting one pair (n = 2, so the tuple law is the set's) from float32
    rows at V = 32,000 (top 100 and the whole vocabulary): the decoded tokens pass a
    chi-square test against ``plan.slice``; none falls outside its support."""
    p, q = _zipf_rows(32_000, 6)
    p32, q32 = p.astype(np.float32), q.astype(np.float32)
    inst = otlp.Instance(p32, q32, 2, top_k=top_k, renormalize=True)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    omega = _pair_with_a_spread_law(plan, inst)
    rows = 20_000
    out = otlp.verify_drafts(
        p32[None],
        q32[None],
        np.tile(omega, (rows, 1)),
        method="partial_resolution",
        top_k=top_k,
        rng=11,
    )
    expected = plan.slice(omega)
    counts = np.bincount(out.tokens, minlength=p.shape[0])
    support = expected > 1e-12
    assert counts[~support].sum() == 0
    heavy = expected >= 20.0 / rows  # frequent tokens tested one by one, the rest pooled
    observed = np.append(counts[heavy], counts[support & ~heavy].sum())
    f_exp = np.append(expected[heavy], expected[support & ~heavy].sum()) * rows
    assert chisquare(observed, f_exp * observed.sum() / f_exp.sum()).pvalue > 1e-4


def test_the_fused_race_from_torch_bfloat16_rows() -> None:
    """torch bfloat16 rows (V = 2,000, n = 2): the decoded pair law passes chi-square against
    the slice of the instance built from the same rounded rows."""
    torch = pytest.importorskip("torch")
    p, q = _zipf_rows(2_000, 9)
    pt, qt = torch.tensor(p).to(torch.bfloat16), torch.tensor(q).to(torch.bfloat16)
    p16, q16 = pt.double().numpy(), qt.double().numpy()
    inst = otlp.Instance(p16, q16, 2, renormalize=True)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    omega = _pair_with_a_spread_law(plan, inst)
    rows = 20_000
    out = otlp.verify_drafts(
        pt[None], qt[None], np.tile(omega, (rows, 1)), method="partial_resolution", rng=3
    )
    expected = plan.slice(omega)
    counts = np.bincount(out.tokens, minlength=p.shape[0])
    support = expected > 1e-12
    assert counts[~support].sum() == 0
    heavy = expected >= 20.0 / rows
    observed = np.append(counts[heavy], counts[support & ~heavy].sum())
    f_exp = np.append(expected[heavy], expected[support & ~heavy].sum()) * rows
    assert chisquare(observed, f_exp * observed.sum() / f_exp.sum()).pvalue > 1e-4


def test_a_shared_pair_equal_rows_and_single_rows_decode_the_same_tokens() -> None:
    """A batch sharing one (p, q) pair, and a (B, V) batch of equal rows (tiled, as a
    decoder's batch of one prompt is), build one partition for the union of their drafts;
    one row at a time builds one per row, filled only as far as that row's drafts: with the
    same uniforms the tokens are identical (a token's set does not depend on how far gap
    filling went). A row that differs splits the run of equal rows."""
    rng = np.random.default_rng(2)
    p, q = rng.dirichlet(np.full(60, 0.3)), rng.dirichlet(np.full(60, 0.3))
    drafts = otlp.Instance(p, q, 3, top_k=20).sample_drafts(1, 64)
    uniforms = rng.random((64, 5))
    shared, _ = batch(p[None], q[None], drafts, 20, 1e-6, uniforms)
    tiled, _ = batch(np.tile(p, (64, 1)), np.tile(q, (64, 1)), drafts, 20, 1e-6, uniforms)
    single = [
        batch(p[None], q[None], drafts[b : b + 1], 20, 1e-6, uniforms[b : b + 1])[0][0]
        for b in range(64)
    ]
    assert np.array_equal(shared, tiled)
    assert np.array_equal(shared, single)
    other = np.tile(p, (64, 1))
    other[7] = rng.dirichlet(np.full(60, 0.3))
    split, table = batch(other, np.tile(q, (64, 1)), drafts, 20, 1e-6, uniforms)
    assert (table[:, 0] == 0).all()
    keep = np.arange(64) != 7
    assert np.array_equal(split[keep], shared[keep])


def test_a_draft_outside_the_top_k_is_refused_by_row() -> None:
    p = np.array([0.1, 0.2, 0.3, 0.4])
    q = np.array([0.4, 0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match=r"drafts\[1, 0\]"):
        otlp.verify_drafts(p, q, [[0, 1], [3, 0]], method="partial_resolution", top_k=2)
    with pytest.raises(ValueError, match=r"p\[0\]"):
        otlp.verify_drafts(p * 2, q, [[0, 1]], method="partial_resolution")
