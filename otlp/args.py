"""Argument checks shared by the public constructors; every error names the offending argument."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.solvers.node_rules import row_total

DEFAULT_SUM_TOL = 1e-6


def probability_vector(
    name: str, values: ArrayLike, *, renormalize: bool = False, atol: float = DEFAULT_SUM_TOL
) -> NDArray[np.float64]:
    """Return ``values`` as a read-only float64 probability vector divided by its own sum (a
    unit sum to rounding: transport problems stay balanced), or raise ``ValueError``.

    Rejects non-1-D input, empty input, NaN/inf, negative entries and sums off by more than
    ``atol``. With ``renormalize=True`` any positive total is rescaled to 1 instead. The
    entries are checked and summed in one compiled pass
    (:func:`otlp.solvers.node_rules.row_total`).
    """
    atol = real_number("atol", atol, minimum=0.0)
    try:
        raw = np.asarray(values)
        complex_input = np.iscomplexobj(raw)
        arr = None if complex_input else np.array(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric vector ({exc})") from None
    if arr is None:
        raise ValueError(f"{name}: expected real probabilities, got complex dtype {raw.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D vector, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: empty vector")
    total, bad = row_total(arr)
    if bad >= 0:
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}: contains NaN or infinite entries")
        raise ValueError(f"{name}: has negative entries (min {arr.min():.3g})")
    if renormalize:
        largest = float(arr.max())
        if largest <= 0:
            raise ValueError(f"{name}: sums to 0; cannot renormalise")
        arr /= largest  # first to [0, 1]: a sum of entries near 1e308 would overflow
        total = float(arr.sum())
    elif not abs(total - 1.0) <= atol:
        raise ValueError(
            f"{name}: sums to {total!r}, not 1 within {atol:g} (pass renormalize=True to rescale)"
        )
    arr /= total
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


def integers(name: str, values: object, *, minimum: int = 0) -> tuple[int, ...]:
    """Return ``values`` (a sequence of integers: token ids of a context, draft lengths) as a
    tuple of ints of at least ``minimum``, or raise ``ValueError`` naming it."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValueError(f"{name}: expected a sequence of integers, got {values!r}")
    return tuple(
        positive_int(f"{name}[{i}]", value, minimum=minimum) for i, value in enumerate(values)
    )


def real_number(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite float in the stated range, or raise ``ValueError`` naming it.

    Rejects bools, complex numbers, strings, None, NaN and infinities.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a real number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{name}: expected a finite number, got {out!r}")
    if minimum is not None:
        if exclusive_minimum and out <= minimum:
            raise ValueError(f"{name}: must be greater than {minimum:g}, got {out:g}")
        if not exclusive_minimum and out < minimum:
            raise ValueError(f"{name}: must be at least {minimum:g}, got {out:g}")
    if maximum is not None and out > maximum:
        raise ValueError(f"{name}: must be at most {maximum:g}, got {out:g}")
    return out


def as_generator(rng: object, name: str = "rng") -> np.random.Generator:
    """A numpy ``Generator`` from an int seed, None (fresh entropy) or a Generator."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if int(rng) < 0:
            raise ValueError(f"{name}: a seed must be non-negative, got {rng}")
        return np.random.default_rng(int(rng))
    raise ValueError(f"{name}: expected an int seed, None or numpy.random.Generator, got {rng!r}")


def canonical_name(value: object, what: str = "name") -> str:
    """The canonical spelling of a method, rule or scheme name: lower case, words joined by '_'.

    ``"maxflow-cs"``, ``"MaxFlow_CS"`` and ``"maxflow_cs"`` all become ``"maxflow_cs"``, so
    registries keyed by canonical names accept either separator.
    """
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected a string, got {value!r}")
    return value.strip().lower().replace("-", "_")


def check_options(what: str, options: Mapping[str, object], allowed: Iterable[str]) -> None:
    """Reject unknown keyword options with the list of valid ones (``ValueError``)."""
    valid = sorted(allowed)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        listing = ", ".join(valid) if valid else "none"
        raise ValueError(f"{what}: unknown option(s) {', '.join(unknown)}; valid: {listing}")
