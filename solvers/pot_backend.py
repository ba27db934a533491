"""POT's network simplex (``ot.emd``) on a dense cost matrix: the peer a user would pick today."""

from __future__ import annotations

from typing import Any

import numpy as np

from solvers.base import Backend, SolveResult, TransportProblem, stopwatch


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
        return SolveResult(
            backend=self.name,
            status="optimal" if warning is None else str(warning),
            success=warning is None and log.get("result_code", 1) == 1,
            objective=float(log["cost"]),
            primal=np.asarray(plan, dtype=np.float64),
            wall_time=elapsed[0],
            messages=[] if warning is None else [str(warning)],
        )
