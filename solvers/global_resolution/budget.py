"""A call's time budget: one deadline read at the call's entry, and what each stage costs.

Issue 24 ("a hard budget", [GR] §6 run at a decoder's call): a global-resolution call with
``time_budget`` seconds ends within that budget plus one bounded step. Its clock starts when
the call starts (:meth:`Deadline.after`), so the work before Newton (the input scan, top-k,
H*, the outer targets), Newton itself and the exact max-flow fallback all draw on the same
seconds; each stage compares its estimated cost with what is left (:meth:`Deadline.fits`)
before it starts and, where it cannot fit, the call goes straight to the scheme's lossless
rule (one pass over the row).

Compiling a kernel, or loading it from numba's cache on its first use in a process, is part
of the call that needs it: the clock starts at the call's entry and nothing is taken off it, so
a first call whose kernels compile past its budget reports its rows out of time (served by
the lossless rule) instead of overrunning silently. A decoder compiles ahead with
:func:`otlp.warm_up` (every kernel a budgeted call runs, at start-up), after which no call
compiles. :func:`compile_seconds` (numba's compiler lock, :class:`_CompileClock`) tells how
long a process has spent compiling.

The estimates are sizes times rates measured on the project's 2-core machine with BLAS on one
thread, made pessimistic by a factor of about two for a loaded machine; an estimate that is
too low costs at most the one stage it let start. :func:`blas_pinned` is that one BLAS thread
for the library calls of Newton's steps: two OpenBLAS threads on two busy cores made a dense
100-variable direction 100x slower (88 ms instead of 0.8 ms).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from numba.core import event

# A Newton direction ran at 1e10-4e10 of direction.step_work's flops per second with BLAS on
# one thread (dense, Woodbury and CG at 100-5,000 variables); halved, then halved again.
FLOP_RATE = 5e9
# One evaluation of a scheme's system (receipts and Hessian parts), per variable and draw:
# ~1.2e-7 s for the pair systems (n = 2, ~30 exponential-sum nodes) and 2.4e-6 to 2.8e-5 s
# for the double quadrature of n >= 3 draws without replacement (its u-grid grows as the
# smallest draft mass falls); doubled.
SECONDS_PER_TERM = 2.5e-7
SECONDS_PER_DOUBLE_TERM = 1e-5
# The exact fallback on a unit's own network (k = 1,000, n = 2 without replacement: 8e6 mass
# operations in 0.21 s, then 1e6 arcs built and solved by OR-Tools in 0.3 s); doubled.
SECONDS_PER_ARC = 6e-7
SECONDS_PER_MASS_OPERATION = 5e-8
# An element of a scan, ~5 ns, doubled; the prefix quadrature of H* without replacement
# takes ~300 nodes x k tokens x n draws of them (5-11 ms at k = 1,000, n = 8).
PREFIX_NODES = 300
SETUP_PASSES = 50  # the other schemes' H* and targets: sorts and scans over the k tokens
SECONDS_PER_ELEMENT = 1e-8


class _CompileClock(event.Listener):
    """Total seconds numba has held its compiler lock (compiling, or loading a kernel from its
    cache on first use; outermost acquisitions only)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0
        self._started = 0.0

    def on_start(self, data: object) -> None:
        if self._depth == 0:
            self._started = time.perf_counter()
        self._depth += 1

    def on_end(self, data: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._started


_COMPILING = _CompileClock()
event.register("numba:compiler_lock", _COMPILING)  # compilations and cache loads


def compile_seconds() -> float:
    """Seconds numba has spent compiling in this process so far."""
    return _COMPILING.seconds


@dataclass(frozen=True)
class Deadline:
    """The ``time.perf_counter()`` value a call must end by (``math.inf``: no limit);
    compiling counts (see the module notes)."""

    at: float = math.inf

    @classmethod
    def after(cls, seconds: float | None, start: float | None = None) -> Deadline:
        """The deadline ``seconds`` after ``start`` (default now; None: no limit)."""
        if seconds is None:
            return cls()
        begin = time.perf_counter() if start is None else start
        return cls(begin + seconds)

    @property
    def limited(self) -> bool:
        return self.at < math.inf

    def now(self) -> float:
        """The deadline as a ``time.perf_counter()`` value (what a compiled kernel reads its
        clock against)."""
        return self.at

    def left(self) -> float:
        """Seconds left (negative once passed; inf without a limit)."""
        return self.now() - time.perf_counter() if self.limited else math.inf

    def fits(self, seconds: float) -> bool:
        """Whether a stage estimated at ``seconds`` ends before the deadline if started now."""
        return not self.limited or time.perf_counter() + seconds <= self.now()

    def seconds(self) -> float | None:
        """What is left as a solver's ``time_budget`` argument (None: no limit)."""
        return self.left() if self.limited else None


NO_DEADLINE = Deadline()


class OutOfTime(Exception):
    """A stage whose estimated cost does not fit the seconds left: the caller serves the
    token by the scheme's lossless rule instead. ``stage`` names it for the report."""

    def __init__(self, stage: str, estimate: float, left: float) -> None:
        super().__init__(
            f"{stage} skipped: estimated {estimate:.3g} s, {max(left, 0.0):.3g} s of the time "
            "budget left"
        )
        self.stage = stage


def require(deadline: Deadline, seconds: float, stage: str) -> None:
    """Raise :class:`OutOfTime` unless a stage of ``seconds`` fits before ``deadline``."""
    if not deadline.fits(seconds):
        raise OutOfTime(stage, seconds, deadline.left())


def evaluation_seconds(variables: int, n: int, double_quadrature: bool) -> float:
    """Estimated seconds of one evaluation (receipts and Hessian parts) of a unit's system
    over ``variables`` tokens and n draws; ``double_quadrature`` for the u-integral of n >= 3
    draws without replacement."""
    rate = SECONDS_PER_DOUBLE_TERM if double_quadrature else SECONDS_PER_TERM
    return rate * variables * n


def setup_seconds(scheme: str, k: int, n: int) -> float:
    """Estimated seconds of H* and the outer targets over k draft tokens: one prefix
    quadrature without replacement, a few sorts and scans otherwise (i.i.d.; the certified
    search and removal chain of two independent drafts: ~0.1 ms at k = 1,000)."""
    passes = PREFIX_NODES * n if scheme == "without_replacement" else SETUP_PASSES
    return SECONDS_PER_ELEMENT * passes * k


def max_flow_seconds(arcs: int, mass_operations: int) -> float:
    """Estimated seconds of the exact fallback on a unit's network (sets, masses, flow)."""
    return SECONDS_PER_ARC * arcs + SECONDS_PER_MASS_OPERATION * mass_operations


BLAS_SIZE = 64  # units from this many variables on make library calls worth pinning


@cache
def _blas_libraries() -> tuple[Any, ...]:
    """threadpoolctl's controllers of the loaded BLAS libraries, found once (~2 ms; a
    ``threadpool_limits`` block searches again each time). scipy's BLAS and LAPACK (what
    numba's compiled ``np.linalg`` and ``@`` call) are loaded first: a search before them
    would not see them."""
    import scipy.linalg.cython_blas
    import scipy.linalg.cython_lapack  # noqa: F401
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    return tuple(lib for lib in controller.lib_controllers if lib.user_api == "blas")


@contextmanager
def blas_pinned(variables: int) -> Iterator[None]:
    """BLAS on one thread for the block (the libraries loaded when first called), where a
    unit may have ``variables`` >= ``BLAS_SIZE``; ~12 us, and nothing for smaller units.

    Each library's own get/set calls, restored on exit: ``ThreadpoolController.limit``
    built a limiter per block whose reference cycles left ~100 bytes of garbage per call."""
    libraries = _blas_libraries() if variables >= BLAS_SIZE else ()
    before = [lib.get_num_threads() for lib in libraries]
    changed = [(lib, n) for lib, n in zip(libraries, before, strict=True) if n != 1]
    for lib, _ in changed:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, n in changed:
            lib.set_num_threads(n)
