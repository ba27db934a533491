"""OR-Tools push-relabel max-flow (``SimpleMaxFlow``) on int64 capacities (see
:mod:`otlp.solvers.scaling` for the scaling and the precision it gives)."""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.solvers.base import Backend, MaxFlowProblem, SolveResult, Status, stopwatch
from otlp.solvers.scaling import DEFAULT_SCALE_BITS, integer_capacities


class OrToolsMaxFlow(Backend):
    name = "ortools-maxflow"
    accepts = (MaxFlowProblem,)
    requires = ("ortools",)

    def solve(
        self,
        problem: MaxFlowProblem,
        *,
        scale_bits: int = DEFAULT_SCALE_BITS,
        want_cut: bool = False,
        **unknown: Any,
    ) -> SolveResult:
        from ortools.graph.python import max_flow

        self.check(problem)
        self.reject_unknown(unknown)
        scaled = integer_capacities(problem, scale_bits)
        with stopwatch() as elapsed:
            solver = max_flow.SimpleMaxFlow()
            arcs = solver.add_arcs_with_capacity(
                problem.tails.astype(np.int32), problem.heads.astype(np.int32), scaled.capacities
            )
            status = solver.solve(problem.source, problem.sink)
            flows = scaled.to_real(solver.flows(arcs))
            value = float(scaled.to_real(solver.optimal_flow()))
            side = None
            if want_cut and status == solver.OPTIMAL:
                side = np.zeros(problem.num_nodes, dtype=bool)
                side[np.asarray(solver.get_source_side_min_cut(), dtype=np.int64)] = True
        return SolveResult(
            backend=self.name,
            # OPTIMAL or one of POSSIBLE_OVERFLOW, BAD_INPUT, BAD_RESULT
            status=Status.OPTIMAL if status == solver.OPTIMAL else Status.OTHER,
            raw_status=str(status).rsplit(".", 1)[-1],
            objective=float(value),
            primal=flows,
            wall_time=elapsed[0],
            messages=[scaled.describe(scale_bits)],
            source_side=side,
            info={"scale": scaled.scale, "precision": scaled.precision},
        )
