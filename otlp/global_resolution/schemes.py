"""Global resolution beyond i.i.d. drafts ([GR] §6 and Appendix S).

The engine of :mod:`otlp.global_resolution.iid` (units, Eq. (18) slices, certified deviations,
per-unit exact max-flow fallback, lazy plans and per-token reports) with the three
scheme-dependent steps replaced:

* ``scheme="without_replacement"`` (any n). H* by the q/p prefix rule (Hu et al. 2025,
  Thm 4) with P(all drafts in H) from the certified exponential-clock quadrature of
  :mod:`otlp.solvers.global_resolution.clocks`. Outer targets by the greedy polymatroid algorithm
  (Theorem 6.2) in
  increasing q/p order with cumulative minimums: Lemma 6.3's prefix reduction
  min_{A ⊆ S ⊆ B} psi(S) = min over q/p-prefixes carries over (checked against max-flow in
  the tests), so min_{T ⊇ H_i} psi(T) = min_{j <= i} psi(H_j) as for i.i.d. drafts, and the
  records of the cumulative minimum are again tight sets that split the outer system into
  independent blocks. Convex systems: for n = 2 the pair masses q_i q_j (1/(1 - q_i) +
  1/(1 - q_j)) are sums of two products, so receipts and a rank-2-per-node Hessian cost
  O(R m) (:class:`~otlp.solvers.global_resolution.pair_system.PairSystem`); for n >= 3 a double
  quadrature (exponential clocks for the set masses, the exponential sum for the softmax)
  costs O(R_t R_u m n) per evaluation
  (:class:`~otlp.solvers.global_resolution.wor_system.WithoutReplacementSystem`). The exact
  groups of set masses (:class:`~otlp.solvers.global_resolution.explicit_system.ExplicitSystem`,
  O(C(k, n))) serve as the reference (``explicit_sets=True``) and for a unit whose largest
  set holds all the draft mass (k = n).
* ``scheme="independent"``, n = 2. H* by a certified branch and bound over
  (q1(H), q2(H)) (a minimiser is a half-plane set), the QPBO min cut ([GR] Appendix D) where
  the search is not certified. The outer targets need min psi over the supersets of a chain
  of sets and psi = p(H) - q1(H) q2(H) has no prefix structure; a removal chain whose
  records are certified closed by submodularity and per-phase checks gives them exactly, with
  the same tight-set blocks as a prefix chain
  (:mod:`otlp.solvers.global_resolution.independent`). Where a check fails, the outer system is
  solved by max-flow and its row sums are the targets (``outer_method`` says which). The
  pair masses q1_i q2_j + q1_j q2_i and singletons q1_i q2_i again give a
  :class:`~otlp.solvers.global_resolution.pair_system.PairSystem`.

Every plan still obeys Lemma 6.6 (15 tau in L1, 10 tau in acceptance) by certificate, and
``otlp.solve`` verifies the materialised plan.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any

import numpy as np

from otlp import combinatorics as cb
from otlp.builders import outer_system
from otlp.columns import set_sizes
from otlp.global_resolution.constants import OUTER, Unit
from otlp.global_resolution.exact import ExactUnit, max_flow_values, restore_rounded_outer_flow
from otlp.global_resolution.iid import GlobalResolution
from otlp.global_resolution.reports import SolveReport
from otlp.global_resolution.scheme_parts import (
    independent_selection,
    independent_targets,
    pair_factors,
    prefix_outer,
    tie_to_empty,
    unit_parts,
    unit_system,
)
from otlp.instance import Instance
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution import MinimizeResult, OuterTargets, SoftmaxSystem
from otlp.solvers.global_resolution.budget import evaluation_seconds, max_flow_seconds, require
from otlp.solvers.global_resolution.explicit_system import ExplicitSystem
from otlp.solvers.global_resolution.system_newton import system_newton
from otlp.subset import SubsetSelection, optimal_acceptance, prefix_psi

SCHEMES = ("without_replacement", "independent")


class SchemeGlobalResolution(GlobalResolution):
    """Global resolution for sampling without replacement and for two independent drafts."""

    SCHEMES = SCHEMES

    def __init__(
        self, inst: Instance, tau: float = 1e-3, *, explicit_sets: bool = False, **options: Any
    ) -> None:
        if options.get("minimizer", "newton") != "newton":
            raise ValueError(
                f"minimizer: the seed's truncated L-BFGS-B is defined for i.i.d. drafts only; "
                f"scheme {inst.scheme!r} needs 'newton', got {options['minimizer']!r}"
            )
        if inst.scheme == "independent" and inst.n > 2:
            raise ValueError(
                f"inst: global resolution for independent drafts needs n = 2 ([GR] Appendix S: "
                f"H* is a general submodular minimisation for n >= 3), got n = {inst.n}"
            )
        super().__init__(inst, tau, **options)
        self.explicit_sets = explicit_sets  # n >= 3: sum exact set masses instead (reference)

    # ----- pair masses ---------------------------------------------------------------------
    @cached_property
    def _pair_factors(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(a, b, d) with w({i, j}) = a_i b_j + b_i a_j and w({i}) = d_i (n = 2)."""
        return pair_factors(self.instance.scheme, self.instance.draft_rows)

    # ----- H* and the outer targets -------------------------------------------------------
    @cached_property
    def _prefix_psi(self) -> tuple[IntArray, FloatArray]:
        """The q/p order and psi of all its prefixes (one quadrature for H* and targets)."""
        return prefix_psi(self.instance)

    @cached_property
    def _certified(self) -> tuple[SubsetSelection, OuterTargets | None]:
        """H* and (where available without max-flow) the outer targets.

        Without replacement: the q/p prefix rule and the chain along it. Two independent
        drafts: the certified branch and bound and removal chain of
        :mod:`otlp.solvers.global_resolution.independent`; H* falls back to the QPBO min cut and
        the targets to the outer max-flow where a certificate fails (``outer_method`` says
        which was used).
        """
        inst = self.instance
        outer: OuterTargets | None
        if inst.scheme == "without_replacement":
            order, psi = self._prefix_psi
            found, outer = prefix_outer(order, psi, inst.p_local)
        else:
            q1, q2 = inst.draft_rows[0], inst.draft_rows[1]
            certified = independent_selection(inst.p_local, q1, q2)
            if certified is None:
                exact = optimal_acceptance(inst)
                certified = tie_to_empty(exact.H_mask, exact.psi_min, exact.method)
            found = certified
            outer = independent_targets(inst.p_local, q1, q2, found.H_mask)
        mask = found.H_mask
        selection = SubsetSelection(
            1.0 + found.psi_min, mask, inst.tokens[mask], found.psi_min, found.method
        )
        return selection, outer

    @cached_property
    def selection(self) -> SubsetSelection:
        """alpha* and H*: the q/p prefix rule without replacement, the certified branch and
        bound (else the QPBO min cut) for two independent drafts. When min psi is 0 up to
        rounding (alpha* = 1) the empty set is used, as for i.i.d. drafts."""
        return self._certified[0]

    def _minimize(self, system: SoftmaxSystem, stop: float) -> MinimizeResult:
        return system_newton(
            system,
            stop,
            max_iter=self.max_iter,
            time_budget=self._time_left(),
        )

    def _evaluation_seconds(self, system: SoftmaxSystem) -> float:
        n = self.instance.n
        double = self.instance.scheme == "without_replacement" and n >= 3
        return evaluation_seconds(system.size, n, double)

    @cached_property
    def outer(self) -> OuterTargets:
        outer = self._certified[1]
        if outer is None:
            self.outer_method = "exact max-flow (chain not certified)"
            return self._exact_outer()
        self.outer_method = "certified chain"
        return outer

    def _exact_outer(self) -> OuterTargets:
        """The outer system by max-flow (independent drafts whose chain is not certified);
        its row sums are the targets. Over ``otlp.limits`` (``ProblemTooLarge``) or past the
        slice call's deadline (``OutOfTime``, estimated from its arcs before it is built),
        the caller's token comes from the scheme's lossless rule."""
        start = time.perf_counter()
        inst, inside = self.instance, self.selection.H_mask
        arcs = cb.count_sets(inst.k, set_sizes(inst.scheme, inst.k, inst.n)) * inst.n
        require(self._deadline, max_flow_seconds(arcs, 0), "the outer max-flow")
        outside = np.flatnonzero(~inside).astype(np.int64)
        network = outer_system(inst, inside)  # the inner network is built only if needed
        values = restore_rounded_outer_flow(network, max_flow_values(network), inst.target_rows)
        rows = np.bincount(network.arc_tokens(), weights=values, minlength=inst.k).astype(float)
        count = np.array([outside.shape[0]], dtype=np.int64)
        block_of = np.where(inside, -1, 0).astype(np.int64)
        targets = OuterTargets(
            outside, rows[outside], np.zeros(1, np.int64), count, np.zeros(1), block_of
        )
        if outside.size:
            unit: Unit = (OUTER, 0)
            self.exact[unit] = ExactUnit(network, values, np.arange(network.num_arcs))
            seconds = time.perf_counter() - start
            self.seconds += seconds
            self.reports[unit] = SolveReport(
                system=str(OUTER),
                block=0,
                variables=0,
                iterations=0,
                deviation=0.0,
                fallback=False,
                message=self.outer_method,
                truncation_error=0.0,
                grad_norm=0.0,
                seconds=seconds,
            )
        return targets

    # ----- convex systems ------------------------------------------------------------------
    def _system(self, unit: Unit) -> tuple[IntArray, SoftmaxSystem]:
        inst = self.instance
        parts = unit_parts(inst.p_local, self.selection.H_mask, self.outer, unit)
        factors = self._pair_factors if inst.n == 2 else None
        system = (
            None
            if self.explicit_sets and inst.n > 2
            else unit_system(inst.scheme, inst.n, inst.draft_rows, parts, factors)
        )
        if system is None:  # n >= 3: the exact groups of set masses
            members, weights = self._groups(unit, parts.tokens)
            system = ExplicitSystem(
                inst.q_local[parts.tokens],
                parts.targets,
                float(inst.q_local[parts.base].sum()),
                parts.slack,
                inst.n,
                members,
                weights,
            )
        return parts.tokens, system

    def _groups(self, unit: Unit, tokens: IntArray) -> tuple[IntArray, FloatArray]:
        """The unit's draft sets grouped by their variable tokens, with summed exact masses."""
        cols = self.instance.columns("sets")
        name, block = unit
        network = self._networks[name]
        if name == OUTER:
            blocks, active = self._outer_arc_blocks
            keep = np.unique(network.arc_columns()[active & (blocks == block)])
        else:
            keep = network.right
        position = np.full(self.instance.k + 1, -1, dtype=np.int64)
        position[tokens] = np.arange(tokens.shape[0])
        rows = np.sort(position[cols.members[keep]], axis=1)[:, ::-1]  # -1 padding last
        groups, inverse = np.unique(rows, axis=0, return_inverse=True)
        weights = np.bincount(inverse.ravel(), weights=cols.mass[keep], minlength=len(groups))
        real = (groups >= 0).any(axis=1)
        return np.ascontiguousarray(groups[real], dtype=np.int64), weights[real].astype(float)
