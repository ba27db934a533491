"""The lazy global-resolution plan: a :class:`~otlp.plan.TransportPlan` over an engine."""

from __future__ import annotations

from typing import Any

from numpy.typing import ArrayLike

from otlp.global_resolution.engine import FloatArray, GlobalResolution
from otlp.global_resolution.reports import TokenReport
from otlp.plan import TransportPlan
from otlp.verify import Tolerances

_LAZY_FIELDS = frozenset({"columns", "explicit", "row_residual", "col_residual"})


class GlobalResolutionPlan(TransportPlan):
    """A lazily evaluated :class:`TransportPlan` backed by a :class:`GlobalResolution` engine.

    :meth:`local_slice`, :meth:`slice` and :meth:`sample` solve only the unit a drafted omega
    needs. The explicit entries (``columns``, ``explicit``, ``row_residual``,
    ``col_residual``) are materialised on first access — e.g. by :func:`otlp.verify` — which
    solves everything, so the verifier checks the full plan.
    """

    def __init__(self, engine: GlobalResolution) -> None:  # fields filled lazily
        self.engine = engine
        self.instance = engine.instance
        self.method = "global_resolution"
        self.wall_time = 0.0
        self.messages: list[str] = []
        self.info: dict[str, Any] = {
            "tolerances": Tolerances.global_resolution(engine.tau),
            "tau": engine.tau,
            "minimizer": engine.minimizer,
        }
        self.token_reports: list[TokenReport] = []

    def __getattr__(self, name: str) -> Any:
        if name in _LAZY_FIELDS and "engine" in self.__dict__:
            self._materialize()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def _materialize(self) -> None:
        columns, explicit, row_residual, col_residual = self.engine.materialize()
        self.columns, self.explicit = columns, explicit
        self.row_residual, self.col_residual = row_residual, col_residual
        self.wall_time = self.engine.seconds
        self.info["units"] = dict(self.engine.reports)
        self.info["fallback"] = [unit for unit in self.engine.units() if unit in self.engine.exact]
        self.info["deviation_bounds"] = self.engine.deviation_bounds()
        self.info["H"] = self.engine.selection.H

    def local_slice(self, omega: ArrayLike) -> FloatArray:
        return self.token_report(omega)[0]

    def token_report(self, omega: ArrayLike) -> tuple[FloatArray, TokenReport]:
        """The slice over the draft vocabulary plus the outside row, and the token report."""
        out, report = self.engine.local_slice(omega)
        self.token_reports.append(report)
        self.wall_time = self.engine.seconds
        return out, report
