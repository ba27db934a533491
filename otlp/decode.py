"""Batched verification for decoders: full-vocabulary (p, q) rows and drafted ids to tokens.

``verify_drafts`` is what a decoder calls once per step for a batch of B sequences: target and
draft distributions over the whole vocabulary (float32 or float64) and the n token ids each
sequence drafted i.i.d. from the (top-k) draft. It returns the B output tokens, whether each
is one of its drafts, and a report per row.

* ``method="global_resolution"`` ([GR] §6, Algorithm 1) runs one compiled loop over the batch
  (:func:`solvers.global_resolution.token.batch`): per row an O(V) scan that checks the inputs
  and selects the top k, H*, the polymatroid targets, the one unit omega needs (Newton) and
  the slice of Eq. (18). A row whose unit misses its 5 tau budget is solved exactly by the
  object API (max-flow fallback, :mod:`otlp.global_resolution`) and its report says so.
  ``parallel=True`` spreads the rows over numba's threads (``prange``; set their number with
  ``numba.set_num_threads`` or ``NUMBA_NUM_THREADS``).
* The exact i.i.d. lossless rules ``sps`` (n = 1), ``rrs``, ``kseq`` ([SpecHub] Algorithm 1;
  SpecTr's K-SEQ) and ``maxflow_cs`` (the exact OT by the complementary-slackness max-flow,
  [GR] §5.3) draw each row's token from the rule's exact conditional law given its drafts
  (:meth:`otlp.rules.Rule.local_conditionals`, ``TransportPlan.local_slice``), row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.instance import Instance
from otlp.validation import (
    DEFAULT_SUM_TOL,
    as_generator,
    canonical_name,
    positive_int,
    real_number,
)

METHODS = ("global_resolution", "sps", "rrs", "kseq", "maxflow_cs")
FLOAT32_SUM_TOL = 1e-4  # float32 probabilities summed over 10^5 tokens drift by ~1e-5


@dataclass(frozen=True)
class RowReport:
    """How one row's token was produced.

    For global resolution: the ``system`` omega needed ("inner" or "outer", with its
    ``block``), its number of ``variables``, Newton ``iterations``, the certified L1
    ``deviation`` of that unit and its ``budget`` (5 tau, an outer block its share), and
    whether it fell back to the exact max-flow. Exact rules report zeros and no system.
    """

    system: str | None
    block: int | None
    variables: int
    iterations: int
    deviation: float
    budget: float
    fallback: bool
    message: str


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


def verify_drafts(
    p: ArrayLike,
    q: ArrayLike,
    drafts: ArrayLike,
    *,
    method: str = "global_resolution",
    top_k: int | None = None,
    tau: float = 1e-3,
    rng: object = None,
    parallel: bool = False,
    max_iter: int = 50,
    atol: float | None = None,
    scheme: str = "iid",
) -> DraftVerification:
    """Verify a batch of drafts: one output token per row of ``drafts``.

    Parameters
    ----------
    p, q:
        Target and draft distributions, (V,) shared by every row or (B, V), float32 or
        float64; each row must sum to 1 within ``atol`` (default 1e-6, 1e-4 for float32).
    drafts:
        (B, n) integer token ids drawn i.i.d. from the draft restricted to its top k.
    method:
        One of ``global_resolution``, ``sps`` (n = 1), ``rrs``, ``kseq``, ``maxflow_cs``.
    top_k:
        Restrict the draft to its top-k tokens ([GR] Appendix N); None keeps every token
        with positive draft probability.
    tau:
        Global resolution's error threshold: each row's law is within 15 tau of p (L1).
    rng:
        An int seed, None or a ``numpy.random.Generator``.
    parallel:
        Global resolution only: run the batch loop on numba's threads.
    scheme:
        How the drafts were drawn: ``iid`` (default), ``without_replacement``,
        ``independent`` (n = 2, q of shape (2, V) or (B, 2, V)) or ``greedy``; the other
        schemes and their methods are in :mod:`otlp.decode_schemes`.
    """
    from otlp.decode_schemes import handles, verify_scheme_drafts

    if handles(scheme, method):
        return verify_scheme_drafts(
            p,
            q,
            drafts,
            scheme=scheme,
            method=method,
            top_k=top_k,
            tau=tau,
            rng=rng,
            parallel=parallel,
            max_iter=max_iter,
            atol=atol,
        )
    from otlp.global_resolution import check_tau, check_unit_size  # registers the method

    method = canonical_name(method, "method")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    p_arr, q_arr, draft_arr = _batch_arrays(p, q, drafts)
    rows, n = draft_arr.shape
    vocab = p_arr.shape[1]
    if top_k is not None:
        top_k = positive_int("top_k", top_k, maximum=vocab)
    if method == "sps" and n != 1:
        raise ValueError(f"method: 'sps' verifies one draft per row, got n = {n}")
    if not isinstance(parallel, bool):
        raise ValueError(f"parallel: expected True or False, got {parallel!r}")
    max_iter = positive_int("max_iter", max_iter, minimum=0)
    if atol is None:
        atol = FLOAT32_SUM_TOL if p_arr.dtype == np.float32 else DEFAULT_SUM_TOL
    atol = real_number("atol", atol, minimum=0.0)
    generator = as_generator(rng)
    uniforms = generator.random((rows, 2))
    if method != "global_resolution":
        return _exact_rule(p_arr, q_arr, draft_arr, method, top_k, atol, uniforms)
    tau = check_tau(tau)
    check_unit_size(vocab if top_k is None else top_k, n)
    from solvers.global_resolution.token import batch, batch_parallel

    kernel = batch_parallel if parallel else batch
    tokens, table = kernel(p_arr, q_arr, draft_arr, top_k or 0, tau, max_iter, atol, uniforms)
    _raise_for_bad_rows(table, p_arr, q_arr, draft_arr)
    reports = []
    for b in range(rows):
        status, system, block, variables, iterations, deviation, budget = table[b]
        fallback = bool(status == 1)
        message = "converged"
        if fallback:
            tokens[b], message = _exact_fallback(
                p_arr, q_arr, draft_arr, b, top_k, tau, max_iter, atol, uniforms[b]
            )
        reports.append(
            RowReport(
                "outer" if system == 0 else "inner",
                int(block) if system == 0 else None,
                int(variables),
                int(iterations),
                float(deviation),
                float(budget),
                fallback,
                message,
            )
        )
    accepted = (tokens[:, None] == draft_arr).any(axis=1)
    return DraftVerification(tokens, accepted, tuple(reports), method)


def _batch_arrays(
    p: ArrayLike, q: ArrayLike, drafts: ArrayLike
) -> tuple[NDArray, NDArray, NDArray[np.int64]]:
    """p, q as (1 or B, V) float arrays and drafts as (B, n) int64; shapes and ids checked."""
    arrays = []
    for name, value in (("p", p), ("q", q)):
        arr = np.asarray(value)
        if arr.dtype not in (np.float32, np.float64):
            raise ValueError(f"{name}: expected a float32 or float64 array, got dtype {arr.dtype}")
        if arr.ndim not in (1, 2) or arr.shape[-1] == 0:
            raise ValueError(f"{name}: expected shape (V,) or (B, V), got {arr.shape}")
        arrays.append(np.ascontiguousarray(arr.reshape(-1, arr.shape[-1])))
    p_arr, q_arr = arrays
    if q_arr.dtype != p_arr.dtype:
        q_arr = q_arr.astype(p_arr.dtype)
    if p_arr.shape[1] != q_arr.shape[1]:
        raise ValueError(f"q: vocabulary size {q_arr.shape[1]} differs from p's {p_arr.shape[1]}")
    draft_arr = np.asarray(drafts)
    if draft_arr.dtype == bool or not np.issubdtype(draft_arr.dtype, np.integer):
        raise ValueError(f"drafts: expected integer token ids, got dtype {draft_arr.dtype}")
    if draft_arr.ndim != 2 or 0 in draft_arr.shape:
        raise ValueError(f"drafts: expected shape (B, n) with B, n >= 1, got {draft_arr.shape}")
    rows = draft_arr.shape[0]
    for name, arr in (("p", p_arr), ("q", q_arr)):
        if arr.shape[0] not in (1, rows):
            raise ValueError(f"{name}: {arr.shape[0]} rows for {rows} rows of drafts")
    vocab = p_arr.shape[1]
    if draft_arr.min() < 0 or draft_arr.max() >= vocab:
        bad = np.argwhere((draft_arr < 0) | (draft_arr >= vocab))[0]
        raise ValueError(
            f"drafts[{bad[0]}, {bad[1]}]: token id {draft_arr[tuple(bad)]} outside [0, {vocab})"
        )
    return p_arr, q_arr, np.ascontiguousarray(draft_arr, dtype=np.int64)


_ROW_ERRORS = {
    2: "p[{b}]: has a negative, NaN or infinite entry",
    3: "q[{b}]: has a negative, NaN or infinite entry",
    4: "p[{b}]: does not sum to 1 within atol",
    5: "q[{b}]: does not sum to 1 within atol",
}


def _raise_for_bad_rows(table: NDArray, p: NDArray, q: NDArray, drafts: NDArray) -> None:
    bad = np.flatnonzero(table[:, 0] >= 2)
    if bad.size == 0:
        return
    b = int(bad[0])
    status = int(table[b, 0])
    if status == 6:
        d = int(table[b, 1])
        raise ValueError(
            f"drafts[{b}, {d}]: token {int(drafts[b, d])} cannot be drafted (draft probability "
            "0, or outside the top-k draft)"
        )
    row = b if (p if status in (2, 4) else q).shape[0] > 1 else 0
    raise ValueError(_ROW_ERRORS[status].format(b=row))


def _row_instance(
    p: NDArray, q: NDArray, drafts: NDArray, b: int, top_k: int | None, atol: float
) -> tuple[Instance, NDArray[np.int64]]:
    """The row's Instance and its drafts' draft-vocabulary positions (errors name the row)."""
    pb = p[0] if p.shape[0] == 1 else p[b]
    qb = q[0] if q.shape[0] == 1 else q[b]
    try:
        inst = Instance(pb, qb, drafts.shape[1], top_k=top_k, atol=atol)
    except ValueError as exc:
        name, _, rest = str(exc).partition(":")
        raise ValueError(f"{name}[{b}]:{rest}") from None
    return inst, _row_instance_drafts(inst, drafts, b)


def _row_instance_drafts(inst: Instance, drafts: NDArray, b: int) -> NDArray[np.int64]:
    try:
        return inst.to_local(drafts[b])
    except ValueError:
        raise ValueError(
            f"drafts[{b}]: {drafts[b].tolist()} contains a token the (top-k) draft cannot produce"
        ) from None


def _draw(inst: Instance, probs: NDArray[np.float64], u: NDArray[np.float64]) -> int:
    from solvers.global_resolution.token import draw

    return int(draw(np.clip(probs, 0.0, None), inst.p, inst.tokens, u[0], u[1]))


def _exact_fallback(
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    b: int,
    top_k: int | None,
    tau: float,
    max_iter: int,
    atol: float,
    u: NDArray[np.float64],
) -> tuple[int, str]:
    """A row whose unit missed its budget: the object API solves it exactly by max-flow."""
    import otlp

    inst, _ = _row_instance(p, q, drafts, b, top_k, atol)
    from otlp.global_resolution import GlobalResolutionPlan

    plan = otlp.solve(inst, "global_resolution", tau=tau, max_iter=max_iter, check=False)
    assert isinstance(plan, GlobalResolutionPlan)
    probs, report = plan.token_report(drafts[b])
    return _draw(inst, probs, u), report.message


def _exact_rule(
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    method: str,
    top_k: int | None,
    atol: float,
    uniforms: NDArray[np.float64],
) -> DraftVerification:
    """Each row's token from the exact conditional law of the rule given its drafts."""
    import otlp
    import otlp.rules

    rows = drafts.shape[0]
    tokens = np.empty(rows, dtype=np.int64)
    rule = None if method == "maxflow_cs" else otlp.rules.get(method)
    shared = p.shape[0] == 1 and q.shape[0] == 1  # one (p, q) for all rows: solve it once
    plan = None
    for b in range(rows):
        if b == 0 or not shared:
            inst, local = _row_instance(p, q, drafts, b, top_k, atol)
            plan = otlp.solve(inst, "maxflow-cs", check=False) if rule is None else None
        else:
            local = _row_instance_drafts(inst, drafts, b)
        if plan is not None:
            probs = plan.local_slice(drafts[b])
        else:
            assert rule is not None
            probs = rule.local_conditionals(inst, local[None, :])[0]
        tokens[b] = _draw(inst, probs, uniforms[b])
    report = RowReport(None, None, 0, 0, 0.0, 0.0, False, "exact")
    accepted = (tokens[:, None] == drafts).any(axis=1)
    return DraftVerification(tokens, accepted, (report,) * rows, method)
