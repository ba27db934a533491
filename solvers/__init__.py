"""Pluggable solver backends for linear programs, max-flow networks and transport problems.

Backends take backend-neutral data (scipy.sparse matrices, arc arrays) and return a
:class:`~otlp.solvers.base.SolveResult` whose ``status`` is a :class:`~otlp.solvers.base.Status`
(scipy's ``linprog`` codes). They are listed in one table (:mod:`otlp.solvers.registry`), know
nothing about speculative sampling and import nothing from ``otlp``.

The numba kernels of the package call each other across modules (partial resolution's row
calls global resolution's scan and polymatroid targets and the gap filling of
:mod:`otlp.solvers.partial_resolution`), so their on-disk cache is cleared whenever any source of
the package changes (:func:`otlp.solvers.kernel_cache.refresh`), before any kernel module loads.
"""

from pathlib import Path

from otlp.solvers.kernel_cache import refresh

refresh(Path(__file__).parent)  # before any kernel module loads

from otlp.solvers.base import (  # noqa: E402
    LinearProgram,
    MaxFlowProblem,
    SolveResult,
    Status,
    TransportProblem,
)
from otlp.solvers.registry import available_backends, backend_names, get_backend  # noqa: E402

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
