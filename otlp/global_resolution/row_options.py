"""One decoder call's global-resolution options, checked once and handed down its rows."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Self

from otlp.args import positive_int
from otlp.global_resolution.constants import check_tau, check_time_budget
from otlp.limits import DEFAULT_TIME_BUDGET

DEFAULT_TAU = 1e-3  # global resolution's error threshold where the caller gives none
DEFAULT_MAX_ITER = 50  # Newton's iterations per unit where the caller gives no limit


@dataclass(frozen=True)
class RowOptions:
    """Each row's law within 15 ``tau`` of p (L1, [GR] Lemma 6.6), at most ``max_iter``
    Newton iterations per unit, ``time_budget`` seconds for the whole call (None: no limit;
    :mod:`otlp.solvers.global_resolution.budget`). Build it with :meth:`checked` from a
    caller's arguments."""

    tau: float = DEFAULT_TAU
    max_iter: int = DEFAULT_MAX_ITER
    time_budget: float | None = DEFAULT_TIME_BUDGET

    @classmethod
    def checked(
        cls,
        tau: object = None,
        max_iter: object = DEFAULT_MAX_ITER,
        time_budget: object = DEFAULT_TIME_BUDGET,
    ) -> Self:
        """The options from a caller's arguments (``tau`` None: :data:`DEFAULT_TAU`), each a
        ``ValueError`` naming it when out of range."""
        return cls(check_tau(DEFAULT_TAU if tau is None else tau)).limited(max_iter, time_budget)

    def limited(self, max_iter: object, time_budget: object) -> Self:
        """These options with a caller's ``max_iter`` and ``time_budget``, checked (a call that
        checks ``tau`` first and its arrays before these two, as ``verify_drafts`` does)."""
        return dataclasses.replace(
            self,
            max_iter=positive_int("max_iter", max_iter, minimum=0),
            time_budget=check_time_budget(time_budget),
        )
