"""What every verify_drafts path shares: the batch's input arrays, the result type, a row's
draft positions and the draw from a local law (one home for the i.i.d. path in
:mod:`otlp.verification.position` and the other schemes in
:mod:`otlp.verification.position_schemes`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
from numpy.typing import NDArray

from otlp.args import real_number
from otlp.global_resolution.reports import RowReport, TokenReport
from otlp.global_resolution.rule_fallback import rule_token
from otlp.instance import Instance
from otlp.solvers.global_resolution.budget import Deadline
from otlp.solvers.global_resolution.constants import BAD_DRAFT, BAD_P, BAD_Q, SUM_P, SUM_Q
from otlp.tensors import as_float64, as_index_array, check_distributions
from otlp.verification.rule_table import RULES


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


def batch_arrays(
    p: object, q: object, drafts: object, atol: object, *, draft_rows: int = 1
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], float]:
    """p as (1 or B, V), q as (1 or B, draft_rows, V) float64 arrays, drafts as (B, n) int64,
    and the kernel's atol: the one reading path of every ``verify_drafts`` input.

    q holds one row per draw: ``draft_rows = 1`` (i.i.d., without replacement, greedy) takes
    q of shape (V,) or (B, V); ``draft_rows = 2`` (two independent drafters) takes (2, V) or
    (B, 2, V). Every array goes through :func:`otlp.tensors.as_float64` (numpy, ml_dtypes,
    torch of any floating dtype and device, lists), and each distribution is judged at its
    own precision (:func:`otlp.tensors.sum_tolerance`) unless ``atol`` is given; both are
    computed on in float64, so a float64 q is never rounded to a float32 p's precision.
    Returns the looser tolerance for the compiled scan once the stricter array has been
    checked here.
    """
    p_arr, p_kind = as_float64("p", p)
    if p_arr.ndim not in (1, 2) or p_arr.shape[-1] == 0:
        raise ValueError(f"p: expected shape (V,) or (B, V), got {p_arr.shape}")
    q_arr, q_kind = as_float64("q", q)
    if draft_rows == 1 and (q_arr.ndim not in (1, 2) or q_arr.shape[-1] == 0):
        raise ValueError(f"q: expected shape (V,) or (B, V), got {q_arr.shape}")
    if draft_rows > 1 and (q_arr.ndim not in (2, 3) or q_arr.shape[-2] != draft_rows):
        raise ValueError(
            f"q: scheme 'independent' takes one row per draft, shape ({draft_rows}, V) or "
            f"(B, {draft_rows}, V), got {q_arr.shape}"
        )
    p_arr = p_arr.reshape(-1, p_arr.shape[-1])
    q_arr = q_arr.reshape(-1, draft_rows, q_arr.shape[-1])
    if p_arr.shape[1] != q_arr.shape[-1]:
        raise ValueError(f"q: vocabulary size {q_arr.shape[-1]} differs from p's {p_arr.shape[1]}")
    vocab = p_arr.shape[1]
    draft_arr, _ = as_index_array("drafts", drafts, size=vocab)
    if draft_arr.ndim != 2 or 0 in draft_arr.shape:
        raise ValueError(f"drafts: expected shape (B, n) with B, n >= 1, got {draft_arr.shape}")
    rows = draft_arr.shape[0]
    for name, arr in (("p", p_arr), ("q", q_arr)):
        if arr.shape[0] not in (1, rows):
            raise ValueError(f"{name}: {arr.shape[0]} rows for {rows} rows of drafts")
    if atol is not None:
        return p_arr, q_arr, draft_arr, real_number("atol", atol, minimum=0.0)
    tolerances = (p_kind.sum_tolerance, q_kind.sum_tolerance)
    if tolerances[0] != tolerances[1]:  # the compiled scan takes one atol: check the stricter
        name, arr, tol = (
            ("p", p_arr, tolerances[0])
            if tolerances[0] < tolerances[1]
            else ("q", q_arr if draft_rows > 1 else q_arr[:, 0], tolerances[1])
        )
        check_distributions(name, arr, tol)
    return p_arr, q_arr, draft_arr, max(tolerances)


DEFAULT_TAU = 1e-3  # global resolution's error threshold where the caller gives none


def method_tau(method: str, tau: float | None) -> float:
    """Global resolution's checked ``tau`` (None: :data:`DEFAULT_TAU`); a ``ValueError`` naming
    ``tau`` and the method where another method (``method``, canonical), which is exact and has
    no error threshold, is given one (as :func:`otlp.verify_tree` refuses it)."""
    if not RULES[method].takes_tau:
        if tau is not None:
            raise ValueError(
                f"tau: method {method!r} is exact and takes no error threshold (tau is "
                f"global_resolution's), got tau={tau!r}"
            )
        return DEFAULT_TAU
    from otlp.global_resolution import check_tau

    return check_tau(DEFAULT_TAU if tau is None else tau)


def call_deadline(time_budget: float | None, start: float, reserve: float) -> Deadline:
    """A ``verify_drafts`` call's deadline for its stages: ``time_budget`` seconds from the
    call's ``start``, less ``reserve`` seconds kept for its rows' rule tokens
    (:func:`otlp.global_resolution.rule_fallback.rule_seconds`), so that a row sent to the
    rule still ends within the budget."""
    return Deadline.after(None if time_budget is None else time_budget - reserve, start)


def local_drafts(inst: Instance, drafts: NDArray, b: int) -> NDArray[np.int64]:
    """Row ``b``'s drafts as draft-vocabulary positions of ``inst`` (errors name the row)."""
    try:
        return inst.to_local(drafts[b])
    except ValueError:
        raise ValueError(
            f"drafts[{b}]: {drafts[b].tolist()} contains a token the (top-k) draft cannot produce"
        ) from None


def draw_token(inst: Instance, probs: NDArray[np.float64], u: NDArray[np.float64]) -> int:
    """One token from the local law ``probs`` (the last entry: outside the draft vocabulary,
    spread in proportion to p), with the fused path's two uniforms ``u``."""
    from otlp.solvers.global_resolution.token import draw

    return int(draw(np.clip(probs, 0.0, None), inst.p, inst.tokens, u[0], u[1]))


def object_api_token(
    inst: Instance,
    drafts: NDArray,
    u: NDArray[np.float64],
    *,
    tau: float,
    max_iter: int,
    time_budget: float | None,
    deadline: Deadline,
) -> tuple[int, TokenReport]:
    """A decoder row the fused path could not certify: the object API solves the unit the
    drafts need before the call's ``deadline`` (exactly by max-flow where its own certificate
    fails too, by the scheme's lossless rule where that max-flow is over ``otlp.limits`` or
    does not fit the time left) and draws the token; returns (token, the token's report).
    ``time_budget``: the call's, for the report."""
    from otlp.api import solve

    plan = solve(
        inst,
        "global_resolution",
        tau=tau,
        max_iter=max_iter,
        time_budget=time_budget,
        check=False,
    )
    probs, report = plan.engine.local_slice(drafts, deadline)  # type: ignore[attr-defined]
    return draw_token(inst, probs, u), report


def fallback_token(
    inst: Instance,
    drafts: NDArray,
    u: NDArray[np.float64],
    *,
    out_of_time: bool,
    alpha_star: float | None,
    tau: float,
    max_iter: int,
    time_budget: float | None,
    deadline: Deadline,
    iteration_limit: bool = False,
) -> tuple[int, str, str | None, float | None]:
    """The token of a row the fused path could not certify: (token, what the fallback did,
    the lossless rule that gave the token or None, the acceptance it lost or None).

    A row ``out_of_time`` (a stage did not fit the call's deadline) goes straight to the
    scheme's lossless rule: an exact max-flow on its unit costs more than the Newton
    iteration that no longer fitted. Any other row goes to :func:`object_api_token`; one
    whose Newton stopped at its ``iteration_limit`` hands it no iteration (the object API's
    Newton would stop at the same limit: it keeps its seed if that is certified, otherwise it
    solves the unit exactly at once)."""
    if out_of_time:
        found = rule_token(inst, inst.to_local(drafts), alpha_star, deadline)
        token = draw_token(inst, found.probs, u)
        return token, f"token by {found.rule}", found.rule, found.acceptance_lost
    token, report = object_api_token(
        inst,
        drafts,
        u,
        tau=tau,
        max_iter=0 if iteration_limit else max_iter,
        time_budget=time_budget,
        deadline=deadline,
    )
    return token, f"object API: {report.message}", report.fallback_rule, report.acceptance_lost


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
    accepted = (tokens[:, None] == drafts).any(axis=1)
    return DraftVerification(tokens, accepted, (report,) * tokens.shape[0], method)


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


# The messages of the fused kernels' row status codes (otlp.solvers.global_resolution.constants).
ROW_ERRORS = {
    BAD_P: "{name}: has a negative, NaN or infinite entry",
    BAD_Q: "{name}: has a negative, NaN or infinite entry",
    SUM_P: "{name}: does not sum to 1 within atol",
    SUM_Q: "{name}: does not sum to 1 within atol",
}


def raise_for_row_status(
    status: int,
    detail: int,
    b: int,
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    scheme: str = "iid",
) -> NoReturn:
    """The ``ValueError`` of row ``b``, which a fused kernel refused with ``status`` (the
    codes of :mod:`otlp.solvers.global_resolution.constants`) and ``detail`` (the draw at fault,
    or the drafter of an independent pair's row): one message per code for every scheme,
    naming the argument and the row as the caller passed them."""
    if status == BAD_DRAFT:
        if detail < 0:
            raise ValueError(
                f"drafts[{b}]: {drafts[b].tolist()} is not a greedy draft tuple (the top "
                f"{drafts.shape[1] - 1} draft tokens plus one other token of positive probability)"
            )
        drafter = f" by its drafter q[{b if q.shape[0] > 1 else 0}, {detail}]"
        raise ValueError(
            f"drafts[{b}, {detail}]: token {int(drafts[b, detail])} cannot be drafted"
            f"{drafter if scheme == 'independent' else ''} (draft probability 0, or outside "
            "the top-k draft)"
        )
    if status in (BAD_P, SUM_P):
        name = f"p[{b if p.shape[0] > 1 else 0}]"
    else:
        row = b if q.shape[0] > 1 else 0
        name = f"q[{row}, {detail}]" if scheme == "independent" else f"q[{row}]"
    raise ValueError(ROW_ERRORS[status].format(name=name))
