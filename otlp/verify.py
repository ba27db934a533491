"""The verifier: checks a plan's marginals, sign, acceptance against an independent alpha*,
and every conditional pi(. | omega) a decoder samples from.

It trusts no solver status and no theory: everything is recomputed from the plan's entries.
Global L1 errors alone are not enough: a column of mass 1e-12 turns an absolute error of
1e-13 into a relative one of 10%, so each slice of a draft the scheme can produce (also one
whose mass underflowed to 0) is checked on its own (entries >= -slice_negative, sum within
slice_sum of 1).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from otlp.args import real_number
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
    slice_sum: float = 1e-9
    slice_negative: float = 1e-9

    def __post_init__(self) -> None:
        for item in fields(self):  # NaN would make every comparison pass
            real_number(item.name, getattr(self, item.name))

    @classmethod
    def global_resolution(cls, tau: float) -> Tolerances:
        """[GR] §6.3: L1 deviation <= 15 tau from p, acceptance within 10 tau of alpha*."""
        return cls(target_l1=15 * tau, draft_l1=1e-9, negative=1e-12, acceptance=10 * tau)


@dataclass(frozen=True)
class SliceReport:
    """The conditionals pi(. | omega) of every column the draft scheme can produce: positive
    draft mass, or a mass that underflowed to 0 whose log by the one rule for tuple masses
    (:func:`otlp.columns.log_set_mass`) is finite.

    ``worst_*`` describe the column whose slice is furthest from a probability vector (largest
    of |sum - 1| and the magnitude of its most negative entry); ``worst_omega`` lists its
    drafted tokens as global ids. ``mean_defect`` is the draft-mass-weighted average of
    |sum - 1| + (total of negative entries): the expected defect of the slice a decoder uses.
    """

    columns: int
    max_sum_error: float
    min_entry: float
    mean_defect: float
    worst_column: int
    worst_omega: tuple[int, ...]
    worst_mass: float
    worst_sum: float
    worst_min: float


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
    slices: SliceReport | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def check_slices(plan: TransportPlan) -> SliceReport:
    """Scan every conditional of ``plan`` (vectorised: column sums plus the residual term)."""
    stats = plan.slice_statistics()
    if stats.columns.size == 0:
        return SliceReport(0, 0.0, 0.0, 0.0, -1, (), 0.0, float("nan"), float("nan"))
    sum_error = np.abs(stats.sums - 1.0)
    badness = np.maximum(sum_error, -np.minimum(stats.mins, 0.0))
    badness = np.where(np.isfinite(badness), badness, np.inf)
    worst = int(np.argmax(badness))
    column = int(stats.columns[worst])
    members = plan.columns.members[column]
    omega = tuple(int(t) for t in plan.instance.tokens[members[members >= 0]])
    mass = plan.columns.mass[stats.columns]
    with np.errstate(invalid="ignore", over="ignore"):
        mean_defect = float(mass @ (sum_error + stats.negative))
    return SliceReport(
        columns=int(stats.columns.size),
        max_sum_error=float(sum_error.max()),
        min_entry=float(min(stats.mins.min(), 0.0)),
        mean_defect=mean_defect,
        worst_column=column,
        worst_omega=omega,
        worst_mass=float(plan.columns.mass[column]),
        worst_sum=float(stats.sums[worst]),
        worst_min=float(stats.mins[worst]),
    )


def verify(
    plan: TransportPlan,
    tolerances: Tolerances | None = None,
    alpha_star: float | None = None,
) -> VerificationReport:
    """Check a transport plan against its marginals, sign, every conditional and the optimal
    acceptance.

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
        their gap, the worst conditional pi(.|omega), ``ok`` and the ``problems`` found.

    Examples
    --------
    >>> import otlp
    >>> inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=2)
    >>> report = otlp.verify(otlp.solve(inst, "pot", check=False))
    >>> report.ok, round(report.acceptance, 6), report.problems
    (True, 0.86, ())
    """
    if not isinstance(plan, TransportPlan):
        raise ValueError(f"plan: expected an otlp.TransportPlan, got {type(plan).__name__}")
    if tolerances is not None and not isinstance(tolerances, Tolerances):
        raise ValueError(
            f"tolerances: expected an otlp.Tolerances, got {type(tolerances).__name__}"
        )
    if alpha_star is not None:
        alpha_star = real_number("alpha_star", alpha_star)
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
    slices = check_slices(plan)
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
    if not (slices.max_sum_error <= tol.slice_sum and slices.min_entry >= -tol.slice_negative):
        problems.append(
            f"slice pi(.|omega={list(slices.worst_omega)}) (draft mass {slices.worst_mass:.3g}) "
            f"sums to {slices.worst_sum:.12g} with smallest entry {slices.worst_min:.3g}: not a "
            f"probability vector within {tol.slice_sum:g} / -{tol.slice_negative:g}"
        )
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
        slices,
    )
