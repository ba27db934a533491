"""The one-call entry point: ``otlp.solve(inst, method=...)``."""

from __future__ import annotations

import time
import warnings
from typing import Any

from otlp.instance import Instance, require_instance
from otlp.methods import get_method
from otlp.plan import TransportPlan
from otlp.verify import Tolerances, VerificationReport, verify


class VerificationError(RuntimeError):
    """A solver returned a plan that failed verification (raised with ``strict=True``)."""

    def __init__(self, report: VerificationReport) -> None:
        self.report = report
        super().__init__("; ".join(report.problems))


class VerificationWarning(UserWarning):
    """A non-strict solve returned a plan that failed verification or whose solver did not
    report an optimal status; ``plan.status`` and ``plan.message`` say what happened."""


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
    Extra keyword options go to the method's backend (unknown ones are rejected).

    The returned plan follows scipy's ``OptimizeResult`` habits:

    * ``plan.verification`` — the :class:`~otlp.verify.VerificationReport` (marginals, sign,
      acceptance against alpha*, and every conditional pi(.|omega)); also in
      ``plan.info["verification"]``. None with ``check=False``.
    * ``plan.success`` — True when the plan verified (with ``check=False``: when every
      backend reported an optimal status).
    * ``plan.status`` — ``"verified"``, ``"verification_failed"`` or ``"unchecked"``.
    * ``plan.message`` — what happened, including any non-optimal backend status.

    A plan that fails verification, or whose backend did not report an optimal status (e.g.
    a HiGHS time limit), emits a :class:`VerificationWarning`; with ``strict=True`` a failed
    verification raises :class:`VerificationError` instead.
    """
    require_instance(inst)
    if tolerances is not None and not isinstance(tolerances, Tolerances):
        raise ValueError(
            f"tolerances: expected an otlp.Tolerances, got {type(tolerances).__name__}"
        )
    start = time.perf_counter()
    plan = get_method(method)(inst, form=form, **options)
    plan.info["total_time"] = time.perf_counter() - start
    if tolerances is not None:
        plan.info["tolerances"] = tolerances
    solver_ok = plan.info.get("solver_success", True)
    solver_note = (
        ""
        if solver_ok
        else f"; backend status {', '.join(map(str, plan.info.get('statuses', [])))}"
    )
    if check or strict:
        report = verify(plan)
        plan.info["verification"] = report
        plan.verification = report
        if strict and not report.ok:
            raise VerificationError(report)
        plan.success = report.ok
        plan.status = "verified" if report.ok else "verification_failed"
        plan.message = ("verified" if report.ok else "; ".join(report.problems)) + solver_note
    else:
        plan.success = bool(solver_ok)
        plan.message = "not verified (check=False)" + solver_note
    if not plan.success or not solver_ok:
        warnings.warn(
            f"otlp.solve(method={method!r}): {plan.message}", VerificationWarning, stacklevel=2
        )
    return plan
