"""Partial resolution's lemmas (docs/partial-resolution.md), each checked against max-flow.

The construction is otlp's own exact per-token plan for n i.i.d. drafts, after "Partial
Resolution: Optimal Multi-Draft Speculative Sampling in Near-Linear Time" (Thomas and Pal,
NeurIPS 2025; only the abstract is public); the facts it rests on are [GR]'s (subset
selection, the polymatroid outer targets of Theorem 6.2, max-flow).
"""

from __future__ import annotations

from itertools import combinations, product

import numpy as np

import otlp
from otlp.partial_resolution import ClockPartition, accepted_targets, cut_point
from otlp.validate.checks._relaxed import subsets
from otlp.validate.registry import Case, Outcome, at_most, check, equality


def _instance(case: Case, max_vocab: int = 6, max_n: int = 4) -> otlp.Instance:
    return case.instance(("iid",), max_vocab=max_vocab, max_n=max_n)


def _max_flow_alpha(inst: otlp.Instance) -> float:
    return otlp.solve(inst, method="maxflow_cs").acceptance


@check(
    "pr.lemma1.feasible_targets",
    "GR",
    "PR Lemma 1 (Thm 6.2)",
    "A = p on H*, outer targets elsewhere: A <= p, A(U) <= 1 - (1 - q(U))^n for every token set "
    "U, and sum A = alpha* of max-flow",
)
def _lemma1(case: Case) -> Outcome:
    inst = _instance(case, max_vocab=7)
    accepted = accepted_targets(inst)[0]
    masks = subsets(inst.k)
    hall = float((masks @ accepted - (1.0 - (1.0 - masks @ inst.q_local) ** inst.n)).max())
    over = float((accepted - inst.p_local).max())
    total = abs(float(accepted.sum()) - _max_flow_alpha(inst))
    return at_most(max(hall, over, total), 0.0, 1e-12, hall=hall, over_p=over, sum_error=total)


@check(
    "pr.lemma2.cut",
    "GR",
    "PR Lemma 2",
    "the weight n (1 - u)^(n-1) on [0, cut) with cut = 1 - (1 - alpha*)^(1/n) has total "
    "alpha* (max-flow)",
)
def _lemma2(case: Case) -> Outcome:
    inst = _instance(case)
    alpha = otlp.optimal_acceptance(inst).alpha_star
    total = 1.0 - (1.0 - cut_point(1.0 - alpha, inst.n)) ** inst.n
    return equality(total, _max_flow_alpha(inst), 1e-10)


@check(
    "pr.lemma3.gap_filling",
    "GR",
    "PR Lemma 3",
    "gap filling partitions [0, 1] into sets I_x with |I_x| = q(x) and weight A(x)",
)
def _lemma3(case: Case) -> Outcome:
    inst = _instance(case, max_vocab=12, max_n=6)
    part = ClockPartition.of(inst)
    accepted = accepted_targets(inst)[0]
    order = np.argsort(part.starts)
    starts, ends = part.starts[order], part.ends[order]
    gaps = float(np.abs(starts[1:] - ends[:-1]).sum() + starts[0] + abs(1.0 - ends[-1]))
    lengths = float(np.abs(part.lengths - inst.q_local).sum())
    weights = float(np.abs(part.weights - accepted).sum())
    return at_most(max(gaps, lengths, weights), 0.0, 1e-13, gaps=gaps, lengths=lengths)


@check(
    "pr.lemma4.clock_plan",
    "GR",
    "PR Lemma 4",
    "the clock plan is optimal: sum_S Q(S) pi(.|S) = p and acceptance = alpha* of max-flow, "
    "every pi(.|S) a distribution (all drafted sets enumerated)",
)
def _lemma4(case: Case) -> Outcome:
    inst = _instance(case)
    part = ClockPartition.of(inst)
    cols = inst.columns("sets")
    total = np.zeros(inst.k + 1)
    acceptance, defect = 0.0, 0.0
    for c in range(cols.count):
        members = cols.members[c][cols.members[c] >= 0]
        cond = part.set_conditional(members)
        defect = max(defect, -float(cond.min()), abs(float(cond.sum()) - 1.0))
        total += cols.mass[c] * cond
        acceptance += cols.mass[c] * float(cond[members].sum())
    law = float(np.abs(total - inst.target_rows).sum())
    gap = abs(acceptance - _max_flow_alpha(inst))
    return at_most(max(law, gap, defect), 0.0, 1e-10, law_l1=law, acceptance_gap=gap)


@check(
    "pr.lemma5.set_conditional",
    "GR",
    "PR Lemma 5",
    "a(S, x) by positive terms equals the direct inclusion-exclusion integral "
    "sum_pieces sum_{x in U in S} (-1)^(|S|-|U|) (G_U(a)^n - G_U(b)^n)",
)
def _lemma5(case: Case) -> Outcome:
    inst = _instance(case, max_vocab=6, max_n=5)
    part = ClockPartition.of(inst)
    worst = 0.0
    for size in range(1, min(inst.n, inst.k) + 1):
        for members in combinations(range(inst.k), size):
            shares, mass = part.set_accepted(members)
            direct = _inclusion_exclusion(part, members)
            worst = max(worst, float(np.abs(shares * mass - direct).sum()))
    return at_most(worst, 0.0, 1e-12)


@check(
    "pr.lemma6.race_law",
    "GR",
    "PR Lemma 6",
    "the race's law given a drafted tuple (a product over the pieces of its tokens' sets) "
    "depends on the multiset only and, summed over a set's tuples with their draft mass, is "
    "Q(S) pi(.|S) (every tuple enumerated)",
)
def _lemma6(case: Case) -> Outcome:
    inst = _instance(case, max_vocab=5, max_n=4)
    part = ClockPartition.of(inst)
    by_set: dict[tuple[int, ...], np.ndarray] = {}
    order = 0.0
    for tup in product(range(inst.k), repeat=inst.n):
        mass = float(np.prod(inst.q_local[list(tup)]))
        if mass == 0.0:
            continue
        law = part.race_conditional(tup)
        order = max(order, float(np.abs(part.race_conditional(tup[::-1]) - law).sum()))
        key = tuple(sorted(set(tup)))
        by_set[key] = by_set.get(key, np.zeros(inst.k + 1)) + mass * law
    worst = 0.0
    for members, total in by_set.items():
        _, set_mass = part.set_accepted(members)
        expected = set_mass * part.set_conditional(np.array(members))
        worst = max(worst, float(np.abs(total - expected).sum()))
    return at_most(max(worst, order), 0.0, 1e-12, set_l1=worst, order_l1=order)


def _inclusion_exclusion(part: ClockPartition, members: tuple[int, ...]) -> np.ndarray:
    """a(S, .) by the note's alternating sum (the integral of n G_U^(n-1) done in closed form)."""
    out = np.zeros(len(members))
    for ix, x in enumerate(members):
        for a, b in part.pieces(x):
            if a >= part.cut:
                continue
            b = min(b, part.cut)
            for size in range(1, len(members) + 1):
                for subset in combinations(members, size):
                    if x not in subset:
                        continue
                    after = sum(_after(part, y, a) for y in subset)
                    sign = (-1) ** (len(members) - size)
                    out[ix] += sign * (after**part.n - (after - (b - a)) ** part.n)
    return out


def _after(part: ClockPartition, token: int, u: float) -> float:
    pieces = part.pieces(token)
    return float(np.clip(pieces[:, 1] - np.maximum(pieces[:, 0], u), 0.0, None).sum())
