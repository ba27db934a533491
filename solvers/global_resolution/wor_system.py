"""Softmax systems for n draws without replacement by a double quadrature ([GR] App. S).

Draws without replacement are the order in which exponential clocks E_j ~ Exp(q_j) ring
(see :mod:`~otlp.solvers.global_resolution.clocks`), so the mass of a drafted set s of size n is

    w(s) = ∫_0^∞ Σ_{l∉s} q_l e^{-q_l u} Π_{j∉s, j≠l} e^{-q_j u} Π_{j∈s} (1 - e^{-q_j u}) du

(clock l is the (n+1)-th to ring, at u, after all of s): a sum of products over *all*
tokens of factors in [0, 1], picked out by a marker x (degree 1) for l and z for s. With
the exponential sum 1/(slack + c(s)) ≈ Σ_r W_r Π_{l∈s∩vars} y_rl (y_rl = e^{-t_r c_l},
W_r = w1_r e^{-t_r slack},
:mod:`~otlp.solvers.global_resolution.expsum`) every sum over the unit's sets factorises:

    g_i = c_i Σ_r W_r ∫ du a_i y_ri [x z^{n-1}] B_u Π_{j∈vars, j≠i} (b_j + a_j y_rj z + q_j b_j x),

a_j = 1 - e^{-q_j u}, b_j = e^{-q_j u}; B_u = e^{-q_ex u} (1 + q_ex x) Π_base (b + a z + q b x)
holds the
base tokens (in the unit's sets but not variables) and the excluded ones (drawn never: the
unit's sets avoid them). The coefficient excluding i comes from prefix and suffix products,
so every term is a product of nonnegative numbers: nothing cancels, nothing overflows. One
evaluation costs O(R_t R_u m n). The u-integral is the trapezoidal rule in log u; as for
:mod:`~otlp.solvers.global_resolution.clocks` its relative error per set is bounded by
``discretisation_bound(n + 1, h)`` (the integrand has n factors 1 - e^{-w}) plus the tails,
u < u_low (relative <= u_low^{n+1} / (n + 1), since w(s) >= Π_{j∈s} q_j) and
u > u_high (relative <= e^{-30}). Positive terms carry relative errors over to the receipts.
The discretisation and left-tail targets are ``U_SHARE`` of the solve's tolerance (never
finer than ``U_REL_ERROR``): at tau = 1e-3, n = 4, about 15 u-nodes instead of 32.

Newton's Hessian is exact on the diagonal side (rho_i = slack c_i Σ_{s∋i} w / (slack +
c(s))^2 from the same pass with the w2 weights). Its off-diagonal part
M_ij = c_i c_j Σ_{s∋i,j} w(s) / (slack + c(s))^2 is exact too while that costs at most
``EXACT_HESSIAN_WORK`` (O(R_t R_u m^2 n): the products excluding two variables, about m / 2
evaluations of the receipts) for at most ``EXACT_HESSIAN_SIZE`` variables; beyond,
it is taken from the i.i.d. system on the same tokens
(:mod:`~otlp.solvers.global_resolution.softmax_system`, low rank, scaled to the exact total
Σ_ij M_ij): an approximate Hessian in Laplacian form is still positive semidefinite, so
Newton keeps descent directions, and the stopping rule uses the certified receipts only.
The i.i.d. stand-in is poor when one token holds almost all the draft mass (draws without
replacement then take it first and the rest from the tail, i.i.d. draws repeat it), which
the exact part covers for small units (the peaked reproducer of the tests: m = 23, n = 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numba as nb
import numpy as np

from otlp.solvers.arrays import FloatArray
from otlp.solvers.global_resolution.clocks import QuadratureRangeError, discretisation_bound, step
from otlp.solvers.global_resolution.expsum import KERNEL_REL_ERRORS, quadrature
from otlp.solvers.global_resolution.softmax_system import (
    Evaluation,
    SoftmaxSystem,
    clip_alpha,
    evaluate_kernel,
    power_table,
)

U_REL_ERROR = 1e-9  # target of the u-quadrature's discretisation bound
U_TAIL = 30.0  # the right tail is below e^-30 relative to every set's mass
U_SHARE = 0.01  # the u-quadrature's relative error may take this share of a solve's tolerance
EXACT_HESSIAN_WORK = 3e7  # largest R_t R_u m^2 n for the exact off-diagonal Hessian
EXACT_HESSIAN_SIZE = 40  # and the most variables: it costs about m / 2 receipt evaluations


def u_target(tol: float) -> float:
    """The u-quadrature's target for a solve to ``tol`` (an L1 deviation of receipts that sum
    to at most 1): ``U_SHARE`` of it rounded down to a power of ten (a few distinct targets,
    so :func:`~otlp.solvers.global_resolution.clocks.step` stays cached), never finer than
    ``U_REL_ERROR``."""
    if not U_SHARE * tol > U_REL_ERROR:
        return U_REL_ERROR
    return max(U_REL_ERROR, 10.0 ** math.floor(math.log10(U_SHARE * tol)))


@dataclass(frozen=True)
class WithoutReplacementSystem(SoftmaxSystem):
    """Variables ``q`` with ``targets``; ``base_q`` lists the base tokens' draft
    probabilities and ``excluded`` is the draft mass of the tokens the unit's sets avoid."""

    base_q: FloatArray
    excluded: float

    @cached_property
    def u_grid(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
        """:meth:`u_grid_at` the finest target, ``U_REL_ERROR``."""
        return self.u_grid_at(U_REL_ERROR)

    def u_grid_at(
        self, target: float
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
        """Per u-node: weights, a and b of the variables, base polynomials; the relative
        error bound of the u-quadrature, whose discretisation and left tail are each at most
        ``target`` (a solve to a tolerance ``tol`` uses :func:`u_target` of it: fewer nodes)."""
        n = self.n
        everything = np.concatenate([self.q, self.base_q])
        top = np.sort(everything)[::-1]
        rest = self.excluded + float(top[n:][::-1].sum())  # smallest 1 - q(s), no cancelling
        if not rest > 0:
            raise QuadratureRangeError("base_q: the unit's largest set holds all the draft mass")
        q_min = float(everything[everything > 0].min())
        h = step(n + 1, target)
        u_low = ((n + 1) * target) ** (1.0 / (n + 1))
        u_high = (U_TAIL + n * -math.log(q_min) - math.log(rest)) / rest
        count = math.ceil((math.log(u_high) - math.log(u_low)) / h) + 1
        u = np.exp(math.log(u_low) + h * np.arange(count))
        weights = h * u
        b = np.exp(-np.multiply.outer(u, self.q))
        a = -np.expm1(-np.multiply.outer(u, self.q))
        base = _base_polynomials(u, np.ascontiguousarray(self.base_q), self.excluded, n)
        bound = discretisation_bound(n + 1, h) + 2 * target + math.exp(-U_TAIL)
        return weights, a, b, base, bound

    @cached_property
    def iid_powers(self) -> tuple[FloatArray, FloatArray]:
        """:func:`~.softmax_system.power_table` of the i.i.d. system on the same tokens, whose
        Hessian stands in off the diagonal."""
        return power_table(self.q, float(self.base_q.sum()), self.n)

    @cached_property
    def reachable(self) -> FloatArray:
        weights, a, b, base, _ = self.u_grid
        return wor_reachable(self.q, weights, a, b, base)

    def evaluate(self, alpha: FloatArray, hessian: bool = False) -> Evaluation:
        """Receipts (and the Hessian parts) at ``alpha``; see the module docstring."""
        weights, a, b, base, bound = self.u_grid
        q_pow, base_pow = self.iid_powers
        alpha, receipts, rho, low_rank, blocks, quad_error = wor_evaluate(
            np.asarray(alpha, dtype=np.float64),
            self.q,
            weights,
            a,
            b,
            base,
            bound,
            q_pow,
            base_pow,
            self.slack,
            hessian,
            0,
        )
        if not hessian:
            return Evaluation(alpha, receipts, None, None, None, quad_error)
        return Evaluation(alpha, receipts, rho, low_rank, blocks, quad_error)


@nb.njit(cache=True)
def wor_reachable(
    q: FloatArray, weights: FloatArray, a: FloatArray, b: FloatArray, base: FloatArray
) -> FloatArray:
    """Mass of the unit's sets containing each variable, Σ_{s∋i} w(s), on a u-grid."""
    m = q.shape[0]
    one = np.ones(1)
    return _wor_terms(np.zeros(1), one, np.zeros(1), np.ones(m), q, a, b, base, weights, False)[0]


@nb.njit(cache=True)
def wor_evaluate(
    alpha: FloatArray,
    q: FloatArray,
    weights: FloatArray,
    a: FloatArray,
    b: FloatArray,
    base: FloatArray,
    u_bound: float,
    q_pow: FloatArray,
    base_pow: FloatArray,
    slack: float,
    hessian: bool,
    level: int,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """:meth:`WithoutReplacementSystem.evaluate` compiled on its u-grid
    (:attr:`~WithoutReplacementSystem.u_grid`) and i.i.d. powers: (clipped alpha, receipts,
    row sums, U^T, Λ blocks, certified bound of the receipts' quadrature error), the Hessian
    parts empty unless ``hessian`` and the row sums' place then holding the second sums that
    :func:`wor_hessian` completes them from; ``level`` picks the quadrature step
    (:data:`~otlp.solvers.global_resolution.expsum.STEPS`)."""
    gauge_free = slack == 0.0
    alpha = clip_alpha(alpha, gauge_free)
    m, n = alpha.shape[0], base.shape[2]
    c = np.exp(alpha - alpha.max()) if gauge_free and m else np.exp(alpha)
    ordered = np.sort(c)
    top = ordered[max(m - n, 0) :].sum()
    lo, hi = slack + ordered[0], slack + top
    t, w1, w2 = quadrature(lo, hi, level)
    for r in range(t.shape[0]):
        scale = math.exp(-t[r] * slack)
        w1[r] *= scale
        w2[r] *= scale
    receipts, second = _wor_terms(t, w1, w2, c, q, a, b, base, weights, True)
    relative = (1.0 + KERNEL_REL_ERRORS[level]) * (1.0 + u_bound) - 1.0
    quad_error = 1.01 * relative * receipts.sum()
    if not hessian:  # the second sums ride along: the Hessian then costs no second pass
        return alpha, receipts, second, np.zeros((0, m)), np.zeros((0, 0, 0)), quad_error
    rho, low_rank, blocks = wor_hessian(
        alpha, receipts, second, q, weights, a, b, base, q_pow, base_pow, slack, level
    )
    return alpha, receipts, rho, low_rank, blocks, quad_error


@nb.njit(cache=True)
def wor_hessian(
    alpha: FloatArray,
    receipts: FloatArray,
    second: FloatArray,
    q: FloatArray,
    weights: FloatArray,
    a: FloatArray,
    b: FloatArray,
    base: FloatArray,
    q_pow: FloatArray,
    base_pow: FloatArray,
    slack: float,
    level: int,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(rho, U^T, Λ blocks) at the clipped ``alpha`` from the receipts and second sums of
    :func:`wor_evaluate` there (c_i Σ_{s∋i} w(s) / (slack + c(s))^2): the diagonal side is
    exact, the off-diagonal part exact for small units and the scaled i.i.d. stand-in beyond
    (see the module docstring)."""
    gauge_free = slack == 0.0
    m, n = alpha.shape[0], base.shape[2]
    rho = slack * second
    c = np.exp(alpha - alpha.max()) if gauge_free and m else np.exp(alpha)
    if m <= EXACT_HESSIAN_SIZE:
        ordered = np.sort(c)
        lo, hi = slack + ordered[0], slack + ordered[max(m - n, 0) :].sum()
        t, _, w2 = quadrature(lo, hi, level)
        if t.shape[0] * weights.shape[0] * m * m * n <= EXACT_HESSIAN_WORK:
            for r in range(t.shape[0]):
                w2[r] *= math.exp(-t[r] * slack)
            blocks = np.empty((1, m, m))
            blocks[0] = _wor_pairs(t, w2, c, q, a, b, base, weights)
            return rho, np.eye(m), blocks
    spread = 0.0  # exact Σ_ij M_ij = Σ_i ((M 1)_i), from the receipts
    for i in range(m):
        spread += max(receipts[i] - (slack + c[i]) * second[i], 0.0)
    iid = evaluate_kernel(alpha, q_pow, base_pow, slack, True, level)
    low_rank, blocks = iid[3], iid[4]
    if low_rank.shape[0]:  # scale M to the exact Σ_{i≠j} M_ij (its diagonal cancels)
        off = _off_diagonal_sum(low_rank, blocks)
        if off > 0:
            blocks = blocks * (spread / off)
    return rho, low_rank, blocks


@nb.njit(cache=True)
def _off_diagonal_sum(low_rank: FloatArray, blocks: FloatArray) -> float:
    """Σ_{i≠j} M_ij of M = U Λ U^T with block-diagonal Λ (``low_rank`` = U^T, one row per node
    and rank): per node 1^T U_t Λ_t U_t^T 1 - Σ_i (U_t Λ_t U_t^T)_ii, O(nodes rank^2 m)."""
    nodes, rank = blocks.shape[0], blocks.shape[1]
    m = low_rank.shape[1]
    total = 0.0
    for node in range(nodes):
        for x in range(rank):
            row_x = low_rank[node * rank + x]
            for y in range(rank):
                row_y = low_rank[node * rank + y]
                diagonal = 0.0
                for i in range(m):
                    diagonal += row_x[i] * row_y[i]
                total += blocks[node, x, y] * (row_x.sum() * row_y.sum() - diagonal)
    return total


@nb.njit(cache=True)
def _base_polynomials(u: FloatArray, base_q: FloatArray, excluded: float, n: int) -> FloatArray:
    """[x^e z^d] of e^{-q_ex u} (1 + q_ex x) Π_base (b + a z + q b x), e <= 1, d < n, per node."""
    out = np.zeros((u.shape[0], 2, n))
    for k in range(u.shape[0]):
        out[k, 0, 0] = math.exp(-excluded * u[k])
        out[k, 1, 0] = excluded * out[k, 0, 0]
        for q in base_q:
            b = math.exp(-q * u[k])
            a = -math.expm1(-q * u[k])
            for d in range(n - 1, -1, -1):
                low0 = out[k, 0, d - 1] if d > 0 else 0.0
                low1 = out[k, 1, d - 1] if d > 0 else 0.0
                out[k, 1, d] = out[k, 1, d] * b + low1 * a + out[k, 0, d] * q * b
                out[k, 0, d] = out[k, 0, d] * b + low0 * a
    return out


@nb.njit(cache=True)
def _push(src: FloatArray, dst: FloatArray, a: float, b: float, qb: float, n: int) -> None:
    """dst = src * (b + a z + qb x), both [x^e z^d] with e <= 1, d < n (truncated)."""
    for d in range(n - 1, -1, -1):
        low0 = src[0, d - 1] if d > 0 else 0.0
        low1 = src[1, d - 1] if d > 0 else 0.0
        dst[1, d] = src[1, d] * b + low1 * a + src[0, d] * qb
        dst[0, d] = src[0, d] * b + low0 * a


@nb.njit(cache=True)
def _prefix_suffix(
    pre: FloatArray,
    suf: FloatArray,
    base: FloatArray,
    a: FloatArray,
    b: FloatArray,
    q: FloatArray,
    y: FloatArray,
    n: int,
) -> None:
    """The prefix products pre[j] = base * prod_{i<j} (b_i + a_i y_i z + q_i b_i x) and the
    suffix products suf[j] = prod_{i>=j} (...) over the m factors (truncated as :func:`_push`),
    for one node's y and one class (``base``, ``a``, ``b``)."""
    m = y.shape[0]
    pre[0] = base
    for j in range(m):
        _push(pre[j], pre[j + 1], a[j] * y[j], b[j], q[j] * b[j], n)
    suf[m] = 0.0
    suf[m, 0, 0] = 1.0
    for j in range(m - 1, -1, -1):
        _push(suf[j + 1], suf[j], a[j] * y[j], b[j], q[j] * b[j], n)


@nb.njit(cache=True)
def _wor_terms(
    t: FloatArray,
    w1: FloatArray,
    w2: FloatArray,
    c: FloatArray,
    q: FloatArray,
    a: FloatArray,
    b: FloatArray,
    base: FloatArray,
    weights: FloatArray,
    second: bool,
) -> tuple[FloatArray, FloatArray]:
    """c_i Σ_{s∋i} w(s) / (slack + c(s)) (w1) and c_i Σ_{s∋i} w(s) / (slack + c(s))^2 (w2).

    w(s) = ∫ Σ_{l∉s} q_l e^{-q_l u} Π_{j∉s, j≠l} e^{-q_j u} Π_{j∈s} (1 - e^{-q_j u}) du (the
    (n+1)-th clock l rings at u after all of s): the marker x picks l, z counts s.
    """
    nodes, m, n = t.shape[0], c.shape[0], base.shape[2]
    first = np.zeros(m)
    other = np.zeros(m)
    y = np.empty(m)
    pre = np.empty((m + 1, 2, n))
    suf = np.empty((m + 1, 2, n))
    for r in range(nodes):
        for i in range(m):
            y[i] = math.exp(-t[r] * c[i])
        for k in range(weights.shape[0]):
            _prefix_suffix(pre, suf, base[k], a[k], b[k], q, y, n)
            for i in range(m):
                e = 0.0
                for d in range(n):
                    e += pre[i, 0, d] * suf[i + 1, 1, n - 1 - d]
                    e += pre[i, 1, d] * suf[i + 1, 0, n - 1 - d]
                value = weights[k] * a[k, i] * y[i] * e
                first[i] += w1[r] * value
                if second:
                    other[i] += w2[r] * value
    for i in range(m):
        first[i] *= c[i]
        other[i] *= c[i]
    return first, other


@nb.njit(cache=True)
def _wor_pairs(
    t: FloatArray,
    w2: FloatArray,
    c: FloatArray,
    q: FloatArray,
    a: FloatArray,
    b: FloatArray,
    base: FloatArray,
    weights: FloatArray,
) -> FloatArray:
    """M_ij = c_i c_j Σ_{s∋i,j} w(s) / (slack + c(s))^2 (i ≠ j, zero diagonal), the exact
    off-diagonal Hessian: per node, [x z^{n-2}] of the product over every factor but i and j
    (a prefix product times the factors between them times a suffix product; all terms
    positive)."""
    nodes, m, n = t.shape[0], c.shape[0], base.shape[2]
    out = np.zeros((m, m))
    y = np.empty(m)
    pre = np.empty((m + 1, 2, n))
    suf = np.empty((m + 1, 2, n))
    cur = np.empty((2, n))
    nxt = np.empty((2, n))
    if n < 2:
        return out
    for r in range(nodes):
        for i in range(m):
            y[i] = math.exp(-t[r] * c[i])
        for k in range(weights.shape[0]):
            _prefix_suffix(pre, suf, base[k], a[k], b[k], q, y, n)
            for i in range(m - 1):
                cur[:] = pre[i]
                left = w2[r] * weights[k] * a[k, i] * y[i]
                for j in range(i + 1, m):
                    e = 0.0
                    for d in range(n - 1):
                        e += cur[0, d] * suf[j + 1, 1, n - 2 - d]
                        e += cur[1, d] * suf[j + 1, 0, n - 2 - d]
                    out[i, j] += left * a[k, j] * y[j] * e
                    _push(cur, nxt, a[k, j] * y[j], b[k, j], q[j] * b[k, j], n)
                    cur[:] = nxt
    for i in range(m):
        for j in range(i + 1, m):
            out[i, j] *= c[i] * c[j]
            out[j, i] = out[i, j]
    return out
