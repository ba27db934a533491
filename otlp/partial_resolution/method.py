"""The ``partial_resolution`` method: an exact optimal plan per token for n i.i.d. drafts."""

from __future__ import annotations

import time

from otlp.instance import Instance
from otlp.methods import register_method
from otlp.partial_resolution.clocks import ClockPartition
from otlp.partial_resolution.plan import PartialResolutionPlan


@register_method(
    "partial_resolution",
    "exact OT per token for i.i.d. drafts: [GR] outer targets + a clock partition of [0, 1] "
    "(Partial Resolution, Thomas & Pal 2025); per-set conditionals, no tolerance",
)
def solve_partial_resolution(inst: Instance, form: str = "sets") -> PartialResolutionPlan:
    """A lazy exact plan: the clock partition is built now (one sort and one gap-filling
    pass); a drafted set's conditional is computed when a slice or sample asks for it; the
    explicit entries (every set) when the verifier reads them. ``form`` must be "sets"."""
    if form != "sets":
        raise ValueError(f"form: partial resolution indexes draft sets, not {form!r}")
    start = time.perf_counter()
    partition = ClockPartition.of(inst)
    return PartialResolutionPlan(partition, inst, time.perf_counter() - start)
