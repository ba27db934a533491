"""The Newton direction of the softmax systems, at a cost bounded before it starts.

The Hessian of F is H = diag(rho + M 1) - M with M = U Λ U^T of rank R (one block of Λ per
quadrature node; see :class:`~otlp.solvers.global_resolution.softmax_system.Evaluation`). Per
node Λ_t = V diag(λ) V^T gives M = W^T diag(sign) W (:func:`factors`), and H d = -g is
solved by one of three methods, each of bounded cost (flop counts: :func:`direction_work`):

* the Woodbury identity, O(size R^2 + R^3), when the rank is below half the variables;
* else the dense m x m system by least squares, O(size^3) (a Hessian singular to machine
  precision must not raise);
* where that exact method would take more than ``EXACT_WORK`` flops: preconditioned conjugate
  gradients on Hessian-vector products (matrix-free, 4 R size flops per product), stopped
  after at most ``CG_WORK`` flops. H is positive semidefinite (Laplacian form) plus a ridge,
  so every CG iterate is a descent direction; the line search does the rest (truncated
  Newton).

The dense system at (k, n) = (5,000, 8) with ~300 quadrature nodes was 5,000^3 flops per
step (two steps took 241 s on this machine against a 5 s budget, issue 24); its bounded
replacement costs at most ``CG_WORK`` flops.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray, IntArray

RIDGE = 1e-13  # relative diagonal shift against exactly singular Hessians
EXACT_WORK = 3e9  # flops an exact (Woodbury or dense) direction may take (BLAS: ~1 s)
CG_WORK = 1e9  # flops the conjugate-gradient direction may take
CG_TOLERANCE = 1e-10  # relative residual at which CG stops early
LSTSQ_FLOPS = 4.0  # dense least squares costs about this many size^3 flops


@nb.njit(cache=True)
def factors(low_rank: FloatArray, blocks: FloatArray, m: int) -> tuple[FloatArray, FloatArray]:
    """U Λ U^T = W diag(sign) W^T: per node Λ_t = V diag(λ) V^T, W = U V |λ|^(1/2).

    Returns W^T (one row per node and eigenvector, like ``low_rank``: rows are contiguous
    over the m variables) and the signs."""
    nodes, rank = blocks.shape[0], blocks.shape[1]
    w_t = np.zeros((nodes * rank, m))
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
                source = t * rank + a
                for i in range(m):
                    w_t[col, i] += coef * low_rank[source, i]
    return w_t, sign


@nb.njit(cache=True)
def direction_work(size: int, nodes: int, rank: int, m: int) -> tuple[float, float, float]:
    """Flops of (the factors, the Woodbury solve, the dense solve) for ``size`` free
    variables out of ``m`` and a low-rank part of ``nodes`` blocks of ``rank``."""
    k = float(nodes * rank)
    factor = nodes * (10.0 * rank**3 + 2.0 * rank * rank * m) + 2.0 * k * m
    woodbury = 2.0 * k * k * size + k**3 if 2 * k < size else np.inf
    dense = LSTSQ_FLOPS * float(size) ** 3 + 2.0 * k * size * size
    return factor, woodbury, dense


WOODBURY, DENSE, CONJUGATE_GRADIENTS = 0, 1, 2


@nb.njit(cache=True)
def direction_method(size: int, nodes: int, rank: int, m: int, positive: bool) -> int:
    """``WOODBURY`` when the rank is below half of ``size`` and the diagonal is
    ``positive``, else ``DENSE``; ``CONJUGATE_GRADIENTS`` where that method's flops exceed
    ``EXACT_WORK``."""
    _, woodbury, dense = direction_work(size, nodes, rank, m)
    method, work = (WOODBURY, woodbury) if woodbury < np.inf and positive else (DENSE, dense)
    return CONJUGATE_GRADIENTS if work > EXACT_WORK else method


@nb.njit(cache=True)
def step_work(size: int, nodes: int, rank: int, m: int) -> float:
    """Flops one direction costs at most (see :func:`direction`)."""
    factor, woodbury, dense = direction_work(size, nodes, rank, m)
    exact = woodbury if woodbury < np.inf else dense
    return factor + min(exact, EXACT_WORK + CG_WORK)


@nb.njit(cache=True)
def conjugate_gradients(
    d: FloatArray, w: FloatArray, sign: FloatArray, rhs: FloatArray, max_iter: int
) -> FloatArray:
    """Solve (diag(d) - W^T diag(sign) W) x = rhs by Jacobi-preconditioned CG from x = 0.

    Stops after ``max_iter`` products, at relative residual ``CG_TOLERANCE``, or where the
    curvature p . H p is not positive (rounding); returns the preconditioned right-hand side
    (a descent direction) if no step was taken."""
    size = rhs.shape[0]
    diag = d.copy()
    for row in range(w.shape[0]):
        for i in range(size):
            diag[i] -= sign[row] * w[row, i] * w[row, i]
    floor = RIDGE * max(np.abs(d).max(), 1e-300)
    for i in range(size):
        diag[i] = max(diag[i], floor)
    x = np.zeros(size)
    r = rhs.copy()
    z = r / diag
    p = z.copy()
    rz = r @ z
    stop = CG_TOLERANCE * np.sqrt(rhs @ rhs)
    taken = 0
    for _ in range(max_iter):
        hp = d * p - (sign * (w @ p)) @ w
        curvature = p @ hp
        if not curvature > 0:
            break
        step = rz / curvature
        x += step * p
        r -= step * hp
        taken += 1
        if np.sqrt(r @ r) <= stop:
            break
        z = r / diag
        rz_next = r @ z
        p = z + (rz_next / rz) * p
        rz = rz_next
    return x if taken > 0 else rhs / diag


@nb.njit(cache=True)
def direction(
    residual: FloatArray,
    row_sums: FloatArray,
    low_rank: FloatArray,
    blocks: FloatArray,
    free: IntArray,
) -> FloatArray:
    """Solve H d = -residual on the ``free`` variables (d = 0 elsewhere) in bounded flops
    (see the module docstring)."""
    m = residual.shape[0]
    w_all, sign = factors(low_rank, blocks, m)  # W^T: (k, m)
    k = sign.shape[0]
    # H = diag(row_sums + M 1) - M with M = W diag(sign) W^T (Laplacian form)
    spread = (sign * (w_all @ np.ones(m))) @ w_all
    size = free.shape[0]
    w = w_all if size == m else np.ascontiguousarray(w_all[:, free])  # W^T on the free rows
    d = np.empty(size)
    rhs = np.empty(size)
    for row in range(size):
        i = free[row]
        rhs[row] = -residual[i]
        d[row] = row_sums[i] + spread[i]
    d += RIDGE * max(np.abs(d).max(), 1e-300)  # singular directions: MAX_STEP bounds them
    method = direction_method(size, blocks.shape[0], blocks.shape[1], m, bool((d > 0).all()))
    out = np.zeros(m)
    if method == CONJUGATE_GRADIENTS:
        products = max(int(CG_WORK / (4.0 * max(k, 1) * size + 10.0 * size)), 1)
        solution: NDArray[np.floating] = conjugate_gradients(d, w, sign, rhs, min(products, size))
    elif method == WOODBURY:  # (D - W S W^T)^-1 = D^-1 + ...
        scaled = w / d.reshape(1, size)  # (D^-1 W)^T
        capacitance = np.diag(sign) - scaled @ w.T
        correction = np.linalg.solve(capacitance, scaled @ rhs) @ scaled
        solution = rhs / d + correction
    else:
        hess = np.diag(d) - (w.T * sign.reshape(1, k)) @ w
        # Least squares, not solve: a Hessian singular to machine precision makes solve raise,
        # and numba 0.68 cannot re-raise through a try/except in compiled code ("Unreachable
        # condition reached (op code RERAISE)", found by otlp fuzz). This branch is small.
        solution = np.linalg.lstsq(hess, rhs)[0]
    for row in range(size):
        out[free[row]] = solution[row]
    return out
