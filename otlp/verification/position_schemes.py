"""The draft schemes beyond i.i.d. of ``otlp.verify_drafts`` ([GR] §6, App. N, O, S; [SpecHub]):
the methods each scheme takes and the checks of its drafts.

A decoder that drafts without replacement (tree decoders: SpecInfer, Sequoia, EAGLE), from
two independent drafters, or greedily (the top n - 1 draft tokens plus one drawn from the
rest) verifies its batch with the same call and ``scheme=``; :func:`otlp.verify_drafts`
reads the inputs once and runs every scheme's rows:

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

import numpy as np
from numpy.typing import NDArray

from otlp.args import canonical_name
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


def method_tau(method: str, tau: object) -> object:
    """``tau`` as ``method`` (canonical) takes it, for :meth:`GlobalResolutionRows.checked` to
    check: as given for global resolution; None (the default, unused) for an exact method,
    which has no error threshold and refuses one by name (as :func:`otlp.verify_tree` does)."""
    if RULES[method].takes_tau:
        return tau
    if tau is not None:
        raise ValueError(
            f"tau: method {method!r} is exact and takes no error threshold (tau is "
            f"global_resolution's), got tau={tau!r}"
        )
    return None


def handles(scheme: str, method: str) -> bool:
    """Whether ``verify_drafts(..., scheme=scheme, method=method)`` (canonical names) runs a
    method of this module: any method of a scheme beyond i.i.d., SpecHub's pairs for i.i.d."""
    return scheme != "iid" or method in SCHEME_METHODS["iid"]


def check_scheme_method(scheme: str, method: str) -> None:
    """A ``ValueError`` naming ``method`` if ``scheme`` (canonical) does not take it."""
    if method not in SCHEME_METHODS[scheme]:
        raise ValueError(
            f"method: scheme {scheme!r} takes {', '.join(SCHEME_METHODS[scheme])}, got {method!r}"
        )


def check_scheme_drafts(scheme: str, method: str, drafts: NDArray[np.int64]) -> None:
    """The checks of a row's ``drafts`` (B, n) that ``scheme`` and ``method`` (canonical, a
    method of this module) add: a pair per row for two independent drafters and SpecHub,
    distinct tokens without replacement and for greedy drafts."""
    n = drafts.shape[1]
    if scheme == "independent" and n != 2:
        raise ValueError(f"drafts: scheme 'independent' verifies two drafts per row, got n = {n}")
    if RULES[method].drafts == 2 and n != 2:
        raise ValueError(f"drafts: {method!r} verifies a pair per row, got n = {n}")
    if scheme in ("without_replacement", "greedy"):
        ordered = np.sort(drafts, axis=1)
        repeats = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if repeats.any():
            b = int(np.flatnonzero(repeats)[0])
            raise ValueError(
                f"drafts[{b}]: {drafts[b].tolist()} repeats a token; scheme {scheme!r} "
                "drafts distinct tokens"
            )
