"""POT's network simplex (``ot.emd``) on a dense cost matrix: the peer a user would pick today."""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.solvers.base import Backend, SolveResult, Status, TransportProblem, stopwatch

# ot.emd's ``result_code`` in scipy's codes (1 is optimal; a warning makes it Status.OTHER)
STATUS = {
    1: Status.OPTIMAL,
    3: Status.LIMIT_REACHED,
    0: Status.INFEASIBLE,
    2: Status.UNBOUNDED,
}


class PotEmd(Backend):
    name = "pot"
    accepts = (TransportProblem,)
    requires = ("ot",)

    def solve(
        self, problem: TransportProblem, *, max_iterations: int = 10_000_000, **unknown: Any
    ) -> SolveResult:
        import ot

        self.check(problem)
        self.reject_unknown(unknown)
        a = np.ascontiguousarray(problem.a, dtype=np.float64)
        b = np.ascontiguousarray(problem.b, dtype=np.float64)
        b = b * (a.sum() / b.sum())  # POT requires equal totals to rounding
        with stopwatch() as elapsed:
            plan, log = ot.emd(
                a, b, np.ascontiguousarray(problem.cost), numItermax=max_iterations, log=True
            )
        warning = log.get("warning")
        status = STATUS.get(log.get("result_code", 1), Status.OTHER)
        return SolveResult(
            backend=self.name,
            status=Status.OTHER if warning is not None and status == 0 else status,
            raw_status="optimal" if warning is None else str(warning),
            objective=float(log["cost"]),
            primal=np.asarray(plan, dtype=np.float64),
            wall_time=elapsed[0],
            messages=[] if warning is None else [str(warning)],
        )
