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

    The optimal transport of [GR] Eq. (1): a coupling of the target p and the draft joint
    that maximises the probability of outputting one of the drafted tokens.

    Parameters
    ----------
    inst : Instance
        The problem: target, draft, number of drafts, draft scheme, top-k.
    method : str, default "maxflow"
        One of the registered methods below (``otlp.method_names()``; docs/api.md); old
        spellings with "-" are accepted.
    form : {"sets", "tuples"}, default "sets"
        Column indexing: sets of distinct drafted tokens, or ordered tuples (cross-checks).
    check : bool, default True
        Verify the plan (:func:`otlp.verify`): marginals, sign, acceptance against alpha* and
        every conditional pi(.|omega).
    strict : bool, default False
        Raise :class:`VerificationError` when the verification fails.
    tolerances : Tolerances, optional
        Verifier tolerances instead of the method's defaults.
    **options
        The method's options, listed below with their defaults; unknown ones are rejected.

    Methods
    -------
    {methods}

    Returns
    -------
    TransportPlan
        The coupling; ``plan.slice(omega)`` is π(·|ω) over the whole vocabulary and
        ``plan.sample(omega, rng)`` draws the verified token. Following scipy's
        ``OptimizeResult`` habits it carries ``plan.verification`` (the
        :class:`~otlp.verify.VerificationReport`, None with ``check=False``),
        ``plan.success`` (verified; with ``check=False``: every backend reported optimal),
        ``plan.status`` (``"verified"``, ``"verification_failed"`` or ``"unchecked"``) and
        ``plan.message`` (what happened, including any non-optimal backend status).

    Warns
    -----
    VerificationWarning
        When the plan fails verification or a backend did not report an optimal status
        (e.g. a HiGHS time limit), unless ``strict=True``.

    Raises
    ------
    ValueError
        Unknown method or option, or an invalid instance.
    VerificationError
        With ``strict=True``, when the plan fails verification.

    Examples
    --------
    >>> import otlp
    >>> inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=2)
    >>> plan = otlp.solve(inst, "maxflow")
    >>> round(plan.acceptance, 6), plan.verification.ok
    (0.86, True)
    >>> round(otlp.solve(inst, "global_resolution", tau=1e-4).acceptance, 3)
    0.86
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
