"""The one-call entry point: ``otlp.solve(inst, method=...)``."""

from __future__ import annotations

import time
from typing import Any

from otlp.instance import Instance
from otlp.methods import get_method
from otlp.plan import TransportPlan
from otlp.verify import Tolerances, VerificationReport, verify


class VerificationError(RuntimeError):
    """A solver returned a plan that failed verification (raised with ``strict=True``)."""

    def __init__(self, report: VerificationReport) -> None:
        self.report = report
        super().__init__("; ".join(report.problems))


def solve(
    inst: Instance,
    method: str = "maxflow",
    *,
    form: str = "sets",
    check: bool = True,
    strict: bool = False,
    tolerances: Tolerances | None = None,
    **options: Any,
) -> TransportPlan:
    """Solve the OTLP of ``inst`` with ``method`` and return a verified transport plan.

    ``form`` picks the column indexing ("sets" of distinct tokens, or ordered "tuples").
    With ``check`` (default) the plan carries ``plan.verification``; with ``strict`` a failed
    verification raises :class:`VerificationError`. Extra options go to the backend.
    """
    if not isinstance(inst, Instance):
        raise ValueError(f"inst: expected an otlp.Instance, got {type(inst).__name__}")
    start = time.perf_counter()
    plan = get_method(method)(inst, form=form, **options)
    plan.info["total_time"] = time.perf_counter() - start
    if tolerances is not None:
        plan.info["tolerances"] = tolerances
    if check or strict:
        report = verify(plan)
        plan.info["verification"] = report
        if strict and not report.ok:
            raise VerificationError(report)
    return plan
