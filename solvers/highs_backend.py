"""HiGHS through highspy.

Method choice: dual simplex for small LPs, interior point (with crossover, so the answer is a
vertex) above ``IPM_THRESHOLD`` variables — simplex took 42 s on the 78k-variable relaxed OTLP
(k=30, n=3) where IPM took 0.9 s on this machine. Presolve has declared valid degenerate
transportation problems infeasible; a non-optimal status with presolve on is retried with
presolve off, and the message says so. Statuses are still not trusted: callers verify.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from otlp.solvers.base import Backend, LinearProgram, SolveResult, Status, stopwatch

IPM_THRESHOLD = 20_000
# HiGHS model statuses (``modelStatusToString``) in scipy's codes, as scipy's linprog maps them;
# any other word is Status.OTHER.
STATUS = {
    "Optimal": Status.OPTIMAL,
    "Time limit reached": Status.LIMIT_REACHED,
    "Iteration limit reached": Status.LIMIT_REACHED,
    "Infeasible": Status.INFEASIBLE,
    "Model error": Status.INFEASIBLE,
    "Unbounded": Status.UNBOUNDED,
}


class HighsLP(Backend):
    name = "highs"
    accepts = (LinearProgram,)
    requires = ("highspy",)

    def solve(
        self,
        problem: LinearProgram,
        *,
        method: str = "auto",
        presolve: bool = True,
        tolerance: float = 1e-9,
        time_limit: float | None = None,
        **unknown: Any,
    ) -> SolveResult:
        self.check(problem)
        self.reject_unknown(unknown)
        if time_limit is not None:
            time_limit = _seconds("time_limit", time_limit)
        if method == "auto":
            method = "ipm" if problem.num_variables > IPM_THRESHOLD else "simplex"
        if method not in ("simplex", "ipm", "pdlp", "choose"):
            raise ValueError(
                f"method: unknown HiGHS method {method!r}; valid: auto, simplex, ipm, pdlp, choose"
            )
        messages = [f"HiGHS {method}, presolve {'on' if presolve else 'off'}"]
        with stopwatch() as elapsed:
            status, x, objective = _run(problem, method, presolve, tolerance, time_limit)
            if status not in ("Optimal", "Time limit reached") and presolve:
                messages.append(f"status {status!r} with presolve; retried with presolve off")
                status, x, objective = _run(problem, method, False, tolerance, time_limit)
        return SolveResult(
            backend=self.name,
            status=STATUS.get(status, Status.OTHER),
            raw_status=status,
            objective=objective,
            primal=x,
            wall_time=elapsed[0],
            messages=messages,
            info={"method": method},
        )


def _seconds(name: str, value: object) -> float:
    """A positive finite number of seconds, or a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a real number of seconds, got {value!r}")
    seconds = float(value)
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{name}: must be a finite number greater than 0, got {value!r}")
    return seconds


def _run(
    problem: LinearProgram,
    method: str,
    presolve: bool,
    tolerance: float,
    time_limit: float | None,
) -> tuple[str, np.ndarray, float]:
    import highspy

    blocks, lower, upper = [], [], []
    if problem.A_ub is not None:
        blocks.append(sp.csr_matrix(problem.A_ub))
        lower.append(np.full(problem.A_ub.shape[0], -highspy.kHighsInf))
        upper.append(np.asarray(problem.b_ub, dtype=np.float64))
    if problem.A_eq is not None:
        blocks.append(sp.csr_matrix(problem.A_eq))
        lower.append(np.asarray(problem.b_eq, dtype=np.float64))
        upper.append(np.asarray(problem.b_eq, dtype=np.float64))
    matrix = sp.vstack(blocks).tocsc()
    matrix.sort_indices()
    lp = highspy.HighsLp()
    lp.num_col_ = problem.num_variables
    lp.num_row_ = matrix.shape[0]
    lp.col_cost_ = np.asarray(problem.c, dtype=np.float64)
    lp.col_lower_ = np.zeros(problem.num_variables)
    lp.col_upper_ = np.full(problem.num_variables, highspy.kHighsInf)
    lp.row_lower_ = np.concatenate(lower)
    lp.row_upper_ = np.concatenate(upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
    lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
    lp.a_matrix_.value_ = matrix.data.astype(np.float64)
    lp.sense_ = highspy.ObjSense.kMaximize if problem.maximize else highspy.ObjSense.kMinimize
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("solver", method)
    h.setOptionValue("presolve", "on" if presolve else "off")
    h.setOptionValue("primal_feasibility_tolerance", tolerance)
    h.setOptionValue("dual_feasibility_tolerance", tolerance)
    h.setOptionValue("threads", 1)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    h.passModel(lp)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    x = np.asarray(h.getSolution().col_value, dtype=np.float64)
    if x.shape[0] != problem.num_variables:
        x = np.full(problem.num_variables, np.nan)
    return status, x, float(h.getInfo().objective_function_value)
