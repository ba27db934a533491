"""Damped Newton for softmax systems that evaluate themselves ([GR] Appendix S schemes).

The i.i.d. systems run the compiled loop of :mod:`~solvers.global_resolution.newton`; systems
of other draft schemes (pair masses, sampling without replacement) bring their own
``evaluate(alpha, hessian) -> Evaluation``, so their loop is driven from Python around the
same compiled Newton step (:func:`~solvers.global_resolution.direction.direction`, of bounded
flops) and the same step rule on the convex objective: along a
direction d, phi'(t) = d . (g - x) is nondecreasing, so a trial with phi'(t) in
[phi'(0) / 2, 0] (or the full step in the quadratic regime) decreases F; its root is
bracketed by Illinois regula falsi. Iteration stops when the certified deviation
||g - x||_1 + (quadrature bound) reaches ``tol``. With a time budget no iteration starts
that would end past it if it took as long as the last one (the first: as long as
``1 + EXPECTED_TRIALS`` evaluations, timed on the initial one, and its direction's flops at
:data:`~.budget.FLOP_RATE`), and the line search stops at it: the budget is overrun by at
most one iteration, whose direction has bounded flops.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from solvers.global_resolution.budget import FLOP_RATE, Deadline, compile_seconds
from solvers.global_resolution.direction import compile_direction, direction, step_work
from solvers.global_resolution.newton import (
    EXPECTED_TRIALS,
    LINE_SEARCH_FAILED,
    MAX_STEP,
    MAX_TRIALS,
    MESSAGES,
    OUT_OF_TIME,
    MinimizeResult,
)
from solvers.global_resolution.softmax_system import Evaluation

FloatArray = NDArray[np.float64]


class SelfEvaluating(Protocol):
    """What the loop needs from a system (see :class:`~.softmax_system.SoftmaxSystem`)."""

    targets: FloatArray
    gauge_free: bool

    @property
    def size(self) -> int: ...

    @property
    def reachable(self) -> FloatArray: ...

    def clip(self, alpha: FloatArray) -> FloatArray: ...

    def evaluate(self, alpha: FloatArray, hessian: bool = False) -> Evaluation: ...


def _step(
    system: SelfEvaluating,
    alpha: FloatArray,
    direction: FloatArray,
    residual: FloatArray,
    deadline: Deadline | None = None,
) -> tuple[Evaluation | None, int]:
    """A trial along ``direction`` that decreases F, or None (also when ``deadline`` passes
    before a trial after the first). Trials carry the Hessian parts: for these systems they
    cost little next to the receipts, and the accepted trial is the next iterate."""
    direction = np.clip(direction, -MAX_STEP, MAX_STEP)
    slope0 = float(direction @ residual)
    if not slope0 < 0:  # not a descent direction (approximate Hessian): steepest descent
        direction, slope0 = -residual, -float(residual @ residual)
        biggest = float(np.abs(direction).max())
        if biggest > 0:
            direction = direction * min(1.0, MAX_STEP / biggest)
    merit = float(residual @ residual)
    lo, slope_lo, hi, slope_hi, step, kept = 0.0, slope0, 1.0, 0.0, 1.0, 0
    for used in range(1, MAX_TRIALS + 1):
        if used > 1 and deadline is not None and time.perf_counter() > deadline.now():
            return None, used - 1
        trial = system.evaluate(system.clip(alpha + step * direction), hessian=True)
        trial_residual = trial.receipts - system.targets
        slope = float(direction @ trial_residual)
        quadratic = abs(slope) <= -0.25 * slope0 and trial_residual @ trial_residual < merit
        if (step == 1.0 and (slope <= 0 or quadratic)) or 0.5 * slope0 <= slope <= 0:
            return trial, used
        if slope < 0:
            lo, slope_lo = step, slope
            kept = kept + 1 if kept > 0 else 1
            slope_hi = slope_hi * 0.5 if kept > 1 else slope_hi
        else:
            hi, slope_hi = step, slope
            kept = kept - 1 if kept < 0 else -1
            slope_lo = slope_lo * 0.5 if kept < -1 else slope_lo
        step = lo + (hi - lo) * slope_lo / (slope_lo - slope_hi)
    return None, MAX_TRIALS


def _initial_alpha(system: SelfEvaluating) -> FloatArray:
    """Each token alone with its columns: c_i / (slack + c_i) W_i = x_i (W = ``reachable``)."""
    reach = np.asarray(system.reachable, dtype=np.float64)
    room = np.maximum(reach - system.targets, 1e-12 * reach)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(room > 0, system.targets / room, 1.0)
    return system.clip(np.log(np.clip(ratio, 1e-300, 1e300)))


def system_newton(
    system: SelfEvaluating,
    tol: float,
    *,
    max_iter: int = 50,
    time_budget: float | None = None,
) -> MinimizeResult:
    """Minimise F until the certified deviation is at most ``tol`` (within ``time_budget``
    seconds from this call, None: no limit; see the module docstring)."""
    compile_direction()
    start, compiled = time.perf_counter(), compile_seconds()
    deadline = Deadline.after(time_budget, start)  # its kernels' first compilation excluded
    free = np.arange(system.size, dtype=np.int64)
    if system.gauge_free:  # pin one variable (the largest target) to fix the gauge
        free = np.delete(free, int(np.argmax(system.targets)))
    ev = system.evaluate(_initial_alpha(system), hessian=True)
    assert ev.row_sums is not None and ev.low_rank is not None and ev.blocks is not None
    nodes, rank = ev.blocks.shape[0], ev.blocks.shape[1]
    evaluation = time.perf_counter() - start - (compile_seconds() - compiled)
    predicted = (1.0 + EXPECTED_TRIALS) * evaluation
    predicted += step_work(free.shape[0], nodes, rank, system.size) / FLOP_RATE
    evaluations, iterations, message = 1, 0, "iteration limit"
    iteration_start = start  # an iteration does not start if it would end past the deadline
    while True:
        residual = ev.receipts - system.targets
        grad_norm = float(np.abs(residual).sum())
        deviation = grad_norm + ev.quad_error
        if deviation <= tol:
            message = "converged"
            break
        if iterations >= max_iter:
            break
        # An iteration starts only if it would end before the deadline, taking as long as the
        # last (the first: as predicted).
        now = time.perf_counter()
        last = now - iteration_start if iterations > 0 else predicted
        if now + last > deadline.now():
            message = MESSAGES[OUT_OF_TIME]
            break
        iteration_start = now
        assert ev.row_sums is not None and ev.low_rank is not None and ev.blocks is not None
        step = direction(residual, ev.row_sums, ev.low_rank, ev.blocks, free)
        trial, used = _step(system, ev.alpha, step, residual, deadline)
        evaluations += used
        iterations += 1
        if trial is None:
            late = time.perf_counter() > deadline.now()
            message = MESSAGES[OUT_OF_TIME if late else LINE_SEARCH_FAILED]
            break
        ev = trial
    return MinimizeResult(
        ev.alpha,
        iterations,
        evaluations,
        grad_norm,
        deviation,
        deviation <= tol,
        message,
        time.perf_counter() - start,
    )
