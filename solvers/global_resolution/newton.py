"""Damped Newton for the softmax systems, with the exact (quadrature) Hessian.

The Hessian of F is diag(d) - U Λ U^T with U of rank R (n - 1) (see :mod:`softmax_system`).
When the rank is below half the number of variables the step uses the Woodbury identity in
O(m (R n)^2) — a Newton step at (k, n) = (1000, 2) costs about as much as one gradient —
and otherwise the dense m x m system.
The step is damped by backtracking on ||g(alpha) - x||_2: the Newton direction is a descent
direction for that merit function whatever the Hessian's inertia, and it needs receipts
only. Iteration stops when the *certified* L1 deviation ||g - x||_1 + (quadrature bound)
reaches ``tol``; without slack (outer blocks) one variable is pinned to fix the gauge.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba as nb
import numpy as np
from numpy.typing import NDArray

from solvers.global_resolution.softmax_system import SoftmaxSystem, evaluate

FloatArray = NDArray[np.float64]

MAX_STEP = 10.0  # largest change of any alpha in one step (a trust region in the infinity norm)


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
    hess_diag: FloatArray,
    low_rank: FloatArray,
    blocks: FloatArray,
    free: NDArray[np.int64],
) -> FloatArray:
    """Solve H d = -residual on the ``free`` variables (d = 0 elsewhere)."""
    m = residual.shape[0]
    w_all, sign = _factors(low_rank, blocks, m)
    k = sign.shape[0]
    size = free.shape[0]
    w = np.empty((size, k))
    d = np.empty(size)
    rhs = np.empty(size)
    for row in range(size):
        i = free[row]
        rhs[row] = -residual[i]
        acc = hess_diag[i]
        for col in range(k):
            w[row, col] = w_all[i, col]
            acc += sign[col] * w_all[i, col] ** 2
        d[row] = acc
    out = np.zeros(m)
    if 2 * k < size and (d > 0).all():  # Woodbury: (D - W S W^T)^-1 = D^-1 + ...
        scaled = w / d.reshape(size, 1)
        capacitance = np.diag(sign) - w.T @ scaled
        correction = scaled @ np.linalg.solve(capacitance, scaled.T @ rhs)
        solution = rhs / d + correction
    else:
        hess = np.diag(d) - (w * sign.reshape(1, k)) @ w.T
        solution = np.linalg.solve(hess, rhs)
    for row in range(size):
        out[free[row]] = solution[row]
    return out


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
    ev = evaluate(system, alpha, hessian=True)
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
        assert ev.hess_diag is not None and ev.low_rank is not None and ev.blocks is not None
        direction = _direction(residual, ev.hess_diag, ev.low_rank, ev.blocks, free)
        biggest = float(np.abs(direction).max())
        step = min(1.0, MAX_STEP / biggest) if biggest > 0 else 1.0
        merit = float(residual @ residual)
        while True:
            trial = evaluate(system, alpha + step * direction, hessian=True)
            evaluations += 1
            trial_residual = trial.receipts - system.targets
            if float(trial_residual @ trial_residual) <= (1.0 - 1e-4 * step) * merit:
                break
            step *= 0.5
            if step < 1e-10:
                break
        iterations += 1
        if step < 1e-10:
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
