"""Batched verification for decoders: full-vocabulary (p, q) rows and drafted ids to tokens.

``verify_drafts`` is what a decoder calls once per step for a batch of B sequences: target and
draft distributions over the whole vocabulary, in the model's own precision (float16, bfloat16,
float32 or float64; numpy or torch, see :mod:`otlp.tensors`), and the n token ids each
sequence drafted i.i.d. from the (top-k) draft. It returns the B output tokens, whether each
is one of its drafts, and a report per row.

* ``method="global_resolution"`` ([GR] §6, Algorithm 1) runs one compiled loop over the batch
  (:func:`otlp.solvers.global_resolution.token.batch`): per row an O(V) scan that checks the inputs
  and selects the top k, H*, the polymatroid targets, the one unit omega needs (Newton) and
  the slice of Eq. (18). A row whose unit misses its 5 tau budget is solved exactly by the
  object API (max-flow fallback, :mod:`otlp.global_resolution`) and its report says so.
  ``time_budget`` is the whole call's: its clock starts at the call's entry, numba's compiling
  or cache loading of a first call included, and a row whose next stage cannot fit what is
  left, or that starts past the deadline, gets its token from ``rrs`` (issue 24; see
  :mod:`otlp.solvers.global_resolution.budget`). Call :func:`otlp.warm_up` once at start-up so that
  no budgeted call compiles.
  ``parallel=True`` spreads the rows over numba's threads (``prange``; set their number with
  ``numba.set_num_threads`` or ``NUMBA_NUM_THREADS``).
* The exact i.i.d. lossless rules ``sps`` (n = 1), ``rrs``, ``kseq`` ([SpecHub] Algorithm 1;
  SpecTr's K-SEQ) and ``maxflow_cs`` (the exact OT by the complementary-slackness max-flow,
  [GR] §5.3) draw each row's token from the rule's exact conditional law given its drafts
  (:meth:`otlp.rules.Rule.local_conditionals`, ``TransportPlan.local_slice``), row by row.
* ``method="partial_resolution"`` (i.i.d. drafts; "Partial Resolution", Thomas and Pal,
  NeurIPS 2025, otlp's construction on docs/partial-resolution.md) runs one compiled pass
  per row (:func:`otlp.solvers.partial_resolution_row.batch`): the top k, H* and the accepted
  masses, the clock partition of the drafted tokens only, and the clock race of its drafts:
  exact optimal transport, no tolerance.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import (
    as_generator,
    canonical_name,
    positive_int,
)
from otlp.errors import ProblemTooLarge
from otlp.global_resolution.constants import DEFAULT_TIME_BUDGET
from otlp.global_resolution.reports import RowReport
from otlp.global_resolution.rule_fallback import rule_seconds
from otlp.instance import Instance
from otlp.solvers.global_resolution.budget import Deadline, blas_pinned
from otlp.solvers.global_resolution.constants import BAD_P, FALLBACK, INNER, OUTER, SINGLE_DRAFT
from otlp.verification.position_rows import (
    DraftVerification,
    batch_arrays,
    call_deadline,
    draw_token,
    exact_verification,
    fallback_token,
    local_drafts,
    method_tau,
    raise_for_row_status,
    rule_rows,
)
from otlp.verification.position_schemes import draft_scheme, handles, verify_scheme_drafts
from otlp.verification.rule_table import RULES, position_names

__all__ = [
    "METHODS",
    "DraftVerification",
    "RowReport",
    "default_method",
    "global_resolution_rows",
    "verify_drafts",
]

# The i.i.d. rows' rules (the rule table's; a SpecHub pair runs in position_schemes).
METHODS = tuple(n for n in position_names("iid") if RULES[n].drafts != 2)


def verify_drafts(
    p: ArrayLike,
    q: ArrayLike,
    drafts: ArrayLike,
    *,
    method: str | None = None,
    top_k: int | None = None,
    tau: float | None = None,
    rng: object = None,
    parallel: bool = False,
    max_iter: int = 50,
    atol: float | None = None,
    scheme: str = "iid",
    time_budget: float | None = DEFAULT_TIME_BUDGET,
) -> DraftVerification:
    """Verify a batch of drafts: one output token per row of ``drafts``.

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
        to its top k; they are checked against q as given, never rounded. For
        ``scheme="independent"`` the pair is ordered: ``drafts[b, d]`` is drafter d's token
        and must be possible under q's row d (docs: gr-schemes, "Which drafts a row may hold").
    method:
        One of ``global_resolution``, ``sps`` (n = 1), ``rrs``, ``kseq``, ``maxflow_cs``,
        ``partial_resolution`` (exact optimal transport for i.i.d. drafts, no tolerance:
        :func:`partial_resolution_rows`). None (default): the scheme's optimal rule,
        :func:`default_method` (``partial_resolution`` for i.i.d. drafts, where it is exact
        and at least as fast; ``global_resolution`` for the other schemes).
    top_k:
        Restrict the draft to its top-k tokens ([GR] Appendix N); None keeps every token
        with positive draft probability.
    tau:
        Global resolution's error threshold (None: 1e-3): each row's law is within 15 tau of
        p (L1). The other methods are exact: passing them a ``tau`` is a ``ValueError``.
    rng:
        An int seed, None or a ``numpy.random.Generator``.
    parallel:
        Global resolution only: run the batch loop on numba's threads.
    scheme:
        How the drafts were drawn: ``iid`` (default), ``without_replacement``,
        ``independent`` (n = 2, q of shape (2, V) or (B, 2, V)) or ``greedy``; the other
        schemes and their methods are in :mod:`otlp.verification.position_schemes`.
    time_budget:
        Global resolution only: seconds this call may take (default ``DEFAULT_TIME_BUDGET``,
        5 s; None for no limit), counted from its entry (compiling included: see
        :func:`otlp.warm_up`) and shared by its rows. No stage
        starts that is predicted to end past it (H* and the outer targets, each Newton
        iteration, the exact max-flow fallback; see :mod:`otlp.solvers.global_resolution.budget`)
        and the rows' lossless-rule passes are kept in reserve, so the call ends within it
        plus one bounded step. A row whose Newton misses its certificate is solved exactly
        (``fallback=True``); a row whose next stage does not fit (``"time budget
        exhausted"`` or ``"skipped"`` in its message), or whose unit's exact network is over
        ``otlp.limits``, gets its token from the scheme's lossless rule (``fallback_rule``,
        e.g. ``"rrs"``, with ``acceptance_lost`` where it could be computed in time).
    """
    start = time.perf_counter()
    if method is None:
        method = default_method(scheme)
        if tau is not None and method != "global_resolution":
            raise ValueError(
                f"tau: the default method for scheme {scheme!r}, {method!r}, is exact and takes "
                f"no error threshold; pass method='global_resolution' to use tau={tau!r}"
            )
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
            time_budget=time_budget,
        )
    from otlp.global_resolution import (  # registers the method
        check_time_budget,
        check_unit_size,
    )

    method = canonical_name(method, "method")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    tau = method_tau(method, tau)
    p_arr, q_rows, draft_arr, atol = batch_arrays(p, q, drafts, atol)
    q_arr = q_rows[:, 0]
    rows, n = draft_arr.shape
    vocab = p_arr.shape[1]
    if top_k is not None:
        top_k = positive_int("top_k", top_k, maximum=vocab)
    if RULES[method].drafts == 1 and n != 1:
        raise ValueError(f"method: {method!r} verifies one draft per row, got n = {n}")
    if not isinstance(parallel, bool):
        raise ValueError(f"parallel: expected True or False, got {parallel!r}")
    max_iter = positive_int("max_iter", max_iter, minimum=0)
    time_budget = check_time_budget(time_budget)
    generator = as_generator(rng)
    if method == "partial_resolution":
        return partial_resolution_rows(
            p_arr, q_arr, draft_arr, generator.random((rows, n + 2)), top_k, atol
        )
    uniforms = generator.random((rows, 2))
    if method != "global_resolution":
        return _exact_rule(p_arr, q_arr, draft_arr, method, top_k, atol, uniforms)
    try:
        check_unit_size(vocab if top_k is None else top_k, n)
    except ProblemTooLarge as exc:  # a valid row still gets a token: the i.i.d. rule's
        verified = _exact_rule(p_arr, q_arr, draft_arr, "rrs", top_k, atol, uniforms)
        return rule_rows(verified, str(exc))
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
        time_budget=time_budget,
        deadline=call_deadline(time_budget, start, rows * rule_seconds(vocab, 1)),
    )


def default_method(scheme: str) -> str:
    """The method :func:`verify_drafts` runs when none is named: the scheme's optimal rule.

    ``partial_resolution`` for i.i.d. drafts (exact optimal transport, "Partial Resolution",
    Thomas and Pal, NeurIPS 2025; docs/partial-resolution.md: at least as fast as global
    resolution at tau = 1e-3 from (100, 2) to the whole vocabulary, and exact), and
    ``global_resolution`` ([GR] §6, certified to 15 tau) for the schemes partial resolution
    does not reach (without replacement, independent, greedy). An unknown scheme is a
    ``ValueError`` naming ``scheme``.
    """
    return "partial_resolution" if draft_scheme(scheme) == "iid" else "global_resolution"


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
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    deadline: Deadline | None = None,
) -> DraftVerification:
    """Global resolution's compiled batch on checked arrays (``verify_drafts`` after its
    argument checks): p, q (1 or B, V) float32/float64 C-contiguous, drafts (B, n) int64,
    two ``uniforms`` per row (a row's token depends on its own pair only); rows whose unit
    misses its budget are solved exactly (fallback). Every row stops at ``deadline`` (the
    caller's; default ``time_budget`` seconds from this call, None: no limit) and a row that
    ran out of it gets its token from ``rrs``."""
    from otlp.solvers.global_resolution.token import batch, batch_parallel

    if deadline is None:
        deadline = Deadline.after(time_budget)
    kernel = batch_parallel if parallel else batch
    _compile(kernel, p_arr.dtype, q_arr.dtype)  # on a tiny row: its seconds count
    # one draft: the closed form, no Newton step to pin BLAS for
    with blas_pinned((top_k or p_arr.shape[1]) if draft_arr.shape[1] > 1 else 0):
        tokens, table = kernel(
            p_arr, q_arr, draft_arr, top_k or 0, tau, max_iter, atol, uniforms, deadline.now()
        )
        _raise_for_bad_rows(table, p_arr, q_arr, draft_arr)
        reports = _row_reports(
            p_arr,
            q_arr,
            draft_arr,
            uniforms,
            tokens,
            table,
            top_k,
            tau,
            max_iter,
            atol,
            time_budget,
            deadline,
        )
    accepted = (tokens[:, None] == draft_arr).any(axis=1)
    return DraftVerification(tokens, accepted, tuple(reports), "global_resolution")


_COMPILED: set[tuple[object, ...]] = set()  # (kernel, p dtype, q dtype) run once


def _compile(kernel: Any, p_dtype: np.dtype, q_dtype: np.dtype) -> None:
    """Run the batch ``kernel`` once on a two-token row of these dtypes, so that numba
    compiles it (or loads it from its cache) on a row that cannot fail: those seconds count
    against the call's budget (:mod:`otlp.solvers.global_resolution.budget`; :func:`warm_up` does
    this ahead)."""
    if (kernel, p_dtype, q_dtype) not in _COMPILED:
        half = np.full((1, 2), 0.5)
        drafts = np.zeros((1, 1), dtype=np.int64)
        kernel(half.astype(p_dtype), half.astype(q_dtype), drafts, 0, 1e-3, 0, 1e-6, half, math.inf)
        _COMPILED.add((kernel, p_dtype, q_dtype))


def _row_reports(
    p_arr: NDArray,
    q_arr: NDArray,
    draft_arr: NDArray[np.int64],
    uniforms: NDArray[np.float64],
    tokens: NDArray[np.int64],
    table: NDArray,
    top_k: int | None,
    tau: float,
    max_iter: int,
    atol: float,
    time_budget: float | None,
    deadline: Deadline,
) -> list[RowReport]:
    """Each row's report from the kernel's table; a fallback row's token (written into
    ``tokens``) from :func:`fallback_token`."""
    from otlp.solvers.global_resolution.newton import ITERATION_LIMIT, OUT_OF_TIME
    from otlp.solvers.global_resolution.newton import MESSAGES as NEWTON_MESSAGES

    rows = draft_arr.shape[0]
    reports = []
    for b in range(rows):
        status, system, block, variables, iterations, deviation, budget, newton = table[b]
        fallback = bool(status == FALLBACK)
        message = NEWTON_MESSAGES[int(newton)]
        if system == SINGLE_DRAFT:
            message = "closed form: one draft's optimal plan is speculative sampling's law"
        rule, lost = None, None
        if fallback:
            inst, _ = _row_instance(p_arr, q_arr, draft_arr, b, top_k, atol)
            tokens[b], how, rule, lost = fallback_token(
                inst,
                draft_arr[b],
                uniforms[b],
                out_of_time=int(newton) == OUT_OF_TIME,
                alpha_star=None,
                tau=tau,
                max_iter=max_iter,
                time_budget=time_budget,
                deadline=deadline,
                iteration_limit=int(newton) == ITERATION_LIMIT,
            )
            message = (
                f"compiled row: {message}, deviation {deviation:.3g} > budget {budget:.3g}; {how}"
            )
        reports.append(
            RowReport(
                system=_SYSTEM_NAMES.get(int(system)),  # -1: out of time before any unit
                block=int(block) if system == OUTER else None,
                variables=int(variables),
                iterations=int(iterations),
                deviation=float(deviation),
                budget=float(budget),
                fallback=fallback,
                message=message,
                fallback_rule=rule,
                acceptance_lost=lost,
            )
        )
    return reports


# The unit a fused row solved (otlp.solvers.global_resolution.constants' codes).
_SYSTEM_NAMES = {OUTER: "outer", INNER: "inner", SINGLE_DRAFT: "single draft (closed form)"}


def _raise_for_bad_rows(table: NDArray, p: NDArray, q: NDArray, drafts: NDArray) -> None:
    """The first refused row's ``ValueError`` (:func:`raise_for_row_status`), if any."""
    bad = np.flatnonzero(table[:, 0] >= BAD_P)
    if bad.size:
        b = int(bad[0])
        raise_for_row_status(int(table[b, 0]), int(table[b, 1]), b, p, q, drafts)


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
    return inst, local_drafts(inst, drafts, b)


def partial_resolution_rows(
    p: NDArray,
    q: NDArray,
    drafts: NDArray[np.int64],
    uniforms: NDArray[np.float64],
    top_k: int | None,
    atol: float,
) -> DraftVerification:
    """Partial resolution's rows (exact OT for i.i.d. drafts, :mod:`otlp.partial_resolution`)
    in one compiled pass per row (:func:`otlp.solvers.partial_resolution_row.batch`): checks and
    top k, H* and the accepted masses, gap filling only as far as the row's drafted tokens,
    then the clock race of its drafts with ``uniforms[b, :n]`` and, on rejection, the
    residual law drawn with ``uniforms[b, n:]`` (a batch sharing one (p, q) pair builds one
    partition). The token's law given the drafts is the tuple-level refinement of the plan's
    set conditional (Lemma 4 of docs/partial-resolution.md), so the row is exact with no
    tolerance."""
    from otlp.solvers.partial_resolution_row import batch

    tokens, table = batch(p, q, drafts, top_k or 0, atol, uniforms)
    _raise_for_bad_rows(table, p, q, drafts)
    return exact_verification(tokens, drafts, "partial_resolution")


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
    import otlp.rules
    from otlp.api import solve

    rows = drafts.shape[0]
    tokens = np.empty(rows, dtype=np.int64)
    rule = None if method == "maxflow_cs" else otlp.rules.get(method)
    shared = p.shape[0] == 1 and q.shape[0] == 1  # one (p, q) for all rows: solve it once
    plan = None
    for b in range(rows):
        if b == 0 or not shared:
            inst, local = _row_instance(p, q, drafts, b, top_k, atol)
            plan = solve(inst, "maxflow-cs", check=False) if rule is None else None
        else:
            local = local_drafts(inst, drafts, b)
        if plan is not None:
            probs = plan.local_slice(drafts[b])
        else:
            assert rule is not None
            probs = rule.local_conditionals(inst, local[None, :])[0]
        tokens[b] = draw_token(inst, probs, uniforms[b])
    return exact_verification(tokens, drafts, method)
