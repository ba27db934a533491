"""Global resolution's decoder rows for the schemes beyond i.i.d. ([GR] §6, App. N, O, S):
drafts without replacement, two independent drafters, greedy drafts. Each row runs the fused
per-row path (:func:`otlp.global_resolution.fused.scheme_row`: compiled scan and top-k, H*,
outer targets, the one unit omega needs, the slice, the draw); a row it cannot certify goes
down the fallback chain (:mod:`otlp.global_resolution.row_fallback`). For the greedy scheme the
optimal plan has a closed form and every row is exact."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.checks import raise_for_row_status
from otlp.decoder_rows.inputs import DecoderBatch, row
from otlp.decoder_rows.result import DraftVerification, verification
from otlp.global_resolution.fused import scheme_row
from otlp.global_resolution.row_fallback import fallback_token, row_outcome
from otlp.global_resolution.row_options import RowOptions
from otlp.solvers.global_resolution.budget import Deadline
from otlp.solvers.row_status import FALLBACK, OK


def scheme_rows(options: RowOptions, batch: DecoderBatch, deadline: Deadline) -> DraftVerification:
    """The fused row per row of ``batch``, before the call's ``deadline``; a row it cannot
    certify gets its token from the fallback chain (:func:`row_outcome`)."""
    drafts, uniforms = batch.drafts, batch.uniforms
    tokens = np.empty(drafts.shape[0], dtype=np.int64)
    reports = []
    for b in range(drafts.shape[0]):
        result = scheme_row(
            row(batch.p, b), row(batch.q, b), drafts[b], batch.scheme, batch.top_k or 0,
            options.tau, options.max_iter, batch.atol, uniforms[b], deadline,
        )  # fmt: skip
        if result.status not in (OK, FALLBACK):
            raise_for_row_status(result.status, result.detail, b, batch)
        tokens[b], report = row_outcome(options, batch, b, result, deadline)
        reports.append(report)
    return verification(tokens, drafts, tuple(reports), "global_resolution")


def scheme_row_token(
    options: RowOptions,
    p: NDArray[np.floating],
    q: NDArray[np.floating],
    drafts: NDArray[np.int64],
    scheme: str,
    uniforms: NDArray[np.float64],
    atol: float,
    top_k: int | None = None,
) -> int:
    """One row's global-resolution token: ``p`` (V,), ``q`` (d, V) as
    :func:`otlp.decoder_rows.inputs.batch_arrays` holds them, two uniforms. The fused path,
    the object API where it cannot certify the row (the rule where it ran out of the
    options' ``time_budget``, counted from this call): :func:`scheme_rows`' step per row, for
    ``verify_tree``'s nodes.

    ``top_k`` None: the caller checked and renormalised the rows and restricted q itself
    (only q's support is the draft vocabulary: a restricted q costs its k tokens, not V); a
    row the fused path refuses raises. ``top_k`` k (0: every positive draft token): the rows
    as given (float32 or float64, each within ``atol`` of summing to 1), q restricted to its
    top k here; a row or draft the fused path refuses gives -1, for the caller's checked
    path to name."""
    deadline = Deadline.after(options.time_budget)
    k = top_k
    if k is None:
        support = int(np.count_nonzero(q.max(axis=0)))
        k = support if support < q.shape[-1] else 0
    result = scheme_row(
        p, q, drafts, scheme, k, options.tau, options.max_iter, atol, uniforms, deadline
    )
    if result.status == OK:
        return result.token
    batch = DecoderBatch.of_row(p, q, drafts, uniforms, scheme=scheme, top_k=k or None, atol=atol)
    if result.status == FALLBACK:  # Instance widens and renormalises the rows itself
        return fallback_token(
            options, batch, 0, deadline, out_of_time=result.out_of_time,
            alpha_star=result.alpha_star, iteration_limit=result.iteration_limit,
        )[0]  # fmt: skip
    if top_k is None:
        raise_for_row_status(result.status, result.detail, 0, batch)
    return -1
