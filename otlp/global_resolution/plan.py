"""The lazy global-resolution plan: a :class:`~otlp.plan.TransportPlan` over an engine."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import as_generator
from otlp.global_resolution.iid import GlobalResolution
from otlp.global_resolution.reports import TokenReport
from otlp.plan import LazyTransportPlan, PlanEntries
from otlp.solvers.arrays import FloatArray
from otlp.solvers.global_resolution.token import draw
from otlp.verify import Tolerances


@lru_cache(maxsize=64)
def _tolerances(tau: float) -> Tolerances:
    """[GR] §6.3's tolerances for ``tau`` (frozen; built once per tau, not per token)."""
    return Tolerances.global_resolution(tau)


class GlobalResolutionPlan(LazyTransportPlan):
    """A lazily evaluated :class:`TransportPlan` backed by a :class:`GlobalResolution` engine.

    :meth:`local_slice`, :meth:`slice` and :meth:`sample` solve only the unit a drafted omega
    needs. The explicit entries (``columns``, ``explicit``, ``row_residual``,
    ``col_residual``) are properties that materialise the whole plan on first access — e.g.
    by :func:`otlp.verify` — which solves everything, so the verifier checks the full plan
    (POT's ``lazy_plan`` habit: the plan is a recipe until an entry is asked for).
    """

    def __init__(self, engine: GlobalResolution) -> None:  # the entries are materialised lazily
        self.engine = engine
        self.instance = engine.instance
        self.method = "global_resolution"
        self.wall_time = 0.0
        self.messages: list[str] = []
        self.info: dict[str, Any] = {
            "tolerances": _tolerances(engine.tau),
            "tau": engine.tau,
            "minimizer": engine.minimizer,
        }
        self.token_reports: list[TokenReport] = []
        self._entries: PlanEntries | None = None

    def _materialized(self) -> PlanEntries:
        """The explicit entries, solving every unit the first time."""
        if self._entries is None:
            self._entries = PlanEntries(*self.engine.materialize())
            self.wall_time = self.engine.seconds
            self.info["units"] = dict(self.engine.reports)
            self.info["fallback"] = [u for u in self.engine.units() if u in self.engine.exact]
            self.info["deviation_bounds"] = self.engine.deviation_bounds()
            self.info["H"] = self.engine.selection.H
        return self._entries

    def local_slice(self, omega: ArrayLike) -> FloatArray:
        return self.token_report(omega)[0]

    def token_report(self, omega: ArrayLike) -> tuple[FloatArray, TokenReport]:
        """The slice over the draft vocabulary plus the outside row, and the token report."""
        out, report = self.engine.local_slice(omega)
        self.token_reports.append(report)
        self.wall_time = self.engine.seconds
        return out, report

    def sample(
        self, omega: ArrayLike, rng: object = None, size: int | None = None
    ) -> int | NDArray[np.int64]:
        """Draw verified token(s) from pi(. | omega); global token ids.

        One token (``size=None``) is drawn as the fused decoder path draws it
        (:func:`otlp.solvers.global_resolution.token.draw`, two uniforms, the outside row spread
        over the tokens outside the draft vocabulary in proportion to p); several as
        :meth:`TransportPlan.sample` does.
        """
        if size is not None:
            return super().sample(omega, rng, size)
        generator = as_generator(rng)
        local = self.local_slice(omega)
        if not np.isfinite(local).all():
            raise ValueError("omega: pi(. | omega) of this plan is not a probability vector")
        u = generator.random(2)
        inst = self.instance
        return int(draw(np.clip(local, 0.0, None), inst.p, inst.tokens, u[0], u[1]))
