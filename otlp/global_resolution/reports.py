"""What solving a unit and producing a token took: the reports of global resolution."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SolveReport:
    """How one unit was solved: the inner system, or one block of the outer system.

    ``variables`` is |T|, the number of alpha optimised (after the seed's truncation, whose
    eps_T or gamma_T is ``truncation_error``); ``deviation`` is the certified L1 deviation of
    the unit's receipts from its targets; ``fallback`` says it missed its budget and was
    solved exactly by max-flow instead (``seconds`` includes that).
    """

    system: str
    block: int | None
    variables: int
    truncation_error: float
    iterations: int
    grad_norm: float
    deviation: float
    fallback: bool
    seconds: float
    message: str


@dataclass(frozen=True)
class TokenReport:
    """The per-token report: what producing the slice for ``omega`` took.

    ``variables`` is |T| of the unit solved for it; ``seconds`` is the wall time of this
    call (H*, targets and solves included when they were not cached yet); ``cached`` says
    the unit had already been solved for an earlier slice of the same (p, q);
    ``time_budget`` is the limit (seconds, None: none) its convex solve ran under.
    """

    omega: tuple[int, ...]
    system: str
    block: int | None
    variables: int
    iterations: int
    grad_norm: float
    deviation: float
    fallback: bool
    seconds: float
    cached: bool
    message: str
    time_budget: float | None = None
