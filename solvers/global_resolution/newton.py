"""Damped Newton for the softmax systems, with the exact (quadrature) Hessian.

The Hessian of F is diag(rho + M 1) - M with M = U Λ U^T of rank R (n - 1) and exact row
sums rho (see :class:`~otlp.solvers.global_resolution.softmax_system.Evaluation`); the direction
(:mod:`~otlp.solvers.global_resolution.direction`) uses the Woodbury identity, the dense system
or, where those are too costly, conjugate gradients, so that every step's flops are bounded.
With a deadline, a unit whose iterations are large (more than ``TIMED_WORK`` flops) or could
not all fit before it (``FIRST_CHUNK`` of them at :data:`~.budget.FLOP_RATE`) reads the clock
before every iteration and does not start one that would end past it if it took as long as
the last one (the first: as long as its flops predict); the line search stops at the
deadline. A solve then overruns its deadline by at most one iteration of bounded flops (one
slower than predicted or than the last), instead of running unbounded dense steps.
Steps are chosen on the convex objective itself, from receipts only: along a direction d,
phi'(t) = d . (g - x) is nondecreasing, so a trial with phi'(t) <= 0 has decreased F (see
:func:`_line_search`); backtracking on ||g - x|| instead zigzags when the inner system has
almost no slack (alpha* close to 1). Iteration stops when the *certified* L1 deviation
||g - x||_1 + (quadrature bound) reaches ``tol``; without slack (outer blocks) one variable
is pinned to fix the gauge.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.budget import FLOP_RATE
from otlp.solvers.global_resolution.direction import direction, step_work
from otlp.solvers.global_resolution.expsum import coarsest_level
from otlp.solvers.global_resolution.softmax_system import (
    SoftmaxSystem,
    evaluate_kernel,
    power_table,
)

MAX_STEP = 10.0  # largest change of any alpha in one step (each coordinate is clipped)
MAX_TRIALS = 40  # line-search evaluations per step
SHIFT_LIMIT = 50.0  # largest common shift of the inner start (see :func:`_shift_start`)
COMMON_SHARE = 0.9  # a shortfall this much along the common direction gets a shift step
CONVERGED, ITERATION_LIMIT, LINE_SEARCH_FAILED, UNRESOLVED, OUT_OF_TIME = 0, 1, 2, 3, 4
MESSAGES = (
    "converged",
    "iteration limit",
    "line search failed",
    "receipts not resolved: the series' rounding error exceeds the budget",
    "time budget exhausted",
)
FIRST_CHUNK = 4  # Newton iterations before the clock is first checked (most solves need fewer)
TIMED_WORK = 1e7  # flops above which an iteration reads the clock before it starts (~10 ms)
EXPECTED_TRIALS = 2.0  # line-search evaluations an iteration is expected to use


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

    @classmethod
    def of_kernel(cls, outputs: tuple[Any, ...], tol: float, start: float) -> MinimizeResult:
        """The result of a compiled Newton loop's ``(alpha, iterations, evaluations,
        ||grad||_1, deviation, status)``, timed from ``start`` (``time.perf_counter()``)."""
        alpha, iterations, evaluations, grad_norm, deviation, status = outputs
        return cls(
            alpha,
            int(iterations),
            int(evaluations),
            float(grad_norm),
            float(deviation),
            bool(deviation <= tol),
            MESSAGES[status],
            time.perf_counter() - start,
        )


@nb.njit(cache=True)
def clock() -> float:
    """``time.perf_counter()`` from compiled code (an object-mode block, a few microseconds)."""
    with nb.objmode(now="float64"):
        now = time.perf_counter()
    return now  # noqa: RET504 (objmode variables must be assigned, then returned)


@nb.njit(cache=True)
def free_variables(targets: FloatArray, slack: float) -> IntArray:
    """The coordinates Newton moves: all of them, or with no slack (F is then invariant
    under a common shift of alpha) all but the largest target's, pinned to fix the gauge."""
    m = targets.shape[0]
    if slack == 0.0:
        pinned = np.argmax(targets)
        return np.concatenate((np.arange(pinned), np.arange(pinned + 1, m)))
    return np.arange(m)


@nb.njit(cache=True)
def descent_direction(direction: FloatArray, residual: FloatArray) -> tuple[FloatArray, float]:
    """The line search's direction and phi'(0): Newton's ``direction`` with each coordinate
    clipped to +-MAX_STEP (tokens heading for saturation; scaling the whole step down instead
    stalls them all), or steepest descent scaled to MAX_STEP where that is not a descent
    direction (an inexact Hessian)."""
    direction = np.minimum(np.maximum(direction, -MAX_STEP), MAX_STEP)
    slope0 = float(direction @ residual)
    if not slope0 < 0:
        direction, slope0 = -residual, -float(residual @ residual)
        biggest = np.abs(direction).max()
        if biggest > 0:
            direction = direction * min(1.0, MAX_STEP / biggest)
    return direction, slope0


@nb.njit(cache=True)
def accepts_step(
    step: float, slope: float, slope0: float, trial_residual: FloatArray, merit: float
) -> bool:
    """Whether a trial ends the line search: the full step with phi' <= 0, or with
    |phi'| <= |phi'(0)| / 4 and a smaller residual (the quadratic regime); any step with
    phi' in [phi'(0) / 2, 0]."""
    if step == 1.0 and (
        slope <= 0 or (abs(slope) <= -0.25 * slope0 and trial_residual @ trial_residual < merit)
    ):
        return True
    return 0.5 * slope0 <= slope <= 0


@nb.njit(cache=True)
def illinois_bracket(
    step: float,
    slope: float,
    lo: float,
    slope_lo: float,
    hi: float,
    slope_hi: float,
    kept: int,
) -> tuple[float, float, float, float, int]:
    """The bracket of phi''s root after a trial at ``step`` (Illinois regula falsi): the trial
    replaces the end of its sign; an end kept twice in a row has its slope halved. ``kept``
    counts the kept end's run (> 0: the upper end, < 0: the lower). Returns (lo, slope_lo,
    hi, slope_hi, kept); the next trial is lo + (hi - lo) slope_lo / (slope_lo - slope_hi)."""
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
    return lo, slope_lo, hi, slope_hi, kept


@nb.njit(cache=True)
def _line_search(
    alpha: FloatArray,
    direction: FloatArray,
    residual: FloatArray,
    targets: FloatArray,
    q_pow: FloatArray,
    base_pow: FloatArray,
    slack: float,
    level: int,
    deadline: float = math.inf,
) -> tuple[bool, bool, Any, FloatArray, int]:
    """A step along ``direction`` that decreases the convex F, from receipts only.

    phi(t) = F(alpha + t d) is convex, so phi'(t) = d . (g - x) is nondecreasing and a
    trial with phi'(t) <= 0 has decreased F on all of [0, t]. The full (capped) Newton step
    is taken when phi' <= 0 there, or when it shrinks the residual with
    |phi'| <= |phi'(0)| / 4 (the quadratic regime). Otherwise phi' is bracketed and its
    root approached by Illinois regula falsi until phi'(t) lies in [phi'(0) / 2, 0]: far
    from the solution receipts grow like e^alpha and Newton overshoots by orders of
    magnitude, where plain backtracking would take tiny steps. Returns (found, whether it
    stopped at ``deadline`` (read before every trial after the first), the trial's
    evaluation — receipts only, no Hessian parts —, its residual, evaluations used).
    """
    direction, slope0 = descent_direction(direction, residual)
    merit = float(residual @ residual)
    lo, slope_lo, hi, slope_hi, step, kept = 0.0, slope0, 1.0, 0.0, 1.0, 0
    trial = (alpha, residual, residual, np.empty((0, 0)), np.empty((0, 0, 0)), 0.0, 0.0)
    trial_residual = residual
    for used in range(1, MAX_TRIALS + 1):
        if used > 1 and deadline < math.inf and clock() > deadline:
            return False, True, trial, trial_residual, used - 1
        trial = evaluate_kernel(alpha + step * direction, q_pow, base_pow, slack, False, level)
        trial_residual = trial[1] - targets
        slope = float(direction @ trial_residual)
        if accepts_step(step, slope, slope0, trial_residual, merit):
            return True, False, trial, trial_residual, used
        lo, slope_lo, hi, slope_hi, kept = illinois_bracket(
            step, slope, lo, slope_lo, hi, slope_hi, kept
        )
        step = lo + (hi - lo) * slope_lo / (slope_lo - slope_hi)
    return False, False, trial, trial_residual, MAX_TRIALS


@nb.njit(cache=True)
def _residual_mass(
    alpha: FloatArray, q_pow: FloatArray, base_pow: FloatArray, columns: float, level: int
) -> tuple[float, float]:
    """(mass the columns keep for the residual, its quadrature bound) at ``alpha`` (slack 1)."""
    ev = evaluate_kernel(alpha, q_pow, base_pow, 1.0, False, level)
    return columns - ev[1].sum(), ev[5]


@nb.njit(cache=True)
def _shift_start(
    alpha0: FloatArray,
    targets: FloatArray,
    q_pow: FloatArray,
    base_pow: FloatArray,
    columns: float,
    level: int,
) -> tuple[FloatArray, int]:
    """``alpha0`` plus the common shift that gives the residual its exact share (slack 1).

    The start of :func:`~otlp.solvers.global_resolution.softmax_system.initial_alpha` ignores the
    other tokens of each column, so its receipts fall short mostly by a *common* factor:
    at (k, n) = (10,000, 2) Newton's first directions are nearly constant (1.6 +- 0.01) and
    cut the residual only ~4x per step, because the residual mass
    R(s) = sum_s w(s) / (1 + e^s c(s)) is close to exponential in the shift s, not linear.
    Two receipt evaluations give a secant step on log R (from the model R ~ e^-s), which
    solves sum_i g_i = sum_i x_i about as well as an exact 1-D root. Returns (start,
    evaluations used); the shift is skipped when the residual masses are not resolved well
    above the quadrature error.
    """
    wanted = columns - targets.sum()
    r0, err0 = _residual_mass(alpha0, q_pow, base_pow, columns, level)
    if not (wanted > 100.0 * err0 and r0 > 100.0 * err0):
        return alpha0, 1
    first = min(max(math.log(r0 / wanted), -SHIFT_LIMIT), SHIFT_LIMIT)
    r1, err1 = _residual_mass(alpha0 + first, q_pow, base_pow, columns, level)
    shift = first
    if r1 > 100.0 * err1 and abs(math.log(r0 / r1)) > 1e-9:
        shift = first + math.log(r1 / wanted) * first / math.log(r0 / r1)
    shift = min(max(shift, -SHIFT_LIMIT), SHIFT_LIMIT)
    return alpha0 + shift, 2


@nb.njit(cache=True)
def _common_shift(
    alpha: FloatArray,
    residual: FloatArray,
    wanted: float,
    tol: float,
    q_pow: FloatArray,
    base_pow: FloatArray,
    level: int,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float, float]:
    """The evaluation at ``alpha`` plus the common shift that leaves the residual its share.

    When the receipts fall short by a common factor (slack 1, the inner system), the mass
    kept for the residual, R = wanted - Σ(g - x), decays like e^-s in a common shift s of
    alpha, and Newton's step on that direction is about +1: with almost no slack (alpha*
    close to 1, R needed ~1e-7) it then takes one iteration per factor e (eight at
    tau = 1e-6 on a peaked pair). The shift log(R / max(wanted, tol / 4)) takes it at once;
    the caller keeps it only if it lowers ||g - x||_1.
    """
    mass = wanted - residual.sum()
    shift = min(max(math.log(mass / max(wanted, 0.25 * tol)), 0.0), SHIFT_LIMIT)
    return evaluate_kernel(alpha + shift, q_pow, base_pow, 1.0, False, level)


@nb.njit(cache=True)
def newton_kernel(
    q: FloatArray,
    targets: FloatArray,
    base: float,
    slack: float,
    n: int,
    tol: float,
    alpha0: FloatArray,
    max_iter: int,
    deadline: float = math.inf,
    first_check: int = FIRST_CHUNK,
) -> tuple[FloatArray, int, int, float, float, int]:
    """Damped Newton from ``alpha0``: (alpha, iterations, evaluations, ||grad||_1, certified
    deviation, status) with status ``CONVERGED``, ``ITERATION_LIMIT``, ``LINE_SEARCH_FAILED`` or
    ``UNRESOLVED`` (the rounding error of the receipts alone exceeds ``tol``) or
    ``OUT_OF_TIME``: past ``deadline`` (``time.perf_counter()``), read before each iteration
    after the first ``first_check`` (most solves finish before the clock is ever read) or,
    for a unit whose iteration exceeds ``TIMED_WORK`` flops or whose first ``first_check``
    iterations are predicted to end past the deadline, before every iteration, which does
    not start if it would end past the deadline taking as long as the last one (the first:
    its predicted seconds; see the module docstring).
    """
    q_pow, base_pow = power_table(q, base, n)
    m = q.shape[0]
    free = free_variables(targets, slack)
    level = coarsest_level(tol)  # the coarsest quadrature the certificate allows
    evaluations = 1
    if slack > 0.0 and max_iter > 0 and m > 1:
        total = base_pow[1] + q.sum()  # columns with a variable: Q^n - base^n
        alpha0, used = _shift_start(alpha0, targets, q_pow, base_pow, total**n - base**n, level)
        evaluations += used
    ev = evaluate_kernel(alpha0, q_pow, base_pow, slack, True, level)
    # One iteration's flops: a Hessian evaluation, the direction and the line-search trials.
    work = step_work(free.shape[0], ev[4].shape[0], ev[4].shape[1], m)
    work += (1.0 + EXPECTED_TRIALS) * float(ev[4].shape[0]) * m * (n + 1) ** 2
    predicted = work / FLOP_RATE
    timed = deadline < math.inf and (
        work > TIMED_WORK or clock() + first_check * predicted > deadline
    )
    trial_deadline = deadline if timed else math.inf
    has_hessian = True
    residual = ev[1] - targets
    wanted = (base_pow[1] + q.sum()) ** n - base**n - targets.sum()  # the residual's share
    iterations, status = 0, ITERATION_LIMIT
    grad_norm = deviation = np.inf
    iteration_start = 0.0
    while True:
        grad_norm = np.abs(residual).sum()
        deviation = grad_norm + ev[5]
        if deviation <= tol:
            status = CONVERGED
            break
        if ev[6] > tol:  # rounding alone (cancellation, large n q): nothing can be certified
            status = UNRESOLVED
            break
        if iterations >= max_iter:
            break
        if timed:  # the first iteration runs if its predicted seconds fit
            now = clock()
            last = now - iteration_start if iterations > 0 else predicted
            if now + last > deadline:
                status = OUT_OF_TIME
                break
            iteration_start = now
        elif iterations >= first_check and deadline < math.inf and clock() > deadline:
            status = OUT_OF_TIME
            break
        if slack > 0.0 and m > 1 and -residual.sum() > COMMON_SHARE * grad_norm:
            shifted = _common_shift(ev[0], residual, wanted, tol, q_pow, base_pow, level)
            evaluations += 1
            if np.abs(shifted[1] - targets).sum() < grad_norm:
                ev, residual, has_hessian = shifted, shifted[1] - targets, False
                iterations += 1
                continue
        if not has_hessian:  # line-search trials carry receipts only
            ev = evaluate_kernel(ev[0], q_pow, base_pow, slack, True, level)
            evaluations += 1
            has_hessian = True
        step = direction(residual, ev[2], ev[3], ev[4], free)
        found, late, trial, trial_residual, used = _line_search(
            ev[0], step, residual, targets, q_pow, base_pow, slack, level, trial_deadline
        )
        evaluations += used
        iterations += 1
        if not found:
            status = OUT_OF_TIME if late else LINE_SEARCH_FAILED
            break
        ev, residual, has_hessian = trial, trial_residual, False
    return ev[0], iterations, evaluations, grad_norm, deviation, status


def newton(
    system: SoftmaxSystem,
    tol: float,
    *,
    alpha0: FloatArray | None = None,
    max_iter: int = 50,
    time_budget: float | None = None,
) -> MinimizeResult:
    """Minimise F until the certified deviation is at most ``tol`` (:func:`newton_kernel`).

    With a ``time_budget`` (seconds, counted from this call) the kernel stops at it (see
    :func:`newton_kernel`).
    """
    start = time.perf_counter()  # compiling below (numba: on first call) counts
    if not newton_kernel.overloads:
        half = np.full(2, 0.5)
        newton_kernel(half, half, 0.0, 1.0, 2, 1e-3, np.zeros(2), 1, math.inf, FIRST_CHUNK)
    alpha = system.initial_alpha() if alpha0 is None else np.array(alpha0, dtype=np.float64)
    deadline = math.inf if time_budget is None else start + time_budget
    outputs = newton_kernel(
        system.q,
        system.targets,
        float(system.base),
        float(system.slack),
        system.n,
        tol,
        alpha,
        max_iter,
        deadline,
        FIRST_CHUNK,
    )
    return MinimizeResult.of_kernel(outputs, tol, start)
