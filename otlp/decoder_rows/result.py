"""A decoder call's result (:class:`DraftVerification`) and each row's (:class:`RowReport`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from otlp.global_resolution.reports import UnitReport


@dataclass(frozen=True, kw_only=True)
class RowReport(UnitReport):
    """How one row of :func:`otlp.verify_drafts` got its token: for global resolution the unit
    omega needed with its ``budget`` (5 tau, an outer block its share); exact rules report no
    system and zeros. ``fallback_rule`` and ``acceptance_lost`` as in
    :class:`otlp.global_resolution.TokenReport`."""

    budget: float
    fallback_rule: str | None = None
    acceptance_lost: float | None = None


@dataclass(frozen=True)
class DraftVerification:
    """The B output tokens (global ids), whether each is one of its drafts, per-row reports."""

    tokens: NDArray[np.int64]
    accepted: NDArray[np.bool_]
    reports: tuple[RowReport, ...]
    method: str

    @property
    def fallbacks(self) -> int:
        return sum(report.fallback for report in self.reports)

    @property
    def output_ids(self) -> NDArray[np.int64]:
        """(B, 1): each row's emitted token, in the engines' layout (as
        :attr:`TreeVerification.output_ids <otlp.verification.tree.TreeVerification>`)."""
        return self.tokens[:, None]

    @property
    def num_accepted(self) -> NDArray[np.int64]:
        """(B,): 1 where the emitted token is one of the row's drafts, else 0 (as
        :attr:`TreeVerification.num_accepted <otlp.verification.tree.TreeVerification>`)."""
        return self.accepted.astype(np.int64)


def verification(
    tokens: NDArray[np.int64],
    drafts: NDArray[np.int64],
    reports: tuple[RowReport, ...],
    method: str,
) -> DraftVerification:
    """The result of rows whose ``tokens`` are known: each accepted where it is one of its
    row's ``drafts``."""
    accepted = (tokens[:, None] == drafts).any(axis=1)
    return DraftVerification(tokens, accepted, reports, method)


def exact_verification(
    tokens: NDArray[np.int64], drafts: NDArray[np.int64], method: str
) -> DraftVerification:
    """The result of an exact rule's rows: every row reports no system and no fallback."""
    report = RowReport(
        system=None,
        block=None,
        variables=0,
        iterations=0,
        deviation=0.0,
        budget=0.0,
        fallback=False,
        message="exact",
    )
    return verification(tokens, drafts, (report,) * tokens.shape[0], method)
