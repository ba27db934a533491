"""The verifier: checks a plan's marginals, sign and acceptance against an independent alpha*.

It trusts no solver status and no theory: everything is recomputed from the plan's entries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from otlp.plan import TransportPlan
from otlp.subset import optimal_acceptance


@dataclass(frozen=True)
class Tolerances:
    """Acceptable errors; exact backends meet the defaults.

    ``negative`` sits ten times above HiGHS's primal feasibility tolerance (1e-9, applied to
    the scaled problem), whose vertex solutions reach -9.3e-10 on the real-model suite.
    """

    target_l1: float = 1e-7
    draft_l1: float = 1e-7
    negative: float = 1e-8
    acceptance: float = 1e-7

    @classmethod
    def global_resolution(cls, tau: float) -> Tolerances:
        """Seed 000 §6.3: L1 deviation <= 15 tau from p, acceptance within 10 tau of alpha*."""
        return cls(target_l1=15 * tau, draft_l1=1e-9, negative=1e-12, acceptance=10 * tau)


@dataclass(frozen=True)
class VerificationReport:
    """What the verifier measured and whether it is within tolerance."""

    target_l1: float
    draft_l1: float
    min_entry: float
    acceptance: float
    alpha_star: float
    acceptance_gap: float
    ok: bool
    tolerances: Tolerances
    problems: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["tolerances"] = asdict(self.tolerances)
        return out


def verify(
    plan: TransportPlan,
    tolerances: Tolerances | None = None,
    alpha_star: float | None = None,
) -> VerificationReport:
    """Check a transport plan against its marginals, sign and the optimal acceptance.

    Solver statuses are never trusted: every plan of :func:`otlp.solve` goes through this.

    Parameters
    ----------
    plan : TransportPlan
        The plan to check (a lazy plan is materialised).
    tolerances : Tolerances, optional
        Defaults to the plan's own (``plan.info["tolerances"]``), else :class:`Tolerances`.
    alpha_star : float, optional
        The optimum to compare with; defaults to subset selection on the plan's instance
        ([GR] Theorem 3.1), computed independently of the plan.

    Returns
    -------
    VerificationReport
        Target and draft marginal L1 errors, the most negative entry, acceptance, alpha*,
        their gap, ``ok`` and the ``problems`` found.

    Examples
    --------
    >>> import otlp
    >>> inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=2)
    >>> report = otlp.verify(otlp.solve(inst, "pot", check=False))
    >>> report.ok, round(report.acceptance, 6), report.problems
    (True, 0.86, ())
    """
    tol = tolerances or plan.info.get("tolerances") or Tolerances()
    inst = plan.instance
    if alpha_star is None:
        alpha_star = optimal_acceptance(inst).alpha_star
    target = inst.target_rows
    target_l1 = float(np.abs(plan.target_marginal() - target).sum())
    draft_l1 = float(np.abs(plan.draft_marginal() - plan.columns.mass).sum())
    min_entry = plan.min_entry()
    acceptance = plan.acceptance
    gap = alpha_star - acceptance
    problems = []
    if not np.isfinite([target_l1, draft_l1, min_entry, acceptance]).all():
        problems.append("plan has non-finite entries")
    if target_l1 > tol.target_l1:
        problems.append(f"target marginal off by {target_l1:.3g} (L1) > {tol.target_l1:g}")
    if draft_l1 > tol.draft_l1:
        problems.append(f"draft marginal off by {draft_l1:.3g} (L1) > {tol.draft_l1:g}")
    if min_entry < -tol.negative:
        problems.append(f"negative entry {min_entry:.3g}")
    if abs(gap) > tol.acceptance and gap > 0:
        problems.append(f"acceptance {acceptance:.9f} below alpha* {alpha_star:.9f}")
    if gap < -tol.acceptance:
        problems.append(f"acceptance {acceptance:.9f} above alpha* {alpha_star:.9f}: impossible")
    return VerificationReport(
        target_l1,
        draft_l1,
        min_entry,
        acceptance,
        alpha_star,
        gap,
        not problems,
        tol,
        tuple(problems),
    )
