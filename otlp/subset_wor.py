"""Deprecated alias (kept for one release): the exponential-clock quadrature for sampling
without replacement now lives in :mod:`solvers.global_resolution.clocks`."""

from solvers.global_resolution.clocks import (
    LEFT_ERROR,
    REL_ERROR,
    RIGHT_TAIL,
    SMALLEST_RATE,
    PrefixComplements,
    QuadratureRangeError,
    complement_in,
    discretisation_bound,
    first_node,
    prefix_complements,
    prefix_psi_without_replacement,
    step,
)

__all__ = [
    "LEFT_ERROR",
    "REL_ERROR",
    "RIGHT_TAIL",
    "SMALLEST_RATE",
    "PrefixComplements",
    "QuadratureRangeError",
    "complement_in",
    "discretisation_bound",
    "first_node",
    "prefix_complements",
    "prefix_psi_without_replacement",
    "step",
]
