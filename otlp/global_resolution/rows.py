"""Global resolution's decoder rows ([GR] §6, Algorithm 1): the one entry the decoder's calls use.

:class:`GlobalResolutionRows` holds one call's checked options (tau, Newton's iteration limit,
the time budget) and verifies with them either a batch of rows of any draft scheme
(:meth:`~GlobalResolutionRows.verify`, for :func:`otlp.verify_drafts`) or one node of a draft
tree (:meth:`~GlobalResolutionRows.node_token` and
:meth:`~GlobalResolutionRows.fused_node_token`, for :func:`otlp.verify_tree`). Below it, one
module per job: :mod:`.iid_rows` (the compiled i.i.d. batch), :mod:`.scheme_rows` (without
replacement, independent, greedy), :mod:`.row_fallback` (the chain a row takes when the fused
path cannot certify it) and :mod:`.rule_fallback` (its last link, the scheme's lossless rule).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.exact import exact_rows
from otlp.decoder_rows.inputs import DecoderBatch
from otlp.decoder_rows.result import DraftVerification
from otlp.errors import ProblemTooLarge
from otlp.global_resolution.constants import check_unit_size
from otlp.global_resolution.iid_rows import iid_rows
from otlp.global_resolution.row_options import RowOptions
from otlp.global_resolution.rule_fallback import FALLBACK_RULES, rule_seconds
from otlp.global_resolution.scheme_rows import scheme_row_token, scheme_rows
from otlp.solvers.global_resolution.budget import Deadline


@dataclass(frozen=True)
class GlobalResolutionRows(RowOptions):
    """Global resolution's rows for one decoder call, with its checked options (:class:`RowOptions`:
    ``tau``, ``max_iter``, ``time_budget``; build them with :meth:`checked`)."""

    def verify(self, batch: DecoderBatch, *, parallel: bool, start: float) -> DraftVerification:
        """The tokens of a checked ``batch`` (:class:`otlp.decoder_rows.inputs.DecoderBatch`,
        two uniforms per row), the call's ``start`` (its ``time.perf_counter()``; the budget
        counts from there).

        A unit whose one Newton evaluation is over ``otlp.limits`` sends every row to the
        scheme's lossless rule (each report says so); otherwise each row is verified by the
        compiled i.i.d. batch (``parallel``: on numba's threads) or the fused scheme row, and a
        row those cannot certify goes down the fallback chain."""
        rows, n = batch.drafts.shape
        vocab = batch.p.shape[1]
        try:
            if batch.scheme != "greedy":  # the greedy plan is closed form: no Newton evaluation
                check_unit_size(vocab if batch.top_k is None else batch.top_k, n)
        except ProblemTooLarge as exc:  # a valid row still gets a token: the scheme's rule's
            rule = FALLBACK_RULES[batch.scheme].name
            verified = exact_rows(batch, rule)
            return rule_rows(verified, str(exc))
        reserve = rows * rule_seconds(vocab, batch.q.shape[1])  # kept for the rows' rule tokens
        deadline = call_deadline(self.time_budget, start, reserve)
        if batch.scheme == "iid":
            return iid_rows(self, batch, deadline, parallel)
        return scheme_rows(self, batch, deadline)

    def node_token(
        self, p: NDArray[np.floating], q: NDArray[np.floating], omega: NDArray[np.int64],
        u: NDArray[np.float64], *, scheme: str,
    ) -> int:  # fmt: skip
        """The token at a tree node on the node's checked, renormalised (and top-k restricted)
        laws ``p``, ``q`` (V,), its drafted tokens ``omega`` and uniforms ``u``; a unit over
        ``otlp.limits`` is refused by name."""
        check_unit_size(int(np.count_nonzero(q)), omega.shape[0])
        wor = scheme == "without_replacement"
        return self._node_row(p, q, omega, u, None, 1e-9, without_replacement=wor)

    def fused_node_token(
        self, p: NDArray[np.floating], q: NDArray[np.floating], omega: NDArray[np.int64],
        u: NDArray[np.float64], *, scheme: str, top_k: int | None, atol: float,
    ) -> int:  # fmt: skip
        """The token at a tree node on the rows as given (the kernels check them, restrict q
        to its top-k and renormalise both rows themselves); a node of one draft without
        replacement takes the i.i.d. kernel. -1 where a drafted token is outside the kernel's
        top-k or a row fails the kernel's check: the restricted path (:meth:`node_token`)
        decides, and names the row in its error."""
        if scheme == "without_replacement" and omega.shape[0] > 1:
            try:
                check_unit_size(top_k or 0, omega.shape[0])
            except ValueError:  # the restricted path refuses the node's own unit by name
                return -1
            return self._node_row(p, q, omega, u, top_k, atol, without_replacement=True)
        try:  # the kernel checks both rows (finite, nonnegative, sums within atol) itself
            return self._node_row(p, q, omega, u, top_k, atol, without_replacement=False)
        except ValueError:
            return -1

    def _node_row(
        self, p: NDArray[np.floating], q: NDArray[np.floating], omega: NDArray[np.int64],
        u: NDArray[np.float64], top_k: int | None, atol: float, *, without_replacement: bool,
    ) -> int:  # fmt: skip
        """A node's token by the compiled per-row paths of :meth:`verify`: the fused scheme
        row for drafts without replacement, else the i.i.d. kernel."""
        if without_replacement:
            return scheme_row_token(
                self, p, q[None, :], omega, "without_replacement", u[:2], atol, top_k
            )
        batch = DecoderBatch.of_row(p, q, omega, u[:2], scheme="iid", top_k=top_k, atol=atol)
        result = iid_rows(self, batch, Deadline.after(self.time_budget))
        return int(result.tokens[0])


def call_deadline(time_budget: float | None, start: float, reserve: float) -> Deadline:
    """A ``verify_drafts`` call's deadline for its stages: ``time_budget`` seconds from the
    call's ``start``, less ``reserve`` seconds kept for its rows' rule tokens
    (:func:`otlp.global_resolution.rule_fallback.rule_seconds`), so that a row sent to the
    rule still ends within the budget."""
    return Deadline.after(None if time_budget is None else time_budget - reserve, start)


def rule_rows(verification: DraftVerification, reason: str) -> DraftVerification:
    """Rows that global resolution could not take at all (its one Newton evaluation over the
    draft vocabulary is over ``otlp.limits``), verified instead by the scheme's lossless rule
    (``verification``, e.g. ``rrs``): every row is that rule's, whatever its drafts, so the
    batch keeps the rule's exact law; each report says so (``fallback_rule``) and why."""
    reports = tuple(
        dataclasses.replace(
            report,
            fallback=True,
            fallback_rule=verification.method,
            message=f"{reason}; every row verified by {verification.method}",
        )
        for report in verification.reports
    )
    return dataclasses.replace(verification, reports=reports, method="global_resolution")
