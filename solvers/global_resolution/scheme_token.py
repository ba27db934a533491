"""Compiled per-token steps of global resolution beyond i.i.d. drafts ([GR] §6, App. N, O, S).

Arrays in, arrays out; the per-row driver is :mod:`otlp.global_resolution.fused`.

* :func:`independent_vocabulary` — the union of two drafts' top-k lists (sorted ids, as
  ``otlp.Instance`` lists them) with p sliced there (not renormalised) and each draft
  renormalised on its own top k ([GR] Appendix N).
* :func:`greedy_slice` — the greedy scheme ([GR] Appendix O): the n - 1 top draft tokens T
  are always drafted and the last draft x comes from r = q restricted to the other tokens.
  Its optimal plan has a closed form: column x keeps min(r_x, p_x) on x, sends its excess
  e_x = r_x - min(r_x, p_x) to T in proportion to p there, scaled by c = min(1, p(T) / Σ e),
  and the rest to the residual target. Acceptance Σ_x min(r_x, p_x) + min(p(T), Σ e), which is
  alpha* = 1 + min psi ([GR] Theorem 3.1 with the closed-form H* of ``otlp.greedy``).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.sorting import top_tokens
from otlp.solvers.global_resolution.token import restrict
from otlp.solvers.row_status import OK

NOT_GREEDY = 1  # greedy_slice status: the drafts are not T plus one other draft token


@nb.njit(cache=True)
def _renormalised(q: NDArray, kept: IntArray, tokens: IntArray, q_sum: float) -> FloatArray:
    """q on ``tokens`` where the token is in ``kept`` (both sorted by id), renormalised."""
    out = np.zeros(tokens.shape[0])
    t = 0
    for j in range(tokens.shape[0]):
        while t < kept.shape[0] and kept[t] < tokens[j]:
            t += 1
        if t < kept.shape[0] and kept[t] == tokens[j]:
            out[j] = float(q[tokens[j]]) / q_sum
    return out / out.sum()


@nb.njit(cache=True)
def independent_vocabulary(
    p: NDArray, q1: NDArray, q2: NDArray, top_k: int, p_sum: float, q1_sum: float, q2_sum: float
) -> tuple[IntArray, FloatArray, FloatArray, FloatArray, float]:
    """(tokens, p_local, q1_local, q2_local, p_outside) for two independent drafts."""
    kept1 = np.sort(top_tokens(q1, top_k))
    kept2 = np.sort(top_tokens(q2, top_k))
    both = np.sort(np.concatenate((kept1, kept2)))
    count = 0
    for j in range(both.shape[0]):
        if j == 0 or both[j] != both[j - 1]:
            both[count] = both[j]
            count += 1
    tokens = both[:count].copy()
    p_local, _, p_outside = restrict(p, q1, tokens, p_sum, q1_sum)
    rows1 = _renormalised(q1, kept1, tokens, q1_sum)
    rows2 = _renormalised(q2, kept2, tokens, q2_sum)
    return tokens, p_local, rows1, rows2, p_outside


@nb.njit(cache=True)
def greedy_last(drafts: IntArray, n: int) -> int:
    """The position of the drawn draft if ``drafts`` (local ids, listed by decreasing q) are
    T = {0, ..., n - 2} in any order plus one id >= n - 1, else -1."""
    seen = np.zeros(n - 1, dtype=np.bool_)
    last = -1
    for position in range(drafts.shape[0]):
        d = drafts[position]
        if d < 0:
            return -1
        if d < n - 1:
            if seen[d]:
                return -1
            seen[d] = True
        elif last >= 0:
            return -1
        else:
            last = position
    return last


@nb.njit(cache=True)
def greedy_slice(
    p_local: FloatArray, q_local: FloatArray, p_outside: float, n: int, drafts: IntArray
) -> tuple[int, FloatArray]:
    """(status, pi(.|omega)) of the greedy scheme's closed-form optimal plan.

    Local ids list the draft vocabulary by decreasing q, so T = {0, ..., n - 2}; ``drafts``
    must be T (any order) plus one id x >= n - 1 with r_x > 0 (:func:`greedy_last`).
    """
    k = p_local.shape[0]
    out = np.zeros(k + 1)
    position = greedy_last(drafts, n)
    if position < 0:
        return NOT_GREEDY, out
    last = drafts[position]
    rest = 0.0
    for j in range(n - 1, k):
        rest += q_local[j]
    if not rest > 0 or not q_local[last] > 0:
        return NOT_GREEDY, out
    fixed_p = 0.0
    for j in range(n - 1):
        fixed_p += p_local[j]
    kept_total = 0.0
    excess_total = 0.0
    for j in range(n - 1, k):
        r = q_local[j] / rest
        kept = min(r, p_local[j])
        kept_total += kept
        excess_total += r - kept
    share = min(1.0, fixed_p / excess_total) if excess_total > 0 else 0.0
    r_last = q_local[last] / rest
    kept_last = min(r_last, p_local[last])
    excess_last = r_last - kept_last
    out[last] = kept_last / r_last
    if fixed_p > 0:
        for j in range(n - 1):  # two ratios: fixed_p * r_last can underflow (1e-300 * 1e-200)
            out[j] = share * (excess_last / r_last) * (p_local[j] / fixed_p)
    rejected = (1.0 - share) * excess_last / r_last
    if rejected > 0:  # the residual target: p minus what every column keeps or sends to T
        residual = np.zeros(k + 1)
        # T keeps what it did not receive: p on T scaled by 1 - share * excess_total / p(T),
        # all of p on T (0 there) when p(T) = 0 and no column can send anything to T.
        kept_fixed = 1.0 - share * excess_total / fixed_p if fixed_p > 0 else 1.0
        for j in range(n - 1):
            residual[j] = max(p_local[j] * kept_fixed, 0.0)
        for j in range(n - 1, k):
            residual[j] = max(p_local[j] - min(q_local[j] / rest, p_local[j]), 0.0)
        residual[k] = p_outside
        total = residual.sum()
        if total > 0:
            for j in range(k + 1):
                out[j] += rejected * residual[j] / total
    return OK, out
