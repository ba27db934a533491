"""Softmax systems for two drafts whose set masses are sums of two products ([GR] App. S).

For n = 2 draws the draft columns are the pairs {i, j} and the singletons {i}. Both
non-i.i.d. schemes of [GR] Appendix S give pair masses of the form

    w({i, j}) = a_i b_j + b_i a_j,    w({i}) = d_i,

* sampling without replacement: P(i then j) + P(j then i) = q_i q_j / (1 - q_i) + q_j q_i /
  (1 - q_j), so a = q / (1 - q), b = q, d = 0 (1 - q_i summed over the other tokens);
* two independent drafts q1, q2: q1_i q2_j + q1_j q2_i, so a = q1, b = q2, d = q1 q2.

Tokens of the ``base`` (draws that leave the system's sets unchanged: H* or later blocks for
the outer system, the p = 0 tokens of H* for the inner one) enter only through Σ_base a and
Σ_base b. With c = e^alpha and the exponential sum 1/x ≈ Σ_r w1_r e^{-t_r x} of
:mod:`~otlp.solvers.global_resolution.expsum` applied to x = slack + c_i + c_j only (the
one-variable columns are exact), token i receives

    g_i = c_i (d_i + a_i B_b + b_i B_a) / (slack + c_i)
          + c_i Σ_r W_r y_ri (a_i Σ_{j≠i} b_j y_rj + b_i Σ_{j≠i} a_j y_rj),

W_r = w1_r e^{-t_r slack}, y_rj = e^{-t_r c_j}: O(R m) per evaluation, with the sums over
j ≠ i as prefix plus suffix sums (no subtraction, so a token holding almost all the draft
mass does not cancel the others). The Hessian's off-diagonal part is
Σ_r w2_r e^{-t_r slack} (u_a u_b^T + u_b u_a^T) with u_a = c y_r a, u_b = c y_r b: rank 2 per
node, in the Laplacian form :func:`~otlp.solvers.global_resolution.newton.newton` expects.

The same factors give subset selection without replacement in closed form at n = 2
([GR] §6, Lemma 6.3's prefix rule; App. S): both drafts fall in H unless the first draw
leaves H, or the first draw is some i in H and the second leaves H, so with λ = q(not H)

    C(H) = 1 - P(both drafts in H) = (λ / Q) (1 + Σ_{i∈H} q_i / (Q - q_i)),    Q = Σ q,

a sum of positive terms (Q - q_i as others' sums, λ as a suffix sum): :func:`pair_complements`
gives it for every prefix of a chain in O(k), where the general exponential-clock quadrature
(:func:`~otlp.solvers.global_resolution.clocks.prefix_complements`) costs O(R k n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numba as nb
import numpy as np

from otlp.solvers.arrays import FloatArray
from otlp.solvers.global_resolution.expsum import KERNEL_REL_ERRORS, quadrature
from otlp.solvers.global_resolution.softmax_system import Evaluation, SoftmaxSystem, clip_alpha


def others_sum(x: FloatArray) -> FloatArray:
    """Σ_{j≠i} x_j for every i, as prefix plus suffix sums of nonnegative terms."""
    prefix = np.concatenate([[0.0], np.cumsum(x)[:-1]])
    suffix = np.concatenate([np.cumsum(x[::-1])[::-1][1:], [0.0]])
    return prefix + suffix


@dataclass(frozen=True)
class PairSystem(SoftmaxSystem):
    """A :class:`SoftmaxSystem` over pair columns with masses a_i b_j + b_i a_j and d_i.

    ``q`` is informative only (the draft probability of each variable token);
    ``base_a``/``base_b`` are Σ a and Σ b over the base tokens.
    """

    a: FloatArray
    b: FloatArray
    d: FloatArray
    base_a: float
    base_b: float

    @cached_property
    def single(self) -> FloatArray:
        """Mass of the columns in which token i is the only variable."""
        return self.d + self.a * self.base_b + self.b * self.base_a

    @cached_property
    def reachable(self) -> FloatArray:
        return pair_reachable(self.a, self.b, self.single)

    def evaluate(self, alpha: FloatArray, hessian: bool = False) -> Evaluation:
        """Receipts (and the Hessian parts) at ``alpha``; see the module docstring."""
        alpha, receipts, row_sums, low_rank, blocks, quad_error = pair_evaluate(
            np.asarray(alpha, dtype=np.float64),
            self.a,
            self.b,
            self.single,
            self.slack,
            hessian,
            0,
        )
        if not hessian:
            return Evaluation(alpha, receipts, None, None, None, quad_error)
        return Evaluation(alpha, receipts, row_sums, low_rank, blocks, quad_error)


@nb.njit(cache=True)
def pair_evaluate(
    alpha: FloatArray,
    a: FloatArray,
    b: FloatArray,
    single: FloatArray,
    slack: float,
    hessian: bool,
    level: int,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """:meth:`PairSystem.evaluate` compiled: (clipped alpha, receipts, row sums, U^T, Λ
    blocks, certified bound of the receipts' quadrature error), the Hessian parts empty
    unless ``hessian``; ``level`` picks the quadrature step
    (:data:`~otlp.solvers.global_resolution.expsum.STEPS`). Without slack c is shifted by
    max alpha (F is shift-invariant)."""
    gauge_free = slack == 0.0
    alpha = clip_alpha(alpha, gauge_free)
    m = alpha.shape[0]
    c = np.exp(alpha - alpha.max()) if gauge_free and m else np.exp(alpha)
    if m >= 2:
        first, second = -np.inf, -np.inf  # the two largest c
        for value in c:
            if value > first:
                first, second = value, first
            elif value > second:
                second = value
        t, w1, w2 = quadrature(slack + c.min(), slack + first + second, level)
        for r in range(t.shape[0]):
            scale = math.exp(-t[r] * slack)
            w1[r] *= scale
            w2[r] *= scale
    else:
        t, w1, w2 = np.zeros(0), np.zeros(0), np.zeros(0)
    pair, pair_rows, low_rank, blocks = _pair_terms(t, w1, w2, c, a, b, slack, hessian)
    receipts = np.empty(m)
    row_sums = np.empty(m if hessian else 0)
    for i in range(m):
        receipts[i] = c[i] * single[i] / (slack + c[i]) + pair[i]
        if hessian:
            row_sums[i] = slack * c[i] * single[i] / (slack + c[i]) ** 2 + pair_rows[i]
    quad_error = 1.01 * KERNEL_REL_ERRORS[level] * pair.sum()
    return alpha, receipts, row_sums, low_rank, blocks, quad_error


@nb.njit(cache=True)
def pair_reachable(a: FloatArray, b: FloatArray, single: FloatArray) -> FloatArray:
    """Mass of the columns containing each token: single_i + a_i Σ_{j≠i} b_j + b_i Σ_{j≠i} a_j."""
    m = a.shape[0]
    sum_a, sum_b = np.empty(m), np.empty(m)
    _exclusive(np.ascontiguousarray(a), sum_a)
    _exclusive(np.ascontiguousarray(b), sum_b)
    return single + a * sum_b + b * sum_a


@nb.njit(cache=True)
def pair_complements(q_order: FloatArray) -> FloatArray:
    """1 - P(both of two draws without replacement lie in q_order[:i]), i = 0..k (see the
    module docstring). ``q_order`` is the draft distribution in chain order; its total Q is
    the clocks' normalisation, so the values match the quadrature's to rounding."""
    k = q_order.shape[0]
    others = np.empty(k)
    _exclusive(q_order, others)
    total = q_order.sum()
    rest = np.empty(k + 1)  # q outside the first i tokens, as suffix sums
    rest[k] = 0.0
    for i in range(k - 1, -1, -1):
        rest[i] = rest[i + 1] + q_order[i]
    out = np.ones(k + 1)  # fewer than two tokens inside, or no mass outside: the
    if k >= 2:  # quadrature's conventions (a pair needs two tokens of positive mass)
        out[k] = 0.0
    # rest_i (1 + Σ_{j<i} q_j / (Q - q_j)) as rest_i + scaled, scaled = Σ_{j<i} q_j rest_i /
    # (Q - q_j): each term is at most q_j (Q - q_j >= rest_i), where the ratio alone overflows
    # once Q - q_j is subnormal (a draft holding all but 1e-309 of the mass).
    scaled = 0.0
    for i in range(k):
        if i >= 2 and rest[i] > 0:
            out[i] = min((rest[i] + scaled) / total, 1.0)
        after = rest[i + 1]
        scaled = scaled * (after / rest[i]) if rest[i] > 0 else 0.0
        if others[i] > 0:
            scaled += q_order[i] * (after / others[i])
    return out


@nb.njit(cache=True)
def _exclusive(x: FloatArray, out: FloatArray) -> None:
    """out_i = Σ_{j≠i} x_j by a forward and a backward pass (no subtraction)."""
    m = x.shape[0]
    acc = 0.0
    for i in range(m):
        out[i] = acc
        acc += x[i]
    acc = 0.0
    for i in range(m - 1, -1, -1):
        out[i] += acc
        acc += x[i]


@nb.njit(cache=True)
def _pair_terms(
    t: FloatArray,
    w1: FloatArray,
    w2: FloatArray,
    c: FloatArray,
    a: FloatArray,
    b: FloatArray,
    slack: float,
    hessian: bool,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Pair-column receipts, their Hessian row sums, U^T (rows (node, a|b)) and Λ blocks."""
    nodes, m = t.shape[0], c.shape[0]
    receipts = np.zeros(m)
    row_sums = np.zeros(m)
    rank = 2 if hessian else 0
    low_rank = np.zeros((nodes * rank, m))
    blocks = np.zeros((nodes, rank, rank))
    y = np.empty(m)
    ya = np.empty(m)
    yb = np.empty(m)
    sum_a = np.empty(m)
    sum_b = np.empty(m)
    for r in range(nodes):
        for i in range(m):
            y[i] = np.exp(-t[r] * c[i])
            ya[i] = a[i] * y[i]
            yb[i] = b[i] * y[i]
        _exclusive(ya, sum_a)
        _exclusive(yb, sum_b)
        for i in range(m):
            term = y[i] * (a[i] * sum_b[i] + b[i] * sum_a[i])
            receipts[i] += w1[r] * term
            if hessian and slack > 0:
                row_sums[i] += slack * w2[r] * term
        if hessian:
            for i in range(m):
                low_rank[2 * r, i] = c[i] * ya[i]
                low_rank[2 * r + 1, i] = c[i] * yb[i]
            blocks[r, 0, 1] = w2[r]
            blocks[r, 1, 0] = w2[r]
    for i in range(m):
        receipts[i] *= c[i]
        row_sums[i] *= c[i]
    return receipts, row_sums, low_rank, blocks
