"""The softmax-parametrised transport systems of global resolution, for i.i.d. drafts.

[GR] Lemmas I.1 and J.1: variable tokens i with draft probability q_i and target x_i,
n i.i.d. draws that land on the variables or on ``base`` (the draft mass of other tokens,
which take nothing), one column per set s of distinct variables drafted, with mass
w(s) = P(set(omega) ∩ variables = s). With c_i = exp(alpha_i) token i receives

    g_i(alpha) = Σ_{s ∋ i} w(s) c_i / (slack + c(s)),

the gradient (plus x) of F(alpha) = Σ_s w(s) log(slack + c(s)) - Σ_i x_i alpha_i: Θ of
Theorem 6.5 with slack 1 (the inner system; the "+1" is the unused draft mass) and, with
slack 0, Φ of Theorem 6.4 restricted to one block of the outer system.

Evaluation without enumerating sets. Replace 1/(slack + c(s)) by the exponential sum of
:mod:`expsum`; each node t turns the set function into a product y^s = Π_{l in s} exp(-t c_l),
and for i.i.d. draws

    Σ_s w(s) y^s = n! [z^n] e^{base z} Π_l (1 + u_l(z)),   u_l(z) = y_l (e^{q_l z} - 1),

(an exponential generating function: each variable is absent or drafted at least once).
With P(z) the product and v_l = u_l / (1 + u_l), the sets containing i give
n! [z^n] v_i P, pairs i ≠ j give n! [z^n] v_i v_j P. Hence, per node, in O(m n^2):
receipts, the Hessian's row sums, and its off-diagonal part as the low-rank form U Λ U^T
(U[i, (t, a)] = c_i v_i[a], Λ_t[a, b] = w2_t n! P[n - a - b]). Every term is
positive, so the relative quadrature error carries over to the receipts unchanged; the
cost is O(R m n^2) for R ≈ 20-50 nodes instead of O(m^n / n!) sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numba as nb
import numpy as np

from otlp.solvers.arrays import FloatArray
from otlp.solvers.global_resolution.expsum import KERNEL_REL_ERRORS, quadrature

ALPHA_LIMIT = 700.0  # exp stays finite
ALPHA_SPAN = 100.0  # larger alpha gaps change no receipt by more than e^-100 (relative)


@dataclass(frozen=True)
class SoftmaxSystem:
    """One convex problem: variables with draft probabilities ``q`` and ``targets``."""

    q: FloatArray
    targets: FloatArray
    base: float
    slack: float
    n: int

    def __post_init__(self) -> None:
        if self.q.shape != self.targets.shape or self.q.ndim != 1:
            raise ValueError("targets: must match q, one entry per variable token")
        if self.slack not in (0.0, 1.0):
            raise ValueError(f"slack: expected 0 (outer) or 1 (inner), got {self.slack}")

    @property
    def size(self) -> int:
        return int(self.q.shape[0])

    @property
    def gauge_free(self) -> bool:
        """Without slack, F is invariant under alpha -> alpha + const."""
        return self.slack == 0.0

    @cached_property
    def reachable(self) -> FloatArray:
        """Mass of the columns containing each token: Q^n - (Q - q_i)^n, Q = base + Σ q."""
        return reachable_mass(self.q, self.base, self.n)

    def clip(self, alpha: FloatArray) -> FloatArray:
        """Keep alpha in a box where exp is finite and the kernel range stays moderate.

        With slack (inner), c_i = e^100 already takes all but e^-100 of every set; without
        slack (outer), only differences matter and are kept within ``ALPHA_SPAN``.
        """
        return clip_alpha(np.asarray(alpha, dtype=np.float64), self.gauge_free)

    @cached_property
    def _powers(self) -> tuple[FloatArray, FloatArray]:
        return power_table(self.q, self.base, self.n)

    def initial_alpha(self) -> FloatArray:
        """Each token alone with its columns: c_i / (1 + c_i) W_i = x_i (a good Newton start)."""
        return initial_alpha(self.q, self.targets, self.base, self.n, self.gauge_free)


@nb.njit(cache=True)
def reachable_mass(q: FloatArray, base: float, n: int) -> FloatArray:
    """Q^n - (Q - q_i)^n per token, Q = base + Σ q, summed as q_i Σ_j Q^j (Q - q_i)^(n-1-j).

    The sum form does not cancel for tiny q_i.
    """
    total = base + q.sum()
    out = np.empty(q.shape[0])
    for i in range(q.shape[0]):
        rest = max(total - q[i], 0.0)
        acc = 0.0
        for j in range(n):
            acc += total**j * rest ** (n - 1 - j)
        out[i] = q[i] * acc
    return out


@nb.njit(cache=True)
def clip_alpha(alpha: FloatArray, gauge_free: bool) -> FloatArray:
    """See :meth:`SoftmaxSystem.clip`."""
    out = np.empty(alpha.shape[0])
    if gauge_free:
        low = alpha.max() - ALPHA_SPAN if alpha.shape[0] else 0.0
        for i in range(alpha.shape[0]):
            out[i] = max(alpha[i], low)
    else:
        for i in range(alpha.shape[0]):
            out[i] = min(max(alpha[i], -ALPHA_LIMIT), ALPHA_SPAN)
    return out


@nb.njit(cache=True)
def power_table(q: FloatArray, base: float, n: int) -> tuple[FloatArray, FloatArray]:
    """q_i^a / a! (row 0 zero) and base^a / a! for a = 0..n: the series coefficients."""
    m = q.shape[0]
    q_pow = np.zeros((n + 1, m))
    base_pow = np.empty(n + 1)
    base_pow[0] = 1.0
    factorial = 1.0
    for a in range(1, n + 1):
        factorial *= a
        base_pow[a] = base**a / factorial
        for j in range(m):
            q_pow[a, j] = q[j] ** a / factorial
    return q_pow, base_pow


@nb.njit(cache=True)
def initial_alpha(
    q: FloatArray, targets: FloatArray, base: float, n: int, gauge_free: bool
) -> FloatArray:
    """See :meth:`SoftmaxSystem.initial_alpha`."""
    reach = reachable_mass(q, base, n)
    alpha = np.empty(q.shape[0])
    for i in range(q.shape[0]):
        room = max(reach[i] - targets[i], 1e-12 * reach[i])
        ratio = targets[i] / room if room > 0 else 1.0
        alpha[i] = math.log(min(max(ratio, 1e-300), 1e300))
    return clip_alpha(alpha, gauge_free)


@dataclass(frozen=True)
class Evaluation:
    """Receipts g(alpha) and, on request, the Hessian H of F in Laplacian form.

    Off the diagonal H = -M with M ≈ U Λ U^T (``low_rank`` holds U^T, one row per node and
    power a = 1..n-1; ``blocks`` the Λ blocks); the rows of H sum to ``row_sums``
    rho_i = slack c_i Σ_{s ∋ i} w(s) / (slack + c(s))^2 (the derivative of g_i under a
    common shift of alpha; 0 without slack). So H = diag(rho + M 1) - M: the quadrature
    perturbs the Laplacian's weights by a relative 1e-7 but never the near-null direction
    of a system with little slack, which a separately computed diagonal would swamp.
    """

    alpha: FloatArray
    receipts: FloatArray
    row_sums: FloatArray | None
    low_rank: FloatArray | None
    blocks: FloatArray | None
    quad_error: float

    @property
    def nodes(self) -> int:
        return 0 if self.blocks is None else int(self.blocks.shape[0])


@nb.njit(cache=True)
def _kernel_nodes(
    c: FloatArray, slack: float, n: int, level: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Nodes and weights for 1/(slack + c(s)) over the sets with at least one variable.

    The weights include n! and exp(-t slack), the factor of the constant term.
    """
    top = np.zeros(min(n, c.shape[0]))  # the n largest c, descending
    for value in c:
        if value > top[-1]:
            pos = top.shape[0] - 1
            while pos > 0 and top[pos - 1] < value:
                top[pos] = top[pos - 1]
                pos -= 1
            top[pos] = value
    lo, hi = slack + c.min(), slack + top.sum()
    t, w1, w2 = quadrature(lo, hi, level)
    factorial = 1.0
    for a in range(2, n + 1):
        factorial *= a
    for k in range(t.shape[0]):
        scale = factorial * np.exp(-t[k] * slack)
        w1[k] *= scale
        w2[k] *= scale
    return t, w1, w2


def evaluate(system: SoftmaxSystem, alpha: FloatArray, hessian: bool = False) -> Evaluation:
    """Receipts of every variable (and the Hessian parts) at ``alpha``."""
    q_pow, base_pow = system._powers
    alpha, receipts, row_sums, low_rank, blocks, quad_error, _ = evaluate_kernel(
        np.asarray(alpha, dtype=np.float64), q_pow, base_pow, system.slack, hessian
    )
    if not hessian:
        return Evaluation(alpha, receipts, None, None, None, quad_error)
    return Evaluation(alpha, receipts, row_sums, low_rank, blocks, quad_error)


@nb.njit(cache=True)
def evaluate_kernel(
    alpha: FloatArray,
    q_pow: FloatArray,
    base_pow: FloatArray,
    slack: float,
    hessian: bool,
    level: int = 0,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float, float]:
    """:func:`evaluate` on the :func:`power_table` of a system: (clipped alpha, receipts,
    row sums, U^T, Λ blocks, error bound of the receipts (quadrature and rounding), its
    rounding part (:func:`rounding_error`)); the Hessian parts are empty unless
    ``hessian``. Without slack (outer) c is shifted by max alpha (F is shift-invariant).
    ``level`` picks the quadrature step (:data:`~otlp.solvers.global_resolution.expsum.STEPS`)."""
    n = base_pow.shape[0] - 1
    gauge_free = slack == 0.0
    alpha = clip_alpha(alpha, gauge_free)
    shift = alpha.max() if gauge_free else 0.0
    c = np.exp(alpha - shift)
    t, w1, w2 = _kernel_nodes(c, slack, n, level)
    if n == 2:
        receipts, row_sums, low_rank, blocks, magnitude = _accumulate_two(
            t, c, q_pow, base_pow, w1, w2, slack, hessian
        )
    else:
        y = np.empty((t.shape[0], c.shape[0]))
        for r in range(t.shape[0]):
            for i in range(c.shape[0]):
                y[r, i] = math.exp(-t[r] * c[i])
        receipts, row_sums, low_rank, blocks, magnitude = _accumulate(
            y, c, q_pow, base_pow, w1, w2, slack, hessian
        )
    rounding = rounding_error(magnitude, n)
    quad_error = 1.01 * KERNEL_REL_ERRORS[level] * abs(receipts.sum()) + rounding
    return alpha, receipts, row_sums, low_rank, blocks, quad_error, rounding


ROUNDING_SAFETY = 4.0  # the rounding estimate's factor over gamma_(n+4) |terms|


@nb.njit(cache=True)
def rounding_error(magnitude: float, n: int) -> float:
    """Estimated floating-point error of the receipts from the absolute sum of their terms.

    The series of :func:`_series` alternate in sign: v_j = u_j / (1 + u_j) and log(1 + u_j)
    have radius about pi / q_j, so for n q_j >> pi the terms c_i w1_t v[a] P[n - a] exceed
    the receipts by up to about n! (q_j / pi)^n (3e17 at n = 30, q_j = 1) and cancel to
    garbage the relative quadrature bound does not see. ``magnitude`` is Σ of their absolute
    values; ``ROUNDING_SAFETY`` gamma_(n+4) times it (Higham's running error estimate for the
    last sum) was 5-300x the measured error of the receipts against enumeration for
    n = 10..40, q up to 1 (``tests/test_gr_rounding.py``). Without cancellation it is about
    1e-14 of the receipts; with it, the certificate grows until the unit falls back exactly.
    """
    unit = (n + 4) * 2.0**-53
    return ROUNDING_SAFETY * unit / (1.0 - unit) * magnitude


@nb.njit(cache=True)
def _series(
    yr: FloatArray, q_pow: FloatArray, base_pow: FloatArray, v: FloatArray, logs: FloatArray
) -> FloatArray:
    """Fill v_j = u_j / (1 + u_j) and return P = e^{base z} Π_j (1 + u_j), both to z^n.

    u_j[a] = y_j q_j^a / a!. The product is exp(base z + Σ_j log(1 + u_j)): the per-token
    log series (f L' = f' with f = 1 + u_j) are summed over j, so every loop over tokens is
    independent and vectorises; all work is O(m n^2).
    """
    n = base_pow.shape[0] - 1
    m = yr.shape[0]
    tmp = np.empty(m)
    series = np.zeros(n + 1)
    if n >= 1:
        series[1] = base_pow[1]
    for a in range(1, n + 1):
        for j in range(m):
            tmp[j] = q_pow[a, j]
        for b in range(1, a):
            for j in range(m):
                tmp[j] -= q_pow[b, j] * v[a - b, j]
        for j in range(m):
            v[a, j] = yr[j] * tmp[j]
        for j in range(m):
            tmp[j] = a * q_pow[a, j]
        for b in range(1, a):
            for j in range(m):
                tmp[j] -= b * logs[b, j] * q_pow[a - b, j]
        total = 0.0
        for j in range(m):
            logs[a, j] = yr[j] * tmp[j] / a
            total += logs[a, j]
        series[a] += total
    prod = np.empty(n + 1)
    prod[0] = 1.0
    for a in range(1, n + 1):
        acc = 0.0
        for b in range(1, a + 1):
            acc += b * series[b] * prod[a - b]
        prod[a] = acc / a
    return prod


@nb.njit(cache=True)
def _accumulate(
    y: FloatArray,
    c: FloatArray,
    q_pow: FloatArray,
    base_pow: FloatArray,
    w1: FloatArray,
    w2: FloatArray,
    slack: float,
    hessian: bool,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """Receipts, Hessian row sums, U^T (rows (node, a)), Λ blocks and the absolute sum of
    the receipts' terms (:func:`rounding_error`); see the module doc."""
    nodes, m = y.shape
    n = base_pow.shape[0] - 1
    rank = n - 1 if hessian else 0
    receipts = np.zeros(m)
    magnitudes = np.zeros(m)
    row_sums = np.zeros(m)
    low_rank = np.zeros((nodes * rank, m))
    blocks = np.zeros((nodes, rank, rank))
    v = np.zeros((n + 1, m))
    logs = np.zeros((n + 1, m))
    for r in range(nodes):
        prod = _series(y[r], q_pow, base_pow, v, logs)
        for a in range(1, n + 1):
            coef = w1[r] * prod[n - a]
            size = abs(coef)
            for i in range(m):
                receipts[i] += coef * v[a, i]
                magnitudes[i] += size * abs(v[a, i])
        if not hessian:
            continue
        if slack > 0:  # row sums: slack * c_i Σ_{s ∋ i} w(s) / (slack + c(s))^2
            for a in range(1, n + 1):
                coef = slack * w2[r] * prod[n - a]
                for i in range(m):
                    row_sums[i] += coef * v[a, i]
        for a in range(1, n):
            row = r * rank + a - 1
            for i in range(m):
                low_rank[row, i] = c[i] * v[a, i]
            for b in range(1, n + 1 - a):
                blocks[r, a - 1, b - 1] = w2[r] * prod[n - a - b]
    magnitude = 0.0
    for i in range(m):
        receipts[i] *= c[i]
        row_sums[i] *= c[i]
        magnitude += c[i] * magnitudes[i]
    return receipts, row_sums, low_rank, blocks, magnitude


@nb.njit(cache=True)
def _accumulate_two(
    t: FloatArray,
    c: FloatArray,
    q_pow: FloatArray,
    base_pow: FloatArray,
    w1: FloatArray,
    w2: FloatArray,
    slack: float,
    hessian: bool,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """:func:`_accumulate` for n = 2 in two passes over the tokens per node (the general
    series take about fifteen): with y = exp(-t c), v_1 = y q, v_2 = y q^2 (1/2 - y) and
    P_1 = base + Σ_j y_j q_j, every receipt term is w1 (P_1 v_1 + v_2), every row-sum term
    slack w2 (P_1 v_1 + v_2), U^T's row is c v_1 and Λ = w2 (P_0 = 1). Nothing cancels
    beyond |v_2| <= q^2 / 2, so the receipts' own sum stands for their terms' magnitude."""
    nodes, m = t.shape[0], c.shape[0]
    rank = 1 if hessian else 0
    receipts = np.zeros(m)
    row_sums = np.zeros(m)
    low_rank = np.zeros((nodes * rank, m))
    blocks = np.zeros((nodes, rank, rank))
    y = np.empty(m)
    for r in range(nodes):
        first = base_pow[1]
        for i in range(m):
            y[i] = math.exp(-t[r] * c[i])
            first += y[i] * q_pow[1, i]
        receipt_coef = w1[r]
        sum_coef = slack * w2[r]
        for i in range(m):
            v1 = y[i] * q_pow[1, i]
            term = first * v1 + y[i] * q_pow[2, i] * (1.0 - 2.0 * y[i])
            receipts[i] += receipt_coef * term
            if hessian:
                row_sums[i] += sum_coef * term
                low_rank[r, i] = c[i] * v1
        if hessian:
            blocks[r, 0, 0] = w2[r]
    magnitude = 0.0
    for i in range(m):
        receipts[i] *= c[i]
        row_sums[i] *= c[i]
        magnitude += abs(receipts[i])
    return receipts, row_sums, low_rank, blocks, magnitude
