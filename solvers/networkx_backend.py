"""networkx preflow-push max-flow: slow, pure Python, kept as the reference implementation."""

from __future__ import annotations

from typing import Any

import numpy as np

from solvers.base import Backend, MaxFlowProblem, SolveResult, stopwatch
from solvers.registry import register


@register
class NetworkxMaxFlow(Backend):
    name = "networkx-maxflow"
    accepts = (MaxFlowProblem,)
    requires = ("networkx",)

    def solve(self, problem: MaxFlowProblem, **_: Any) -> SolveResult:
        import networkx as nx
        from networkx.algorithms.flow import preflow_push

        self.check(problem)
        pairs = np.stack([problem.tails, problem.heads], axis=1)
        if np.unique(pairs, axis=0).shape[0] != pairs.shape[0]:
            raise ValueError("problem: networkx backend needs at most one arc per node pair")
        with stopwatch() as elapsed:
            graph = nx.DiGraph()
            graph.add_nodes_from(range(problem.num_nodes))
            for tail, head, cap in zip(
                problem.tails.tolist(),
                problem.heads.tolist(),
                problem.capacities.tolist(),
                strict=True,
            ):
                if np.isfinite(cap):
                    graph.add_edge(tail, head, capacity=cap)
                else:
                    graph.add_edge(tail, head)  # no capacity attribute: unbounded
            value, flow = nx.maximum_flow(
                graph, problem.source, problem.sink, flow_func=preflow_push
            )
            flows = np.array(
                [
                    flow[t][h]
                    for t, h in zip(problem.tails.tolist(), problem.heads.tolist(), strict=True)
                ],
                dtype=np.float64,
            )
        return SolveResult(self.name, "optimal", True, float(value), flows, elapsed[0])
