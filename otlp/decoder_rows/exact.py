"""The exact rules' decoder rows: each token drawn from the rule's exact conditional law given
the row's drafts (:meth:`otlp.rules.Rule.local_conditionals`), or from the exact optimal plan's
slice for ``maxflow_cs`` ([GR] §5.3, ``TransportPlan.local_slice``)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.checks import checked_row, raise_for_row_status
from otlp.decoder_rows.inputs import DecoderBatch, draw_token, row
from otlp.decoder_rows.result import DraftVerification, exact_verification
from otlp.instance import Instance
from otlp.solvers.row_status import OK


def exact_rows(
    batch: DecoderBatch, method: str, *, kernel_checks: bool = True
) -> DraftVerification:
    """Each row's token from the exact conditional law of ``method`` (a rule of
    :mod:`otlp.rules`, or ``maxflow_cs``) given its drafts, with the row's two uniforms; a
    batch sharing one (p, q) solves or builds it once. With ``kernel_checks`` every row is
    first checked as the fused rows check it (:func:`~otlp.decoder_rows.checks.checked_row`:
    the schemes beyond i.i.d., whose methods refuse the same rows with the same message);
    without, the row's :class:`~otlp.instance.Instance` checks it (the i.i.d. rules, whose
    messages give the offending sum)."""
    import otlp.rules
    from otlp.api import solve

    p, q, drafts = batch.p, batch.q, batch.drafts
    tokens = np.empty(drafts.shape[0], dtype=np.int64)
    rule = None if method == "maxflow_cs" else otlp.rules.get(method)
    shared = p.shape[0] == 1 and q.shape[0] == 1  # one (p, q) for all rows: solve it once
    inst: Instance | None = None
    plan = None
    for b in range(drafts.shape[0]):
        if kernel_checks:
            status, detail, _, _ = checked_row(
                row(p, b), row(q, b), drafts[b], batch.scheme, batch.top_k or 0, batch.atol
            )
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
