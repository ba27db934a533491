"""Size limits checked before any work that grows with the problem.

* ``max_variables`` bounds what one problem allocates (columns, incidence pairs, LP variables,
  dense tables); builders call :func:`check_size` before allocating.
* ``max_operations`` bounds the elementary array operations of enumerations whose time grows
  faster than their output (set masses: O(j n^2) or O(n j 2^j) per set); :func:`check_work`.
* ``max_drafts`` bounds n itself: every scheme keeps one draft row per draw.

Sizes are exact Python ints (never int64), so n = 10^9 is refused at once, not overflowed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from math import log2

from otlp.errors import ProblemTooLarge

# Seconds a call may take by default where it has a time budget: global resolution's decoder
# call and each token's convex solve (:mod:`otlp.solvers.global_resolution.budget`), after which
# a unit falls back to its exact max-flow or the scheme's lossless rule; a runaway solve (tiny
# tau on a loaded machine) never hangs a decoder.
DEFAULT_TIME_BUDGET = 5.0
# Bytes a builder spends per variable: value, two index arrays and solver-side copies.
BYTES_PER_VARIABLE = 64
# Sizes above 2^BIG_EXPONENT are not computed exactly (k^n for huge n): they are reported
# as "more than 2^BIG_EXPONENT".
BIG_EXPONENT = 256


@dataclass(frozen=True)
class Limits:
    """Configurable ceilings (see the module docstring)."""

    max_variables: int = 20_000_000
    max_operations: int = 100_000_000
    max_drafts: int = 1024


_current = Limits()


def current() -> Limits:
    """The limits in force."""
    return _current


def _validated(changes: Mapping[str, object]) -> Limits:
    known = {f.name for f in fields(Limits)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: unknown limit; valid: {', '.join(sorted(known))}")
    for name, value in changes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return replace(_current, **changes)  # type: ignore[arg-type]


def configure(**changes: int) -> Limits:
    """Change limits globally (e.g. ``configure(max_variables=10**8)``); returns the new limits.

    Values must be positive integers; unknown names are rejected with the list of valid ones.
    """
    global _current
    _current = _validated(changes)
    return _current


@contextmanager
def limited(**changes: int) -> Iterator[Limits]:
    """Temporarily change limits inside a ``with`` block."""
    global _current
    saved = _current
    _current = _validated(changes)
    try:
        yield _current
    finally:
        _current = saved


def check_size(what: str, variables: int, advice: str = "lower top_k or n") -> None:
    """Raise :class:`ProblemTooLarge` if ``variables`` exceeds the configured limit."""
    limit = _current.max_variables
    if variables > limit:
        raise ProblemTooLarge(what, variables, variables * BYTES_PER_VARIABLE, limit, advice=advice)


def check_work(what: str, operations: int, advice: str = "lower top_k or n") -> None:
    """Raise :class:`ProblemTooLarge` if ``operations`` exceeds ``max_operations``."""
    limit = _current.max_operations
    if operations > limit:
        raise ProblemTooLarge(
            what,
            operations,
            0,
            limit,
            unit="array operations",
            setting="max_operations",
            advice=advice,
        )


def check_drafts(n: int) -> None:
    """Refuse more drafts than ``max_drafts`` (before one row per draw is allocated)."""
    limit = _current.max_drafts
    if n > limit:
        raise ProblemTooLarge(
            "n: the instance",
            n,
            0,
            limit,
            unit="drafts",
            setting="max_drafts",
            advice="lower n",
        )


def power(base: int, exponent: int) -> int:
    """``base ** exponent`` as an exact int, capped at 2^BIG_EXPONENT + 1 without computing
    it when larger (so k^n for n = 10^9 costs nothing)."""
    if base <= 1:
        return base
    if exponent * log2(base) > BIG_EXPONENT:
        return 2**BIG_EXPONENT + 1
    return base**exponent
