"""The ``global_resolution`` method: the front door that picks the engine for a scheme."""

from __future__ import annotations

from typing import Any

from otlp.global_resolution.iid import GlobalResolution
from otlp.global_resolution.plan import GlobalResolutionPlan
from otlp.global_resolution.schemes import SCHEMES, SchemeGlobalResolution
from otlp.instance import Instance
from otlp.limits import DEFAULT_TIME_BUDGET
from otlp.methods import register_method


def make_engine(inst: Instance, tau: float = 1e-3, **options: Any) -> GlobalResolution:
    """The engine for ``inst``'s draft scheme: i.i.d. (and any single draft, which is one
    draw from q under every scheme), or without replacement / two independent drafts.
    Every other instance is refused with a ValueError naming ``inst``."""
    if isinstance(inst, Instance) and inst.scheme != "iid" and inst.n > 1:
        if inst.scheme not in SCHEMES:
            raise ValueError(
                f"inst: global resolution solves the schemes {('iid', *SCHEMES)}, not "
                f"{inst.scheme!r} (verify_drafts(..., scheme={inst.scheme!r}) has its rule)"
            )
        return SchemeGlobalResolution(inst, tau, **options)
    return GlobalResolution(inst, tau, **options)


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
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    fallback: bool = True,
) -> GlobalResolutionPlan:
    """A lazy global-resolution plan (nothing is solved until a slice or entry is needed).

    ``time_budget`` (seconds, default ``DEFAULT_TIME_BUDGET``; None for no limit) bounds each
    token's call (``plan.token_report``, ``plan.local_slice``) from its entry: no stage (H*,
    Newton, the unit's exact max-flow) starts that is estimated to end past it, and a token
    whose next stage does not fit comes from the scheme's lossless rule (``fallback_rule`` in
    its report; :mod:`otlp.global_resolution.iid`). Materialising the whole plan solves
    each unit's Newton within the budget and exactly where it misses it.
    """
    engine = make_engine(
        inst,
        tau,
        minimizer=minimizer,
        form=form,
        max_iter=max_iter,
        time_budget=time_budget,
        fallback=fallback,
    )
    return GlobalResolutionPlan(engine)
