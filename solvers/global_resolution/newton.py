"""Damped Newton for the softmax systems, with the exact (quadrature) Hessian.

The Hessian of F is diag(rho + M 1) - M with M = U Λ U^T of rank R (n - 1) and exact row
sums rho (see :class:`~solvers.global_resolution.softmax_system.Evaluation`).
When the rank is below half the number of variables the step uses the Woodbury identity in
O(m (R n)^2) — a Newton step at (k, n) = (1000, 2) costs about as much as one gradient —
and otherwise the dense m x m system.
Steps are chosen on the convex objective itself, from receipts only: along a direction d,
phi'(t) = d . (g - x) is nondecreasing, so a trial with phi'(t) <= 0 has decreased F (see
:func:`_line_search`); backtracking on ||g - x|| instead zigzags when the inner system has
almost no slack (alpha* close to 1). Iteration stops when the *certified* L1 deviation
||g - x||_1 + (quadrature bound) reaches ``tol``; without slack (outer blocks) one variable
is pinned to fix the gauge.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba as nb
import numpy as np
from numpy.typing import NDArray

from solvers.global_resolution.softmax_system import Evaluation, SoftmaxSystem, evaluate

FloatArray = NDArray[np.float64]

RIDGE = 1e-13  # relative diagonal shift against exactly singular Hessians
MAX_STEP = 10.0  # largest change of any alpha in one step (each coordinate is clipped)
MAX_TRIALS = 40  # line-search evaluations per step


@dataclass(frozen=True)
class MinimizeResult:
    """Outcome of one convex solve. ``deviation`` bounds Σ_i |receipt_i - target_i|."""

    alpha: FloatArray
    iterations: int
    evaluations: int
    grad_norm: float
    deviation: float
    converged: bool
    message: str
    seconds: float


@nb.njit(cache=True)
def _factors(low_rank: FloatArray, blocks: FloatArray, m: int) -> tuple[FloatArray, FloatArray]:
    """U Λ U^T = W diag(sign) W^T: per node Λ_t = V diag(λ) V^T, W = U V |λ|^(1/2)."""
    nodes, rank = blocks.shape[0], blocks.shape[1]
    w = np.zeros((m, nodes * rank))
    sign = np.zeros(nodes * rank)
    for t in range(nodes):
        if rank == 1:
            lam = np.array([blocks[t, 0, 0]])
            vec = np.ones((1, 1))
        else:
            lam, vec = np.linalg.eigh(blocks[t])
        for b in range(rank):
            col = t * rank + b
            root = np.sqrt(np.abs(lam[b]))
            sign[col] = np.sign(lam[b])
            for a in range(rank):
                coef = vec[a, b] * root
                for i in range(m):
                    w[i, col] += coef * low_rank[t * rank + a, i]
    return w, sign


@nb.njit(cache=True)
def _direction(
    residual: FloatArray,
    row_sums: FloatArray,
    low_rank: FloatArray,
    blocks: FloatArray,
    free: NDArray[np.int64],
) -> FloatArray:
    """Solve H d = -residual on the ``free`` variables (d = 0 elsewhere)."""
    m = residual.shape[0]
    w_all, sign = _factors(low_rank, blocks, m)
    k = sign.shape[0]
    # H = diag(row_sums + M 1) - M with M = W diag(sign) W^T (Laplacian form)
    spread = w_all @ (sign * (w_all.T @ np.ones(m)))
    size = free.shape[0]
    w = np.empty((size, k))
    d = np.empty(size)
    rhs = np.empty(size)
    for row in range(size):
        i = free[row]
        rhs[row] = -residual[i]
        d[row] = row_sums[i] + spread[i]
        for col in range(k):
            w[row, col] = w_all[i, col]
    d += RIDGE * max(np.abs(d).max(), 1e-300)  # singular directions: MAX_STEP bounds them
    out = np.zeros(m)
    if 2 * k < size and (d > 0).all():  # Woodbury: (D - W S W^T)^-1 = D^-1 + ...
        scaled = w / d.reshape(size, 1)
        capacitance = np.diag(sign) - w.T @ scaled
        correction = scaled @ np.linalg.solve(capacitance, scaled.T @ rhs)
        solution = rhs / d + correction
    else:
        hess = np.diag(d) - (w * sign.reshape(1, k)) @ w.T
        try:
            solution = np.linalg.solve(hess, rhs)
        except Exception:  # singular to machine precision: least squares
            solution = np.linalg.lstsq(hess, rhs)[0]
    for row in range(size):
        out[free[row]] = solution[row]
    return out


def _evaluate(system: SoftmaxSystem, alpha: FloatArray) -> Evaluation:
    """Receipts and Hessian parts; a system with its own ``evaluate`` (other draft schemes,
    [GR] Appendix S) supplies them itself."""
    own = getattr(system, "evaluate", None)
    return own(alpha, hessian=True) if own is not None else evaluate(system, alpha, hessian=True)


def _line_search(
    system: SoftmaxSystem, alpha: FloatArray, direction: FloatArray, residual: FloatArray
) -> tuple[Evaluation | None, FloatArray, int]:
    """A step along ``direction`` that decreases the convex F, from receipts only.

    phi(t) = F(alpha + t d) is convex, so phi'(t) = d . (g - x) is nondecreasing and a
    trial with phi'(t) <= 0 has decreased F on all of [0, t]. The full (capped) Newton step
    is taken when phi' <= 0 there, or when it shrinks the residual with
    |phi'| <= |phi'(0)| / 4 (the quadratic regime). Otherwise phi' is bracketed and its
    root approached by Illinois regula falsi until phi'(t) lies in [phi'(0) / 2, 0]: far
    from the solution receipts grow like e^alpha and Newton overshoots by orders of
    magnitude, where plain backtracking would take tiny steps.
    """
    # Coordinates that Newton would move by more than MAX_STEP are clipped one by one (they
    # are tokens heading for saturation); scaling the whole step down instead stalls them all.
    direction = np.minimum(np.maximum(direction, -MAX_STEP), MAX_STEP)
    slope0 = float(direction @ residual)
    if not slope0 < 0:  # not a descent direction (inexact Hessian): steepest descent
        direction, slope0 = -residual, -float(residual @ residual)
        biggest = float(np.abs(direction).max())
        direction *= min(1.0, MAX_STEP / biggest) if biggest > 0 else 1.0
    full = 1.0
    merit = float(residual @ residual)
    lo, slope_lo, hi, slope_hi = 0.0, slope0, full, 0.0
    step, kept = full, 0
    for used in range(1, MAX_TRIALS + 1):
        trial = _evaluate(system, system.clip(alpha + step * direction))
        trial_residual = trial.receipts - system.targets
        slope = float(direction @ trial_residual)
        if step == full and (
            slope <= 0 or (abs(slope) <= -0.25 * slope0 and trial_residual @ trial_residual < merit)
        ):
            return trial, trial_residual, used
        if 0.5 * slope0 <= slope <= 0:
            return trial, trial_residual, used
        if slope < 0:
            lo, slope_lo = step, slope
            kept = kept + 1 if kept > 0 else 1  # the upper end was kept
            if kept > 1:
                slope_hi *= 0.5
        else:
            hi, slope_hi = step, slope
            kept = kept - 1 if kept < 0 else -1  # the lower end was kept
            if kept < -1:
                slope_lo *= 0.5
        step = lo + (hi - lo) * slope_lo / (slope_lo - slope_hi)
    return None, residual, MAX_TRIALS


def newton(
    system: SoftmaxSystem,
    tol: float,
    *,
    alpha0: FloatArray | None = None,
    max_iter: int = 50,
    time_budget: float | None = None,
) -> MinimizeResult:
    """Minimise F until the certified deviation is at most ``tol``."""
    start = time.perf_counter()
    alpha = system.initial_alpha() if alpha0 is None else np.array(alpha0, dtype=np.float64)
    free = np.arange(system.size, dtype=np.int64)
    if system.gauge_free:
        free = np.delete(free, int(np.argmax(system.targets)))
    ev = _evaluate(system, alpha)
    evaluations, iterations, message = 1, 0, "iteration limit"
    residual = ev.receipts - system.targets
    while True:
        grad_norm = float(np.abs(residual).sum())
        deviation = grad_norm + ev.quad_error
        if deviation <= tol:
            message = "converged"
            break
        if iterations >= max_iter:
            break
        if time_budget is not None and time.perf_counter() - start > time_budget:
            message = "time budget exhausted"
            break
        assert ev.row_sums is not None and ev.low_rank is not None and ev.blocks is not None
        direction = _direction(residual, ev.row_sums, ev.low_rank, ev.blocks, free)
        trial, trial_residual, used = _line_search(system, alpha, direction, residual)
        evaluations += used
        iterations += 1
        if trial is None:
            message = "line search failed"
            break
        alpha, ev, residual = trial.alpha, trial, trial_residual
    return MinimizeResult(
        alpha,
        iterations,
        evaluations,
        grad_norm,
        deviation,
        deviation <= tol,
        message,
        time.perf_counter() - start,
    )
