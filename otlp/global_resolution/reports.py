"""The reports of global resolution, composed from one base: what solving a unit took
(:class:`SolveReport`), what producing one token's slice took (:class:`TokenReport`, a solve
report plus the drafted omega); a decoder's row reports the same fields
(:class:`otlp.decoder_rows.result.RowReport`).

Every report is keyword-constructed and says which unit was solved (``system``, ``block``),
its number of ``variables``, the minimiser's ``iterations``, the certified L1 ``deviation``
of the unit's receipts from its targets ([GR] Theorems 6.4/6.5), whether it ``fallback``-ed
to the exact max-flow of §5.3, and a ``message``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class UnitReport:
    """The fields every report of a solved unit carries (``system`` None: no unit, e.g. a
    row verified by an exact rule)."""

    system: str | None
    block: int | None
    variables: int
    iterations: int
    deviation: float
    fallback: bool
    message: str


@dataclass(frozen=True, kw_only=True)
class SolveReport(UnitReport):
    """How one unit was solved: the inner system, or one block of the outer system.

    ``variables`` is |T|, the number of alpha optimised (after the seed's truncation, whose
    eps_T or gamma_T is ``truncation_error``); ``grad_norm`` is the minimiser's last
    ||grad||_1; ``fallback`` says the unit missed its budget and was solved exactly by
    max-flow instead (``seconds`` includes that).
    """

    truncation_error: float
    grad_norm: float
    seconds: float


_SOLVE_FIELDS = tuple(f.name for f in dataclasses.fields(SolveReport))


@dataclass(frozen=True, kw_only=True)
class TokenReport(SolveReport):
    """The per-token report: the solve report of the unit ``omega`` needed, where ``seconds``
    is the wall time of this call (H*, targets and solves included when they were not cached
    yet) and ``cached`` says the unit had already been solved for an earlier slice of the
    same (p, q); ``time_budget`` is the limit (seconds, None: none) its convex solve ran
    under. ``fallback_rule`` names the lossless rule the slice came from when even the
    unit's exact fallback was over ``otlp.limits``
    (:mod:`otlp.global_resolution.rule_fallback`), with ``acceptance_lost`` = alpha* minus
    that rule's acceptance (None if not computed)."""

    omega: tuple[int, ...]
    cached: bool
    time_budget: float | None = None
    fallback_rule: str | None = None
    acceptance_lost: float | None = None

    @classmethod
    def of_unit(
        cls,
        report: SolveReport,
        *,
        omega: tuple[int, ...],
        seconds: float,
        cached: bool,
        time_budget: float | None = None,
        fallback_rule: str | None = None,
        acceptance_lost: float | None = None,
    ) -> TokenReport:
        """``report``'s fields with this token's ``omega``, ``seconds`` and ``cached``."""
        fields = {name: getattr(report, name) for name in _SOLVE_FIELDS}
        return cls(
            **(fields | {"seconds": seconds}),
            omega=omega,
            cached=cached,
            time_budget=time_budget,
            fallback_rule=fallback_rule,
            acceptance_lost=acceptance_lost,
        )
