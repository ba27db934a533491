"""The partial-resolution plan: a lazy :class:`~otlp.plan.TransportPlan` over a clock partition.

A drafted omega's conditional needs only the pieces of its own distinct tokens
(:meth:`ClockPartition.set_conditional`); the whole plan (every set's accepted flow, for the
verifier) is built on first access to the explicit entries.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.instance import Instance
from otlp.partial_resolution.clocks import ClockPartition
from otlp.plan import LazyTransportPlan, PlanEntries, TransportPlan
from otlp.reprs import dataclass_repr
from otlp.solvers.arrays import FloatArray


@dataclass(frozen=True)
class PartialTokenReport:
    """What one token's conditional took: the drafted ``omega`` (global ids), its distinct
    draft-vocabulary ``members``, the share of the set's mass ``accepted`` (sum of a(S, .) /
    Q(S)), the set's mass, the pieces its members own and the ``seconds`` it took. Exact:
    ``fallback`` is always False (no iteration, no tolerance decides the law)."""

    omega: tuple[int, ...]
    members: tuple[int, ...]
    accepted: float
    set_mass: float
    pieces: int
    seconds: float
    fallback: bool = False
    message: str = "exact (clock partition)"

    __repr__ = dataclass_repr


class PartialResolutionPlan(LazyTransportPlan):
    """An exact optimal plan for n i.i.d. drafts, evaluated per token.

    :meth:`local_slice`, :meth:`slice`, :meth:`token_report` and :meth:`sample` compute only
    the drafted set's conditional (its members' pieces of the clock partition, positive sums,
    no inclusion-exclusion); ``sample`` draws from that set conditional (the decoder's clock
    race, :meth:`ClockPartition.race`, is its tuple-level refinement, with the exact law
    :meth:`race_slice`); reading ``columns``,
    ``explicit`` or the residuals materialises every set's accepted flow (what
    :func:`otlp.verify` checks on small instances).
    """

    def __init__(self, partition: ClockPartition, instance: Instance, seconds: float) -> None:
        self.partition = partition
        self.instance = instance
        self.method = "partial_resolution"
        self.wall_time = seconds
        self.messages: list[str] = []
        self.info: dict[str, Any] = {"alpha_star": partition.alpha_star, "cut": partition.cut}
        self.token_reports: list[PartialTokenReport] = []
        self._entries: PlanEntries | None = None

    def _materialized(self) -> PlanEntries:
        """Every set's accepted flow a(S, .) as the explicit entries, the first time."""
        if self._entries is None:
            start = time.perf_counter()
            inst = self.instance
            cols = inst.columns("sets")
            values = np.zeros(cols.inc_token.shape[0])
            at = 0
            for c in range(cols.count):
                members = cols.members[c][cols.members[c] >= 0]
                shares, _ = self.partition.set_accepted(members)
                values[at : at + members.shape[0]] = shares * cols.mass[c]
                at += members.shape[0]
            # inc_col is sorted column by column, members in column order: values line up
            plan = TransportPlan.from_relaxed(
                inst, cols, cols.inc_token, cols.inc_col, values, method=self.method
            ).polished()
            self._entries = PlanEntries(
                plan.columns, plan.explicit, plan.row_residual, plan.col_residual
            )
            self.info["polish"] = plan.info.get("polish")
            self.wall_time += time.perf_counter() - start
        return self._entries

    def _members(self, omega: ArrayLike) -> NDArray[np.int64]:
        return np.unique(self.instance.to_local(omega))

    def local_slice(self, omega: ArrayLike) -> FloatArray:
        """pi(. | omega) over the draft vocabulary plus the outside row (length k + 1)."""
        return self.token_report(omega)[0]

    def race_slice(self, omega: ArrayLike) -> FloatArray:
        """The decoder's law given the drafted *tuple* ``omega`` over the whole vocabulary:
        the clock race's (:meth:`ClockPartition.race_conditional`, Lemma 6 of
        docs/partial-resolution.md), a refinement of :meth:`slice` that depends on the
        drafted multiset and averages to the set's conditional over the set's multisets. It
        is what ``otlp.verify_drafts`` and ``verify_tree`` sample; equal to :meth:`slice`
        where the set has one multiset (n <= 2, or all drafts distinct or all equal)."""
        local = self.partition.race_conditional(self.instance.to_local(omega))
        return self.instance.global_law(local)

    def token_report(self, omega: ArrayLike) -> tuple[FloatArray, PartialTokenReport]:
        """The slice over the draft vocabulary plus the outside row, and the token report."""
        start = time.perf_counter()
        members = self._members(omega)
        shares, mass = self.partition.set_accepted(members)
        out = self.partition.residual_law * max(1.0 - float(shares.sum()), 0.0)
        out[members] += shares
        part = self.partition
        report = PartialTokenReport(
            tuple(int(t) for t in np.asarray(omega).ravel()),
            tuple(int(m) for m in members),
            float(shares.sum()),
            mass,
            int((part.last[members] - part.first[members]).sum()),
            time.perf_counter() - start,
        )
        self.token_reports.append(report)
        return out, report
