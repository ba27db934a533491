"""The exact rules' decoder rows: each token drawn from the rule's exact conditional law given
the row's drafts (:meth:`otlp.rules.Rule.local_conditionals`), or from the exact optimal plan's
slice for ``maxflow_cs`` ([GR] §5.3, ``TransportPlan.local_slice``)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.checks import (
    RowVocabulary,
    checked_drafts,
    raise_for_row_status,
    row_vocabulary,
)
from otlp.decoder_rows.inputs import DecoderBatch, draw_token, row
from otlp.decoder_rows.result import DraftVerification, exact_verification
from otlp.instance import Instance
from otlp.solvers.row_status import OK


def exact_rows(batch: DecoderBatch, method: str) -> DraftVerification:
    """Each row's token from the exact conditional law of ``method`` (a rule of
    :mod:`otlp.rules`, or ``maxflow_cs``) given its drafts, with the row's two uniforms; a
    batch sharing one (p, q) checks, solves or builds it once. The schemes beyond i.i.d. and
    SpecHub's pairs (the methods of :mod:`otlp.verification.position_schemes`) check each row
    first as the fused rows check it (:func:`~otlp.decoder_rows.checks.row_vocabulary`, then
    its drafts), so that they refuse the same rows with the same message; the other i.i.d.
    rules leave it to the row's :class:`~otlp.instance.Instance`, whose messages give the
    offending sum."""
    import otlp.rules
    from otlp.api import solve

    p, q, drafts = batch.p, batch.q, batch.drafts
    kernel_checks = batch.scheme != "iid" or method == "spechub"
    tokens = np.empty(drafts.shape[0], dtype=np.int64)
    rule = None if method == "maxflow_cs" else otlp.rules.get(method)
    shared = p.shape[0] == 1 and q.shape[0] == 1  # one (p, q) for all rows: once
    vocab: RowVocabulary | None = None
    inst: Instance | None = None
    plan = None
    for b in range(drafts.shape[0]):
        if kernel_checks:
            if vocab is None or not shared:
                status, detail, vocab = row_vocabulary(
                    row(p, b), row(q, b), batch.scheme, batch.top_k or 0, batch.atol
                )
                if vocab is None:
                    raise_for_row_status(status, detail, b, batch)
            status, detail, _ = checked_drafts(vocab, drafts[b], batch.scheme)
            if status != OK:
                raise_for_row_status(status, detail, b, batch)
        if inst is None or not shared:
            inst = batch.instance(b)
            plan = solve(inst, "maxflow-cs", check=False) if rule is None else None
        try:
            local = inst.to_local(drafts[b])
        except ValueError:
            raise ValueError(
                f"drafts[{b}]: {drafts[b].tolist()} contains a token the (top-k) draft cannot "
                "produce"
            ) from None
        if plan is not None:
            probs = plan.local_slice(drafts[b])
        else:
            assert rule is not None
            if method == "spechub":
                _require_hub(inst, local, drafts, b)
            probs = rule.local_conditionals(inst, local[None, :])[0]
        tokens[b] = draw_token(inst, probs, batch.uniforms[b])
    return exact_verification(tokens, drafts, method)


def _require_hub(inst: Instance, local: NDArray[np.int64], drafts: NDArray, b: int) -> None:
    """SpecHub draws its pair from its own hub joint ([SpecHub] §4): a pair without the hub
    a = argmax q is one it cannot draw."""
    hub = int(np.argmax(inst.q_local))
    if hub not in local:
        raise ValueError(
            f"drafts[{b}]: {drafts[b].tolist()} does not contain SpecHub's hub "
            f"token {int(inst.tokens[hub])} (argmax q): its hub joint cannot draw it"
        )
