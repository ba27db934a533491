"""cvxpy as a modelling layer: any LP solver cvxpy has installed (default: its own choice)."""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.solvers.base import Backend, LinearProgram, SolveResult, Status, stopwatch

# cvxpy's status words (cvxpy.settings) in scipy's codes; "..._inaccurate" and any other word
# is Status.OTHER.
STATUS = {
    "optimal": Status.OPTIMAL,
    "user_limit": Status.LIMIT_REACHED,
    "infeasible": Status.INFEASIBLE,
    "unbounded": Status.UNBOUNDED,
}


class CvxpyLP(Backend):
    name = "cvxpy"
    accepts = (LinearProgram,)
    requires = ("cvxpy",)

    def solve(
        self, problem: LinearProgram, *, solver: str | None = None, **unknown: Any
    ) -> SolveResult:
        import cvxpy as cp

        self.check(problem)
        self.reject_unknown(unknown)
        with stopwatch() as elapsed:
            x = cp.Variable(problem.num_variables, nonneg=True)
            constraints = []
            if problem.A_ub is not None:
                constraints.append(problem.A_ub @ x <= problem.b_ub)
            if problem.A_eq is not None:
                constraints.append(problem.A_eq @ x == problem.b_eq)
            objective = problem.c @ x
            sense = cp.Maximize(objective) if problem.maximize else cp.Minimize(objective)
            model = cp.Problem(sense, constraints)
            model.solve(solver=solver)
        status = str(model.status)
        values = x.value if x.value is not None else np.full(problem.num_variables, np.nan)
        used = model.solver_stats.solver_name if model.solver_stats else solver
        return SolveResult(
            backend=self.name,
            status=STATUS.get(status, Status.OTHER),
            raw_status=status,
            objective=float(model.value) if model.value is not None else float("nan"),
            primal=np.asarray(values, dtype=np.float64),
            wall_time=elapsed[0],
            messages=[f"cvxpy solver {used}"],
            info={"solver": used},
        )
