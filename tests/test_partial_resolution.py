"""Partial resolution (exact OT per token for n i.i.d. drafts): exact laws by enumeration.

Every check enumerates every drafted set of small instances and compares with otlp's exact
max-flow (``maxflow_cs``): acceptance = alpha* within 1e-10 and sum_S Q(S) pi(. | S) = p
within 1e-10 in L1, every conditional a distribution. The mutation test shows the check
fails when one conditional is perturbed by 1e-6.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

import otlp
from otlp.instances import zipf_llm_pair
from otlp.partial_resolution import ClockPartition, accepted_targets
from otlp.solvers.partial_resolution import (
    _fill_segment,
    _new_tree,
    clock_pieces,
    token_totals,
    weight_between,
)

Slice = Callable[[np.ndarray], np.ndarray]


def _law(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "zipf":
        w = rng.permutation(np.arange(1, size + 1) ** -rng.uniform(0.8, 2.0))
    elif kind == "ties":
        w = rng.integers(0, 3, size).astype(float)
        w[rng.integers(size)] += 1.0
    else:
        w = rng.dirichlet(np.full(size, rng.choice([0.1, 0.3, 1.0, 3.0])))
    return w / w.sum()


def random_instances(count: int, seed: int, max_vocab: int = 8, max_n: int = 4):
    rng = np.random.default_rng(seed)
    for index in range(count):
        vocab = int(rng.integers(2, max_vocab + 1))
        n = int(rng.integers(1, max_n + 1))
        kinds = ("zipf", "dirichlet", "ties")
        p = _law(kinds[index % 3], vocab, rng)
        q = p.copy() if index % 11 == 0 else _law(kinds[(index // 3) % 3], vocab, rng)
        top_k = int(rng.integers(1, vocab + 1)) if index % 4 == 0 else None
        yield otlp.Instance(p, q, n, top_k=top_k)


def law_errors(inst: otlp.Instance, local_slice: Slice) -> tuple[float, float, float]:
    """(L1 error of sum_S Q(S) pi(.|S) against p, |acceptance - alpha*| with alpha* from
    maxflow_cs, the worst defect of a conditional as a distribution), by enumeration."""
    cols = inst.columns("sets")
    total = np.zeros(inst.k + 1)
    acceptance = 0.0
    defect = 0.0
    for c in range(cols.count):
        members = cols.members[c][cols.members[c] >= 0]
        omega = inst.tokens[np.resize(members, inst.n)]
        cond = local_slice(omega)
        defect = max(defect, -float(cond.min()), abs(float(cond.sum()) - 1.0))
        total += cols.mass[c] * cond
        acceptance += cols.mass[c] * float(cond[members].sum())
    exact = otlp.solve(inst, method="maxflow_cs").acceptance
    return float(np.abs(total - inst.target_rows).sum()), abs(acceptance - exact), defect


@pytest.mark.parametrize("seed", range(4))
def test_enumerated_law_is_the_target_and_acceptance_is_alpha_star(seed: int) -> None:
    for inst in random_instances(60, seed):
        plan = otlp.solve(inst, method="partial_resolution", check=False)
        law, accept, defect = law_errors(inst, plan.local_slice)
        assert law <= 1e-10 and accept <= 1e-10 and defect <= 1e-12, (inst, law, accept)


def test_perturbing_one_conditional_fails_the_check() -> None:
    """Mutation: move 1e-6 of one set's conditional between two rows; the check sees it."""
    inst = otlp.Instance([0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4], 3)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    victim = set(inst.tokens[[0, 1]].tolist())

    def mutated(omega: np.ndarray) -> np.ndarray:
        out = plan.local_slice(omega).copy()
        if set(omega.tolist()) == victim:
            out[0] += 1e-6
            out[2] -= 1e-6
        return out

    assert max(law_errors(inst, plan.local_slice)[:2]) <= 1e-12
    assert law_errors(inst, mutated)[0] > 1e-10


@pytest.mark.parametrize("seed", range(2))
def test_the_verifier_passes_the_whole_plan(seed: int) -> None:
    for inst in random_instances(25, 100 + seed, max_vocab=7, max_n=4):
        plan = otlp.solve(inst, method="partial_resolution")
        assert plan.success, plan.info["verification"].problems
        alpha = otlp.optimal_acceptance(inst).alpha_star
        assert plan.acceptance == pytest.approx(alpha, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_the_partition_realises_lengths_and_accepted_masses(seed: int) -> None:
    """Lemma 3: the sets I_x are disjoint, cover [0, 1], |I_x| = q(x), weight = A(x)."""
    for inst in random_instances(40, 200 + seed, max_vocab=12, max_n=6):
        part = ClockPartition.of(inst)
        accepted = accepted_targets(inst)[0]
        assert np.abs(part.lengths - inst.q_local).sum() <= 1e-13
        assert np.abs(part.weights - accepted).sum() <= 1e-13
        order = np.argsort(part.starts)
        starts, ends = part.starts[order], part.ends[order]
        assert starts[0] == 0.0 and ends[-1] == pytest.approx(1.0, abs=1e-14)
        assert np.all(ends > starts) and np.allclose(starts[1:], ends[:-1], rtol=0, atol=1e-15)


def test_a_free_list_of_half_the_segment_is_a_shallow_tree() -> None:
    """Gap filling's free list is a balanced tree: checked by its depth, not by a clock.

    One segment of k = 32,000 tokens of length 1/k, n = 2, cut = 1: token t's accepted mass
    is the weight of slot 1, 3, 5, ... of [0, 1] (then the even slots), so each of the first
    k/2 tokens carves the inside of a free interval and leaves one more: k/2 + 1 intervals. A
    flat list made every token O(k) there (O(k^2) in all, 1.1 s against 0.06 s now)."""
    k, n, cut = 32_000, 2, 1.0
    q = np.full(k, 1.0 / k)
    slots = np.r_[np.arange(1, k, 2), np.arange(0, k, 2)]
    accepted = np.array([weight_between(j / k, (j + 1) / k, cut, n) for j in slots])
    order = np.arange(k)
    out = (np.empty(3 * k + 1), np.empty(3 * k + 1), np.zeros(k, np.int64), np.zeros(k, np.int64))
    values, links = _new_tree(k + 2)
    tree = (values, links, np.empty(k + 2, np.int64), np.empty(k + 2, np.int64))
    length = float(np.cumsum(q)[-1])
    needed = np.ones(k, dtype=bool)
    _, root = _fill_segment(
        q, accepted, order, needed, 0, k, k // 2, 0.0, length, tree, out, 0, cut, n
    )
    size, depth, level = 0, 0, [root]
    while level:
        size, depth = size + len(level), depth + 1
        level = [int(child) for node in level for child in links[node, :2] if child != 0]
    assert size == k // 2 + 1 and depth <= 4 * np.log2(size), (size, depth)
    starts, ends, first, last = clock_pieces(q, accepted, order, np.array([k]), n, cut)
    lengths, weights = token_totals(starts, ends, first, last, cut, n)
    assert np.abs(lengths - q).max() <= 1e-12 and np.abs(weights - accepted).max() <= 1e-12


def test_one_whole_vocabulary_segment_is_partitioned_exactly() -> None:
    """Zipf at V = 32,000 with similarity 0.9: the whole vocabulary is one segment of gap
    filling (its free list peaks at about 3,900 intervals); the sets are disjoint, cover
    [0, 1], and have lengths q and weights A per token."""
    inst = otlp.Instance(*zipf_llm_pair(32_000, similarity=0.9, seed=0), 2)
    accepted, _, segment_ends, _ = accepted_targets(inst)
    assert segment_ends.tolist() == [inst.k]
    part = ClockPartition.of(inst)
    assert np.abs(part.lengths - inst.q_local).max() <= 1e-13
    assert np.abs(part.weights - accepted).max() <= 1e-13
    starts, ends = np.sort(part.starts), np.sort(part.ends)
    assert starts[0] == 0.0 and ends[-1] == pytest.approx(1.0, abs=1e-14)
    assert np.all(ends > starts) and np.allclose(starts[1:], ends[:-1], rtol=0, atol=1e-15)


def test_the_notes_two_ends_counterexample_is_solved_by_gap_filling() -> None:
    """The naive "front and back piece" split breaks a tight set by 0.055 here (V = 3, n = 4);
    gap filling (any order) does not."""
    p = [0.008146, 0.158775, 0.833079]
    q = [0.362542, 0.119969, 0.517489]
    inst = otlp.Instance(p, q, 4, renormalize=True)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    law, accept, defect = law_errors(inst, plan.local_slice)
    assert law <= 1e-12 and accept <= 1e-12 and defect <= 1e-12


def test_larger_peaked_instances_and_n_up_to_12() -> None:
    rng = np.random.default_rng(7)
    for n, vocab in ((5, 6), (6, 5), (8, 4), (12, 4), (2, 14), (3, 12)):
        p = rng.dirichlet(np.full(vocab, 0.2))
        q = rng.dirichlet(np.full(vocab, 0.2))
        inst = otlp.Instance(p, q, n)
        plan = otlp.solve(inst, method="partial_resolution", check=False)
        law, accept, defect = law_errors(inst, plan.local_slice)
        assert law <= 1e-10 and accept <= 1e-10 and defect <= 1e-12, (n, vocab, law, accept)


def test_tiny_masses_keep_every_conditional_a_distribution() -> None:
    p = np.array([1e-13, 0.5 - 1e-13, 0.25, 0.25 - 2e-13, 2e-13])
    q = np.array([0.4, 1e-13, 0.3, 0.3 - 2e-13, 1e-13])
    for n in (2, 3, 4):
        inst = otlp.Instance(p, q, n)
        plan = otlp.solve(inst, method="partial_resolution")
        assert plan.success
        assert max(law_errors(inst, plan.local_slice)) <= 1e-10


def test_the_clock_race_averages_to_the_set_conditional() -> None:
    """Lemma 4: the decoder's tuple-level race, over drafts drawn i.i.d. from q, emits each
    drafted set's conditional (chi-square per frequent set, 40,000 decoded rows); plan.sample
    draws the set conditional itself."""
    inst = otlp.Instance([0.05, 0.35, 0.25, 0.2, 0.15], [0.4, 0.1, 0.2, 0.2, 0.1], 3)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    draws = 40_000
    drafts = inst.sample_drafts(21, draws)
    decoded = otlp.verify_drafts(
        inst.p[None, :], inst.q[None, :], drafts, method="partial_resolution", rng=12
    ).tokens
    keys = np.array([sum(1 << int(t) for t in set(row.tolist())) for row in drafts])
    checked = 0
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        if rows.size < 2_000:
            continue
        expected = plan.slice(drafts[rows[0]])
        counts = np.bincount(decoded[rows], minlength=inst.vocab_size)
        support = expected > 1e-9
        assert counts[~support].sum() == 0
        if support.sum() == 1:
            continue  # a certain token: nothing to test beyond the support
        f_exp = expected[support] / expected[support].sum() * rows.size
        assert chisquare(counts[support], f_exp).pvalue > 1e-4, (key, counts, f_exp)
        checked += 1
    assert checked >= 3
    omega = drafts[0]
    sampled = np.asarray(plan.sample(omega, 3, size=20_000))
    expected = plan.slice(omega)
    support = expected > 1e-9
    counts = np.bincount(sampled, minlength=inst.vocab_size)
    assert counts[~support].sum() == 0
    assert (
        chisquare(counts[support], expected[support] / expected[support].sum() * 20_000).pvalue
        > 1e-4
    )


@pytest.mark.parametrize("seed", range(3))
def test_the_race_law_averages_to_the_set_conditional_by_enumeration(seed: int) -> None:
    """Lemma 6: the race's exact law given a drafted tuple, averaged over every tuple of a
    set (weighted by its draft probability), is that set's conditional (Lemma 5), to
    rounding; it depends on the multiset only (any order of the tuple gives the same law)."""
    for inst in random_instances(12, 40 + seed, max_vocab=5, max_n=4):
        part = ClockPartition.of(inst)
        by_set: dict[tuple[int, ...], list] = {}
        for tup in itertools.product(range(inst.k), repeat=inst.n):
            mass = float(np.prod(inst.q_local[list(tup)]))
            if mass == 0.0:
                continue
            law = part.race_conditional(tup)
            np.testing.assert_allclose(part.race_conditional(tup[::-1]), law, rtol=0, atol=1e-15)
            entry = by_set.setdefault(tuple(sorted(set(tup))), [0.0, np.zeros(inst.k + 1)])
            entry[0] += mass
            entry[1] += mass * law
        for members, (mass, total) in by_set.items():
            expected = part.set_conditional(np.array(members))
            assert np.abs(total / mass - expected).sum() <= 1e-12, (inst, members)


def test_the_decoder_row_samples_the_race_law_of_its_tuple() -> None:
    """The fused row on the tuple (x, x, y), whose set {x, y} also holds (x, y, y): its
    tokens follow the race's law of that multiset (chi-square), which differs from the set
    conditional by more than the test resolves, and so does (x, y, y)'s."""
    inst = otlp.Instance([0.05, 0.35, 0.25, 0.2, 0.15], [0.4, 0.1, 0.2, 0.2, 0.1], 3)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    rows = 40_000
    for omega in ([0, 0, 2], [0, 2, 2]):
        drafts = np.tile(np.array(omega), (rows, 1))
        decoded = otlp.verify_drafts(inst.p, inst.q, drafts, rng=5).tokens
        law = plan.race_slice(omega)
        assert np.abs(law - plan.slice(omega)).sum() > 0.05
        counts = np.bincount(decoded, minlength=inst.vocab_size)
        support = law > 1e-12
        assert counts[~support].sum() == 0
        assert chisquare(counts[support], law[support] * rows).pvalue > 1e-4, (omega, counts)


def test_decoder_rows_match_the_object_api_slices_with_and_without_top_k() -> None:
    """Each decoded row's emitted law (enumerated over the race's clocks by Monte Carlo is
    slow; here: its exact set conditional through the same partition) is the object API's."""
    rng = np.random.default_rng(3)
    vocab, n = 40, 2
    p = rng.dirichlet(np.full(vocab, 0.3), size=3)
    q = rng.dirichlet(np.full(vocab, 0.3), size=3)
    for top_k in (None, 10):
        drafts = np.stack(
            [otlp.Instance(p[b], q[b], n, top_k=top_k).sample_drafts(b, 1)[0] for b in range(3)]
        )
        out = otlp.verify_drafts(p, q, drafts, method="partial_resolution", top_k=top_k, rng=5)
        for b in range(3):
            inst = otlp.Instance(p[b], q[b], n, top_k=top_k)
            law = otlp.solve(inst, method="partial_resolution", check=False).slice(drafts[b])
            assert law[out.tokens[b]] > 0
            assert out.accepted[b] == (out.tokens[b] in drafts[b])


def test_other_schemes_are_refused() -> None:
    inst = otlp.Instance([0.5, 0.5], [0.3, 0.7], 2, scheme="without_replacement")
    with pytest.raises(ValueError, match=r"i\.i\.d\."):
        otlp.solve(inst, method="partial_resolution")


def test_exact_at_full_vocabulary_scale_top_100_two_drafts() -> None:
    """V = 32,000, (k, n) = (100, 2): every one of the 5,050 drafted sets' slices, summed with
    its mass, is p within 1e-9 in L1, and the acceptance is alpha* within 1e-10."""
    rng = np.random.default_rng(4)
    vocab = 32_000
    p = rng.permutation(np.arange(1, vocab + 1) ** -1.1)
    q = p * np.exp(rng.normal(0.0, 1.0, vocab))
    inst = otlp.Instance(p / p.sum(), q / q.sum(), 2, top_k=100)
    plan = otlp.solve(inst, method="partial_resolution", check=False)
    law, accept, defect = law_errors(inst, plan.local_slice)
    assert law <= 1e-9 and accept <= 1e-10 and defect <= 1e-12, (law, accept, defect)


def test_sixty_four_drafts_from_torch_float32_rows() -> None:
    """The decoder takes any n (here 64) from torch rows; every token is possible under its
    row's set conditional."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    vocab = 300
    p, q = rng.dirichlet(np.full(vocab, 0.3)), rng.dirichlet(np.full(vocab, 0.3))
    inst = otlp.Instance(p, q, 64)
    drafts = inst.sample_drafts(9, 4)
    out = otlp.verify_drafts(
        torch.tensor(p, dtype=torch.float32)[None],
        torch.tensor(q, dtype=torch.float32)[None],
        drafts,
        method="partial_resolution",
        rng=2,
    )
    plan = otlp.solve(
        otlp.Instance(p.astype(np.float32), q.astype(np.float32), 64, renormalize=True),
        method="partial_resolution",
        check=False,
    )
    for b in range(4):
        assert plan.slice(drafts[b])[out.tokens[b]] > 0


def test_a_rejection_mass_below_rounding_keeps_its_stretch_of_the_line() -> None:
    """1 - alpha* = q(2)^16 = 8.6e-80 rounds alpha* to 1.0, but the cut must sit at
    1 - q(2) (the fuzz's float16 reproducer): drafting only the p = 0 token never emits it."""
    p = np.array([0.0203857421875, 0.97900390625, 0.0, 0.0005207061767578125])
    q = np.array([0.1016845703125, 0.8466796875, 1.1444091796875e-05, 0.051849365234375])
    inst = otlp.Instance(p, q, 16, renormalize=True)
    part = ClockPartition.of(inst)
    assert part.cut == pytest.approx(1.0 - inst.q[2], rel=0, abs=1e-15)
    drafts = np.full((200, 16), 2)
    out = otlp.verify_drafts(inst.p[None], inst.q[None], drafts, method="partial_resolution", rng=0)
    assert not out.accepted.any() and np.all(inst.p[out.tokens] > 0)
    plan = otlp.solve(inst, method="partial_resolution")
    assert plan.success and plan.slice(drafts[0])[2] == 0.0


@pytest.mark.parametrize("n", [2, 16, 17, 64, 200])
def test_the_weight_of_a_stretch_is_exact_to_a_few_ulps(n: int) -> None:
    """weight_between(a, b) = (1 - a)^n - (1 - b)^n against exact rational arithmetic on the
    floats 1 - a and 1 - b it sees, relative error <= 1e-13, on stretches from 1e-12 to 0.5
    long: summed as n positive terms up to n = 16, above by ta^n (-expm1(n log1p(-d / ta)))
    (O(1) in n)."""
    rng = np.random.default_rng(n)
    for _ in range(300):
        ta = 1.0 - rng.uniform(0.0, 0.5)
        tb = max(ta - 10 ** rng.uniform(-12, np.log10(0.5)), 0.5)
        if not tb < ta:
            continue
        exact = Fraction(ta) ** n - Fraction(tb) ** n
        got = weight_between(1.0 - ta, 1.0 - tb, 1.0, n)
        error = float(abs(Fraction(got) - exact) / exact)
        assert error <= 1e-13, (ta, tb, n, error)


@pytest.mark.parametrize("n", [60, 100, 200])
def test_many_drafts_of_a_near_one_hot_pair_keep_the_weights_of_the_clock_sets(n):
    """Fuzz seed 56, case 182 (float16 p = [1, 4.2e-5], q = [1, 4.4e-6], n = 200): the weight
    of a piece ending near 1 was summed from tb^(n-1), subnormal at n = 60 (weights 1.006 for
    a true 0.99996) and 0 at n = 100 (the plan's target marginal off by 7e-5, a conditional
    entry of -6.5e9). Summed from the largest term, the plan verifies and the two-token set's
    conditional is the exact max-flow's."""
    from otlp.solvers.partial_resolution import weight_between

    p = np.array([1.0, 4.166364669799805e-05])
    q = np.array([1.0, 4.351139068603516e-06])
    inst = otlp.Instance(p / p.sum(), q / q.sum(), n)
    plan = otlp.solve(inst, "partial_resolution", check=False)
    assert otlp.verify(plan).ok, otlp.verify(plan).problems
    part = plan.partition
    np.testing.assert_allclose(part.weights, part.accepted, rtol=1e-9)
    exact = otlp.solve(inst, "maxflow_cs", check=False)
    both = np.array([0] * (n - 1) + [1])
    np.testing.assert_allclose(
        part.set_conditional(np.array([0, 1]))[:2], exact.slice(both), atol=1e-9
    )
    # the weight of [a, b] is (1 - a)^n - (1 - b)^n, also where (1 - b)^(n-1) underflows
    a, b = 1e-7, 1.0 - 3.6e-6
    assert weight_between(a, b, 1.0, n) == pytest.approx((1 - a) ** n, rel=1e-12)
