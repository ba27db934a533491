"""The scheme-dependent steps of global resolution as array functions ([GR] §6, App. S).

One home for what the object API (:class:`~otlp.global_resolution.schemes.
SchemeGlobalResolution`) and the fused decoder path (:mod:`otlp.global_resolution.fused`)
both need, over the draft vocabulary:

* :func:`without_replacement_analysis` — H* by the q/p prefix rule and the outer targets
  along the increasing-q/p chain (one certified quadrature for every prefix).
* :func:`independent_selection`, :func:`independent_targets` — two independent drafts: H* by
  the certified branch and bound and the outer targets by the certified removal chain of
  :mod:`otlp.solvers.global_resolution.independent` (no max-flow); what is not certified is
  returned as None and the caller solves it exactly (QPBO min cut, outer max-flow).
* :func:`unit_parts` and :func:`unit_system` — one unit (an outer block or the inner system)
  and its convex system.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otlp.global_resolution.constants import OUTER, PSI_TIE, Unit
from otlp.solvers.arrays import BoolArray, FloatArray, IntArray
from otlp.solvers.global_resolution import OuterTargets, SoftmaxSystem
from otlp.solvers.global_resolution.clocks import prefix_psi_without_replacement
from otlp.solvers.global_resolution.independent import chain_blocks, independent_outer, minimise_psi
from otlp.solvers.global_resolution.pair_system import PairSystem, others_sum
from otlp.solvers.global_resolution.sorting import ratio_keys, stable_argsort
from otlp.solvers.global_resolution.wor_system import WithoutReplacementSystem


@dataclass(frozen=True)
class Selection:
    """H* over the draft vocabulary and psi(H*) (the empty set when alpha* = 1 up to
    ``PSI_TIE``), with the method that found it."""

    H_mask: BoolArray
    psi_min: float
    method: str


def tie_to_empty(mask: BoolArray, value: float, method: str) -> Selection:
    """When min psi is 0 up to rounding (alpha* = 1) the empty set is used: with H*
    nonempty the inner system would have no slack and Eq. (18) no residual rows."""
    if mask.any() and value > -PSI_TIE:
        return Selection(np.zeros_like(mask), 0.0, method)
    return Selection(mask, value, method)


def chain_targets(
    outside: IntArray, p_outside: FloatArray, psi_chain: FloatArray, k: int
) -> OuterTargets:
    """Theorem 6.2 targets and tight-set blocks from psi along a good chain.

    ``outside`` lists the tokens outside H* in chain order v_1..v_K; ``psi_chain[i]`` is
    psi(H* ∪ {v_{i+1}, ..., v_K}) for i = 0..K, and every min over supersets is a cumulative
    minimum of it (:func:`otlp.solvers.global_resolution.independent.chain_blocks`).
    """
    targets, starts, ends, block_of = chain_blocks(
        np.ascontiguousarray(outside, dtype=np.int64),
        np.ascontiguousarray(p_outside, dtype=np.float64),
        np.ascontiguousarray(psi_chain, dtype=np.float64),
        k,
    )
    bases = np.zeros(starts.shape[0])  # unused: the scheme systems carry their own base terms
    return OuterTargets(outside.astype(np.int64), targets, starts, ends, bases, block_of)


def ratio_order(p_local: FloatArray, q_local: FloatArray) -> IntArray:
    """Positions by decreasing q/p (p = 0 first, ties by position), as ``otlp.subset``."""
    return stable_argsort(ratio_keys(p_local, q_local))


def prefix_outer(
    order: IntArray, psi: FloatArray, p_local: FloatArray
) -> tuple[Selection, OuterTargets]:
    """H* as the best prefix of ``order`` (psi of every prefix given) and the chain targets
    along the remaining tokens in reverse order (Lemma 6.3's prefix reduction)."""
    best = int(np.argmin(psi))
    mask = np.zeros(p_local.shape[0], dtype=bool)
    mask[order[:best]] = True
    selection = tie_to_empty(mask, float(psi[best]), "prefix")
    size = int(selection.H_mask.sum())
    outside = order[size:][::-1].astype(np.int64)
    return selection, chain_targets(
        outside, p_local[outside], psi[::-1][: outside.size + 1], mask.size
    )


def without_replacement_analysis(
    p_local: FloatArray, q_local: FloatArray, p_outside: float, n: int
) -> tuple[Selection, OuterTargets]:
    """H* and outer targets without replacement; raises ``QuadratureRangeError`` for masses
    the quadrature cannot certify (the caller sums exact set masses instead)."""
    order = ratio_order(p_local, q_local)
    psi = prefix_psi_without_replacement(p_local[order], p_outside, q_local[order], n)
    return prefix_outer(order, psi, p_local)


def independent_selection(p_local: FloatArray, q1: FloatArray, q2: FloatArray) -> Selection | None:
    """H* for two independent drafts by the certified branch and bound, None if the search
    was not certified (the caller then uses the exact QPBO min cut)."""
    certified, mask, value = minimise_psi(*_contiguous(p_local, q1, q2))
    return tie_to_empty(mask, value, "branch and bound") if certified else None


def independent_targets(
    p_local: FloatArray, q1: FloatArray, q2: FloatArray, inside: BoolArray
) -> OuterTargets | None:
    """The outer targets along the certified removal chain, None if a phase check fails
    (the caller then solves the outer system by max-flow)."""
    p_local, q1, q2 = _contiguous(p_local, q1, q2)
    good, order, chain = independent_outer(p_local, q1, q2, np.ascontiguousarray(inside))
    if not good:
        return None
    return chain_targets(order, p_local[order], chain, p_local.shape[0])


def _contiguous(*arrays: FloatArray) -> tuple[FloatArray, ...]:
    return tuple(np.ascontiguousarray(a, dtype=np.float64) for a in arrays)


def pair_factors(scheme: str, rows: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(a, b, d) with w({i, j}) = a_i b_j + b_i a_j and w({i}) = d_i (n = 2): two
    independent drafts (rows q1, q2) or two draws without replacement from rows[0]."""
    if scheme == "independent":
        q1, q2 = rows[0], rows[1]
        return q1, q2, q1 * q2
    return _balanced_ratio_factors(rows[0])


# a_i = q_i / Σ_{j≠i} q_j can reach 2^1074 (q_i near 1 beside subnormal others)
_BALANCE_ABOVE = 2.0**64


def _balanced_ratio_factors(q: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(a, b, 0) = (q / Σ_{j≠i} q_j, q, 0) for draws without replacement, scaled exactly.

    The masses a_i b_j + b_i a_j (i ≠ j) never exceed 1, but a alone overflows, or is
    mis-rounded, when a token holds all but a subnormal remainder of the draft mass. Such
    a are divided and b multiplied by one power of two 2^m (exact: the masses are
    unchanged), with m balancing the largest a against the largest b. A token whose
    others sum to 0 has no pair column: its a is 0.
    """
    others = others_sum(q)
    positive = others > 0
    with np.errstate(divide="ignore", over="ignore"):
        a = np.where(positive, q / np.where(positive, others, 1.0), 0.0)
    largest = float(a.max(initial=0.0))
    if largest <= _BALANCE_ABOVE:
        return a, q, np.zeros_like(q)
    with np.errstate(divide="ignore"):
        log_ratio = np.where(positive & (q > 0), np.log2(q) - np.log2(others), -np.inf)
    m = int(np.ceil(float(log_ratio.max()) / 2.0))
    scaled_others = np.ldexp(others, m)  # exact: others <= 1 and m <= 537
    a = np.where(positive, q / np.where(positive, scaled_others, 1.0), 0.0)
    return a, np.ldexp(q, m), np.zeros_like(q)


@dataclass(frozen=True)
class UnitParts:
    """One unit's variables and targets, its base (tokens in its sets that are not
    variables), the tokens its sets avoid, and its slack (0 outer, 1 inner)."""

    tokens: IntArray
    targets: FloatArray
    base: BoolArray
    excluded: BoolArray
    slack: float


def unit_parts(
    p_local: FloatArray, inside: BoolArray, outer: OuterTargets, unit: Unit
) -> UnitParts:
    """Outer block b: its tokens and targets, the base is H* and later blocks, the earlier
    blocks are excluded. Inner system: the tokens of H* with p > 0 and targets p, the base
    is H*'s p = 0 tokens, everything outside H* is excluded."""
    name, block = unit
    if name == OUTER:
        assert block is not None
        return UnitParts(
            outer.block_tokens(block),
            outer.block_targets(block),
            inside | (outer.block_of > block),
            (outer.block_of >= 0) & (outer.block_of < block),
            0.0,
        )
    tokens = np.flatnonzero(inside & (p_local > 0)).astype(np.int64)
    return UnitParts(tokens, p_local[tokens], inside & (p_local <= 0), ~inside, 1.0)


def unit_system(
    scheme: str,
    n: int,
    rows: FloatArray,
    parts: UnitParts,
    factors: tuple[FloatArray, FloatArray, FloatArray] | None = None,
) -> SoftmaxSystem | None:
    """The unit's convex system; None for a unit of n >= 3 draws without replacement whose
    sets are all of its tokens (exact set masses are needed there)."""
    q_local = rows[0]
    tokens, base = parts.tokens, parts.base
    q = q_local[tokens]
    base_q = float(q_local[base].sum())
    if n == 2:
        a, b, d = factors if factors is not None else pair_factors(scheme, rows)
        return PairSystem(
            q,
            parts.targets,
            base_q,
            parts.slack,
            2,
            a[tokens],
            b[tokens],
            d[tokens],
            float(a[base].sum()),
            float(b[base].sum()),
        )
    if not parts.excluded.any() and base.sum() + tokens.size <= n:
        return None
    return WithoutReplacementSystem(
        q,
        parts.targets,
        base_q,
        parts.slack,
        n,
        q_local[base],
        float(q_local[parts.excluded].sum()),
    )
