"""Exponential sums for 1/x and 1/x^2 on an interval: the separable kernel behind fast GR.

``1/x = ∫ exp(u - e^u x) du`` and ``1/x^2 = ∫ exp(2u - e^u x) du`` over the real line. With
the substitution ``u = s - exp(-(s - s0))`` (double-exponential decay on the left, where the
integrand would otherwise decay only like e^u) the trapezoidal rule with step ``STEP`` gives

    1/x ≈ Σ_k w1_k exp(-t_k x),   1/x^2 ≈ Σ_k w2_k exp(-t_k x),   x in [lo, hi],

with positive weights and relative errors below ``KERNEL_REL_ERROR`` and
``HESSIAN_REL_ERROR`` uniformly in the interval (checked on dense grids up to hi/lo = 1e15
in the tests). The node count grows like log(hi/lo) / STEP: about 20 for hi/lo = 10 and 50
for 1e6. Because every factor exp(-t c) of a sum of c's factorises, sums over all draft sets
become products of per-token terms (see :mod:`softmax_system`).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from otlp.solvers.arrays import FloatArray

# Trapezoid steps, finest first, the tails each level cuts off and the relative errors for 1/x
# and 1/x^2 (measured worst over 60 ratios hi/lo up to 1e15: 7.7e-9 / 1.1e-7, 1.6e-6 / 1.6e-5,
# 1.6e-5 / 1.5e-4, 8.8e-5 / 6.4e-4). A solver uses the coarsest step its certificate allows
# (:func:`coarsest_level`): fewer nodes (at hi/lo = 4: 21, 16, 14, 11).
STEPS = (0.45, 0.6, 0.7, 0.8)
TAILS = (1e-12, 1e-12, 1e-12, 1e-6)
KERNEL_REL_ERRORS = (1e-8, 2e-6, 2e-5, 1e-4)
HESSIAN_REL_ERRORS = (2e-7, 2e-5, 2e-4, 8e-4)
STEP, KERNEL_REL_ERROR, HESSIAN_REL_ERROR = STEPS[0], KERNEL_REL_ERRORS[0], HESSIAN_REL_ERRORS[0]
QUADRATURE_SHARE = 0.05  # the quadrature term may take this share of a certified tolerance
# per level, the s-range beyond which both tails are below TAILS[level]
_TAIL_RANGES = tuple(math.log(math.log(1.0 / tail) + 5.0) for tail in TAILS)


@nb.njit(cache=True)
def coarsest_level(tol: float) -> int:
    """The coarsest step whose kernel error (times 1.01) is within QUADRATURE_SHARE of tol."""
    for level in range(len(STEPS) - 1, 0, -1):
        if 1.01 * KERNEL_REL_ERRORS[level] <= QUADRATURE_SHARE * tol:
            return level
    return 0


@nb.njit(cache=True)
def quadrature(lo: float, hi: float, level: int = 0) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Nodes t and weights (w1 for 1/x, w2 for 1/x^2) valid on [lo, hi], 0 < lo <= hi, with
    the trapezoid step ``STEPS[level]``."""
    step, tail = STEPS[level], _TAIL_RANGES[level]
    ratio = max(hi / lo, 1.0)
    s0 = -math.log(ratio) - 1.0
    count = int((2.0 * tail - s0) / step) + 1
    t = np.empty(count)
    w1 = np.empty(count)
    w2 = np.empty(count)
    for k in range(count):
        s = s0 - tail + k * step
        e = math.exp(-(s - s0))
        eu = math.exp(s - e)
        jac = step * (1.0 + e) * eu
        t[k] = eu / lo
        w1[k] = jac / lo
        w2[k] = jac * eu / (lo * lo)
    return t, w1, w2
