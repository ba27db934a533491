"""Global resolution ([GR] §6, Algorithm 1): slices of the approximate OT, per token.

Per (p, q): H* by subset selection, the outer residual targets by the greedy polymatroid
algorithm (Theorem 6.2), then for a drafted omega only the system omega needs — the outer
system (Theorem 6.4) if some drafted token lies outside H*, else the inner one (Theorem 6.5)
— and the slice of the approximate OT of Eq. (18). Solved parameters are cached on the
plan, so further slices of the same (p, q) are free.

Two minimisers:

* ``"newton"`` (default) — no truncation: receipts and Hessians over *all* draft sets via
  exponential sums (:mod:`otlp.solvers.global_resolution.softmax_system`), damped Newton with the
  exact Hessian, and the outer system split into its tight-set blocks
  (:mod:`otlp.solvers.global_resolution.polymatroid`); blocks of one token are exact and free.
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

The package, one module per job: :mod:`.method` (the ``global_resolution`` method and the
engine for a scheme), :mod:`.iid` (i.i.d. drafts), :mod:`.schemes` (without replacement,
two independent drafts), :mod:`.exact` (the per-unit max-flow fallback), :mod:`.plan` (the
lazy plan), :mod:`.reports` and :mod:`.constants`; a decoder's rows enter by :mod:`.rows`
(:class:`~otlp.global_resolution.rows.GlobalResolutionRows`: the compiled i.i.d. batch of
:mod:`.iid_rows`, the fused scheme rows of :mod:`.scheme_rows` and :mod:`.fused`, the chain of
:mod:`.row_fallback` and :mod:`.rule_fallback` for a row they cannot certify). The compiled
kernels, numeric only, are in :mod:`otlp.solvers.global_resolution`; the fused per-token
decoder path is :mod:`otlp.solvers.global_resolution.token`.
"""

from otlp.global_resolution.constants import (
    BUDGET_FACTOR,
    GUARD_NODES,
    INNER,
    MAX_DRAFTS,
    MINIMIZERS,
    NUMERICAL_FAILURES,
    OUTER,
    PSI_TIE,
    ROUNDING_SHORTFALL,
    SEED_T_LIMITS,
    TAU_MIN,
    System,
    Unit,
    check_tau,
    check_time_budget,
    check_unit_size,
)
from otlp.global_resolution.exact import ExactUnit, restore_rounded_outer_flow
from otlp.global_resolution.iid import GlobalResolution
from otlp.global_resolution.method import make_engine, solve_global_resolution
from otlp.global_resolution.plan import GlobalResolutionPlan
from otlp.global_resolution.reports import SolveReport, TokenReport
from otlp.global_resolution.scheme_parts import chain_targets
from otlp.global_resolution.schemes import SCHEMES, SchemeGlobalResolution
from otlp.limits import DEFAULT_TIME_BUDGET

__all__ = [
    "BUDGET_FACTOR",
    "DEFAULT_TIME_BUDGET",
    "GUARD_NODES",
    "INNER",
    "MAX_DRAFTS",
    "MINIMIZERS",
    "NUMERICAL_FAILURES",
    "OUTER",
    "PSI_TIE",
    "ROUNDING_SHORTFALL",
    "SCHEMES",
    "SEED_T_LIMITS",
    "TAU_MIN",
    "ExactUnit",
    "GlobalResolution",
    "GlobalResolutionPlan",
    "SchemeGlobalResolution",
    "SolveReport",
    "System",
    "TokenReport",
    "Unit",
    "chain_targets",
    "check_tau",
    "check_time_budget",
    "check_unit_size",
    "make_engine",
    "restore_rounded_outer_flow",
    "solve_global_resolution",
]
