"""Partial resolution: exact optimal transport per token for n i.i.d. drafts.

"Partial Resolution: Optimal Multi-Draft Speculative Sampling in Near-Linear Time" (R. Thomas
and A. Pal, NeurIPS 2025) announces an exact per-token algorithm; only its abstract is
public. otlp's construction (docs/partial-resolution.md, proofs and validate statements
``pr.*``): the token side A of an optimal flow ([GR] Theorem 6.2), a partition of [0, 1] into
one set per token of length q(x) and weight A(x) under n (1 - u)^(n-1) cut at
1 - (1 - alpha*)^(1/n), and i.i.d. clocks: the earliest wins.

* :mod:`.clocks` — :class:`ClockPartition` (the partition, set conditionals, the race).
* :mod:`.plan` — :class:`PartialResolutionPlan` (lazy; per-token slices).
* :mod:`.method` — registers ``otlp.solve(inst, method="partial_resolution")``.
"""

from otlp.partial_resolution.clocks import ClockPartition, accepted_targets, cut_point
from otlp.partial_resolution.method import solve_partial_resolution
from otlp.partial_resolution.plan import PartialResolutionPlan, PartialTokenReport

__all__ = [
    "ClockPartition",
    "PartialResolutionPlan",
    "PartialTokenReport",
    "accepted_targets",
    "cut_point",
    "solve_partial_resolution",
]
