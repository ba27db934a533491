"""Global resolution's fallback chain for a decoder row ([GR] §5.3, §6): a row the fused path
cannot certify is solved by the object API (its unit's exact max-flow where Newton misses its
certificate); a row out of time, or whose unit is over ``otlp.limits``, gets its token from the
scheme's lossless rule (:mod:`otlp.global_resolution.rule_fallback`). Every path says in the
row's report what it did."""

from __future__ import annotations

from otlp.decoder_rows.inputs import DecoderBatch, draw_token
from otlp.decoder_rows.result import RowReport
from otlp.global_resolution.fused import RowResult
from otlp.global_resolution.method import make_engine
from otlp.global_resolution.row_options import RowOptions
from otlp.global_resolution.rule_fallback import rule_token
from otlp.solvers.global_resolution.budget import Deadline
from otlp.solvers.row_status import FALLBACK


def fallback_token(
    options: RowOptions,
    batch: DecoderBatch,
    b: int,
    deadline: Deadline,
    *,
    out_of_time: bool,
    alpha_star: float | None,
    iteration_limit: bool,
) -> tuple[int, str, str | None, float | None]:
    """The token of row ``b`` of ``batch`` that the fused path could not certify: (token,
    what the fallback did, the lossless rule that gave the token or None, the acceptance it
    lost or None).

    A row ``out_of_time`` (a stage did not fit the call's ``deadline``) goes straight to the
    scheme's lossless rule: an exact max-flow on its unit costs more than the Newton
    iteration that no longer fitted. Any other row goes to the object API, which solves the
    unit the drafts need before the deadline (exactly by max-flow where its own certificate
    fails too, by the scheme's lossless rule where that max-flow is over ``otlp.limits`` or
    does not fit the time left); a row whose Newton stopped at its ``iteration_limit`` hands
    it no iteration (the object API's Newton would stop at the same limit: it keeps its seed
    if that is certified, otherwise it solves the unit exactly at once)."""
    inst = batch.instance(b)
    drafts = batch.drafts[b]
    if out_of_time:
        found = rule_token(inst, inst.to_local(drafts), alpha_star, deadline)
        probs, how = found.probs, f"token by {found.rule}"
        rule: str | None = found.rule
        lost = found.acceptance_lost
    else:
        max_iter = 0 if iteration_limit else options.max_iter
        engine = make_engine(inst, options.tau, max_iter=max_iter, time_budget=options.time_budget)
        probs, report = engine.local_slice(drafts, deadline)
        how = f"object API: {report.message}"
        rule, lost = report.fallback_rule, report.acceptance_lost
    return draw_token(inst, probs, batch.uniforms[b]), how, rule, lost


def row_outcome(
    options: RowOptions, batch: DecoderBatch, b: int, result: RowResult, deadline: Deadline
) -> tuple[int, RowReport]:
    """Row ``b``'s token and report from its fused or compiled ``result``: the result's own
    token, or, where it could not certify the row (``FALLBACK``), the fallback chain's
    (:func:`fallback_token`), the message then saying what the fallback did and the report
    which rule gave the token and the acceptance it lost."""
    fallback = result.status == FALLBACK
    token, message, rule, lost = result.token, result.message, None, None
    if fallback:
        token, how, rule, lost = fallback_token(
            options, batch, b, deadline, out_of_time=result.out_of_time,
            alpha_star=result.alpha_star, iteration_limit=result.iteration_limit,
        )  # fmt: skip
        message = f"{message}; {how}"
    report = RowReport(
        system=result.system,
        block=result.block,
        variables=result.variables,
        iterations=result.iterations,
        deviation=result.deviation,
        budget=result.budget,
        fallback=fallback,
        message=message,
        fallback_rule=rule,
        acceptance_lost=lost,
    )
    return token, report
