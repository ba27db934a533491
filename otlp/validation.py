"""Argument checks shared by the public constructors; every error names the offending argument."""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray

DEFAULT_SUM_TOL = 1e-6


def probability_vector(
    name: str, values: ArrayLike, *, renormalize: bool = False, atol: float = DEFAULT_SUM_TOL
) -> NDArray[np.float64]:
    """Return ``values`` as a read-only float64 probability vector, or raise ``ValueError``.

    Rejects non-1-D input, empty input, NaN/inf, negative entries and sums off by more than
    ``atol``. With ``renormalize=True`` any positive total is rescaled to 1 instead.
    """
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric vector ({exc})") from None
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D vector, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: empty vector")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    if np.any(arr < 0):
        raise ValueError(f"{name}: has negative entries (min {arr.min():.3g})")
    total = float(arr.sum())
    if renormalize:
        if total <= 0:
            raise ValueError(f"{name}: sums to {total:.3g}; cannot renormalise")
        arr /= total
    elif abs(total - 1.0) > atol:
        raise ValueError(
            f"{name}: sums to {total!r}, not 1 within {atol:g} (pass renormalize=True to rescale)"
        )
    arr.setflags(write=False)
    return arr


def positive_int(name: str, value: object, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int in [minimum, maximum], or raise ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name}: must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: must be at most {maximum}, got {value}")
    return value
