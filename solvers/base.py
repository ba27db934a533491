"""Problem data and the single result type shared by all backends."""

from __future__ import annotations

import inspect
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray


@dataclass(frozen=True)
class LinearProgram:
    """``maximize c @ x`` (or minimise) s.t. ``A_ub x <= b_ub``, ``A_eq x = b_eq``, ``x >= 0``."""

    c: FloatArray
    A_ub: sp.csr_matrix | None = None
    b_ub: FloatArray | None = None
    A_eq: sp.csr_matrix | None = None
    b_eq: FloatArray | None = None
    maximize: bool = True

    @property
    def num_variables(self) -> int:
        return int(self.c.shape[0])


@dataclass(frozen=True)
class MaxFlowProblem:
    """A directed network; ``capacities`` may be ``np.inf`` for uncapacitated arcs."""

    num_nodes: int
    tails: NDArray[np.int64]
    heads: NDArray[np.int64]
    capacities: FloatArray
    source: int
    sink: int

    @property
    def num_arcs(self) -> int:
        return int(self.tails.shape[0])


@dataclass(frozen=True)
class TransportProblem:
    """Balanced discrete optimal transport: ``min <cost, G>`` s.t. ``G 1 = a``, ``G^T 1 = b``."""

    a: FloatArray
    b: FloatArray
    cost: FloatArray


class Status(IntEnum):
    """A backend's outcome in scipy's ``linprog`` codes (``OptimizeResult.status``); each
    backend maps its own word onto them and keeps the word in ``SolveResult.raw_status``."""

    OPTIMAL = 0  # solved to optimality
    LIMIT_REACHED = 1  # iteration or time limit
    INFEASIBLE = 2
    UNBOUNDED = 3
    OTHER = 4  # numerical difficulties, "infeasible or unbounded", any other failure


@dataclass
class SolveResult:
    """What every backend returns (modelled on scipy's ``OptimizeResult``).

    ``primal`` is x for a linear program, the flow on each arc for a max-flow problem, and the
    dense plan for a transport problem. ``status`` is a :class:`Status` (an ``int``: 0 is
    optimal) and ``raw_status`` the backend's own word for it; ``success`` is
    ``status == 0``. A status is never trusted on its own — callers verify the primal.
    """

    backend: str
    status: Status
    raw_status: str
    objective: float
    primal: FloatArray
    wall_time: float
    messages: list[str] = field(default_factory=list)
    source_side: NDArray[np.bool_] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """Whether the backend reported an optimal solution (``status == 0``)."""
        return self.status == Status.OPTIMAL


class Backend(ABC):
    """A solver adapter. Subclasses declare which problem kinds they accept."""

    name: ClassVar[str]
    accepts: ClassVar[tuple[type, ...]]
    requires: ClassVar[tuple[str, ...]] = ()

    def available(self) -> bool:
        """Whether the backend's Python packages are installed here (found by
        :func:`importlib.util.find_spec`, not imported)."""
        import importlib.util

        return all(importlib.util.find_spec(mod) is not None for mod in self.requires)

    def reject_unknown(self, options: dict[str, Any]) -> None:
        """``ValueError`` listing the valid keyword options if ``options`` is not empty
        (backends collect what their signature does not name in ``**unknown``)."""
        if not options:
            return
        params = inspect.signature(type(self).solve).parameters.values()
        valid = sorted(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
        raise ValueError(
            f"backend {self.name!r}: unknown option(s) {', '.join(sorted(options))}; "
            f"valid: {', '.join(valid) if valid else 'none'}"
        )

    def check(self, problem: object) -> None:
        if not isinstance(problem, self.accepts):
            kinds = ", ".join(k.__name__ for k in self.accepts)
            raise TypeError(f"backend {self.name!r} solves {kinds}, not {type(problem).__name__}")

    @abstractmethod
    def solve(self, problem: Any, **options: Any) -> SolveResult:
        """Solve ``problem``; options are backend specific."""


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """Measure wall time of a block: ``with stopwatch() as t: ...; t[0]`` is seconds."""
    box = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start
