"""Solution methods: instance -> builder -> backend -> transport plan.

Each method is a function ``(inst, form, **options) -> TransportPlan`` registered by name;
:func:`otlp.solve` looks them up. Later capabilities (e.g. global resolution) register here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from otlp.args import canonical_name
from otlp.builders import (
    BipartiteSystem,
    full_otlp_lp,
    full_otlp_transport,
    inner_system,
    outer_system,
    relaxed_system,
)
from otlp.instance import Instance
from otlp.plan import TransportPlan
from otlp.solvers.base import SolveResult
from otlp.solvers.registry import backend_class, get_backend
from otlp.subset import optimal_acceptance
from otlp.verify import Tolerances

Method = Callable[..., TransportPlan]
_METHODS: dict[str, tuple[Method, str]] = {}


_BACKENDS: dict[str, str] = {}


def register_method(
    name: str, description: str, backend: str | None = None
) -> Callable[[Method], Method]:
    """Decorator registering a solution method under ``name`` (stored in canonical spelling);
    extra keyword options of :func:`otlp.solve` go to ``backend`` (a :mod:`solvers` name),
    else to the method itself."""

    def wrap(func: Method) -> Method:
        key = canonical_name(name, "method")
        _METHODS[key] = (func, description)
        if backend is not None:
            _BACKENDS[key] = backend
        return func

    return wrap


def method_names() -> list[str]:
    """Registered method names."""
    return list(_METHODS)


def describe_methods() -> dict[str, str]:
    """Method name -> one-line description."""
    return {name: desc for name, (_, desc) in _METHODS.items()}


def method_options(name: str) -> dict[str, inspect.Parameter]:
    """The keyword options :func:`otlp.solve` passes on for method ``name``, with defaults:
    the method's own keyword-only parameters, or those of its backend's ``solve``."""
    get_method(name)
    key = canonical_name(name, "method")
    target = backend_class(_BACKENDS[key]).solve if key in _BACKENDS else _METHODS[key][0]
    params = inspect.signature(target).parameters.values()
    return {p.name: p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def get_method(name: str) -> Method:
    """The method registered as ``name``; old spellings such as "maxflow-cs" are aliases."""
    key = canonical_name(name, "method")
    if key not in _METHODS:
        raise ValueError(f"method: unknown {name!r}; known: {', '.join(_METHODS)}")
    return _METHODS[key][0]


def _plan_from_systems(
    inst: Instance,
    parts: list[tuple[BipartiteSystem, np.ndarray]],
    method: str,
    results: list[SolveResult],
) -> TransportPlan:
    tokens = np.concatenate([system.arc_tokens() for system, _ in parts])
    cols = np.concatenate([system.arc_columns() for system, _ in parts])
    values = np.concatenate([vals for _, vals in parts])
    return TransportPlan.from_relaxed(
        inst,
        parts[0][0].columns,
        tokens,
        cols,
        values,
        method=method,
        wall_time=sum(r.wall_time for r in results),
        messages=[m for r in results for m in r.messages],
        info=_solver_info(results),
    ).polished()


def _solver_info(results: list[SolveResult]) -> dict[str, Any]:
    """What the backends said; ``solver_success`` is False if any status was not optimal."""
    return {
        "statuses": [r.raw_status for r in results],
        "backends": [r.backend for r in results],
        "solver_success": all(r.success for r in results),
    }


def _solve_lp(
    inst: Instance, form: str, method: str, backend: str, **options: Any
) -> TransportPlan:
    system = relaxed_system(inst, form)
    result = get_backend(backend).solve(system.to_lp(), **options)
    return _plan_from_systems(inst, [(system, result.primal)], method, [result])


def _solve_flow(
    inst: Instance, form: str, method: str, backend: str, **options: Any
) -> TransportPlan:
    system = relaxed_system(inst, form)
    result = get_backend(backend).solve(system.to_maxflow(), **options)
    return _plan_from_systems(
        inst, [(system, system.arc_values_from_flow(result.primal))], method, [result]
    )


@register_method("highs", "relaxed OTLP (Eq. 2) as an LP, HiGHS simplex/IPM", "highs")
def solve_highs(inst: Instance, form: str = "sets", **options: Any) -> TransportPlan:
    return _solve_lp(inst, form, "highs", "highs", **options)


# cvxpy's default LP solver is an interior-point method: its answers are feasible to about
# 1e-9 and optimal to about 1e-8, not to the vertex accuracy of simplex or max-flow.
INTERIOR_POINT_TOLERANCES = Tolerances(
    target_l1=1e-6, draft_l1=1e-6, negative=1e-7, acceptance=1e-6
)


@register_method("cvxpy", "relaxed OTLP as an LP through cvxpy (its default LP solver)", "cvxpy")
def solve_cvxpy(inst: Instance, form: str = "sets", **options: Any) -> TransportPlan:
    plan = _solve_lp(inst, form, "cvxpy", "cvxpy", **options)
    plan.info["tolerances"] = INTERIOR_POINT_TOLERANCES
    return plan


@register_method(
    "maxflow", "relaxed OTLP as max-flow (§5.2), OR-Tools push-relabel", "ortools-maxflow"
)
def solve_maxflow(inst: Instance, form: str = "sets", **options: Any) -> TransportPlan:
    return _solve_flow(inst, form, "maxflow", "ortools-maxflow", **options)


@register_method(
    "networkx", "relaxed OTLP as max-flow, networkx preflow-push (reference)", "networkx-maxflow"
)
def solve_networkx(inst: Instance, form: str = "sets", **options: Any) -> TransportPlan:
    return _solve_flow(inst, form, "networkx", "networkx-maxflow", **options)


@register_method(
    "maxflow_cs", "H* then outer and inner networks only (§5.3), OR-Tools", "ortools-maxflow"
)
def solve_maxflow_cs(inst: Instance, form: str = "sets", **options: Any) -> TransportPlan:
    selection = optimal_acceptance(inst)
    backend = get_backend("ortools-maxflow")
    parts, results = [], []
    for system in (
        outer_system(inst, selection.H_mask, form),
        inner_system(inst, selection.H_mask, form),
    ):
        if system.num_arcs == 0:
            continue
        result = backend.solve(system.to_maxflow(), **options)
        parts.append((system, system.arc_values_from_flow(result.primal)))
        results.append(result)
    if not parts:
        system = relaxed_system(inst, form)
        parts = [(system, np.zeros(system.num_arcs))]
    plan = _plan_from_systems(inst, parts, "maxflow_cs", results)
    plan.info["H"] = selection.H
    return plan


@register_method("pot", "full OTLP (Eq. 1) with 0/1 membership cost, POT ot.emd", "pot")
def solve_pot(inst: Instance, form: str = "sets", **options: Any) -> TransportPlan:
    problem, cols = full_otlp_transport(inst, form)
    result = get_backend("pot").solve(problem, **options)
    return TransportPlan.from_coupling(
        inst,
        cols,
        result.primal,
        method="pot",
        wall_time=result.wall_time,
        messages=result.messages,
        info=_solver_info([result]),
    ).polished()


@register_method("highs_full", "full OTLP (Eq. 1) as an LP, HiGHS", "highs")
def solve_highs_full(inst: Instance, form: str = "sets", **options: Any) -> TransportPlan:
    lp, cols = full_otlp_lp(inst, form)
    result = get_backend("highs").solve(lp, **options)
    coupling = result.primal.reshape(inst.k + 1, cols.count)
    return TransportPlan.from_coupling(
        inst,
        cols,
        coupling,
        method="highs_full",
        wall_time=result.wall_time,
        messages=result.messages,
        info=_solver_info([result]),
    ).polished()
