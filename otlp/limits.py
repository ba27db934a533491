"""Size limits checked by every problem builder before it allocates."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from otlp.errors import ProblemTooLarge

# Bytes a builder spends per variable: value, two index arrays and solver-side copies.
BYTES_PER_VARIABLE = 64


@dataclass(frozen=True)
class Limits:
    """Configurable ceilings; `max_variables` bounds any single problem a builder makes."""

    max_variables: int = 20_000_000


_current = Limits()


def current() -> Limits:
    """The limits in force."""
    return _current


def configure(**changes: int) -> Limits:
    """Change limits globally (e.g. ``configure(max_variables=10**8)``); returns the new limits."""
    global _current
    _current = replace(_current, **changes)
    return _current


@contextmanager
def limited(**changes: int) -> Iterator[Limits]:
    """Temporarily change limits inside a ``with`` block."""
    global _current
    saved = _current
    _current = replace(_current, **changes)
    try:
        yield _current
    finally:
        _current = saved


def check_size(what: str, variables: int) -> None:
    """Raise :class:`ProblemTooLarge` if ``variables`` exceeds the configured limit."""
    limit = _current.max_variables
    if variables > limit:
        raise ProblemTooLarge(what, variables, variables * BYTES_PER_VARIABLE, limit)
