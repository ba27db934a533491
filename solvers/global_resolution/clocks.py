"""P(all n drafts fall in H) for sampling without replacement, for every prefix at once.

Numeric only (arrays in, arrays out): subset selection (:mod:`otlp.subset`) and the
without-replacement systems of global resolution (:mod:`.wor_system`) both use it.

Sampling n tokens without replacement from q is the order in which independent exponential
clocks E_j ~ Exp(q_j) ring ([GR] Appendix S asks for H* and the outer targets of this
scheme). All n drafts lie in H exactly when n clocks of H ring before the first clock
outside H, which rings at rate lambda = q(outside H). Hence the complement

    C(H) = 1 - P(all n drafts in H) = ∫_0^∞ lambda e^{-lambda t} F_H(t) dt,
    F_H(t) = P(fewer than n clocks of H rang by t)
           = Σ_{m<n} [z^m] Π_{j∈H} (e^{-q_j t} + (1 - e^{-q_j t}) z),

a one-dimensional integral of a probability: every term is positive, so nothing cancels
(not even when one token holds almost all the draft mass). Along a chain of prefixes
H_0 ⊂ H_1 ⊂ ... the product gains one factor per token, so all k + 1 values cost O(R k n)
for R quadrature nodes, instead of summing C(k, n) set masses.

Quadrature, with a certified bound. With t = e^v the integrand g(v) = lambda t e^{-lambda t}
F_H(t) is entire in v; the trapezoidal rule with step h has error at most
2 N(θ) / (e^{2πθ/h} - 1) for any 0 < θ < π/2, where N(θ) bounds ∫|g(v ± iθ)| dv
(Trefethen & Weideman, SIAM Review 2014, Thm 5.1). For t = r e^{iφ}, |e^{-w}| = e^{-Re w} and
|1 - e^{-w}| <= min(|w|, 1 + e^{-Re w}) <= K_θ (1 - e^{-Re w}) with
K_θ = sup_y min(y / cos θ, 1 + e^{-y}) / (1 - e^{-y}); each term of F_H has fewer than n
factors 1 - e^{-w}, so |F_H(r e^{iφ})| <= K_θ^{n-1} F_H(r cos θ) and
N(θ) <= K_θ^{n-1} C(H) / cos θ: the discretisation error is *relative* to C(H), uniformly in
q, H and lambda. :func:`step` picks the largest h whose bound (minimised over θ) is at most
``REL_ERROR``. The grid runs from :func:`first_node` (below it F = 1 to within ``LEFT_ERROR``
and the nodes' sum is a closed-form series) to where every prefix's tail
h Σ lambda t e^{-lambda t} is below e^{-40} relative to C(H) >= lambda.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray
from otlp.solvers.global_resolution.pair_system import pair_complements

REL_ERROR = 1e-13  # target for the trapezoidal discretisation bound
LEFT_ERROR = 1e-14  # relative error of treating F = 1 below the first node
RIGHT_TAIL = 40.0  # every prefix's right tail is below e^-40 relative to its complement
SMALLEST_RATE = 1e-305  # below this, the clocks' time range (~50/rate) overflows float64


class QuadratureRangeError(ValueError):
    """The draft masses span more than the quadrature can represent in float64: some prefix
    leaves less than ``SMALLEST_RATE`` of draft mass, whose clock rings at times ~1/rate."""


@lru_cache(maxsize=32)
def _strip_constants() -> tuple[FloatArray, FloatArray]:
    """K_θ on a grid of θ (sup over a dense log grid of y, with a 1% margin)."""
    y = np.logspace(-9, 3, 120_001)
    thetas = np.linspace(0.05, 1.5, 146)
    factors = np.array(
        [(np.minimum(y / np.cos(t), 1 + np.exp(-y)) / -np.expm1(-y)).max() for t in thetas]
    )
    return thetas, 1.01 * factors


@lru_cache(maxsize=256)
def discretisation_bound(n: int, h: float) -> float:
    """Relative error bound of the trapezoidal rule with step ``h`` (minimised over θ)."""
    thetas, factors = _strip_constants()
    bounds = 2.0 * factors ** (n - 1) / np.cos(thetas) / np.expm1(2 * np.pi * thetas / h)
    return float(bounds.min())


@lru_cache(maxsize=64)
def step(n: int, target: float = REL_ERROR) -> float:
    """The largest step h (to 1e-3) whose discretisation bound is at most ``target``."""
    lo, hi = 0.01, 1.0
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if discretisation_bound(n, mid) <= target else (lo, mid)
    return lo


def first_node(n: int) -> float:
    """t below which F >= 1 - t^n / n! >= 1 - LEFT_ERROR: the left tail is then closed-form.

    Below it the nodes contribute h Σ lambda t_j e^{-lambda t_j} F(t_j), and 1 - F(t) =
    P(at least n clocks of H rang) <= (q(H) t)^n / n!; capped at 0.2 for :func:`_left_tail`.
    """
    return min((math.factorial(n) * LEFT_ERROR) ** (1.0 / n), 0.2)


@nb.njit(cache=True)
def _prefix_sums(q: FloatArray, rate: FloatArray, n: int, nodes: FloatArray) -> FloatArray:
    """Σ_t t e^{-rate_i t} F_{H_i}(t) over the nodes, for every prefix H_i of ``q``.

    One transcendental per (node, token): e^{-q t} or its complement, whichever is the
    smaller, and the other by subtraction (no cancellation); e^{-rate t} is updated by
    division while it stays normal.
    """
    k = q.shape[0]
    out = np.zeros(k + 1)
    poly = np.empty(n)
    for t in nodes:
        poly[:] = 0.0
        poly[0] = 1.0  # P(exactly m clocks of the prefix rang by t), m < n
        decay = math.exp(-rate[0] * t)
        out[0] += t * decay
        for j in range(k):
            x = q[j] * t
            if x > 0.7:
                b = math.exp(-x)
                a = 1.0 - b
            else:
                a = -math.expm1(-x)
                b = 1.0 - a
            for m in range(n - 1, 0, -1):
                poly[m] = poly[m] * b + poly[m - 1] * a
            poly[0] *= b
            exponent = rate[j + 1] * t
            if decay > 1e-200 and b > 1e-100:
                decay /= b
            elif exponent > 745.0:  # e^{-rate t} underflows: skip the exp
                decay = 0.0
            else:
                decay = math.exp(-exponent)
            if j + 1 >= n and rate[j + 1] > 0.0 and decay > 0.0:
                below = 0.0
                for m in range(n):
                    below += poly[m]
                out[j + 1] += t * decay * below
    return out


@nb.njit(cache=True)
def _left_tail(rate: FloatArray, h: float, t_low: float) -> FloatArray:
    """h Σ_{j>=1} x_j e^{-x_j}, x_j = rate t_low e^{-jh}: the nodes below ``t_low`` with F = 1.

    Expanding e^{-x} gives Σ_m (-1)^{m-1} (rate t_low)^m / (m-1)! / (e^{mh} - 1); with
    rate t_low < 0.2 twelve terms leave less than 1e-17.
    """
    out = np.empty(rate.shape[0])
    for i in range(rate.shape[0]):
        x = rate[i] * t_low
        power, factorial, total = 1.0, 1.0, 0.0  # x^m, (m - 1)!
        for m in range(1, 13):
            power *= x
            total += (-1.0) ** (m - 1) * power / factorial / math.expm1(m * h)
            factorial *= m
        out[i] = h * total
    return out


@dataclass(frozen=True)
class PrefixComplements:
    """``values[i]`` = 1 - P(all n drafts among the first i tokens); ``error[i]`` bounds it."""

    values: FloatArray
    error: FloatArray
    nodes: int


def prefix_complements(q_order: FloatArray, n: int) -> PrefixComplements:
    """1 - P(all n draws without replacement lie in q_order[:i]) for i = 0..k.

    ``q_order`` is the draft distribution (summing to one over all k tokens) in the order
    of the chain. Rates outside each prefix are suffix sums of positive terms. For n = 2 the
    closed form of :mod:`~otlp.solvers.global_resolution.pair_system` (no quadrature nodes).
    """
    q = np.ascontiguousarray(q_order, dtype=np.float64)
    k = q.shape[0]
    if n == 2:  # closed form in O(k): see the docstring
        pairs = pair_complements(q)
        return PrefixComplements(pairs, 8.0 * (k + 2) * np.finfo(float).eps * pairs, 0)
    rate = np.append(np.cumsum(q[::-1])[::-1], 0.0)  # q outside the first i tokens
    values = np.ones(k + 1)
    error = np.zeros(k + 1)
    if k >= n:
        values[k] = 0.0
    active = (np.arange(k + 1) >= n) & (rate > 0)
    if not active.any():
        return PrefixComplements(values, error, 0)
    h, t_low = step(n), first_node(n)
    smallest = float(rate[active].min())
    if smallest < SMALLEST_RATE:
        raise QuadratureRangeError(
            f"q: a prefix leaves draft mass {smallest:.3g} (below {SMALLEST_RATE:g}); the "
            "exponential-clock quadrature cannot span that range in float64"
        )
    t_high = (RIGHT_TAIL + math.log(1.0 / smallest) + 5.0) / smallest
    count = math.ceil((math.log(t_high) - math.log(t_low)) / h) + 1
    nodes = np.exp(math.log(t_low) + h * np.arange(count))
    sums = _prefix_sums(q, rate, n, nodes)
    values[active] = h * rate[active] * sums[active] + _left_tail(rate[active], h, t_low)
    relative = discretisation_bound(n, h) + LEFT_ERROR + math.exp(-RIGHT_TAIL)
    rounding = 8.0 * (k + count) * np.finfo(float).eps  # sums of positive terms only
    error[active] = (relative * (1.0 + 1e-3) + rounding) * values[active]
    np.minimum(values, 1.0, out=values)
    return PrefixComplements(values, error, count)


def complement_in(q: FloatArray, mask: NDArray[np.bool_], n: int) -> float:
    """1 - P(all n draws without replacement lie in the masked tokens)."""
    inside = int(mask.sum())
    chain = np.concatenate([q[mask], q[~mask]])
    return float(prefix_complements(chain, n).values[inside])


def prefix_psi_without_replacement(
    p_order: FloatArray, p_outside: float, q_order: FloatArray, n: int
) -> FloatArray:
    """psi(H_i) = p(H_i) - P(all drafts in H_i) for the prefixes H_i of a token order.

    Written as C(H_i) - p(not H_i): both terms are sums of positive parts (no 1 - x).
    """
    p_rest = np.append(np.cumsum(p_order[::-1])[::-1], 0.0) + p_outside
    return prefix_complements(q_order, n).values - p_rest
