"""Global resolution per token, fused: full-vocabulary (p, q, omega) to pi(.|omega) and a token.

[GR] §6, Algorithm 1, for n i.i.d. drafts, in compiled calls that reuse the kernels of this
package: one pass over the vocabulary checks p and q and selects the draft's top k
(a bounded heap, O(V)), one sort of the k survivors, one sort by q/p for H* (the prefix rule,
[GR] Theorem 3.1 and Lemma 6.3) and the polymatroid targets with their tight-set blocks
(:func:`~otlp.solvers.global_resolution.polymatroid.target_blocks`, Theorem 6.2), then only the unit
omega needs (the earliest outer block it meets, else the inner system) by
:func:`~otlp.solvers.global_resolution.newton.newton_kernel`, and the slice of Eq. (18).

A unit that misses its 5 tau budget is reported (``FALLBACK``) and never used: the caller
solves that token exactly (:mod:`otlp.global_resolution`), whose
object API uses :func:`analyse` and the same Newton kernel, so both paths agree to rounding.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.constants import (
    BUDGET_FACTOR,
    INNER,
    OUTER,
    PSI_TIE,
    SINGLE_DRAFT,
)
from otlp.solvers.global_resolution.newton import CONVERGED, OUT_OF_TIME, clock, newton_kernel
from otlp.solvers.global_resolution.polymatroid import target_blocks
from otlp.solvers.global_resolution.softmax_system import ALPHA_LIMIT, initial_alpha
from otlp.solvers.global_resolution.sorting import stable_argsort, top_tokens
from otlp.solvers.node_rules import CHUNK, row_total
from otlp.solvers.row_status import BAD_DRAFT, BAD_P, BAD_Q, FALLBACK, OK, SUM_P, SUM_Q


@nb.njit(cache=True)
def scan(p: NDArray, q: NDArray, atol: float) -> tuple[int, float, float]:
    """(status, sum p, sum q): entries finite and >= 0, sums within ``atol`` of 1; each row in
    one vectorised pass (:func:`otlp.solvers.node_rules.row_total`)."""
    p_sum, p_bad = row_total(p)
    q_sum, q_bad = row_total(q)
    if p_bad >= 0:
        return BAD_P, p_sum, q_sum
    if q_bad >= 0:
        return BAD_Q, p_sum, q_sum
    if not abs(p_sum - 1.0) <= atol:
        return SUM_P, p_sum, q_sum
    if not abs(q_sum - 1.0) <= atol:
        return SUM_Q, p_sum, q_sum
    return OK, p_sum, q_sum


@nb.njit(cache=True)
def restrict(
    p: NDArray, q: NDArray, tokens: IntArray, p_sum: float, q_sum: float
) -> tuple[FloatArray, FloatArray, float]:
    """p over the draft vocabulary (not renormalised), q renormalised on it, and the target
    mass outside it ([GR] Appendix N)."""
    k = tokens.shape[0]
    p_local = np.empty(k)
    q_local = np.empty(k)
    for j in range(k):
        p_local[j] = float(p[tokens[j]]) / p_sum
        q_local[j] = float(q[tokens[j]]) / q_sum
    q_local /= q_local.sum()
    # The complement of the kept mass; summed over the outside tokens themselves when it is
    # tiny, so that it is exactly 0 when nothing is outside.
    outside = max(1.0 - p_local.sum(), 0.0)
    if outside < 1e-12:
        outside = 0.0
        kept = _membership(tokens, p.shape[0])
        for i in range(p.shape[0]):
            if not kept[i]:
                outside += float(p[i]) / p_sum
    return p_local, q_local, outside


@nb.njit(cache=True)
def _membership(tokens: IntArray, size_v: int) -> NDArray[np.bool_]:
    """A mask over the vocabulary of the kept tokens (O(V + k), no sort)."""
    kept = np.zeros(size_v, dtype=np.bool_)
    for token in tokens:
        kept[token] = True
    return kept


@nb.njit(cache=True)
def analyse(
    p_local: FloatArray, q_local: FloatArray, n: int
) -> tuple[IntArray, int, float, FloatArray, IntArray, IntArray, FloatArray, IntArray]:
    """H* and the outer system of (p, q) over the draft vocabulary, with one sort by q/p.

    Returns (ratio order, |H*|, psi(H*), outer targets, block starts, block ends, block
    bases, block of each token): H* = ``order[:size]``; the tokens outside H* by increasing
    q/p are ``order[size:][::-1]`` (see :class:`~otlp.solvers.global_resolution.OuterTargets`).
    When min psi is 0 up to rounding (alpha* = 1) the empty set is used: with H* nonempty the
    inner system would have no slack and Eq. (18) no residual rows.
    """
    k = p_local.shape[0]
    keys = np.empty(k)
    for j in range(k):
        keys[j] = -q_local[j] / p_local[j] if p_local[j] > 0 else -np.inf
    order = stable_argsort(keys)  # decreasing q/p, p = 0 first, ties by position
    best, psi_min = 0, 0.0
    p_prefix = 0.0
    q_prefix = 0.0
    for j in range(k):
        p_prefix += p_local[order[j]]
        q_prefix += q_local[order[j]]
        value = p_prefix - q_prefix**n
        if value < psi_min:
            best, psi_min = j + 1, value
    if best > 0 and psi_min > -PSI_TIE:
        best, psi_min = 0, 0.0
    p_inside = 0.0
    q_inside = 0.0
    for j in range(best):
        p_inside += p_local[order[j]]
        q_inside += q_local[order[j]]
    outside = order[best:][::-1].copy()
    targets, starts, ends, bases, block_of = target_blocks(
        p_local, q_local, outside, p_inside, q_inside, n
    )
    return order, best, psi_min, targets, starts, ends, bases, block_of


@nb.njit(cache=True)
def unit_of(block_of: IntArray, drafts: IntArray) -> int:
    """The earliest outer block the drafted local ids meet, or -1 (the inner system)."""
    unit = -1
    for d in drafts:
        b = block_of[d]
        if b >= 0 and (unit < 0 or b < unit):
            unit = b
    return unit


@nb.njit(cache=True)
def inner_variables(
    p_local: FloatArray, q_local: FloatArray, order: IntArray, size: int
) -> tuple[IntArray, float]:
    """The inner system's variables (H* tokens with p > 0, by position) and its base mass."""
    inside = np.zeros(p_local.shape[0], dtype=np.bool_)
    for j in range(size):
        inside[order[j]] = True
    count = 0
    base = 0.0
    for j in range(p_local.shape[0]):
        if inside[j]:
            if p_local[j] > 0:
                count += 1
            else:
                base += q_local[j]
    tokens = np.empty(count, dtype=np.int64)
    count = 0
    for j in range(p_local.shape[0]):
        if inside[j] and p_local[j] > 0:
            tokens[count] = j
            count += 1
    return tokens, base


@nb.njit(cache=True)
def budget_share(targets: FloatArray, starts: IntArray, ends: IntArray, block: int) -> float:
    """The part of the outer system's 5 tau block ``block`` may use; the shares sum to one.

    Half in proportion to the block's mass, half split evenly between the blocks that need
    solving — so a tiny block is not asked for an accuracy below rounding.
    """
    total = targets.sum()
    mass = targets[starts[block] : ends[block]].sum() / total if total > 0 else 1.0
    solving = 0
    for b in range(starts.shape[0]):
        if ends[b] - starts[b] > 1:
            solving += 1
    return 0.5 * (mass + 1.0 / max(solving, 1))


@nb.njit(cache=True)
def solve_system(
    q: FloatArray,
    targets: FloatArray,
    base: float,
    slack: float,
    n: int,
    budget: float,
    max_iter: int,
    deadline: float = math.inf,
) -> tuple[FloatArray, int, float, float, int]:
    """(alpha, iterations, ||grad||_1, certified deviation, Newton status) for one unit (the
    unit falls back unless deviation <= budget); a unit of no variable, or an outer one of one
    variable, is exact. ``deadline``: see :func:`newton_kernel`."""
    m = q.shape[0]
    if m == 0 or (m == 1 and slack == 0.0):
        return np.zeros(m), 0, 0.0, 0.0, CONVERGED
    start = initial_alpha(q, targets, base, n, slack == 0.0)
    alpha, iterations, _, grad_norm, deviation, status = newton_kernel(
        q, targets, base, slack, n, budget, start, max_iter, deadline
    )
    return alpha, iterations, grad_norm, deviation, status


@nb.njit(cache=True)
def unit_system(
    p_local: FloatArray,
    q_local: FloatArray,
    order: IntArray,
    size: int,
    targets: FloatArray,
    starts: IntArray,
    ends: IntArray,
    bases: FloatArray,
    block: int,
) -> tuple[IntArray, FloatArray, float, float]:
    """(variables, their targets, base mass, slack) of outer block ``block`` (slack 0,
    Theorem 6.4) or, for ``block`` = -1, of the inner system (slack 1, Theorem 6.5)."""
    if block >= 0:
        lo, hi = starts[block], ends[block]
        return order[size:][::-1][lo:hi].copy(), targets[lo:hi].copy(), bases[block], 0.0
    variables, base = inner_variables(p_local, q_local, order, size)
    return variables, p_local[variables], base, 1.0


@nb.njit(cache=True)
def unit_budget(
    tau: float, targets: FloatArray, starts: IntArray, ends: IntArray, block: int
) -> float:
    """The unit's deviation budget: 5 tau for the inner system, a block's share of it."""
    share = budget_share(targets, starts, ends, block) if block >= 0 else 1.0
    return BUDGET_FACTOR * tau * share


@nb.njit(cache=True)
def residual_rows(
    p_local: FloatArray, p_outside: float, order: IntArray, size: int, targets: FloatArray
) -> FloatArray:
    """Eq. (18) residual rows: p(i) - p_i outside H*, 0 in H*, the outside-V0 mass last."""
    k = p_local.shape[0]
    residual = np.zeros(k + 1)
    outside = order[size:][::-1]
    for j in range(outside.shape[0]):
        residual[outside[j]] = max(p_local[outside[j]] - targets[j], 0.0)
    residual[k] = p_outside
    return residual


@nb.njit(cache=True)
def slice_of(
    alpha: FloatArray,
    inner: NDArray[np.bool_],
    block_of: IntArray,
    residual: FloatArray,
    drafts: IntArray,
    block: int,
) -> FloatArray:
    """pi(.|omega) over the draft vocabulary plus the outside row ([GR] Eq. 18) from the
    solved alpha of the unit omega needs (any draft scheme: only the unit's alpha differ).

    Outer block ``block``: a softmax of alpha over the drafted members of the block
    (Eq. 14). Inner system (``block`` = -1): weights e^alpha of the drafted inner variables
    (``inner``) over 1 + their sum, the rest on the ``residual`` rows in proportion (Eq. 17).
    """
    k = alpha.shape[0]
    out = np.zeros(k + 1)
    if block >= 0:
        best = -np.inf
        for d in drafts:
            if block_of[d] == block:
                best = max(best, alpha[d])
        total = 0.0
        for d in drafts:
            if block_of[d] == block and out[d] == 0.0:
                out[d] = math.exp(alpha[d] - best)
                total += out[d]
        out /= total
        return out
    denominator = 1.0
    for d in drafts:
        if inner[d] and out[d] == 0.0:
            out[d] = math.exp(min(alpha[d], ALPHA_LIMIT))
            denominator += out[d]
    out /= denominator
    total = residual.sum()
    if total > 0:
        out += residual / total / denominator
    return out


@nb.njit(cache=True)
def single_draft_slice(
    p_local: FloatArray, q_local: FloatArray, p_outside: float, x: int
) -> FloatArray:
    """pi(.|x) of one draft x, in closed form: the optimal plan of n = 1 is speculative
    sampling's law (accept x with min(1, p_x / q_x), else a draw from max(p - q, 0), the
    outside row holding p outside the draft vocabulary), which global resolution's plan
    reaches to its tolerance ([GR] Eq. 1 with n = 1; checked against the object API)."""
    k = p_local.shape[0]
    out = np.zeros(k + 1)
    accept = min(1.0, p_local[x] / q_local[x])
    total = p_outside
    for i in range(k):
        total += max(p_local[i] - q_local[i], 0.0)
    if accept >= 1.0 or not total > 0:
        out[x] = 1.0
        return out
    share = (1.0 - accept) / total
    for i in range(k):
        out[i] = max(p_local[i] - q_local[i], 0.0) * share
    out[x] = accept
    out[k] = p_outside * share
    return out


@nb.njit(cache=True)
def token_slice(
    p_local: FloatArray,
    q_local: FloatArray,
    p_outside: float,
    n: int,
    drafts: IntArray,
    tau: float,
    max_iter: int,
    deadline: float = math.inf,
) -> tuple[FloatArray, int, int, int, int, float, float, int]:
    """pi(.|omega) over the draft vocabulary plus the outside row ([GR] Eq. 18) for drafted
    local ids, and (system, block, variables, iterations, deviation, budget, Newton status);
    the slice is valid only if deviation <= budget (else the unit falls back). One draft:
    the closed form of :func:`single_draft_slice`, exact (no unit, no Newton)."""
    k = p_local.shape[0]
    if drafts.shape[0] == 1:
        out = single_draft_slice(p_local, q_local, p_outside, drafts[0])
        return out, SINGLE_DRAFT, -1, 0, 0, 0.0, BUDGET_FACTOR * tau, CONVERGED
    order, size, _, targets, starts, ends, bases, block_of = analyse(p_local, q_local, n)
    block = unit_of(block_of, drafts)
    variables, x, base, slack = unit_system(
        p_local, q_local, order, size, targets, starts, ends, bases, block
    )
    budget = unit_budget(tau, targets, starts, ends, block)
    solved, iterations, _, deviation, status = solve_system(
        q_local[variables], x, base, slack, n, budget, max_iter, deadline
    )
    alpha = np.zeros(k)
    inner = np.zeros(k, dtype=np.bool_)
    for j in range(variables.shape[0]):
        alpha[variables[j]] = solved[j]
        inner[variables[j]] = block < 0
    residual = residual_rows(p_local, p_outside, order, size, targets)
    out = slice_of(alpha, inner, block_of, residual, drafts, block)
    system = OUTER if block >= 0 else INNER
    return out, system, block, variables.shape[0], iterations, deviation, budget, status


@nb.njit(cache=True)
def local_drafts(tokens: IntArray, drafts: NDArray) -> IntArray:
    """Draft-vocabulary positions of drafted token ids; -1 for a token outside it (one scan
    of the list, O(k n): no sort)."""
    out = np.full(drafts.shape[0], -1, dtype=np.int64)
    for j in range(tokens.shape[0]):
        for d in range(drafts.shape[0]):
            if tokens[j] == drafts[d]:
                out[d] = j
    return out


@nb.njit(cache=True)
def _draw_from(p: NDArray, u: float) -> int:
    """A token drawn from p itself (one uniform)."""
    total = 0.0
    for i in range(p.shape[0]):
        total += max(float(p[i]), 0.0)
    target = u * total
    acc = 0.0
    last = -1
    for i in range(p.shape[0]):
        if p[i] > 0:
            last = i
            acc += float(p[i])
            if acc > target:
                return i
    return last


@nb.njit(cache=True)
def draw(probs: FloatArray, p: NDArray, tokens: IntArray, u: float, u_out: float) -> int:
    """A token from a slice over the draft vocabulary plus the outside row; the outside row
    is spread over the outside tokens in proportion to p (two uniforms).

    A token of target probability 0 is never drawn: no coupling of p puts mass on it, and an
    approximate slice can only do so within its error, as global resolution's does on a
    column of negligible mass (drafts of probability 1e-100 whose p rounded to 0; issue 27's
    fuzz classes). Such entries are skipped; a slice with nothing else left draws from p.
    """
    k = tokens.shape[0]
    total = 0.0
    for j in range(k + 1):
        if probs[j] > 0 and (j == k or p[tokens[j]] > 0):
            total += probs[j]
    if not total > 0:
        return _draw_from(p, u)
    target = u * total
    acc = 0.0
    pick = -1
    for j in range(k + 1):
        if probs[j] > 0 and (j == k or p[tokens[j]] > 0):
            pick = j
            acc += probs[j]
            if acc > target:
                break
    if pick < k:
        return tokens[pick]
    kept = _membership(tokens, p.shape[0])
    vocab = p.shape[0]
    target = u_out * _outside_sum(p, kept, 0, vocab)
    acc = 0.0
    last = -1
    for start in range(0, vocab, CHUNK):  # whole chunks summed vectorised, one scanned
        stop = min(start + CHUNK, vocab)
        mass = _outside_sum(p, kept, start, stop)
        if mass > 0.0 and acc + mass <= target:
            acc += mass
            for i in range(stop - 1, start - 1, -1):
                if not kept[i] and p[i] > 0:
                    last = i
                    break
            continue
        for i in range(start, stop):
            if not kept[i] and p[i] > 0:
                last = i
                acc += float(p[i])
                if acc > target:
                    return i
    return last


@nb.njit(cache=True, fastmath={"reassoc"})
def _outside_sum(p: NDArray, kept: NDArray[np.bool_], start: int, stop: int) -> float:
    """Σ p over the tokens in [start, stop) that are not ``kept`` (branch-free: vectorised)."""
    total = 0.0
    for i in range(start, stop):
        total += 0.0 if kept[i] else float(p[i])
    return total


@nb.njit(cache=True)
def token_row(
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    top_k: int,
    tau: float,
    max_iter: int,
    atol: float,
    u: float,
    u_out: float,
    report: FloatArray,
    deadline: float = math.inf,
) -> int:
    """One decoder step: the output token for drafted ids (-1 unless the status is OK).

    ``report`` receives (status, system, block, variables, iterations, deviation, budget,
    Newton status); Newton stops at ``deadline`` (``time.perf_counter()``; the call's, read
    at its entry). A row that starts past it (after its inputs are checked: the call spent
    its budget on earlier rows, or compiling its kernels) does no other work: ``FALLBACK``
    with Newton status ``OUT_OF_TIME``, for the caller's lossless rule. One clock read per
    row with a deadline (~1 us, an object-mode block).
    """
    n = drafts.shape[0]
    status, p_sum, q_sum = scan(p, q, atol)
    report[0] = status
    if status != OK:
        return -1
    tokens = top_tokens(q, top_k)
    local = local_drafts(tokens, drafts)
    for d in range(n):
        if local[d] < 0:
            report[0] = BAD_DRAFT
            report[1] = d
            return -1
    if deadline < math.inf and clock() > deadline:  # e.g. the call compiled past its budget
        report[0], report[1], report[2] = FALLBACK, -1, -1  # no system was set up
        report[5], report[6], report[7] = math.inf, BUDGET_FACTOR * tau, OUT_OF_TIME
        return -1
    p_local, q_local, p_outside = restrict(p, q, tokens, p_sum, q_sum)
    probs, system, block, variables, iterations, deviation, budget, newton = token_slice(
        p_local, q_local, p_outside, n, local, tau, max_iter, deadline
    )
    report[1], report[2], report[3] = system, block, variables
    report[4], report[5], report[6], report[7] = iterations, deviation, budget, newton
    if not deviation <= budget:
        report[0] = FALLBACK
        return -1
    return draw(probs, p, tokens, u, u_out)


REPORT_FIELDS = (
    "status",
    "system",
    "block",
    "variables",
    "iterations",
    "deviation",
    "budget",
    "newton",
)


@nb.njit(cache=True)
def batch(
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    top_k: int,
    tau: float,
    max_iter: int,
    atol: float,
    uniforms: FloatArray,
    deadline: float = math.inf,
) -> tuple[IntArray, FloatArray]:
    """:func:`token_row` for each row of ``drafts`` ((B, n)); p and q are (1, V) or (B, V);
    every row stops at the call's ``deadline`` (``time.perf_counter()``; inf: none)."""
    rows = drafts.shape[0]
    out = np.empty(rows, dtype=np.int64)
    reports = np.zeros((rows, len(REPORT_FIELDS)))
    for b in range(rows):
        pb = p[0] if p.shape[0] == 1 else p[b]
        qb = q[0] if q.shape[0] == 1 else q[b]
        out[b] = token_row(
            pb,
            qb,
            drafts[b],
            top_k,
            tau,
            max_iter,
            atol,
            uniforms[b, 0],
            uniforms[b, 1],
            reports[b],
            deadline,
        )
    return out, reports


@nb.njit(cache=True, parallel=True)
def batch_parallel(
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    top_k: int,
    tau: float,
    max_iter: int,
    atol: float,
    uniforms: FloatArray,
    deadline: float = math.inf,
) -> tuple[IntArray, FloatArray]:
    """:func:`batch` with the rows spread over numba's threads (``prange``)."""
    rows = drafts.shape[0]
    out = np.empty(rows, dtype=np.int64)
    reports = np.zeros((rows, len(REPORT_FIELDS)))
    for b in nb.prange(rows):
        pb = p[0] if p.shape[0] == 1 else p[b]
        qb = q[0] if q.shape[0] == 1 else q[b]
        out[b] = token_row(
            pb,
            qb,
            drafts[b],
            top_k,
            tau,
            max_iter,
            atol,
            uniforms[b, 0],
            uniforms[b, 1],
            reports[b],
            deadline,
        )
    return out, reports
