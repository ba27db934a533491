"""The global-resolution engine for i.i.d. drafts ([GR] §6, Algorithm 1).

Per (p, q): H* by subset selection, the outer residual targets by the greedy polymatroid
algorithm (Theorem 6.2), then for a drafted omega only the unit omega needs — the earliest
outer block it meets (Theorem 6.4), else the inner system (Theorem 6.5) — and the slice of
the approximate OT of Eq. (18). Solved parameters are cached on the engine, so further
slices of the same (p, q) are free. Other draft schemes replace the scheme-dependent steps
in :mod:`otlp.global_resolution.schemes`; :func:`otlp.global_resolution.method.make_engine`
picks the engine.

A slice (:meth:`GlobalResolution.local_slice`, behind ``plan.token_report`` and
``plan.local_slice``) is one call with one deadline, ``time_budget`` seconds from its entry
(:mod:`otlp.solvers.global_resolution.budget`): H* and the outer targets, Newton (its initial
evaluation, then each iteration) and the exact max-flow on the unit's own network each start
only if their estimated seconds fit what is left; where one cannot, or where the exact
network is over ``otlp.limits``, the token comes from the scheme's lossless rule
(:mod:`otlp.global_resolution.rule_fallback`) and its report says so. A unit left unsolved
for lack of time is tried again by the next call, with that call's budget.
"""

from __future__ import annotations

import dataclasses
import math
import time
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from otlp.args import canonical_name, positive_int
from otlp.builders import BipartiteSystem, inner_system, outer_system
from otlp.columns import DraftColumns
from otlp.errors import ProblemTooLarge
from otlp.global_resolution.constants import (
    BUDGET_FACTOR,
    INNER,
    MINIMIZERS,
    NUMERICAL_FAILURES,
    OUTER,
    SEED_T_LIMITS,
    System,
    Unit,
    check_tau,
    check_time_budget,
    check_unit_size,
)
from otlp.global_resolution.exact import (
    ExactUnit,
    block_network,
    full_arcs,
    max_flow_values,
    outer_arc_blocks,
    restore_rounded_outer_flow,
    unit_columns,
    unit_network,
)
from otlp.global_resolution.reports import SolveReport, TokenReport
from otlp.global_resolution.rule_fallback import rule_token
from otlp.instance import Instance
from otlp.limits import DEFAULT_TIME_BUDGET
from otlp.plan import carry_stranded_columns, fit_columns, negligible_column_slice
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution import (
    ALPHA_LIMIT,
    MinimizeResult,
    OuterTargets,
    SoftmaxSystem,
    lbfgs,
    newton,
)
from otlp.solvers.global_resolution.budget import (
    NO_DEADLINE,
    Deadline,
    OutOfTime,
    blas_pinned,
    evaluation_seconds,
    require,
    setup_seconds,
)
from otlp.solvers.global_resolution.token import analyse, budget_share, slice_of
from otlp.subset import SubsetSelection


class GlobalResolution:
    """The engine behind a global-resolution plan: per-(p, q) state and cached solutions.

    The units solved independently are the inner system, ``(INNER, None)``, and each block
    b of the outer system, ``(OUTER, b)`` (:class:`~otlp.global_resolution.constants.System`
    members equal the strings ``"inner"`` and ``"outer"``).
    """

    SCHEMES: tuple[str, ...] = ("iid",)  # other schemes: otlp.global_resolution.schemes

    def __init__(
        self,
        inst: Instance,
        tau: float = 1e-3,
        *,
        minimizer: str = "newton",
        form: str = "sets",
        max_iter: int | None = None,
        time_budget: float | None = DEFAULT_TIME_BUDGET,
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
        time_budget = check_time_budget(time_budget)
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
        self.exact: dict[Unit, ExactUnit] = {}
        # Units whose solve missed its budget and whose exact network is over otlp.limits:
        # their failed report (their tokens come from the scheme's lossless rule).
        self.over_limits: dict[Unit, SolveReport] = {}
        self.seconds = 0.0
        self._alpha = np.zeros(inst.k)  # each solved unit's alpha, per variable token
        self._deadline = NO_DEADLINE  # the slice call in progress (none outside one)
        # H* or the outer targets over otlp.limits (two independent drafts whose outer
        # max-flow is too large): every token comes from the scheme's lossless rule.
        self._setup_refused: SolveReport | None = None

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

    @cached_property
    def _inner_variables(self) -> NDArray[np.bool_]:
        """The inner system's variables: the tokens of H* with p > 0."""
        return self.selection.H_mask & (self.instance.p_local > 0)

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
        """Solve one unit (cached). If it misses its budget, solve it exactly by max-flow;
        if that network is over ``otlp.limits``, the unit is recorded in ``over_limits`` and
        :class:`~otlp.errors.ProblemTooLarge` raised; if the max-flow cannot fit the slice
        call's deadline, :class:`~otlp.solvers.global_resolution.budget.OutOfTime` is raised and
        the unit stays unsolved (a later call tries it again)."""
        if unit not in self.reports:
            tokens, system = self._system(unit)
            with blas_pinned(system.size):
                alpha, report = self._solve_unit(unit, system)
            self._alpha[tokens] = alpha
            self.reports[unit] = report
            self.seconds += report.seconds
        report = self.reports[unit]
        if report.fallback and unit not in self.exact:
            try:
                self._solve_exactly(unit)
            except ProblemTooLarge as exc:
                del self.reports[unit]
                self.over_limits[unit] = dataclasses.replace(
                    report, message=f"{report.message}; exact fallback: {exc}"
                )
                raise
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
        tokens = np.flatnonzero(self._inner_variables).astype(np.int64)
        base = float(inst.q_local[inside & (inst.p_local <= 0)].sum())
        return tokens, SoftmaxSystem(inst.q_local[tokens], inst.p_local[tokens], base, 1.0, inst.n)

    def _time_left(self) -> float | None:
        """A convex solve's time budget: what is left of the slice call's deadline, else
        ``time_budget`` (a unit solved for the whole plan)."""
        return self._deadline.seconds() if self._deadline.limited else self.time_budget

    def _evaluation_seconds(self, system: SoftmaxSystem) -> float:
        """Estimated seconds of one evaluation of a unit's system (before Newton starts)."""
        return evaluation_seconds(system.size, self.instance.n, False)

    def _minimize(self, system: SoftmaxSystem, stop: float) -> MinimizeResult:
        if self.minimizer == "seed":
            return lbfgs(system, stop, max_iter=self.max_iter)
        return newton(system, stop, max_iter=self.max_iter, time_budget=self._time_left())

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
                system=str(name),
                block=block,
                variables=system.size,
                iterations=0,
                deviation=0.0,
                fallback=False,
                message="exact",
                truncation_error=0.0,
                grad_norm=0.0,
                seconds=0.0,
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
                require(self._deadline, self._evaluation_seconds(system), "Newton")
                result = self._minimize(system, stop)
            except OutOfTime as exc:  # not started: the unit falls back
                result = MinimizeResult(alpha[keep], 0, 0, math.inf, math.inf, False, str(exc), 0.0)
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
            system=str(name),
            block=block,
            variables=system.size,
            iterations=iterations,
            deviation=deviation,
            fallback=fallback,
            message=message,
            truncation_error=truncation_error,
            grad_norm=grad_norm,
            seconds=seconds,
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
        return outer_arc_blocks(self._networks[OUTER], self.outer)

    def _unit_network(self, unit: Unit) -> tuple[BipartiteSystem, IntArray | None]:
        """The unit's own network and its arcs' positions in the full system's arc list.

        Over sets, only the unit's own columns are built (:func:`unit_columns`), so a unit's
        fallback never pays for the whole outer or inner system; its arcs are placed in the
        full system only if the plan is materialised (None until then).
        """
        name, block = unit
        if self.form == "sets":
            inst, outer = self.instance, self.outer
            if name == INNER:
                inside = self.selection.H_mask
                left = np.flatnonzero(inside).astype(np.int64)
                columns = unit_columns(inst, inside, None, self._deadline)
                return unit_network(columns, left, inst.p_local[left], inst.k), None
            assert block is not None
            allowed = (outer.block_of < 0) | (outer.block_of >= block)
            columns = unit_columns(inst, allowed, outer.block_of == block, self._deadline)
            left = outer.block_tokens(block)
            return unit_network(columns, left, outer.block_targets(block), inst.k), None
        network = self._networks[name]
        if name == INNER:
            return network, np.arange(network.num_arcs)
        assert block is not None
        return block_network(network, self.outer, block, self._outer_arc_blocks, self.instance.k)

    def _solve_exactly(self, unit: Unit) -> ExactUnit:
        """Max-flow (OR-Tools) on the unit's network; the plan says so in its reports."""
        if not self.allow_fallback:
            raise RuntimeError(
                f"global resolution: unit {unit} missed its budget at tau = {self.tau:g} and "
                "fallback=False"
            )
        start = time.perf_counter()
        network, arcs = self._unit_network(unit)
        values = max_flow_values(network)
        if unit[0] == OUTER:
            values = restore_rounded_outer_flow(network, values, self.instance.target_rows)
        self.exact[unit] = ExactUnit(network, values, arcs, own_columns=arcs is None)
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

    def local_slice(
        self, omega: ArrayLike, deadline: Deadline | None = None
    ) -> tuple[FloatArray, TokenReport]:
        """pi(. | omega) over the draft vocabulary plus the outside row, and its report.

        ``deadline``: the caller's (default: ``time_budget`` seconds from now; see the
        module docstring)."""
        start = time.perf_counter()
        self._deadline = Deadline.after(self.time_budget) if deadline is None else deadline
        try:
            return self._slice(omega, start)
        finally:
            self._deadline = NO_DEADLINE

    def _set_up(self) -> None:
        """H* and the outer targets, if their estimated seconds fit the call's deadline."""
        if "outer" not in self.__dict__:
            inst = self.instance
            require(self._deadline, setup_seconds(inst.scheme, inst.k, inst.n), "H* and targets")
            _ = self.outer

    def _slice(self, omega: ArrayLike, start: float) -> tuple[FloatArray, TokenReport]:
        inst = self.instance
        local = inst.to_local(omega)
        if self._setup_refused is not None:
            return self._rule_slice(omega, local, start, True, self._setup_refused)
        try:
            self._set_up()
        except (OutOfTime, ProblemTooLarge) as exc:  # no unit to solve: the rule's token
            failed = _unsolved(str(exc))
            if isinstance(exc, ProblemTooLarge):
                self._setup_refused = failed
            return self._rule_slice(omega, local, start, False, failed)
        unit = self.unit_of(local)
        cached = unit in self.reports or unit in self.over_limits
        if unit in self.over_limits:
            return self._rule_slice(omega, local, start, cached, self.over_limits[unit])
        try:
            report = self.solve(unit)
        except ProblemTooLarge:
            if unit not in self.over_limits:
                raise  # not the unit's exact fallback
            return self._rule_slice(omega, local, start, cached, self.over_limits[unit])
        except OutOfTime as exc:  # the exact fallback does not fit the time left
            failed = self.reports[unit]
            late = dataclasses.replace(failed, message=f"{failed.message}; {exc}")
            return self._rule_slice(omega, local, start, cached, late)
        if unit in self.exact:
            out = self._exact_slice(unit, local)
        else:
            block = -1 if unit[1] is None else unit[1]
            out = slice_of(
                self._alpha,
                self._inner_variables,
                self.outer.block_of,
                self.row_residual,
                local,
                block,
            )
        token_report = TokenReport.of_unit(
            report,
            omega=tuple(int(t) for t in np.atleast_1d(omega)),
            seconds=time.perf_counter() - start,
            cached=cached,
            time_budget=self.time_budget,
        )
        return out, token_report

    def _rule_slice(
        self, omega: ArrayLike, local: IntArray, start: float, cached: bool, failed: SolveReport
    ) -> tuple[FloatArray, TokenReport]:
        """The slice of the scheme's lossless rule for a token whose unit (report ``failed``)
        is over the limits or out of time (:mod:`otlp.global_resolution.rule_fallback`), and
        its report."""
        alpha_star = self.selection.alpha_star if "selection" in self.__dict__ else None
        found = rule_token(self.instance, local, alpha_star, self._deadline)
        report = TokenReport.of_unit(
            dataclasses.replace(failed, message=f"{failed.message}; token by {found.rule}"),
            omega=tuple(int(t) for t in np.atleast_1d(omega)),
            seconds=time.perf_counter() - start,
            cached=cached,
            time_budget=self.time_budget,
            fallback_rule=found.rule,
            acceptance_lost=found.acceptance_lost,
        )
        return found.probs, report

    def _exact_slice(self, unit: Unit, local: IntArray) -> FloatArray:
        exact = self.exact[unit]
        cols = exact.network.columns
        column = exact.column(local)
        mass = float(cols.mass[column])
        if not mass > 0:  # a possible draft whose mass underflowed: Eq. (3)'s residual only
            return negligible_column_slice(self.row_residual, self.instance.target_rows)
        out = np.zeros(self.instance.k + 1)
        out[:-1] = exact.matrix[:, column].toarray().ravel() / mass
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
                    if exact.arcs is None:
                        exact.arcs = full_arcs(exact.network, network)
                    values[exact.arcs] = exact.values
            parts.append((tokens, cols, values))
        tokens = np.concatenate([t for t, _, _ in parts])
        cols = np.concatenate([c for _, c, _ in parts])
        values = np.concatenate([v for _, _, v in parts])
        return columns, tokens, cols, values

    def _softmax_values(
        self, name: System, tokens: IntArray, cols: IntArray, columns: DraftColumns
    ) -> FloatArray:
        """Eqs. (14)/(17): the softmax entries of the outer blocks or of the inner system."""
        if tokens.size == 0:
            return np.zeros(0)
        if name == INNER:
            alpha = np.minimum(self._alpha[tokens], ALPHA_LIMIT)
            weights = np.where(self._inner_variables[tokens], np.exp(alpha), 0.0)
            denominator = 1.0 + np.bincount(cols, weights=weights, minlength=columns.count)
            return columns.mass[cols] * weights / denominator[cols]
        _, active = self._outer_arc_blocks
        alpha = np.where(active, self._alpha[tokens], -np.inf)
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
        rows = carry_stranded_columns(
            self.row_residual.copy(), col_residual, self.instance.target_rows
        )
        return columns, explicit, rows, col_residual

    def deviation_bounds(self) -> dict[str, float]:
        """Lemma 6.6 from the certified deviations of the solved units (0 where exact)."""
        deviation = {OUTER: 0.0, INNER: 0.0}
        for unit, report in self.reports.items():
            if unit not in self.exact:
                deviation[unit[0]] += report.deviation
        outer, inner = deviation[OUTER], deviation[INNER]
        return {"target_l1": outer + 2.0 * inner, "acceptance": outer + inner}


def _unsolved(message: str) -> SolveReport:
    """The report of a token that reached no unit (H* or the outer targets not computed)."""
    return SolveReport(
        system=None,
        block=None,
        variables=0,
        iterations=0,
        deviation=math.inf,
        fallback=True,
        message=message,
        truncation_error=0.0,
        grad_norm=math.inf,
        seconds=0.0,
    )
