"""Optimal acceptance by subset selection ([GR] Theorem 3.1): alpha* = 1 + min_H psi(H).

psi(H) = p(H) - P(all n drafts fall in H). Methods:

* ``prefix``  — sort the draft vocabulary by decreasing q/p and take the best prefix
  (O(k log k), [GR] §5.1 and Lemma 6.3, for i.i.d. drafts). For sampling without
  replacement (Hu et al. 2025, Thm 4, cited in [GR] Appendix S) P(all drafts in H) has no
  product form; all k + 1 prefix values come from one certified quadrature in O(R k n)
  (:mod:`otlp.solvers.global_resolution.clocks`), and the prefix rule is checked against brute
  force in the tests.
* ``mincut``  — n = 2 independent drafts: psi is a submodular quadratic pseudo-boolean
  function, minimised by one s-t minimum cut ([GR] Appendix D).
* ``maxflow`` — any scheme: the minimum cut of the relaxed-OTLP flow network (§5.2); the
  tokens whose source arc is cut form H*.
* ``brute``   — every subset of a tiny draft vocabulary (reference).
* ``greedy``  — the greedy draft scheme's closed form (otlp.greedy, [GR] Appendix O).

Tokens outside the draft vocabulary never belong to H* (they add p but no draft mass).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from otlp import greedy
from otlp.instance import Instance, require_instance
from otlp.limits import check_size
from otlp.reprs import dataclass_repr
from otlp.solvers.global_resolution.clocks import (
    QuadratureRangeError,
    complement_in,
    prefix_psi_without_replacement,
)

METHODS = ("auto", "prefix", "mincut", "maxflow", "brute", "greedy")
BRUTE_FORCE_MAX_K = 16


@dataclass(frozen=True)
class SubsetSelection:
    """alpha*, the optimal subset H* (as draft-vocabulary mask and global ids), and psi(H*)."""

    alpha_star: float
    H_mask: NDArray[np.bool_]
    H: NDArray[np.int64]
    psi_min: float
    method: str

    __repr__ = dataclass_repr


def draft_mass_in(inst: Instance, mask: NDArray[np.bool_]) -> float:
    """P(all n drafted tokens lie in the masked part of the draft vocabulary)."""
    if inst.scheme == "without_replacement":
        try:
            return 1.0 - complement_in(inst.q_local, mask, inst.n)
        except QuadratureRangeError:  # subnormal masses: sum the exact set masses
            cols = inst.columns("sets")
            return float(cols.mass[cols.contained_in(mask)].sum())
    if inst.scheme == "greedy":
        return greedy.mass_inside(inst.q_local, inst.n, mask)
    return float(np.prod(inst.draft_rows[:, mask].sum(axis=1)))


def psi(inst: Instance, mask: NDArray[np.bool_]) -> float:
    """psi(H) = p(H) - P(drafts in H) for H given as a draft-vocabulary mask."""
    require_instance(inst)
    chosen = np.asarray(mask)
    if chosen.dtype != np.bool_ or chosen.shape != (inst.k,):
        raise ValueError(
            f"mask: expected a boolean mask of shape ({inst.k},) over the draft vocabulary, got "
            f"dtype {chosen.dtype} and shape {chosen.shape}"
        )
    return float(inst.p_local[chosen].sum()) - draft_mass_in(inst, chosen)


def optimal_acceptance(inst: Instance, method: str = "auto") -> SubsetSelection:
    """alpha* and H* for ``inst`` by subset selection ([GR] Theorem 3.1).

    Parameters
    ----------
    inst : Instance
        The problem.
    method : {"auto", "prefix", "mincut", "maxflow", "brute"}, default "auto"
        ``prefix``: search by decreasing q/p, O(k log k) (i.i.d. and exchangeable drafts);
        ``mincut``: one s-t min cut for n = 2 independent drafts ([GR] Appendix D);
        ``maxflow``: min cut of the relaxed network (any scheme); ``brute``: every subset
        (k <= 16). ``auto`` picks the fastest exact one for the scheme.

    Returns
    -------
    SubsetSelection
        ``alpha_star`` (the optimal acceptance), ``H`` (global token ids of H*), ``H_mask``
        (over the draft vocabulary), ``psi_min`` and the ``method`` used.

    Examples
    --------
    >>> import otlp
    >>> inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=2)
    >>> sel = otlp.optimal_acceptance(inst)
    >>> round(sel.alpha_star, 6), sel.H.tolist()
    (0.86, [2, 1])
    """
    require_instance(inst)
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    if method == "auto":
        method = _auto_method(inst)
    if method == "greedy" or (method == "prefix" and inst.scheme == "greedy"):
        if inst.scheme != "greedy":
            raise ValueError("method: 'greedy' is the closed form of the greedy draft scheme")
        method = "greedy"
        mask = greedy.optimal_subset(inst.p_local, inst.q_local, inst.n)
    elif method == "prefix":
        if inst.scheme == "independent" and inst.n > 1:
            raise ValueError("method: 'prefix' is exact only for i.i.d. or exchangeable drafts")
        return prefix_selection(inst)
    elif method == "mincut":
        if inst.scheme != "independent" or inst.n != 2:
            raise ValueError("method: 'mincut' applies to n = 2 independent drafts")
        mask = _qpbo_min_cut(inst)
    elif method == "maxflow":
        mask = _relaxed_min_cut(inst)
    else:
        mask = _brute_force(inst)
    value = psi(inst, mask)
    return SubsetSelection(1.0 + value, mask, inst.tokens[mask], value, method)


def _auto_method(inst: Instance) -> str:
    if inst.scheme == "greedy":
        return "greedy"
    if inst.scheme != "independent" or inst.n == 1:
        return "prefix"
    return "mincut" if inst.n == 2 else "maxflow"


def ratio_order(inst: Instance) -> NDArray[np.int64]:
    """Draft-vocabulary positions sorted by decreasing q/p (p = 0 first; ties by position)."""
    p, q = inst.p_local, inst.q_local
    with np.errstate(divide="ignore", over="ignore"):  # q / subnormal p: inf, like p = 0
        ratio = np.where(p > 0, q / np.where(p > 0, p, 1.0), np.inf)
    return np.lexsort((np.arange(inst.k), -ratio)).astype(np.int64)


def prefix_psi(inst: Instance) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The q/p order and psi of each of its k + 1 prefixes (i.i.d. or without replacement)."""
    order = ratio_order(inst)
    if inst.scheme == "without_replacement":
        try:
            values = prefix_psi_without_replacement(
                inst.p_local[order], inst.p_outside, inst.q_local[order], inst.n
            )
        except QuadratureRangeError:  # subnormal masses: exact set masses (size-checked)
            values = _exact_prefix_psi(inst, order)
    else:
        p_prefix = np.concatenate([[0.0], np.cumsum(inst.p_local[order])])
        values = p_prefix - np.concatenate([[0.0], np.cumsum(inst.q_local[order])]) ** inst.n
    return order, values


def prefix_selection(inst: Instance) -> SubsetSelection:
    """alpha* and H* by the best prefix of the q/p order (``method="prefix"`` of
    :func:`optimal_acceptance`, for i.i.d. drafts or without replacement; the caller holds a
    checked Instance of such a scheme). Ties go to the shortest prefix (``argmin`` takes the
    first minimiser), so H* is the smallest optimal prefix (empty when p = q)."""
    order, values = prefix_psi(inst)
    best = int(np.argmin(values))
    mask = np.zeros(inst.k, dtype=bool)
    mask[order[:best]] = True
    value = float(values[best])
    return SubsetSelection(1.0 + value, mask, inst.tokens[mask], value, "prefix")


def _exact_prefix_psi(inst: Instance, order: NDArray[np.int64]) -> NDArray[np.float64]:
    """psi of every prefix of ``order`` from the exact set masses: a column lies inside the
    first i tokens when its last member in the order comes before position i."""
    cols = inst.columns("sets")
    position = np.empty(inst.k, dtype=np.int64)
    position[order] = np.arange(inst.k)
    last = np.full(cols.count, -1, dtype=np.int64)
    np.maximum.at(last, cols.inc_col, position[cols.inc_token])
    inside = np.cumsum(np.bincount(last + 1, weights=cols.mass, minlength=inst.k + 1))
    p_prefix = np.concatenate([[0.0], np.cumsum(inst.p_local[order])])
    return p_prefix - inside


def _brute_force(inst: Instance) -> NDArray[np.bool_]:
    if inst.k > BRUTE_FORCE_MAX_K:
        raise ValueError(
            f"method: 'brute' enumerates 2^k subsets; k={inst.k} exceeds {BRUTE_FORCE_MAX_K}"
        )
    cols = inst.columns("sets")
    bits = np.zeros(cols.count, dtype=np.int64)
    np.bitwise_or.at(bits, cols.inc_col, np.int64(1) << cols.inc_token)
    subsets = np.arange(1 << inst.k, dtype=np.int64)
    token_bits = (subsets[:, None] >> np.arange(inst.k)) & 1
    p_sum = token_bits @ inst.p_local
    inside = (bits[None, :] & ~subsets[:, None]) == 0
    values = p_sum - inside.astype(float) @ cols.mass
    best = int(np.argmin(values))
    return token_bits[best].astype(bool)


def _qpbo_min_cut(inst: Instance) -> NDArray[np.bool_]:
    """Appendix D: psi(x) = sum_i (p_i - q1_i) x_i + sum_{i != j} q1_i q2_j x_i (1 - x_j).

    x_i = 1 (i in H) puts node i on the sink side; x_i (1 - x_j) is an arc j -> i.
    """
    from otlp.solvers.base import MaxFlowProblem
    from otlp.solvers.registry import get_backend

    k = inst.k
    check_size(f"n = 2 min-cut network (k={k})", k * k)
    q1, q2 = inst.draft_rows[0], inst.draft_rows[1]
    unary = inst.p_local - q1
    source, sink = k, k + 1
    ii, jj = np.nonzero(np.outer(q1, q2) * (1 - np.eye(k)) > 0)
    tails = np.concatenate([np.full(k, source), np.arange(k), jj])
    heads = np.concatenate([np.arange(k), np.full(k, sink), ii])
    caps = np.concatenate([np.maximum(unary, 0), np.maximum(-unary, 0), q1[ii] * q2[jj]])
    problem = MaxFlowProblem(k + 2, tails, heads, caps, source, sink)
    result = get_backend("ortools-maxflow").solve(problem, want_cut=True)
    assert result.source_side is not None  # requested with want_cut=True
    return ~result.source_side[:k]


def _relaxed_min_cut(inst: Instance) -> NDArray[np.bool_]:
    from otlp.builders import relaxed_system
    from otlp.solvers.registry import get_backend

    system = relaxed_system(inst)
    result = get_backend("ortools-maxflow").solve(system.to_maxflow(), want_cut=True)
    assert result.source_side is not None  # requested with want_cut=True
    return ~result.source_side[: system.left_count]
