"""Global resolution per decoder row beyond i.i.d. drafts ([GR] §6, App. N, O, S).

One row, from full-vocabulary arrays to a token, in compiled steps with a thin Python
driver (the i.i.d. row runs entirely compiled: :func:`otlp.solvers.global_resolution.token.batch`):

1. an O(V) scan of p and each draft row, the top-k selection and the restriction to the
   draft vocabulary (:mod:`otlp.solvers.global_resolution.token`,
   :func:`~otlp.solvers.global_resolution.scheme_token.independent_vocabulary`);
2. H* and the outer targets with their tight-set blocks
   (:mod:`otlp.global_resolution.scheme_parts`: the q/p prefix rule and one quadrature
   without replacement; the certified branch and bound and removal chain for two
   independent drafts);
3. only the unit omega needs (the earliest outer block it meets, else the inner system),
   solved by Newton to its 5 tau budget (its share for an outer block);
   steps 2 and 3 start only if their estimated seconds fit what is left of the call's
   ``deadline`` (:mod:`otlp.solvers.global_resolution.budget`), else the row is ``out_of_time``;
4. the slice of Eq. (18) (:func:`~otlp.solvers.global_resolution.token.slice_of`, the kernel the
   i.i.d. path and the object API use) and the draw.

The greedy scheme needs no solve: its optimal plan has a closed form
(:func:`~otlp.solvers.global_resolution.scheme_token.greedy_slice`). Every step uses the same
functions as the object API (:class:`~otlp.global_resolution.schemes.SchemeGlobalResolution`),
so both give the same slice to rounding. A row that needs what this path does not do — a
certificate that fails, a unit over its budget, masses the quadrature cannot certify, a
unit of n >= 3 draws whose sets are all its tokens — returns ``FALLBACK`` and the caller
solves it exactly through the object API.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.checks import RowVocabulary, checked_row
from otlp.global_resolution.constants import BUDGET_FACTOR, INNER, NUMERICAL_FAILURES, OUTER
from otlp.global_resolution.scheme_parts import (
    Selection,
    independent_selection,
    independent_targets,
    unit_parts,
    unit_system,
    without_replacement_analysis,
)
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution import OuterTargets
from otlp.solvers.global_resolution.budget import (
    NO_DEADLINE,
    Deadline,
    OutOfTime,
    blas_pinned,
    evaluation_seconds,
    require,
    setup_seconds,
)
from otlp.solvers.global_resolution.clocks import QuadratureRangeError
from otlp.solvers.global_resolution.newton import ITERATION_LIMIT, MESSAGES, OUT_OF_TIME
from otlp.solvers.global_resolution.scheme_token import (
    greedy_slice,
)
from otlp.solvers.global_resolution.system_newton import system_newton
from otlp.solvers.global_resolution.token import (
    budget_share,
    draw,
    slice_of,
    unit_of,
)
from otlp.solvers.row_status import BAD_DRAFT, FALLBACK, OK

FUSED_SCHEMES = ("without_replacement", "independent", "greedy")


@dataclass(frozen=True)
class RowResult:
    """One row: ``status`` (a :class:`~otlp.solvers.row_status.RowStatus` code), the
    token (-1 unless OK), and the unit's report fields. For a bad input ``detail`` is the
    offending draft row (BAD_P .. SUM_Q) or draft position (BAD_DRAFT). ``out_of_time``: a
    stage did not fit the call's deadline; ``iteration_limit``: Newton stopped at its
    iteration limit; ``alpha_star`` once H* is known."""

    status: int
    token: int
    system: str | None = None
    block: int | None = None
    variables: int = 0
    iterations: int = 0
    deviation: float = 0.0
    budget: float = 0.0
    message: str = ""
    detail: int = 0
    out_of_time: bool = False
    iteration_limit: bool = False
    alpha_star: float | None = None


def analysis(scheme: str, n: int, vocab: RowVocabulary) -> tuple[Selection, OuterTargets] | str:
    """H* and the outer targets of the row, or why this path cannot give them."""
    if scheme == "without_replacement":
        try:
            return without_replacement_analysis(vocab.p_local, vocab.rows[0], vocab.p_outside, n)
        except QuadratureRangeError:
            return "set masses below the quadrature's certified range"
    selection = independent_selection(vocab.p_local, vocab.rows[0], vocab.rows[1])
    if selection is None:
        return "H* search not certified"
    outer = independent_targets(vocab.p_local, vocab.rows[0], vocab.rows[1], selection.H_mask)
    if outer is None:
        return "outer chain not certified"
    return selection, outer


def residual_rows(vocab: RowVocabulary, outer: OuterTargets) -> FloatArray:
    """Eq. (18)'s residual rows: p(i) - p_i outside H*, 0 in H*, the outside mass last."""
    k = vocab.p_local.shape[0]
    out = np.zeros(k + 1)
    out[outer.order] = np.maximum(vocab.p_local[outer.order] - outer.targets, 0.0)
    out[k] = vocab.p_outside
    return out


def row_slice(
    p: NDArray,
    q_rows: NDArray,
    drafts: IntArray,
    scheme: str,
    top_k: int,
    tau: float,
    max_iter: int,
    atol: float,
    deadline: Deadline = NO_DEADLINE,
) -> tuple[RowResult, FloatArray | None, IntArray | None]:
    """(report, pi(.|omega) over the draft vocabulary plus the outside row, its global ids)
    for one decoder row of ``scheme``; the slice is None unless the status is OK.

    ``q_rows`` is (1, V), or (2, V) for two independent drafts; ``top_k`` 0 keeps every
    positive draft token; ``deadline``: the call's (see the module docstring).
    """
    status, detail, vocab, local = checked_row(p, q_rows, drafts, scheme, top_k, atol)
    if vocab is None or local is None:
        return RowResult(status, -1, detail=detail), None, None
    n = drafts.shape[0]
    k = vocab.p_local.shape[0]
    if scheme == "greedy":
        bad, probs = greedy_slice(vocab.p_local, vocab.rows[0], vocab.p_outside, n, local)
        if bad:
            return RowResult(BAD_DRAFT, -1, detail=-1), None, None
        message = "closed form (exact)"
        if deadline.limited and deadline.left() < 0:  # no stage to skip, no rule to take
            message += "; finished past the time budget (the plan costs one pass, as a rule's)"
        return RowResult(OK, -1, message=message), probs, vocab.tokens
    try:
        require(deadline, setup_seconds(scheme, k, n), "H* and the outer targets")
    except OutOfTime as exc:
        return RowResult(FALLBACK, -1, message=str(exc), out_of_time=True), None, None
    found = analysis(scheme, n, vocab)
    if isinstance(found, str):
        return RowResult(FALLBACK, -1, message=found), None, None
    selection, outer = found
    alpha_star = 1.0 + selection.psi_min  # [GR] Theorem 3.1
    block = int(unit_of(outer.block_of, local))
    unit = (OUTER, block) if block >= 0 else (INNER, None)
    parts = unit_parts(vocab.p_local, selection.H_mask, outer, unit)
    share = budget_share(outer.targets, outer.starts, outer.ends, block) if block >= 0 else 1.0
    budget = BUDGET_FACTOR * tau * share
    system = unit_system(scheme, n, vocab.rows, parts)
    name = str(unit[0])
    block_id = block if block >= 0 else None
    if system is None:
        message = "unit needs exact set masses"
        failure = RowResult(FALLBACK, -1, name, block_id, message=message, alpha_star=alpha_star)
        return failure, None, None
    alpha = np.zeros(system.size)
    iterations, deviation, message = 0, 0.0, "exact"
    if not (system.size == 0 or (system.size == 1 and system.gauge_free)):
        double = scheme == "without_replacement" and n >= 3
        try:
            require(deadline, evaluation_seconds(system.size, n, double), "Newton")
            with blas_pinned(system.size):  # two threads on busy cores: steps 20-100x slower
                result = system_newton(
                    system, budget, max_iter=max_iter, time_budget=deadline.seconds()
                )
        except OutOfTime as exc:
            skipped = RowResult(
                FALLBACK,
                -1,
                name,
                block_id,
                system.size,
                message=str(exc),
                out_of_time=True,
                alpha_star=alpha_star,
            )
            return skipped, None, None
        except NUMERICAL_FAILURES as exc:
            message = f"numerical failure: {exc}"
            failure = RowResult(
                FALLBACK, -1, name, block_id, message=message, alpha_star=alpha_star
            )
            return failure, None, None
        alpha, iterations, deviation = result.alpha, result.iterations, result.deviation
        message = result.message
        if not deviation <= budget:
            late = message == MESSAGES[OUT_OF_TIME]
            at_limit = message == MESSAGES[ITERATION_LIMIT]
            message = f"{message}; deviation {deviation:.3g} > budget {budget:.3g}"
            report = RowResult(
                FALLBACK,
                -1,
                name,
                block_id,
                system.size,
                iterations,
                deviation,
                budget,
                message,
                out_of_time=late,
                iteration_limit=at_limit,
                alpha_star=alpha_star,
            )
            return report, None, None
    solved = np.zeros(k)
    solved[parts.tokens] = alpha
    inner = np.zeros(k, dtype=bool)
    inner[parts.tokens] = block < 0
    probs = slice_of(solved, inner, outer.block_of, residual_rows(vocab, outer), local, block)
    report = RowResult(
        OK, -1, name, block_id, system.size, iterations, deviation, budget, message,
        alpha_star=alpha_star,
    )  # fmt: skip
    return report, probs, vocab.tokens


def scheme_row(
    p: NDArray,
    q_rows: NDArray,
    drafts: IntArray,
    scheme: str,
    top_k: int,
    tau: float,
    max_iter: int,
    atol: float,
    uniforms: FloatArray,
    deadline: Deadline = NO_DEADLINE,
) -> RowResult:
    """One decoder row: :func:`row_slice` and a draw from the slice (two uniforms)."""
    report, probs, tokens = row_slice(
        p, q_rows, drafts, scheme, top_k, tau, max_iter, atol, deadline
    )
    if probs is None or tokens is None:
        return report
    token = int(draw(probs, p, tokens, uniforms[0], uniforms[1]))
    return dataclasses.replace(report, token=token)
