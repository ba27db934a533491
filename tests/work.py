"""Work done by a block of code, measured without a clock: Python function calls and peak
traced memory. "Refused before any work" and "stays cheap" are asserted with these, so a test
passes or fails the same way on an idle and on a loaded machine (wall time does not)."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType


@dataclass
class Work:
    calls: int = 0  # Python and C function calls made inside the block
    peak_bytes: int = 0  # peak memory allocated inside the block (numpy included)


@contextmanager
def work_done() -> Iterator[Work]:
    """Count the calls and the peak allocation of the ``with`` block (this thread only)."""
    work = Work()

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            work.calls += 1

    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start, _ = tracemalloc.get_traced_memory()
    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        yield work
    finally:
        sys.setprofile(previous)
        work.peak_bytes = max(0, tracemalloc.get_traced_memory()[1] - start)
        if not tracing:
            tracemalloc.stop()
