"""``otlp.verify_drafts`` for draft schemes beyond i.i.d. ([GR] §6, App. N, O, S; [SpecHub]).

A decoder that drafts without replacement (tree decoders: SpecInfer, Sequoia, EAGLE), from
two independent drafters, or greedily (the top n - 1 draft tokens plus one drawn from the
rest) verifies its batch with the same call and ``scheme=``:

* ``method="global_resolution"`` — the fused per-row path of
  :mod:`otlp.global_resolution.fused` (compiled scan and top-k, H*, outer targets, the one
  unit omega needs, the slice, the draw); a row it cannot certify is solved exactly by the
  object API (max-flow fallback) and its report says so. The call's ``time_budget`` starts
  at its entry; a row whose next stage cannot fit what is left gets its token from the
  scheme's lossless rule (``rrs_without_replacement``, ``rrs``). For the greedy scheme the optimal
  plan has a closed form and every row is exact.
* the exact lossless rules, each row drawn from the rule's exact conditional law given its
  drafts: ``maxflow_cs`` (the exact OT of the scheme, [GR] §5.3) for every scheme,
  ``rrs_without_replacement`` ([SpecHub] Algorithm 1) without replacement, and ``spechub``
  ([SpecHub] §4) for ``scheme="iid"``, n = 2: SpecHub draws its pair from its own hub joint
  built on q (the hub a = argmax q is always in the pair), so its drafts must contain a.

q is (V,) or (B, V); for ``scheme="independent"`` it holds one row per draft: (2, V) shared
by every row or (B, 2, V).
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import (
    as_generator,
    canonical_name,
    positive_int,
)
from otlp.errors import ProblemTooLarge
from otlp.global_resolution.constants import (
    DEFAULT_TIME_BUDGET,
    check_time_budget,
    check_unit_size,
)
from otlp.global_resolution.fused import RowResult, checked_row, scheme_row
from otlp.global_resolution.reports import RowReport
from otlp.global_resolution.rule_fallback import FALLBACK_RULES, rule_seconds
from otlp.instance import Instance
from otlp.solvers.global_resolution.budget import Deadline
from otlp.solvers.global_resolution.constants import (
    FALLBACK,
    OK,
)
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
from otlp.verification.rule_table import POSITION_SCHEMES, RULES, position_names

# Scheme -> the rules run here (the rule table's): every position rule of the schemes beyond
# i.i.d., and SpecHub's pairs of i.i.d. drafts (the other i.i.d. rules run in position).
SCHEME_METHODS = {
    scheme: tuple(n for n in position_names(scheme) if scheme != "iid" or RULES[n].drafts == 2)
    for scheme in POSITION_SCHEMES
}


def draft_scheme(scheme: object) -> str:
    """``scheme``'s canonical name if ``verify_drafts`` verifies it, else a ``ValueError``
    naming ``scheme``."""
    name = canonical_name(scheme, "scheme")
    if name not in SCHEME_METHODS:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEME_METHODS)}, got {scheme!r}")
    return name


def handles(scheme: object, method: object) -> bool:
    """Whether ``verify_drafts(..., scheme=scheme, method=method)`` runs here (scheme checked)."""
    name = draft_scheme(scheme)
    return name != "iid" or canonical_name(method, "method") in SCHEME_METHODS["iid"]


def verify_scheme_drafts(
    p: ArrayLike,
    q: ArrayLike,
    drafts: ArrayLike,
    *,
    scheme: str,
    method: str,
    top_k: int | None,
    tau: float | None,
    rng: object,
    parallel: bool,
    max_iter: int,
    atol: float | None,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
) -> DraftVerification:
    """See the module docstring and :func:`otlp.verify_drafts`."""
    start = time.perf_counter()
    scheme = canonical_name(scheme, "scheme")
    method = canonical_name(method, "method")
    if method not in SCHEME_METHODS[scheme]:
        raise ValueError(
            f"method: scheme {scheme!r} takes {', '.join(SCHEME_METHODS[scheme])}, got {method!r}"
        )
    tau = method_tau(method, tau)
    draft_rows = 2 if scheme == "independent" else 1
    p_arr, q_arr, draft_arr, atol = batch_arrays(p, q, drafts, atol, draft_rows=draft_rows)
    rows, n = draft_arr.shape
    vocab = p_arr.shape[1]
    if scheme == "independent" and n != 2:
        raise ValueError(f"drafts: scheme 'independent' verifies two drafts per row, got n = {n}")
    if RULES[method].drafts == 2 and n != 2:
        raise ValueError(f"drafts: {method!r} verifies a pair per row, got n = {n}")
    if scheme in ("without_replacement", "greedy"):
        ordered = np.sort(draft_arr, axis=1)
        repeats = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if repeats.any():
            b = int(np.flatnonzero(repeats)[0])
            raise ValueError(
                f"drafts[{b}]: {draft_arr[b].tolist()} repeats a token; scheme {scheme!r} "
                "drafts distinct tokens"
            )
    if top_k is not None:
        top_k = positive_int("top_k", top_k, maximum=vocab)
    if not isinstance(parallel, bool):
        raise ValueError(f"parallel: expected True or False, got {parallel!r}")
    if parallel:
        raise ValueError(
            f"parallel: only the i.i.d. fused path runs on numba's threads; scheme {scheme!r} "
            "verifies its rows one by one"
        )
    max_iter = positive_int("max_iter", max_iter, minimum=0)
    time_budget = check_time_budget(time_budget)
    uniforms = as_generator(rng).random((rows, 2))
    if method != "global_resolution":
        return _exact_rows(p_arr, q_arr, draft_arr, scheme, method, top_k, atol, uniforms)
    try:
        if scheme != "greedy":  # the greedy plan is closed form: no Newton evaluation
            check_unit_size(vocab if top_k is None else top_k, n)
    except ProblemTooLarge as exc:  # a valid row still gets a token: the scheme's rule's
        name = FALLBACK_RULES[scheme].name
        verified = _exact_rows(p_arr, q_arr, draft_arr, scheme, name, top_k, atol, uniforms)
        return rule_rows(verified, str(exc))
    deadline = call_deadline(time_budget, start, rows * rule_seconds(vocab, q_arr.shape[1]))
    return _scheme_rows(
        p_arr, q_arr, draft_arr, uniforms, scheme, top_k, tau, max_iter, atol, time_budget, deadline
    )


def _scheme_rows(
    p_arr: NDArray,
    q_arr: NDArray,
    draft_arr: NDArray[np.int64],
    uniforms: NDArray[np.float64],
    scheme: str,
    top_k: int | None,
    tau: float,
    max_iter: int,
    atol: float,
    time_budget: float | None,
    deadline: Deadline,
) -> DraftVerification:
    """The fused row per row of the batch, before the call's ``deadline``; a row it cannot
    certify gets its token from :func:`fallback_token`."""
    rows = draft_arr.shape[0]
    tokens = np.empty(rows, dtype=np.int64)
    reports = []
    for b in range(rows):
        pb, qb = _row(p_arr, b), _row(q_arr, b)
        result = scheme_row(
            pb, qb, draft_arr[b], scheme, top_k or 0, tau, max_iter, atol, uniforms[b], deadline
        )
        if result.status not in (OK, FALLBACK):
            raise_for_row_status(result.status, result.detail, b, p_arr, q_arr, draft_arr, scheme)
        fallback = result.status == FALLBACK
        message = result.message
        rule, lost = None, None
        if fallback:
            inst = _instance(pb, qb, draft_arr.shape[1], scheme, top_k, atol, b)
            tokens[b], how, rule, lost = _fallback(
                inst, draft_arr[b], uniforms[b], result, tau, max_iter, time_budget, deadline
            )
            message = f"{message}; {how}"
        else:
            tokens[b] = result.token
        reports.append(
            RowReport(
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
        )
    accepted = (tokens[:, None] == draft_arr).any(axis=1)
    return DraftVerification(tokens, accepted, tuple(reports), "global_resolution")


def scheme_row_token(
    p: NDArray[np.floating],
    q: NDArray[np.floating],
    drafts: NDArray[np.int64],
    scheme: str,
    *,
    tau: float,
    uniforms: NDArray[np.float64],
    max_iter: int,
    atol: float,
    top_k: int | None = None,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
) -> int:
    """One row's global-resolution token: ``p`` (V,), ``q`` (d, V) as
    :func:`verify_scheme_drafts` holds them, two uniforms. The fused path, the object API
    where it cannot certify the row (the rule where it ran out of ``time_budget`` seconds
    from this call): that function's step per row, for ``verify_tree``'s nodes.

    ``top_k`` None: the caller checked and renormalised the rows and restricted q itself
    (only q's support is the draft vocabulary: a restricted q costs its k tokens, not V); a
    row the fused path refuses raises. ``top_k`` k (0: every positive draft token): the rows
    as given (float32 or float64, each within ``atol`` of summing to 1), q restricted to its
    top k here; a row or draft the fused path refuses gives -1, for the caller's checked
    path to name."""
    deadline = Deadline.after(time_budget)
    k = top_k
    if k is None:
        support = int(np.count_nonzero(q.max(axis=0)))
        k = support if support < q.shape[-1] else 0
    result = scheme_row(p, q, drafts, scheme, k, tau, max_iter, atol, uniforms, deadline)
    if result.status == FALLBACK:  # Instance widens and renormalises the rows itself
        inst = _instance(p, q, drafts.shape[0], scheme, k or None, atol, 0)
        return _fallback(inst, drafts, uniforms, result, tau, max_iter, time_budget, deadline)[0]
    if result.status != OK and top_k is None:
        raise_for_row_status(
            result.status, result.detail, 0, p[None], q[None], drafts[None], scheme
        )
    return result.token if result.status == OK else -1


def _fallback(
    inst: Instance,
    drafts: NDArray[np.int64],
    uniforms: NDArray[np.float64],
    result: RowResult,
    tau: float,
    max_iter: int,
    time_budget: float | None,
    deadline: Deadline,
) -> tuple[int, str, str | None, float | None]:
    """:func:`fallback_token` for a row the fused scheme row (``result``) could not certify."""
    return fallback_token(
        inst,
        drafts,
        uniforms,
        out_of_time=result.out_of_time,
        alpha_star=result.alpha_star,
        tau=tau,
        max_iter=max_iter,
        time_budget=time_budget,
        deadline=deadline,
        iteration_limit=result.iteration_limit,
    )


def _row(arr: NDArray, b: int) -> NDArray:
    return arr[0] if arr.shape[0] == 1 else arr[b]


def _instance(
    pb: NDArray, qb: NDArray, n: int, scheme: str, top_k: int | None, atol: float, b: int
) -> Instance:
    """The row's Instance (errors name the row)."""
    q_arg = list(qb) if scheme == "independent" else qb[0]
    try:
        return Instance(pb, q_arg, n, scheme, top_k=top_k, atol=atol)
    except ValueError as exc:
        name, _, rest = str(exc).partition(":")
        raise ValueError(f"{name}[{b}]:{rest}") from None


def _exact_rows(
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    scheme: str,
    method: str,
    top_k: int | None,
    atol: float,
    uniforms: NDArray[np.float64],
) -> DraftVerification:
    """Each row's token from the exact conditional law of the rule given its drafts."""
    import otlp.rules
    from otlp.api import solve

    rows, n = drafts.shape
    tokens = np.empty(rows, dtype=np.int64)
    rule = None if method == "maxflow_cs" else otlp.rules.get(method)
    shared = p.shape[0] == 1 and q.shape[0] == 1  # one (p, q) for all rows: solve it once
    inst: Instance | None = None
    plan = None
    for b in range(rows):
        status, detail, _, _ = checked_row(
            _row(p, b), _row(q, b), drafts[b], scheme, top_k or 0, atol
        )
        if status != OK:  # the fused path's own checks: every method refuses the same rows
            raise_for_row_status(status, detail, b, p, q, drafts, scheme)
        if inst is None or not shared:
            inst = _instance(_row(p, b), _row(q, b), n, scheme, top_k, atol, b)
            plan = solve(inst, "maxflow-cs", check=False) if rule is None else None
        local = local_drafts(inst, drafts, b)
        if plan is not None:
            probs = plan.local_slice(drafts[b])
        else:
            assert rule is not None
            if method == "spechub":
                hub = int(np.argmax(inst.q_local))
                if hub not in local:
                    raise ValueError(
                        f"drafts[{b}]: {drafts[b].tolist()} does not contain SpecHub's hub "
                        f"token {int(inst.tokens[hub])} (argmax q): its hub joint cannot draw it"
                    )
            probs = rule.local_conditionals(inst, local[None, :])[0]
        tokens[b] = draw_token(inst, probs, uniforms[b])
    return exact_verification(tokens, drafts, method)
