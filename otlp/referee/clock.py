"""A time limit on every call of a sampler, so that a sampler that never returns cannot hang
the referee: the call is interrupted with :class:`SamplerTimeout` and the referee reports an
``error`` verdict naming the case.

>>> import time
>>> def hangs(p, q, drafts, rng):
...     while True:
...         time.sleep(0.01)
>>> with limited(hangs, 0.05) as call:
...     call(None, None, None, None)
Traceback (most recent call last):
...
otlp.referee.clock.SamplerTimeout: the sampler did not return within 0.05 s

How a call is interrupted:

* on the main thread of a POSIX process, by ``SIGALRM`` (``signal.setitimer``, armed for
  each call and disarmed after it): this stops Python loops and blocking waits alike
  (``time.sleep``, locks, queues), because the handler's exception ends the wait;
* elsewhere (another thread, or no ``SIGALRM``), by a watchdog thread that raises the
  exception asynchronously in the calling thread (``PyThreadState_SetAsyncExc``): this stops
  Python code, but a call blocked inside C code is only stopped when it returns to Python.

The previous ``SIGALRM`` handler and any timer armed before (pytest-timeout's, say) are
restored when :func:`limited` exits. :class:`SamplerTimeout` derives from ``BaseException``,
as ``KeyboardInterrupt`` does, so a sampler's own ``except Exception`` cannot swallow it.
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

DEFAULT_CALL_LIMIT = 10.0  # seconds per call of the sampler
WATCHDOG_TICK = 0.02  # seconds between the watchdog's looks (threads without signals)


class SamplerTimeout(BaseException):
    """A call of the sampler ran past the referee's per-call time limit."""


class LimitedSampler:
    """``sampler`` with a time limit of ``seconds`` on each call; every other attribute
    (``batched``, ``protocol``, ``name``...) is the sampler's own."""

    def __init__(self, sampler: Callable[..., Any], seconds: float) -> None:
        self.sampler, self.seconds = sampler, seconds
        self._signals = False
        self._active = False
        self._thread: int | None = None
        self._deadline = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the watchdog never fires after a call returned

    def __getattr__(self, name: str) -> Any:
        if name == "sampler":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.sampler, name)

    def __call__(self, *args: Any) -> Any:
        try:
            return self._call(args)
        except SamplerTimeout:  # the watchdog raises the bare class: give it its message
            raise self._timeout() from None

    def _call(self, args: tuple[Any, ...]) -> Any:
        if self._signals:
            self._active = True
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            try:
                return self.sampler(*args)
            finally:
                self._active = False
                signal.setitimer(signal.ITIMER_REAL, 0.0)
        self._deadline = time.monotonic() + self.seconds
        self._active = True
        try:
            return self.sampler(*args)
        finally:
            with self._lock:
                self._active = False

    def _timeout(self) -> SamplerTimeout:
        return SamplerTimeout(f"the sampler did not return within {self.seconds:g} s")

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        if self._active:  # an alarm landing just after the call returned is ignored
            self._active = False
            raise self._timeout()

    def _watch(self) -> None:
        """The watchdog: raise :class:`SamplerTimeout` in the calling thread once a call has
        run past its deadline."""
        while not self._stop.wait(WATCHDOG_TICK):
            with self._lock:
                if self._active and time.monotonic() > self._deadline and self._thread is not None:
                    self._active = False
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(self._thread), ctypes.py_object(SamplerTimeout)
                    )


@contextmanager
def limited(sampler: Callable[..., Any], seconds: float | None) -> Iterator[Any]:
    """``sampler`` with a per-call time limit of ``seconds`` (None: no limit) while the
    ``with`` block runs (see the module docstring for how a call is interrupted)."""
    if seconds is None:
        yield sampler
        return
    wrapped = LimitedSampler(sampler, seconds)
    previous: Any = None
    use_signals = threading.current_thread() is threading.main_thread()
    if use_signals and hasattr(signal, "setitimer"):
        try:
            previous = signal.signal(signal.SIGALRM, wrapped._on_alarm)
        except ValueError:  # signals unavailable here (an embedded interpreter): the watchdog
            use_signals = False
    else:
        use_signals = False
    if use_signals:
        armed_before = signal.getitimer(signal.ITIMER_REAL)
        start = time.monotonic()
        wrapped._signals = True
        try:
            yield wrapped
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, previous)
            if armed_before[0] > 0:  # someone else's timer: re-armed for what it had left
                left = max(armed_before[0] - (time.monotonic() - start), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, left, armed_before[1])
        return
    wrapped._thread = threading.get_ident()
    watchdog = threading.Thread(target=wrapped._watch, name="otlp-referee-watchdog", daemon=True)
    watchdog.start()
    try:
        yield wrapped
    finally:
        wrapped._stop.set()
        watchdog.join()
