"""The seed's minimiser ([GR] Appendix K): SciPy L-BFGS-B on the grouped-set form.

Kept as the reference configuration: at most ``max_iter`` (25) iterations from alpha = 0,
stopping once ||grad||_1 <= tol. Its deviation is the gradient norm alone; the caller adds
the truncation terms of Theorems 6.4/6.5.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from otlp.solvers.global_resolution.grouped import GroupedObjective
from otlp.solvers.global_resolution.newton import MinimizeResult
from otlp.solvers.global_resolution.softmax_system import SoftmaxSystem

if TYPE_CHECKING:
    from scipy.optimize import OptimizeResult


def lbfgs(system: SoftmaxSystem, tol: float, *, max_iter: int = 25) -> MinimizeResult:
    """L-BFGS-B until ||grad F||_1 <= tol or ``max_iter`` iterations."""
    from scipy.optimize import minimize  # imported on use: it costs ~0.5 s at import otlp

    start = time.perf_counter()
    objective = GroupedObjective(system)
    calls = [0]

    def fun(alpha: np.ndarray) -> tuple[float, np.ndarray]:
        calls[0] += 1
        return objective(alpha)

    def stop(intermediate_result: OptimizeResult) -> None:
        if np.abs(objective(intermediate_result.x)[1]).sum() <= tol:
            raise StopIteration

    result = minimize(
        fun,
        np.zeros(system.size),
        jac=True,
        method="L-BFGS-B",
        callback=stop,
        options={"maxiter": max_iter, "gtol": 0.0, "ftol": 0.0},
    )
    grad_norm = float(np.abs(objective(result.x)[1]).sum())
    return MinimizeResult(
        np.asarray(result.x, dtype=np.float64),
        int(result.nit),
        calls[0],
        grad_norm,
        grad_norm,
        grad_norm <= tol,
        str(result.message),
        time.perf_counter() - start,
    )
