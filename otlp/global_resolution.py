"""Global resolution ([GR] §6, Algorithm 1): slices of the OT for i.i.d. drafts.

Per (p, q): H* by subset selection, the outer residual targets by the greedy polymatroid
algorithm (Theorem 6.2), then for a drafted omega only the system omega needs — the outer
system (Theorem 6.4) if some drafted token lies outside H*, else the inner one (Theorem 6.5)
— and the slice of the approximate OT of Eq. (18). Solved parameters are cached on the
plan, so further slices of the same (p, q) are free.

Two minimisers:

* ``"newton"`` (default) — no truncation: receipts and Hessians over *all* draft sets via
  exponential sums (:mod:`solvers.global_resolution.softmax_system`), damped Newton with the
  exact Hessian, and the outer system split into its tight-set blocks
  (:mod:`solvers.global_resolution.polymatroid`); blocks of one token are exact and free.
  A system's deviation is certified as ||grad||_1 plus the quadrature bound.
* ``"seed"`` — the seed's configuration (Appendix K): the smallest truncation T with
  eps_T <= tau (gamma_T <= tau), |T| capped at 50/20/10/10 for n = 2/3/4/5, grouped sets,
  L-BFGS-B for at most 25 iterations; deviation ||grad||_1 + 3 eps_T (3 gamma_T).

Each system may deviate by 5 tau (an outer block by its share of it), so the plan deviates
from p by at most 15 tau (L1) and from alpha* by at most 10 tau (Lemma 6.6). A unit (the
inner system or one outer block) that misses its budget within the iteration/time limits
falls back — and says so in its report — to the exact max-flow on its own network of §5.3:
the inner network, or the block's part of the outer network with the polymatroid targets
as source capacities, so the result stays consistent with the other units and Eq. (18).
Nothing is ever silently out of tolerance, and ``otlp.solve`` still verifies the
materialised plan.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from otlp.builders import BipartiteSystem, inner_system, outer_system
from otlp.columns import DraftColumns
from otlp.instance import Instance
from otlp.limits import check_size
from otlp.methods import register_method
from otlp.plan import TransportPlan, fit_columns
from otlp.subset import SubsetSelection
from otlp.subset_wor import QuadratureRangeError
from otlp.validation import canonical_name, positive_int, real_number
from otlp.verify import Tolerances
from solvers.global_resolution import (
    ALPHA_LIMIT,
    MinimizeResult,
    OuterTargets,
    SoftmaxSystem,
    lbfgs,
    newton,
)
from solvers.global_resolution.token import BUDGET_FACTOR, analyse, budget_share
from solvers.registry import get_backend

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

MINIMIZERS = ("newton", "seed")
SEED_T_LIMITS = {2: 50, 3: 20, 4: 10, 5: 10}  # [GR] Appendix K (10 beyond n = 5)
INNER, OUTER = "inner", "outer"
Unit = tuple[str, int | None]
# Below TAU_MIN the Newton certificate (quadrature error ~1e-8 relative) can never be met, so
# every unit would fall back, and the verifier's 15 tau approaches floating-point rounding.
TAU_MIN = 1e-10
GUARD_NODES = 64  # quadrature nodes assumed by the size guard (20-60 in practice)


def check_tau(tau: object) -> float:
    """tau as a float in [TAU_MIN, 1), or a ValueError naming it."""
    value = real_number("tau", tau, minimum=TAU_MIN)
    if not value < 1.0:
        raise ValueError(f"tau: must lie in [{TAU_MIN:g}, 1), got {value:g}")
    return value


# Max-flow on int64 capacities (scale 2^50 of the largest) rounds away flows below ~1e-15 of
# it; an outer column short by at most this much lost its flow to that rounding.
ROUNDING_SHORTFALL = 1e-12


def restore_rounded_outer_flow(
    network: BipartiteSystem, values: FloatArray, target_rows: FloatArray
) -> FloatArray:
    """Put back the flow that integer rounding took from saturated outer columns.

    Every column of the outer system is transported in full ([GR] Theorem 5.1), but a column
    of tiny mass (1e-300, subnormal) gets no flow from a max-flow on scaled int64 capacities,
    and its slice pi(.|omega) would sum to 0. A shortfall of at most ``ROUNDING_SHORTFALL`` is
    spread over the column's own arcs in proportion to their target rows (equally when those
    are all 0); the marginals move by no more than the rounding already lost.
    """
    if values.size == 0:
        return values
    cols = network.arc_columns()
    mass = network.columns.mass
    short = mass - np.bincount(cols, weights=values, minlength=mass.shape[0])
    fix = (short > 0) & (short <= ROUNDING_SHORTFALL)
    if not fix[cols].any():
        return values
    weight = target_rows[network.arc_tokens()]
    total = np.bincount(cols, weights=weight, minlength=mass.shape[0])
    arcs = np.bincount(cols, minlength=mass.shape[0]).astype(float)
    share = np.where(total[cols] > 0, weight / np.where(total > 0, total, 1.0)[cols], 0.0)
    share = np.where(total[cols] > 0, share, 1.0 / np.maximum(arcs[cols], 1.0))
    return values + np.where(fix[cols], short[cols] * share, 0.0)


# Beyond 64 drafts the exponential sums need ever more quadrature nodes and Newton stalls: on
# V <= 10, n = 64 takes <= 0.23 s per plan but n = 80 takes 3-14 s before falling back (and
# 171! overflows float64). Larger n is refused; the exact methods handle it.
MAX_DRAFTS = 64
# A unit whose convex solve hits one of these (masses at the edge of float64: a singular or
# non-finite Hessian, a quadrature out of range) is solved exactly instead, and says so.
NUMERICAL_FAILURES = (
    np.linalg.LinAlgError,
    OverflowError,
    FloatingPointError,
    QuadratureRangeError,
)


def check_unit_size(k: int, n: int) -> None:
    """Refuse a draft vocabulary whose one Newton evaluation would exceed ``otlp.limits``.

    An evaluation holds the Hessian's low-rank factor: (n - 1) rows per quadrature node
    (20-60 nodes in practice) over the k draft tokens ([GR] Appendix L), and costs O(k n^2) per
    node; without top-k on a large vocabulary that is seconds and gigabytes per token.
    """
    if n > MAX_DRAFTS:
        raise ValueError(
            f"n: global resolution handles at most {MAX_DRAFTS} drafts (beyond that its "
            f"quadrature and Newton steps stop being reliable or fast), got {n}; use "
            "method='maxflow_cs' for the exact OT"
        )
    check_size(
        f"global resolution over k = {k:,} draft tokens with n = {n} (pass top_k, e.g. "
        "top_k=1000, to restrict the draft): one Newton evaluation's Hessian factor",
        GUARD_NODES * max(n - 1, 1) * k,
    )


@dataclass(frozen=True)
class SolveReport:
    """How one unit was solved: the inner system, or one block of the outer system.

    ``variables`` is |T|, the number of alpha optimised (after the seed's truncation, whose
    eps_T or gamma_T is ``truncation_error``); ``deviation`` is the certified L1 deviation of
    the unit's receipts from its targets; ``fallback`` says it missed its budget and was
    solved exactly by max-flow instead (``seconds`` includes that).
    """

    system: str
    block: int | None
    variables: int
    truncation_error: float
    iterations: int
    grad_norm: float
    deviation: float
    fallback: bool
    seconds: float
    message: str


@dataclass(frozen=True)
class TokenReport:
    """The per-token report: what producing the slice for ``omega`` took.

    ``variables`` is |T| of the unit solved for it; ``seconds`` is the wall time of this
    call (H*, targets and solves included when they were not cached yet); ``cached`` says
    the unit had already been solved for an earlier slice of the same (p, q).
    """

    omega: tuple[int, ...]
    system: str
    block: int | None
    variables: int
    iterations: int
    grad_norm: float
    deviation: float
    fallback: bool
    seconds: float
    cached: bool
    message: str


@dataclass
class _Exact:
    """A unit solved exactly: arc values on its max-flow network ([GR] §5.3, App. F).

    ``arcs`` indexes the unit's arcs within the full outer or inner system's arc list.
    """

    network: BipartiteSystem
    values: FloatArray
    arcs: IntArray

    @cached_property
    def matrix(self) -> sp.csc_matrix:
        cols = self.network.columns
        return sp.csc_matrix(
            (self.values, (self.network.arc_tokens(), self.network.arc_columns())),
            shape=(cols.k, cols.count),
        )


class GlobalResolution:
    """The engine behind a global-resolution plan: per-(p, q) state and cached solutions.

    The units solved independently are the inner system, ``("inner", None)``, and each block
    b of the outer system, ``("outer", b)``.
    """

    SCHEMES: tuple[str, ...] = ("iid",)  # other schemes: otlp.global_resolution_schemes

    def __init__(
        self,
        inst: Instance,
        tau: float = 1e-3,
        *,
        minimizer: str = "newton",
        form: str = "sets",
        max_iter: int | None = None,
        time_budget: float | None = None,
        fallback: bool = True,
    ) -> None:
        if not isinstance(inst, Instance):
            raise ValueError(f"inst: expected an otlp.Instance, got {type(inst).__name__}")
        if inst.scheme not in self.SCHEMES and not (inst.n == 1 and "iid" in self.SCHEMES):
            raise ValueError(
                f"inst: {type(self).__name__} handles schemes {self.SCHEMES}, got {inst.scheme!r}"
            )
        tau = check_tau(tau)
        minimizer = canonical_name(minimizer, "minimizer")
        if minimizer not in MINIMIZERS:
            raise ValueError(f"minimizer: expected one of {MINIMIZERS}, got {minimizer!r}")
        if max_iter is not None:
            max_iter = positive_int("max_iter", max_iter, minimum=0)
        if time_budget is not None:
            time_budget = real_number(
                "time_budget", time_budget, minimum=0.0, exclusive_minimum=True
            )
        if not isinstance(fallback, bool):
            raise ValueError(f"fallback: expected True or False, got {fallback!r}")
        check_unit_size(inst.k, inst.n)
        self.instance = inst
        self.tau = float(tau)
        self.minimizer = minimizer
        self.form = form
        self.max_iter = (50 if minimizer == "newton" else 25) if max_iter is None else max_iter
        self.time_budget = time_budget
        self.allow_fallback = fallback
        self.reports: dict[Unit, SolveReport] = {}
        self.exact: dict[Unit, _Exact] = {}
        self.seconds = 0.0
        self._alpha_outer = np.zeros(inst.k)
        self._inner_weights = np.zeros(inst.k)

    # ----- shared per-(p, q) quantities ---------------------------------------------------
    @cached_property
    def _analysis(self) -> tuple[Any, ...]:
        """H* and the outer system by the fused path's kernel (one sort by q/p)."""
        inst = self.instance
        return analyse(
            np.ascontiguousarray(inst.p_local), np.ascontiguousarray(inst.q_local), inst.n
        )

    @cached_property
    def selection(self) -> SubsetSelection:
        """alpha* and H* ([GR] Theorem 3.1, prefix rule for i.i.d. drafts).

        When min psi is 0 up to rounding (alpha* = 1), the empty set is optimal too and is
        used: with H* nonempty the inner system would have no slack and Eq. (18) no residual
        rows to put its (approximation) residual on.
        """
        order, size, psi_min = self._analysis[:3]
        mask = np.zeros(self.instance.k, dtype=bool)
        mask[order[:size]] = True
        return SubsetSelection(1.0 + psi_min, mask, self.instance.tokens[mask], psi_min, "prefix")

    @cached_property
    def outer(self) -> OuterTargets:
        """Theorem 6.2 targets; one block for the seed's minimiser, tight-set blocks else."""
        order, size, _, targets, starts, ends, bases, block_of = self._analysis
        outside = order[size:][::-1].copy()
        outer = OuterTargets(outside, targets, starts, ends, bases, block_of)
        return outer if self.minimizer == "newton" else outer.merged()

    @cached_property
    def row_residual(self) -> FloatArray:
        """Eq. (18) residual rows: p(i) - p_i outside H*, 0 in H*, the outside-V0 mass last."""
        inst = self.instance
        out = np.zeros(inst.k + 1)
        outer = self.outer
        out[outer.order] = np.maximum(inst.p_local[outer.order] - outer.targets, 0.0)
        out[-1] = inst.p_outside
        return out

    def units(self) -> list[Unit]:
        """Every unit of this (p, q): the outer blocks, then the inner system if H* ≠ ∅."""
        blocks: list[Unit] = [(OUTER, b) for b in range(self.outer.num_blocks)]
        return blocks + ([(INNER, None)] if self.selection.H_mask.any() else [])

    def unit_of(self, local: IntArray) -> Unit:
        """The unit a drafted tuple needs: the earliest outer block it meets, else inner."""
        blocks = self.outer.block_of[local]
        blocks = blocks[blocks >= 0]
        return (INNER, None) if blocks.size == 0 else (OUTER, int(blocks.min()))

    # ----- solving units ------------------------------------------------------------------
    def solve(self, unit: Unit) -> SolveReport:
        """Solve one unit (cached). If it misses its budget, solve it exactly by max-flow."""
        if unit not in self.reports:
            tokens, system = self._system(unit)
            alpha, report = self._solve_unit(unit, system)
            if unit[0] == OUTER:
                self._alpha_outer[tokens] = alpha - alpha.max() if alpha.size else alpha
            else:
                self._inner_weights[tokens] = np.exp(np.minimum(alpha, ALPHA_LIMIT))
            self.reports[unit] = report
            self.seconds += report.seconds
            if report.fallback:
                self._solve_exactly(unit)
        return self.reports[unit]

    def solve_all(self) -> None:
        """Every unit (what materialising the plan needs)."""
        for unit in self.units():
            self.solve(unit)

    def _system(self, unit: Unit) -> tuple[IntArray, SoftmaxSystem]:
        inst = self.instance
        name, block = unit
        if name == OUTER:
            assert block is not None
            tokens = self.outer.block_tokens(block)
            targets, base = self.outer.block_targets(block), float(self.outer.bases[block])
            return tokens, SoftmaxSystem(inst.q_local[tokens], targets, base, 0.0, inst.n)
        inside = self.selection.H_mask
        tokens = np.flatnonzero(inside & (inst.p_local > 0)).astype(np.int64)
        base = float(inst.q_local[inside & (inst.p_local <= 0)].sum())
        return tokens, SoftmaxSystem(inst.q_local[tokens], inst.p_local[tokens], base, 1.0, inst.n)

    def _minimize(self, system: SoftmaxSystem, stop: float) -> MinimizeResult:
        if self.minimizer == "seed":
            return lbfgs(system, stop, max_iter=self.max_iter)
        return newton(system, stop, max_iter=self.max_iter, time_budget=self.time_budget)

    def _budget_share(self, block: int) -> float:
        """The part of the outer system's 5 tau block ``block`` may use (see budget_share)."""
        outer = self.outer
        return float(budget_share(outer.targets, outer.starts, outer.ends, block))

    def _seed_truncation(self, system: SoftmaxSystem, inner: bool) -> tuple[IntArray, float]:
        """The seed's T: fewest variables (by decreasing q) with gamma_T or eps_T <= tau.

        Outer (Theorem 6.4): eps_T = 1 - (q(H*) + q(T))^n, with ``system.base`` = q(H*).
        Inner (Theorem 6.5): gamma_T = q(H*)^n - q(T)^n, q(H*) = ``base`` + Σ q.
        """
        n = self.instance.n
        order = np.argsort(-system.q, kind="stable")
        prefix = np.concatenate([[0.0], np.cumsum(system.q[order])])
        if inner:
            error = (system.base + prefix[-1]) ** n - prefix**n
        else:
            error = 1.0 - np.minimum(system.base + prefix, 1.0) ** n
        error = np.maximum(error, 0.0)
        size = int(np.argmax(error <= self.tau)) if (error <= self.tau).any() else order.size
        return np.sort(order[:size]), float(error[size])

    def _solve_unit(self, unit: Unit, system: SoftmaxSystem) -> tuple[FloatArray, SolveReport]:
        """alpha over the unit's variables and its report (a fallback is flagged, not run)."""
        start = time.perf_counter()
        name, block = unit
        share = self._budget_share(block) if block is not None else 1.0
        budget = BUDGET_FACTOR * self.tau * share
        alpha = np.zeros(system.size)
        if system.size == 0 or (system.size == 1 and system.gauge_free):
            return alpha, SolveReport(
                name, block, system.size, 0.0, 0, 0.0, 0.0, False, 0.0, "exact"
            )
        truncation_error, keep, message = 0.0, np.arange(system.size), ""
        if self.minimizer == "seed":
            n = self.instance.n
            keep, truncation_error = self._seed_truncation(system, name == INNER)
            base = system.base if name == OUTER else 0.0
            system = SoftmaxSystem(system.q[keep], system.targets[keep], base, system.slack, n)
            limit = SEED_T_LIMITS.get(n, 10)
            if keep.size > limit:
                message = f"|T| = {keep.size} exceeds the seed's limit {limit}"
        if message:
            iterations, grad_norm, deviation = 0, float("inf"), float("inf")
        else:
            # Newton: the seed's "stop at 5 tau", on the certified deviation (no truncation
            # term); seed: Theorem 6.4 with eps = eps_T = tau, so that 2 tau + 3 eps_T <= 5 tau
            stop = budget if self.minimizer == "newton" else 2.0 * self.tau
            try:
                result = self._minimize(system, stop)
            except NUMERICAL_FAILURES as exc:  # the unit falls back to the exact max-flow
                result = MinimizeResult(
                    alpha[keep], 0, 0, math.inf, math.inf, False, f"numerical failure: {exc}", 0.0
                )
            alpha[keep] = result.alpha
            iterations, grad_norm, message = result.iterations, result.grad_norm, result.message
            deviation = result.deviation + 3.0 * truncation_error
        fallback = not deviation <= budget
        if fallback:
            message = f"{message}; deviation {deviation:.3g} > budget {budget:.3g}"
        seconds = time.perf_counter() - start
        report = SolveReport(
            name,
            block,
            system.size,
            truncation_error,
            iterations,
            grad_norm,
            deviation,
            fallback,
            seconds,
            message,
        )
        return alpha, report

    # ----- exact fallback -----------------------------------------------------------------
    @cached_property
    def _networks(self) -> dict[str, BipartiteSystem]:
        """The outer and inner networks of §5.3 over the columns of ``form``."""
        inst, mask = self.instance, self.selection.H_mask
        return {
            OUTER: outer_system(inst, mask, self.form),
            INNER: inner_system(inst, mask, self.form),
        }

    @cached_property
    def _outer_arc_blocks(self) -> tuple[IntArray, NDArray[np.bool_]]:
        """Each outer arc's token block, and whether it is the earliest block of its column."""
        network = self._networks[OUTER]
        blocks = self.outer.block_of[network.arc_tokens()]
        cols = network.arc_columns()
        earliest = np.full(network.columns.count, np.iinfo(np.int64).max)
        np.minimum.at(earliest, cols, blocks)
        return blocks, blocks == earliest[cols]

    def _unit_network(self, unit: Unit) -> tuple[BipartiteSystem, IntArray]:
        """The unit's own network and its arcs' positions in the full system's arc list.

        An outer block keeps the columns whose earliest block it is and the arcs to its own
        tokens; its source capacities are the polymatroid targets, so the exact flow meets
        them and stays consistent with the other units and with Eq. (18).
        """
        name, block = unit
        network = self._networks[name]
        if name == INNER:
            return network, np.arange(network.num_arcs)
        blocks, active = self._outer_arc_blocks
        arcs = np.flatnonzero(active & (blocks == block))
        tokens, cols = network.arc_tokens()[arcs], network.arc_columns()[arcs]
        assert block is not None
        left = self.outer.block_tokens(block)
        position = np.full(self.instance.k, -1, dtype=np.int64)
        position[left] = np.arange(left.shape[0])
        right, arc_right = np.unique(cols, return_inverse=True)
        sub = BipartiteSystem(
            network.columns,
            left,
            self.outer.block_targets(block),
            right,
            network.columns.mass[right],
            position[tokens],
            arc_right.astype(np.int64),
        )
        return sub, arcs

    def _solve_exactly(self, unit: Unit) -> _Exact:
        """Max-flow (OR-Tools) on the unit's network; the plan says so in its reports."""
        if not self.allow_fallback:
            raise RuntimeError(
                f"global resolution: unit {unit} missed its budget at tau = {self.tau:g} and "
                "fallback=False"
            )
        start = time.perf_counter()
        network, arcs = self._unit_network(unit)
        values = np.zeros(network.num_arcs)
        if network.num_arcs:
            result = get_backend("ortools-maxflow").solve(network.to_maxflow())
            values = network.arc_values_from_flow(result.primal)
        if unit[0] == OUTER:
            values = restore_rounded_outer_flow(network, values, self.instance.target_rows)
        self.exact[unit] = _Exact(network, values, arcs)
        seconds = time.perf_counter() - start
        self.seconds += seconds
        failed = self.reports[unit]
        self.reports[unit] = dataclasses.replace(
            failed,
            seconds=failed.seconds + seconds,
            message=f"{failed.message}; solved exactly by max-flow in {seconds:.3g} s",
        )
        return self.exact[unit]

    # ----- slices -------------------------------------------------------------------------
    def _residual_share(self) -> FloatArray:
        total = float(self.row_residual.sum())
        return self.row_residual / total if total > 0 else np.zeros_like(self.row_residual)

    def local_slice(self, omega: ArrayLike) -> tuple[FloatArray, TokenReport]:
        """pi(. | omega) over the draft vocabulary plus the outside row, and its report."""
        start = time.perf_counter()
        inst = self.instance
        local = inst.to_local(omega)
        unit = self.unit_of(local)
        cached = unit in self.reports
        report = self.solve(unit)
        if unit in self.exact:
            out = self._exact_slice(unit, local)
        else:
            out = np.zeros(inst.k + 1)
            tokens = np.unique(local)
            if unit[0] == OUTER:
                members = tokens[self.outer.block_of[tokens] == unit[1]]
                alpha = self._alpha_outer[members]
                weights = np.exp(alpha - alpha.max())
                out[members] = weights / weights.sum()
            else:
                weights = self._inner_weights[tokens]
                denominator = 1.0 + float(weights.sum())
                out[tokens] = weights / denominator
                out += self._residual_share() / denominator
        token_report = TokenReport(
            tuple(int(t) for t in np.atleast_1d(omega)),
            unit[0],
            unit[1],
            report.variables,
            report.iterations,
            report.grad_norm,
            report.deviation,
            report.fallback,
            time.perf_counter() - start,
            cached,
            report.message,
        )
        return out, token_report

    def _exact_slice(self, unit: Unit, local: IntArray) -> FloatArray:
        exact = self.exact[unit]
        cols = exact.network.columns
        column = int(cols.indices_of(local[None, :])[0])
        out = np.zeros(self.instance.k + 1)
        out[:-1] = exact.matrix[:, column].toarray().ravel() / float(cols.mass[column])
        if unit[0] == INNER:
            out += max(1.0 - float(out.sum()), 0.0) * self._residual_share()
        return out

    # ----- the whole plan -----------------------------------------------------------------
    def arc_values(self) -> tuple[DraftColumns, IntArray, IntArray, FloatArray]:
        """Every S entry of Eq. (18) over the columns of ``form`` (solves what is missing)."""
        self.solve_all()
        columns = self.instance.columns(self.form)
        parts = []
        for name in (OUTER, INNER):
            network = self._networks[name]
            tokens, cols = network.arc_tokens(), network.arc_columns()
            values = self._softmax_values(name, tokens, cols, columns)
            for unit, exact in self.exact.items():
                if unit[0] == name:
                    values[exact.arcs] = exact.values
            parts.append((tokens, cols, values))
        tokens = np.concatenate([t for t, _, _ in parts])
        cols = np.concatenate([c for _, c, _ in parts])
        values = np.concatenate([v for _, _, v in parts])
        return columns, tokens, cols, values

    def _softmax_values(
        self, name: str, tokens: IntArray, cols: IntArray, columns: DraftColumns
    ) -> FloatArray:
        """Eqs. (14)/(17): the softmax entries of the outer blocks or of the inner system."""
        if tokens.size == 0:
            return np.zeros(0)
        if name == INNER:
            weights = self._inner_weights[tokens]
            denominator = 1.0 + np.bincount(cols, weights=weights, minlength=columns.count)
            return columns.mass[cols] * weights / denominator[cols]
        _, active = self._outer_arc_blocks
        alpha = np.where(active, self._alpha_outer[tokens], -np.inf)
        top = np.full(columns.count, -np.inf)
        np.maximum.at(top, cols, alpha)
        weights = np.exp(alpha - top[cols])  # a stable softmax per column
        denominator = np.bincount(cols, weights=weights, minlength=columns.count).astype(float)
        return columns.mass[cols] * weights / denominator[cols]

    def materialize(self) -> tuple[DraftColumns, sp.csc_matrix, FloatArray, FloatArray]:
        """The plan's columns, explicit S, and the Eq. (18) residual vectors."""
        columns, tokens, cols, values = self.arc_values()
        explicit = sp.csc_matrix(
            (values, (tokens, cols)), shape=(self.instance.k + 1, columns.count)
        )
        explicit.sum_duplicates()
        col_residual = fit_columns(explicit, columns.mass)
        return columns, explicit, self.row_residual.copy(), col_residual

    def deviation_bounds(self) -> dict[str, float]:
        """Lemma 6.6 from the certified deviations of the solved units (0 where exact)."""
        deviation = {OUTER: 0.0, INNER: 0.0}
        for unit, report in self.reports.items():
            if unit not in self.exact:
                deviation[unit[0]] += report.deviation
        outer, inner = deviation[OUTER], deviation[INNER]
        return {"target_l1": outer + 2.0 * inner, "acceptance": outer + inner}


_LAZY_FIELDS = frozenset({"columns", "explicit", "row_residual", "col_residual"})


class GlobalResolutionPlan(TransportPlan):
    """A lazily evaluated :class:`TransportPlan` backed by a :class:`GlobalResolution` engine.

    :meth:`local_slice`, :meth:`slice` and :meth:`sample` solve only the unit a drafted omega
    needs. The explicit entries (``columns``, ``explicit``, ``row_residual``,
    ``col_residual``) are materialised on first access — e.g. by :func:`otlp.verify` — which
    solves everything, so the verifier checks the full plan.
    """

    def __init__(self, engine: GlobalResolution) -> None:  # fields filled lazily
        self.engine = engine
        self.instance = engine.instance
        self.method = "global_resolution"
        self.wall_time = 0.0
        self.messages: list[str] = []
        self.info: dict[str, Any] = {
            "tolerances": Tolerances.global_resolution(engine.tau),
            "tau": engine.tau,
            "minimizer": engine.minimizer,
        }
        self.token_reports: list[TokenReport] = []

    def __getattr__(self, name: str) -> Any:
        if name in _LAZY_FIELDS and "engine" in self.__dict__:
            self._materialize()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def _materialize(self) -> None:
        columns, explicit, row_residual, col_residual = self.engine.materialize()
        self.columns, self.explicit = columns, explicit
        self.row_residual, self.col_residual = row_residual, col_residual
        self.wall_time = self.engine.seconds
        self.info["units"] = dict(self.engine.reports)
        self.info["fallback"] = [unit for unit in self.engine.units() if unit in self.engine.exact]
        self.info["deviation_bounds"] = self.engine.deviation_bounds()
        self.info["H"] = self.engine.selection.H

    def local_slice(self, omega: ArrayLike) -> FloatArray:
        return self.token_report(omega)[0]

    def token_report(self, omega: ArrayLike) -> tuple[FloatArray, TokenReport]:
        """The slice over the draft vocabulary plus the outside row, and the token report."""
        out, report = self.engine.local_slice(omega)
        self.token_reports.append(report)
        self.wall_time = self.engine.seconds
        return out, report


@register_method(
    "global_resolution",
    "polymatroid targets + convex solvers (§6; i.i.d., without replacement, 2 independent), "
    "per-token slices, exact fallback",
)
def solve_global_resolution(
    inst: Instance,
    form: str = "sets",
    *,
    tau: float = 1e-3,
    minimizer: str = "newton",
    max_iter: int | None = None,
    time_budget: float | None = None,
    fallback: bool = True,
) -> GlobalResolutionPlan:
    """A lazy global-resolution plan (nothing is solved until a slice or entry is needed)."""
    # One draft is one draw from q under every scheme: the i.i.d. engine serves it.
    if isinstance(inst, Instance) and inst.scheme != "iid" and inst.n > 1:
        from otlp.global_resolution_schemes import scheme_engine

        engine_class: Any = scheme_engine
    else:
        engine_class = GlobalResolution
    engine = engine_class(
        inst,
        tau,
        minimizer=minimizer,
        form=form,
        max_iter=max_iter,
        time_budget=time_budget,
        fallback=fallback,
    )
    return GlobalResolutionPlan(engine)
