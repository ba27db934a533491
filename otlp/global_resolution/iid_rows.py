"""Global resolution's i.i.d. decoder rows ([GR] §6, Algorithm 1) in one compiled loop over the
batch (:func:`otlp.solvers.global_resolution.token.batch`): per row an O(V) scan that checks the
inputs and selects the top k, H*, the polymatroid targets, the one unit omega needs (Newton)
and the slice of Eq. (18); a row whose unit misses its budget is solved by the fallback chain
(:mod:`otlp.global_resolution.row_fallback`). ``parallel`` spreads the rows over numba's
threads (``prange``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.checks import raise_for_bad_rows
from otlp.decoder_rows.inputs import DecoderBatch
from otlp.decoder_rows.result import DraftVerification, RowReport, verification
from otlp.global_resolution.fused import RowResult
from otlp.global_resolution.row_fallback import row_outcome
from otlp.global_resolution.row_options import RowOptions
from otlp.solvers.global_resolution.budget import Deadline, blas_pinned
from otlp.solvers.global_resolution.constants import INNER, OUTER, SINGLE_DRAFT
from otlp.solvers.global_resolution.newton import ITERATION_LIMIT, OUT_OF_TIME
from otlp.solvers.global_resolution.newton import MESSAGES as NEWTON_MESSAGES
from otlp.solvers.global_resolution.token import batch as batch_kernel
from otlp.solvers.global_resolution.token import batch_parallel
from otlp.solvers.row_status import FALLBACK


def iid_rows(
    options: RowOptions, batch: DecoderBatch, deadline: Deadline, parallel: bool = False
) -> DraftVerification:
    """Global resolution's compiled batch on a checked i.i.d. ``batch`` (``verify_drafts``
    after its argument checks): p, q float32/float64 C-contiguous, two uniforms per row (a
    row's token depends on its own pair only); rows whose unit misses its budget are solved
    exactly (fallback). Every row stops at the call's ``deadline`` and a row that ran out of
    it gets its token from ``rrs``."""
    p, q, drafts, top_k = batch.p, batch.q[:, 0], batch.drafts, batch.top_k
    kernel = batch_parallel if parallel else batch_kernel
    _compile(kernel, p.dtype, q.dtype)  # on a tiny row: its seconds count
    # one draft: the closed form, no Newton step to pin BLAS for
    with blas_pinned((top_k or p.shape[1]) if drafts.shape[1] > 1 else 0):
        tokens, table = kernel(
            p, q, drafts, top_k or 0, options.tau, options.max_iter, batch.atol,
            batch.uniforms, deadline.now(),
        )  # fmt: skip
        raise_for_bad_rows(table, batch)
        reports = _row_reports(options, batch, tokens, table, deadline)
    return verification(tokens, drafts, tuple(reports), "global_resolution")


_COMPILED: set[tuple[object, ...]] = set()  # (kernel, p dtype, q dtype) run once


def _compile(kernel: Any, p_dtype: np.dtype, q_dtype: np.dtype) -> None:
    """Run the batch ``kernel`` once on a two-token row of these dtypes, so that numba
    compiles it (or loads it from its cache) on a row that cannot fail: those seconds count
    against the call's budget (:mod:`otlp.solvers.global_resolution.budget`;
    :func:`otlp.warm_up` does this ahead)."""
    if (kernel, p_dtype, q_dtype) not in _COMPILED:
        half = np.full((1, 2), 0.5)
        drafts = np.zeros((1, 1), dtype=np.int64)
        kernel(half.astype(p_dtype), half.astype(q_dtype), drafts, 0, 1e-3, 0, 1e-6, half, math.inf)
        _COMPILED.add((kernel, p_dtype, q_dtype))


def _row_reports(
    options: RowOptions,
    batch: DecoderBatch,
    tokens: NDArray[np.int64],
    table: NDArray,
    deadline: Deadline,
) -> list[RowReport]:
    """Each row's report from the kernel's table; a fallback row's token (written into
    ``tokens``) from the fallback chain (:func:`row_outcome`)."""
    reports = []
    for b in range(batch.drafts.shape[0]):
        status, system, block, variables, iterations, deviation, budget, newton = table[b]
        message = NEWTON_MESSAGES[int(newton)]
        if system == SINGLE_DRAFT:
            message = "closed form: one draft's optimal plan is speculative sampling's law"
        if status == FALLBACK:
            message = f"compiled row: {message}, deviation {deviation:.3g} > budget {budget:.3g}"
        result = RowResult(
            int(status),
            int(tokens[b]),
            system=_SYSTEM_NAMES.get(int(system)),  # -1: out of time before any unit
            block=int(block) if system == OUTER else None,
            variables=int(variables),
            iterations=int(iterations),
            deviation=float(deviation),
            budget=float(budget),
            message=message,
            out_of_time=int(newton) == OUT_OF_TIME,
            iteration_limit=int(newton) == ITERATION_LIMIT,
        )
        tokens[b], report = row_outcome(options, batch, b, result, deadline)
        reports.append(report)
    return reports


# The unit a fused row solved (otlp.solvers.global_resolution.constants' codes).
_SYSTEM_NAMES = {OUTER: "outer", INNER: "inner", SINGLE_DRAFT: "single draft (closed form)"}
