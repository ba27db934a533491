"""Pluggable solver backends for linear programs, max-flow networks and transport problems.

Backends take backend-neutral data (scipy.sparse matrices, arc arrays) and return a
:class:`~solvers.base.SolveResult` whose ``status`` is a :class:`~solvers.base.Status`
(scipy's ``linprog`` codes). They are listed in one table (:mod:`solvers.registry`), know
nothing about speculative sampling and import nothing from ``otlp``.
"""

from solvers.base import LinearProgram, MaxFlowProblem, SolveResult, Status, TransportProblem
from solvers.registry import available_backends, backend_names, get_backend

__all__ = [
    "LinearProgram",
    "MaxFlowProblem",
    "SolveResult",
    "Status",
    "TransportProblem",
    "available_backends",
    "backend_names",
    "get_backend",
]
