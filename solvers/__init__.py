"""Pluggable solver backends for linear programs, max-flow networks and transport problems.

Backends take backend-neutral data (scipy.sparse matrices, arc arrays) and return a
:class:`~solvers.base.SolveResult`. They know nothing about speculative sampling.
"""

from solvers.base import LinearProgram, MaxFlowProblem, SolveResult, TransportProblem
from solvers.registry import available_backends, backend_names, get_backend

__all__ = [
    "LinearProgram",
    "MaxFlowProblem",
    "SolveResult",
    "TransportProblem",
    "available_backends",
    "backend_names",
    "get_backend",
]
