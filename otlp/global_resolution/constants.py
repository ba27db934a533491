"""Global resolution's constants, unit names and argument checks ([GR] §6, Appendix K).

The numeric constants shared with the compiled kernels (``PSI_TIE``, ``BUDGET_FACTOR`` and
the integer unit codes) have their one home in :mod:`otlp.solvers.global_resolution.constants`;
:class:`System` names those codes for the object API and its reports.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from otlp.args import real_number
from otlp.limits import check_size
from otlp.solvers.global_resolution import constants as kernel
from otlp.solvers.global_resolution.clocks import QuadratureRangeError

PSI_TIE = kernel.PSI_TIE
BUDGET_FACTOR = kernel.BUDGET_FACTOR


class System(StrEnum):
    """The two kinds of unit: a block of the outer system (Theorem 6.4) or the inner system
    (Theorem 6.5). Equal to the strings ``"outer"`` / ``"inner"``; ``code`` is the integer
    the kernels use."""

    OUTER = "outer"
    INNER = "inner"

    @property
    def code(self) -> int:
        return kernel.OUTER if self is System.OUTER else kernel.INNER


OUTER, INNER = System.OUTER, System.INNER
# A unit solved on its own: the inner system, (INNER, None), or block b of the outer one.
Unit = tuple[System, int | None]

MINIMIZERS = ("newton", "seed")
SEED_T_LIMITS = {2: 50, 3: 20, 4: 10, 5: 10}  # [GR] Appendix K (10 beyond n = 5)
# Below TAU_MIN the Newton certificate (quadrature error ~1e-8 relative) can never be met, so
# every unit would fall back, and the verifier's 15 tau approaches floating-point rounding.
TAU_MIN = 1e-10
GUARD_NODES = 64  # quadrature nodes assumed by the size guard (20-60 in practice)
# Max-flow on int64 capacities (scale 2^50 of the largest) rounds away flows below ~1e-15 of
# it; an outer column short by at most this much lost its flow to that rounding.
ROUNDING_SHORTFALL = 1e-12
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


def check_tau(tau: object) -> float:
    """tau as a float in [TAU_MIN, 1), or a ValueError naming it."""
    value = real_number("tau", tau, minimum=TAU_MIN)
    if not value < 1.0:
        raise ValueError(f"tau: must lie in [{TAU_MIN:g}, 1), got {value:g}")
    return value


def check_time_budget(time_budget: object) -> float | None:
    """A per-token time budget in seconds (> 0), or None for no limit; else a ValueError."""
    if time_budget is None:
        return None
    return real_number("time_budget", time_budget, minimum=0.0, exclusive_minimum=True)


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
