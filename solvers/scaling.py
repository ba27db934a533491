"""Integer capacities for max-flow codes that need (or are only robust with) integers.

Capacities are clipped at twice the finite capacity leaving the source (``total``; no flow
exceeds it, so a clipped arc neither binds nor saturates and the min cut is unchanged),
scaled by ``2**scale_bits / total`` and rounded down: a flow for the integer network is
feasible for the real one, and its value is within ``num_arcs * total / 2**scale_bits`` of
the optimum. Infinite capacities become ``INFINITE_CAPACITY``, above any possible flow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from solvers.base import MaxFlowProblem

DEFAULT_SCALE_BITS = 50
INFINITE_CAPACITY = 2**61


@dataclass(frozen=True)
class IntegerCapacities:
    capacities: NDArray[np.int64]
    scale: float
    precision: float

    def describe(self, scale_bits: int) -> str:
        return (
            f"int64 capacities at scale 2^{scale_bits}/total; flow value within "
            f"{self.precision:.2e} of the optimum"
        )


def integer_capacities(
    problem: MaxFlowProblem, scale_bits: int = DEFAULT_SCALE_BITS
) -> IntegerCapacities:
    """Scale, clip and round ``problem``'s capacities to int64 as described above."""
    caps = np.asarray(problem.capacities, dtype=np.float64)
    finite = np.isfinite(caps)
    total = float(caps[finite & (problem.tails == problem.source)].sum())
    scale = float(2**scale_bits) / total if total > 0 else 1.0
    out = np.full(caps.shape, INFINITE_CAPACITY, dtype=np.int64)
    out[finite] = np.floor(np.minimum(caps[finite], 2.0 * total) * scale).astype(np.int64)
    return IntegerCapacities(out, scale, problem.num_arcs * total / 2**scale_bits)
