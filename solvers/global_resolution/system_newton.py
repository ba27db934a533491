"""Damped Newton, compiled, for the systems of the non-i.i.d. schemes ([GR] Appendix S).

The i.i.d. systems run :func:`~otlp.solvers.global_resolution.newton.newton_kernel`; the pair
systems (:mod:`~otlp.solvers.global_resolution.pair_system`: two draws without replacement, two
independent drafts) and the systems of n >= 3 draws without replacement
(:mod:`~otlp.solvers.global_resolution.wor_system`) run :func:`system_newton_kernel`, one compiled
loop over their compiled evaluations (``PAIR`` or ``WITHOUT_REPLACEMENT``, picked by an integer:
every evaluation returns the same tuple; ``EXPLICIT`` for the exact groups of set masses of
:mod:`~otlp.solvers.global_resolution.explicit_system`, a unit whose largest set holds all the
draft mass), with the same compiled Newton step
(:func:`~otlp.solvers.global_resolution.direction.direction`, of bounded flops) and the same step
rule on the convex objective: along a direction d, phi'(t) = d . (g - x) is nondecreasing,
so a trial with phi'(t) in [phi'(0) / 2, 0] (or the full step in the quadratic regime)
decreases F; its root is bracketed by Illinois regula falsi. Trials evaluate receipts only
and the Hessian is evaluated at an iterate only when another step is needed (a solve that
converges at its start or after one step evaluates it once; the without-replacement
evaluations carry the second sums its diagonal needs, so it then costs no second pass over the
double quadrature). Evaluations use the coarsest exponential sum the certificate allows
(:func:`~otlp.solvers.global_resolution.expsum.coarsest_level`), as the i.i.d. loop does.
Iteration stops when the certified deviation ||g - x||_1 + (quadrature bound) reaches ``tol``.

Time: as :func:`~otlp.solvers.global_resolution.newton.newton_kernel`, the clock
(``deadline``, ``time.perf_counter()``) is read before every iteration after the first
``FIRST_CHUNK`` of :mod:`~otlp.solvers.global_resolution.newton`, or before every one for a unit
whose iteration exceeds ``TIMED_WORK`` flops or whose first ``FIRST_CHUNK`` iterations are
predicted (at :data:`~.budget.FLOP_RATE`) to end past the deadline; such an iteration does
not start if it would end past the deadline taking as long as the last (the first: as long
as predicted), and the line search stops at the deadline. Compiling the kernels counts
against the budget (:mod:`~.budget`; ``otlp.warm_up`` compiles them ahead).
The budget is overrun by at most one iteration, whose direction has bounded flops.
"""

from __future__ import annotations

import importlib
import math
import time
from typing import Any

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray
from otlp.solvers.global_resolution.budget import FLOP_RATE, Deadline
from otlp.solvers.global_resolution.direction import direction, step_work
from otlp.solvers.global_resolution.explicit_system import (
    ExplicitSystem,
    explicit_reachable,
    explicit_terms,
)
from otlp.solvers.global_resolution.expsum import coarsest_level
from otlp.solvers.global_resolution.newton import (
    CONVERGED,
    EXPECTED_TRIALS,
    ITERATION_LIMIT,
    LINE_SEARCH_FAILED,
    MAX_TRIALS,
    OUT_OF_TIME,
    TIMED_WORK,
    MinimizeResult,
    accepts_step,
    clock,
    descent_direction,
    free_variables,
    illinois_bracket,
)
from otlp.solvers.global_resolution.pair_system import PairSystem, pair_evaluate, pair_reachable
from otlp.solvers.global_resolution.softmax_system import SoftmaxSystem, clip_alpha
from otlp.solvers.global_resolution.wor_system import (
    WithoutReplacementSystem,
    u_target,
    wor_evaluate,
    wor_hessian,
    wor_reachable,
)

# The module, not the function the package exports under its name: FIRST_CHUNK is read from
# it at every call (tests shorten it).
NEWTON = importlib.import_module("otlp.solvers.global_resolution.newton")
PAIR, WITHOUT_REPLACEMENT, EXPLICIT = 0, 1, 2
# What the evaluations read, one tuple for every kind (the other kinds' entries are empty):
# (vectors (rows a, b, single: pair; q: without replacement), u-grid a, u-grid b, base
# polynomials, u-weights (explicit: the groups' masses), u-bound, i.i.d. q powers, i.i.d. base
# powers, the explicit groups' members (positions, -1 padded)).
KernelData = tuple[
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    float,
    FloatArray,
    FloatArray,
    NDArray[np.int64],
]


def kernel_data(system: SoftmaxSystem, tol: float) -> tuple[int, KernelData]:
    """The kind of ``system`` and what its compiled evaluation reads for a solve to ``tol``
    (the u-grid of :func:`~otlp.solvers.global_resolution.wor_system.u_target` of it)."""
    none1, none2, none3 = np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0, 0))
    no_groups = np.zeros((0, 0), dtype=np.int64)
    if isinstance(system, PairSystem):
        vectors = np.stack((system.a, system.b, system.single)).astype(np.float64)
        return PAIR, (vectors, none2, none2, none3, none1, 0.0, none2, none1, no_groups)
    if isinstance(system, ExplicitSystem):
        members = np.ascontiguousarray(system.members, dtype=np.int64)
        weights = np.ascontiguousarray(system.weights, dtype=np.float64)
        return EXPLICIT, (none2, none2, none2, none3, weights, 0.0, none2, none1, members)
    if not isinstance(system, WithoutReplacementSystem):
        raise TypeError(
            f"system: expected a pair, without-replacement or explicit system, got {system!r}"
        )
    weights, a, b, base, bound = system.u_grid_at(u_target(tol))
    q_pow, base_pow = system.iid_powers
    return WITHOUT_REPLACEMENT, (
        np.ascontiguousarray(system.q, dtype=np.float64)[None, :],
        a,
        b,
        base,
        weights,
        bound,
        q_pow,
        base_pow,
        no_groups,
    )


@nb.njit(cache=True)
def _evaluate(
    kind: int, alpha: FloatArray, slack: float, hessian: bool, level: int, data: Any
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """The system's evaluation: (clipped alpha, receipts, row sums, U^T, Λ blocks, bound)."""
    vectors, grid_a, grid_b, base, weights, u_bound, q_pow, base_pow, members = data
    if kind == PAIR:
        return pair_evaluate(alpha, vectors[0], vectors[1], vectors[2], slack, hessian, level)
    if kind == EXPLICIT:
        return _explicit_evaluate(alpha, members, weights, slack, hessian)
    return wor_evaluate(
        alpha, vectors[0], weights, grid_a, grid_b, base, u_bound, q_pow, base_pow, slack,
        hessian, level,
    )  # fmt: skip


@nb.njit(cache=True)
def _with_hessian(kind: int, ev: Any, slack: float, level: int, data: Any) -> Any:
    """``ev`` (an evaluation of receipts only) with its Hessian parts: for the
    without-replacement systems from the second sums it carries (no second pass over the
    double quadrature), for the others by evaluating again."""
    if kind != WITHOUT_REPLACEMENT:
        return _evaluate(kind, ev[0], slack, True, level, data)
    vectors, grid_a, grid_b, base, weights, _, q_pow, base_pow, _ = data
    rho, low_rank, blocks = wor_hessian(
        ev[0], ev[1], ev[2], vectors[0], weights, grid_a, grid_b, base, q_pow, base_pow, slack,
        level,
    )  # fmt: skip
    return ev[0], ev[1], rho, low_rank, blocks, ev[5]


@nb.njit(cache=True)
def _explicit_evaluate(
    alpha: FloatArray, members: NDArray[np.int64], weights: FloatArray, slack: float, hessian: bool
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """:meth:`ExplicitSystem.evaluate` in the loop's tuple form: the dense M as one node of
    rank m (U = I), exact (no quadrature bound)."""
    gauge_free = slack == 0.0
    clipped = clip_alpha(alpha, gauge_free)
    log_c = clipped - clipped.max() if gauge_free and clipped.shape[0] else clipped
    receipts, rho, matrix = explicit_terms(log_c, members, weights, slack, hessian)
    m = clipped.shape[0]
    if not hessian:
        return clipped, receipts, rho, np.zeros((0, 0)), np.zeros((0, 0, 0)), 0.0
    blocks = np.empty((1, m, m))
    blocks[0] = matrix
    return clipped, receipts, rho, np.eye(m), blocks, 0.0


@nb.njit(cache=True)
def _evaluation_work(kind: int, m: int, nodes: int, data: Any) -> float:
    """Flops of one evaluation of receipts (about), for the clock rule."""
    if kind == PAIR:
        return 8.0 * nodes * m
    if kind == EXPLICIT:
        members = data[8]
        return 4.0 * members.shape[0] * members.shape[1] ** 2
    base = data[3]
    return 4.0 * nodes * base.shape[0] * m * base.shape[2] ** 2


@nb.njit(cache=True)
def _line_search(
    kind: int,
    alpha: FloatArray,
    step_dir: FloatArray,
    residual: FloatArray,
    targets: FloatArray,
    slack: float,
    level: int,
    data: Any,
    deadline: float,
) -> tuple[bool, bool, Any, int]:
    """A trial along ``step_dir`` that decreases F (see the module docstring): (found,
    whether it stopped at ``deadline`` — read before every trial after the first —, the
    trial's evaluation (receipts only), its residual, evaluations used)."""
    step_dir, slope0 = descent_direction(step_dir, residual)
    merit = float(residual @ residual)
    lo, slope_lo, hi, slope_hi, step, kept = 0.0, slope0, 1.0, 0.0, 1.0, 0
    trial = (alpha, residual, residual, np.empty((0, 0)), np.empty((0, 0, 0)), 0.0)
    for used in range(1, MAX_TRIALS + 1):
        if used > 1 and deadline < math.inf and clock() > deadline:
            return False, True, trial, used - 1
        trial = _evaluate(kind, alpha + step * step_dir, slack, False, level, data)
        trial_residual = trial[1] - targets
        slope = float(step_dir @ trial_residual)
        if accepts_step(step, slope, slope0, trial_residual, merit):
            return True, False, trial, used
        lo, slope_lo, hi, slope_hi, kept = illinois_bracket(
            step, slope, lo, slope_lo, hi, slope_hi, kept
        )
        step = lo + (hi - lo) * slope_lo / (slope_lo - slope_hi)
    return False, False, trial, MAX_TRIALS


@nb.njit(cache=True)
def initial_alpha(kind: int, data: Any, targets: FloatArray, slack: float) -> FloatArray:
    """Each token alone with its columns: c_i / (slack + c_i) W_i = x_i (W_i: the mass of the
    columns containing i, :func:`~.pair_system.pair_reachable` or
    :func:`~.wor_system.wor_reachable`)."""
    vectors, grid_a, grid_b, base, weights = data[0], data[1], data[2], data[3], data[4]
    if kind == PAIR:
        reach = pair_reachable(vectors[0], vectors[1], vectors[2])
    elif kind == EXPLICIT:
        reach = explicit_reachable(data[8], weights, targets.shape[0])
    else:
        reach = wor_reachable(vectors[0], weights, grid_a, grid_b, base)
    alpha = np.empty(targets.shape[0])
    for i in range(targets.shape[0]):
        room = max(reach[i] - targets[i], 1e-12 * reach[i])
        ratio = targets[i] / room if room > 0 else 1.0
        alpha[i] = math.log(min(max(ratio, 1e-300), 1e300))
    return clip_alpha(alpha, slack == 0.0)


@nb.njit(cache=True)
def system_newton_kernel(
    kind: int,
    data: Any,
    targets: FloatArray,
    slack: float,
    tol: float,
    max_iter: int,
    deadline: float,
    first_check: int,
) -> tuple[FloatArray, int, int, float, float, int]:
    """Damped Newton from :func:`initial_alpha` (see the module docstring; the clock is first
    read after ``first_check`` iterations unless the unit is timed): (alpha, iterations,
    evaluations, ||grad||_1, certified deviation, status) with status ``CONVERGED``,
    ``ITERATION_LIMIT``, ``LINE_SEARCH_FAILED`` or ``OUT_OF_TIME``."""
    m = targets.shape[0]
    free = free_variables(targets, slack)
    level = coarsest_level(tol)  # the coarsest quadrature the certificate allows
    ev = _evaluate(kind, initial_alpha(kind, data, targets, slack), slack, False, level, data)
    evaluations, iterations, status = 1, 0, ITERATION_LIMIT
    timed = False
    grad_norm = deviation = np.inf
    iteration_start = 0.0
    while True:
        residual = ev[1] - targets
        grad_norm = np.abs(residual).sum()
        deviation = grad_norm + ev[5]
        if deviation <= tol:
            status = CONVERGED
            break
        if iterations >= max_iter:
            break
        if timed and iterations > 0:  # the first one is checked once its flops are known
            now = clock()
            last = now - iteration_start
            if now + last > deadline:
                status = OUT_OF_TIME
                break
            iteration_start = now
        elif iterations >= first_check and deadline < math.inf and clock() > deadline:
            status = OUT_OF_TIME
            break
        ev = _with_hessian(kind, ev, slack, level, data)
        evaluations += int(kind != WITHOUT_REPLACEMENT)
        if iterations == 0 and deadline < math.inf:  # one iteration's flops
            nodes, rank = ev[4].shape[0], ev[4].shape[1]
            work = step_work(free.shape[0], nodes, rank, m)
            work += (2.0 + EXPECTED_TRIALS) * _evaluation_work(kind, m, nodes, data)
            predicted = work / FLOP_RATE
            now = clock()
            timed = work > TIMED_WORK or now + first_check * predicted > deadline
            if timed:  # the first iteration runs if its predicted seconds fit
                if now + predicted > deadline:
                    status = OUT_OF_TIME
                    break
                iteration_start = now
        step = direction(residual, ev[2], ev[3], ev[4], free)
        found, late, trial, used = _line_search(
            kind, ev[0], step, residual, targets, slack, level, data,
            deadline if timed else math.inf,
        )  # fmt: skip
        evaluations += used
        iterations += 1
        if not found:
            status = OUT_OF_TIME if late else LINE_SEARCH_FAILED
            break
        ev = trial
    return ev[0], iterations, evaluations, grad_norm, deviation, status


def system_newton(
    system: SoftmaxSystem,
    tol: float,
    *,
    max_iter: int = 50,
    time_budget: float | None = None,
) -> MinimizeResult:
    """Minimise F of a pair or without-replacement ``system`` until the certified deviation
    is at most ``tol`` (within ``time_budget`` seconds from this call, None: no limit;
    :func:`system_newton_kernel`)."""
    start = time.perf_counter()
    deadline = Deadline.after(time_budget, start).now()  # compiling below counts
    kind, data = kernel_data(system, tol)
    if not system_newton_kernel.overloads:  # the first call: compiled on a tiny system
        _compile()
    outputs = system_newton_kernel(
        kind,
        data,
        np.ascontiguousarray(system.targets, dtype=np.float64),
        float(system.slack),
        tol,
        max_iter,
        deadline,
        NEWTON.FIRST_CHUNK,
    )
    return MinimizeResult.of_kernel(outputs, tol, start)


def _compile() -> None:
    """Compile :func:`system_newton_kernel` on a tiny system (one signature serves every
    kind: the kind is an argument and every kind's data has the same types)."""
    q = np.array([0.3, 0.3, 0.4])
    targets = np.array([0.1, 0.1, 0.1])
    kind, data = kernel_data(PairSystem(q, targets, 0.0, 1.0, 2, q, q, q, 0.0, 0.0), 1e-3)
    system_newton_kernel(kind, data, targets, 1.0, 1e-3, 1, math.inf, 1)
