"""Batched verification for decoders: full-vocabulary (p, q) rows and drafted ids to tokens.

``verify_drafts`` is what a decoder calls once per step for a batch of B sequences: target and
draft distributions over the whole vocabulary, in the model's own precision (float16, bfloat16,
float32 or float64; numpy or torch, see :mod:`otlp.tensors`), and the n token ids each
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
from otlp.tensors import as_float64, as_index_array, check_distributions
from otlp.validation import (
    as_generator,
    canonical_name,
    positive_int,
    real_number,
)

METHODS = ("global_resolution", "sps", "rrs", "kseq", "maxflow_cs")


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
) -> DraftVerification:
    """Verify a batch of i.i.d. drafts: one output token per row of ``drafts``.

    Parameters
    ----------
    p, q:
        Target and draft distributions, (V,) shared by every row or (B, V): numpy float16,
        float32 or float64, ml_dtypes bfloat16, torch tensors of any floating dtype and device,
        or lists (:func:`otlp.tensors.as_float64`). Each is computed on in float64 and must
        sum to 1 within ``atol``, by default the tolerance of its own precision (1e-6 for
        float64, 1e-4 for float32, 2 eps for 16-bit formats; :func:`otlp.tensors.sum_tolerance`).
    drafts:
        (B, n) integer token ids (numpy, torch or lists) drawn i.i.d. from the draft restricted
        to its top k; they are checked against q as given, never rounded.
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
    """
    from otlp.global_resolution import check_tau, check_unit_size  # registers the method

    method = canonical_name(method, "method")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    p_arr, q_arr, draft_arr, atol = _batch_arrays(p, q, drafts, atol)
    rows, n = draft_arr.shape
    vocab = p_arr.shape[1]
    if top_k is not None:
        top_k = positive_int("top_k", top_k, maximum=vocab)
    if method == "sps" and n != 1:
        raise ValueError(f"method: 'sps' verifies one draft per row, got n = {n}")
    if not isinstance(parallel, bool):
        raise ValueError(f"parallel: expected True or False, got {parallel!r}")
    max_iter = positive_int("max_iter", max_iter, minimum=0)
    generator = as_generator(rng)
    uniforms = generator.random((rows, 2))
    if method != "global_resolution":
        return _exact_rule(p_arr, q_arr, draft_arr, method, top_k, atol, uniforms)
    tau = check_tau(tau)
    check_unit_size(vocab if top_k is None else top_k, n)
    return global_resolution_rows(
        p_arr,
        q_arr,
        draft_arr,
        uniforms,
        top_k=top_k,
        tau=tau,
        max_iter=max_iter,
        atol=atol,
        parallel=parallel,
    )


def global_resolution_rows(
    p_arr: NDArray,
    q_arr: NDArray,
    draft_arr: NDArray[np.int64],
    uniforms: NDArray[np.float64],
    *,
    top_k: int | None,
    tau: float,
    max_iter: int,
    atol: float,
    parallel: bool = False,
) -> DraftVerification:
    """Global resolution's compiled batch on checked arrays (``verify_drafts`` after its
    argument checks): p, q (1 or B, V) float32/float64 C-contiguous, drafts (B, n) int64,
    two ``uniforms`` per row (a row's token depends on its own pair only); rows whose unit
    misses its budget are solved exactly (fallback)."""
    from solvers.global_resolution.token import batch, batch_parallel

    rows = draft_arr.shape[0]
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
    return DraftVerification(tokens, accepted, tuple(reports), "global_resolution")


def _batch_arrays(
    p: object, q: object, drafts: object, atol: object
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], float]:
    """p, q as (1 or B, V) float64 arrays, drafts as (B, n) int64, and the kernel's atol.

    Each distribution is judged at its own precision (:func:`otlp.tensors.sum_tolerance`)
    unless ``atol`` is given; both are computed on in float64, so a float64 q is never rounded
    to a float32 p's precision. Returns the looser tolerance for the compiled scan once the
    stricter array has been checked here.
    """
    arrays, tolerances = [], []
    for name, value in (("p", p), ("q", q)):
        arr, kind = as_float64(name, value)
        if arr.ndim not in (1, 2) or arr.shape[-1] == 0:
            raise ValueError(f"{name}: expected shape (V,) or (B, V), got {arr.shape}")
        arrays.append(arr.reshape(-1, arr.shape[-1]))
        tolerances.append(kind.sum_tolerance)
    p_arr, q_arr = arrays
    if p_arr.shape[1] != q_arr.shape[1]:
        raise ValueError(f"q: vocabulary size {q_arr.shape[1]} differs from p's {p_arr.shape[1]}")
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
    if tolerances[0] != tolerances[1]:  # the compiled scan takes one atol: check the stricter
        strict = 0 if tolerances[0] < tolerances[1] else 1
        check_distributions("pq"[strict], arrays[strict], tolerances[strict])
    return p_arr, q_arr, draft_arr, max(tolerances)


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
