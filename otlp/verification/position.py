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

import time

from numpy.typing import ArrayLike

from otlp.args import (
    as_generator,
    canonical_name,
    positive_int,
)
from otlp.decoder_rows.checks import raise_for_bad_rows
from otlp.decoder_rows.exact import exact_rows
from otlp.decoder_rows.inputs import DecoderBatch, batch_arrays
from otlp.decoder_rows.result import DraftVerification, RowReport, exact_verification
from otlp.global_resolution.row_options import DEFAULT_MAX_ITER
from otlp.global_resolution.rows import GlobalResolutionRows
from otlp.limits import DEFAULT_TIME_BUDGET
from otlp.verification.position_schemes import (
    check_scheme_drafts,
    check_scheme_method,
    draft_scheme,
    handles,
    method_tau,
)
from otlp.verification.rule_table import RULES, optimal_method, position_names

__all__ = [
    "METHODS",
    "DraftVerification",
    "RowReport",
    "default_method",
    "verify_drafts",
]

# The i.i.d. rows' rules (the rule table's; a SpecHub pair is one of position_schemes').
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
    max_iter: int = DEFAULT_MAX_ITER,
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
    scheme = draft_scheme(scheme)
    method = canonical_name(method, "method")
    # a method of position_schemes: its rows are checked as the fused rows check them
    by_scheme = handles(scheme, method)
    if by_scheme:
        check_scheme_method(scheme, method)
    elif method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    tau_only = GlobalResolutionRows.checked(method_tau(method, tau))  # tau before the arrays
    draft_rows = 2 if scheme == "independent" else 1
    p_arr, q_rows, draft_arr, atol = batch_arrays(p, q, drafts, atol, draft_rows=draft_rows)
    rows, n = draft_arr.shape
    if by_scheme:
        check_scheme_drafts(scheme, method, draft_arr)
    if top_k is not None:
        top_k = positive_int("top_k", top_k, maximum=p_arr.shape[1])
    if RULES[method].drafts == 1 and n != 1:
        raise ValueError(f"method: {method!r} verifies one draft per row, got n = {n}")
    if not isinstance(parallel, bool):
        raise ValueError(f"parallel: expected True or False, got {parallel!r}")
    if parallel and by_scheme:
        raise ValueError(
            f"parallel: only the i.i.d. fused path runs on numba's threads; scheme {scheme!r} "
            "verifies its rows one by one"
        )
    options = tau_only.limited(max_iter, time_budget)
    # partial resolution: n clocks and the residual's two uniforms per row; the others: two
    uniforms = as_generator(rng).random((rows, n + 2 if method == "partial_resolution" else 2))
    batch = DecoderBatch(p_arr, q_rows, draft_arr, uniforms, scheme, top_k, atol)
    if method == "partial_resolution":
        return partial_resolution_rows(batch)
    if method != "global_resolution":
        return exact_rows(batch, method)
    return options.verify(batch, parallel=parallel, start=start)


def default_method(scheme: str) -> str:
    """The method :func:`verify_drafts` runs when none is named: the scheme's optimal rule.

    ``partial_resolution`` for i.i.d. drafts (exact optimal transport, "Partial Resolution",
    Thomas and Pal, NeurIPS 2025; docs/partial-resolution.md: at least as fast as global
    resolution at tau = 1e-3 from (100, 2) to the whole vocabulary, and exact), and
    ``global_resolution`` ([GR] §6, certified to 15 tau) for the schemes partial resolution
    does not reach (without replacement, independent, greedy). An unknown scheme is a
    ``ValueError`` naming ``scheme``.
    """
    return optimal_method(draft_scheme(scheme))


def partial_resolution_rows(batch: DecoderBatch) -> DraftVerification:
    """Partial resolution's rows (exact OT for i.i.d. drafts, :mod:`otlp.partial_resolution`)
    in one compiled pass per row (:func:`otlp.solvers.partial_resolution_row.batch`): checks and
    top k, H* and the accepted masses, gap filling only as far as the row's drafted tokens,
    then the clock race of its drafts with ``uniforms[b, :n]`` and, on rejection, the
    residual law drawn with ``uniforms[b, n:]`` (a batch sharing one (p, q) pair builds one
    partition). The token's law given the drafts is the tuple-level refinement of the plan's
    set conditional (Lemma 4 of docs/partial-resolution.md), so the row is exact with no
    tolerance."""
    from otlp.solvers.partial_resolution_row import batch as batch_kernel

    drafts = batch.drafts
    tokens, table = batch_kernel(
        batch.p, batch.q[:, 0], drafts, batch.top_k or 0, batch.atol, batch.uniforms
    )
    raise_for_bad_rows(table, batch)
    return exact_verification(tokens, drafts, "partial_resolution")
