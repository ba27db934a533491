"""networkx preflow-push max-flow: pure Python, kept as the reference implementation.

It runs on the same exact integer capacities as OR-Tools (:mod:`otlp.solvers.scaling`):
preflow-push on floating-point capacities failed inside networkx on a real instance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.solvers.base import Backend, MaxFlowProblem, SolveResult, Status, stopwatch
from otlp.solvers.scaling import DEFAULT_SCALE_BITS, INFINITE_CAPACITY, integer_capacities


class NetworkxMaxFlow(Backend):
    name = "networkx-maxflow"
    accepts = (MaxFlowProblem,)
    requires = ("networkx",)

    def solve(
        self, problem: MaxFlowProblem, *, scale_bits: int = DEFAULT_SCALE_BITS, **unknown: Any
    ) -> SolveResult:
        import networkx as nx
        from networkx.algorithms.flow import preflow_push

        self.check(problem)
        self.reject_unknown(unknown)
        pairs = np.stack([problem.tails, problem.heads], axis=1)
        if np.unique(pairs, axis=0).shape[0] != pairs.shape[0]:
            raise ValueError("problem: networkx backend needs at most one arc per node pair")
        scaled = integer_capacities(problem, scale_bits)
        tails, heads = problem.tails.tolist(), problem.heads.tolist()
        with stopwatch() as elapsed:
            graph = nx.DiGraph()
            graph.add_nodes_from(range(problem.num_nodes))
            for tail, head, cap in zip(tails, heads, scaled.capacities.tolist(), strict=True):
                if cap == INFINITE_CAPACITY:
                    graph.add_edge(tail, head)  # no capacity attribute: unbounded
                else:
                    graph.add_edge(tail, head, capacity=cap)
            value, flow = nx.maximum_flow(
                graph, problem.source, problem.sink, flow_func=preflow_push
            )
            flows = np.array(
                [flow[t][h] for t, h in zip(tails, heads, strict=True)], dtype=np.float64
            )
        return SolveResult(  # preflow-push either finishes with a maximum flow or raises
            backend=self.name,
            status=Status.OPTIMAL,
            raw_status="optimal",
            objective=float(scaled.to_real(value)),
            primal=scaled.to_real(flows),
            wall_time=elapsed[0],
            messages=[scaled.describe(scale_bits)],
            info={"scale": scaled.scale, "precision": scaled.precision},
        )
