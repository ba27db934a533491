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

from otlp.solvers.base import MaxFlowProblem

DEFAULT_SCALE_BITS = 50
INFINITE_CAPACITY = 2**61


@dataclass(frozen=True)
class IntegerCapacities:
    """int64 capacities in units of ``total / 2**bits``; ``scale`` is units per real unit."""

    capacities: NDArray[np.int64]
    total: float
    bits: int
    precision: float

    @property
    def scale(self) -> float:
        """Integer units per unit of capacity (inf when total is below ~1e-293)."""
        with np.errstate(over="ignore", divide="ignore"):
            return float(np.float64(2.0**self.bits) / self.total) if self.total > 0 else 1.0

    def to_real(self, values: NDArray[np.int64] | NDArray[np.float64] | int) -> NDArray[np.float64]:
        """Integer flows back to capacities: ``values * total / 2**bits``, multiplied first so
        that a tiny (even subnormal) total keeps its precision instead of overflowing a scale."""
        if not self.total > 0:
            return np.asarray(values, dtype=np.float64)
        return np.asarray(values, dtype=np.float64) * self.total / 2.0**self.bits

    def describe(self, scale_bits: int) -> str:
        return (
            f"int64 capacities at scale 2^{scale_bits}/total; flow value within "
            f"{self.precision:.2e} of the optimum"
        )


def integer_capacities(
    problem: MaxFlowProblem, scale_bits: int = DEFAULT_SCALE_BITS
) -> IntegerCapacities:
    """Scale, clip and round ``problem``'s capacities to int64 as described above.

    Capacities are divided by ``total`` before multiplying by ``2**scale_bits`` so that no
    intermediate overflows, however small ``total`` is.
    """
    caps = np.asarray(problem.capacities, dtype=np.float64)
    finite = np.isfinite(caps)
    total = float(caps[finite & (problem.tails == problem.source)].sum())
    out = np.full(caps.shape, INFINITE_CAPACITY, dtype=np.int64)
    if total > 0:
        with np.errstate(over="ignore"):  # caps / subnormal total: inf, clipped to 2
            units = np.minimum(caps[finite] / total, 2.0) * 2.0**scale_bits
    else:
        units = np.minimum(caps[finite], 0.0)  # nothing leaves the source: all zero
    out[finite] = np.floor(units).astype(np.int64)
    return IntegerCapacities(out, total, scale_bits, problem.num_arcs * total / 2**scale_bits)
