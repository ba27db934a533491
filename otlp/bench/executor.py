"""Where work units run: a local process pool (default) or an existing Dask cluster.

Both call the same :func:`otlp.bench.worker.run_unit` on the same units, so a sweep gives
the same records either way (timings aside). Local workers are spawned with BLAS pinned to
one thread and ignore Ctrl-C: the main process stops them (terminates the pool) and keeps
every result that already arrived. Dask's nanny sets the same BLAS variables in the workers it
starts (its default ``distributed.nanny.pre-spawn-environ``), and each record notes what its
worker had.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from otlp.bench.cells import WorkUnit
from otlp.bench.worker import BLAS_VARIABLES, run_unit

Records = list[dict[str, Any]]
CONNECT_TIMEOUT_S = 5  # an unreachable --scheduler fails within 10 s
DRAIN_TIMEOUT_S = 0.05
_ADDRESS = re.compile(r"^([a-z]+://)?[\w.\-\[\]:]+:\d+$")


@contextmanager
def pinned_blas() -> Iterator[None]:
    """Set the BLAS thread variables to 1 for processes started inside the block."""
    saved = {name: os.environ.get(name) for name in BLAS_VARIABLES}
    os.environ.update(dict.fromkeys(BLAS_VARIABLES, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(units: Sequence[WorkUnit], workers: int) -> Iterator[Records]:
    """Run ``units`` on ``workers`` spawned processes; yields each unit's records as it ends.

    On Ctrl-C the results that already arrived are yielded, the pool is terminated at once
    and ``KeyboardInterrupt`` is raised again.
    """
    if workers < 1:
        raise ValueError(f"workers: expected a positive integer, got {workers}")
    if not units:
        return
    context = multiprocessing.get_context("spawn")
    with pinned_blas():
        pool = context.Pool(workers, initializer=_ignore_interrupts)
    try:
        results = pool.imap_unordered(run_unit, units)
        for _ in units:
            try:
                records = results.next()
            except KeyboardInterrupt:
                yield from _drain(results)
                raise
            yield records
    finally:
        pool.terminate()
        pool.join()


def _drain(results: Any) -> Iterator[Records]:
    """The results a pool has already delivered, without waiting for more."""
    while True:
        try:
            yield results.next(timeout=DRAIN_TIMEOUT_S)
        except (multiprocessing.TimeoutError, StopIteration):
            return


def run_dask(units: Sequence[WorkUnit], scheduler: str) -> Iterator[Records]:
    """Run ``units`` on the Dask cluster at ``scheduler``; yields each unit's records.

    Its workers need this package importable (the same version) and the suites' data. A
    malformed or unreachable address fails at once (not lazily) within 10 s, with a message
    naming ``--scheduler``.
    """
    if not _ADDRESS.match(scheduler):
        raise ValueError(
            f"--scheduler: expected an address like tcp://HOST:PORT or HOST:PORT, got {scheduler!r}"
        )
    try:
        from distributed import Client
    except ImportError:
        raise ValueError("--scheduler: needs dask.distributed (pip install 'otlp[dask]')") from None
    try:
        client = Client(scheduler, set_as_default=False, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, ValueError, TimeoutError) as exc:
        raise ValueError(f"--scheduler: cannot reach {scheduler!r} ({exc})") from None
    return _dask_stream(client, units)


def _dask_stream(client: Any, units: Sequence[WorkUnit]) -> Iterator[Records]:
    from distributed import as_completed as dask_completed

    with client:
        futures = [client.submit(run_unit, unit, pure=False) for unit in units]
        try:
            for future in dask_completed(futures, loop=client.loop):
                yield future.result()
        finally:
            client.cancel(futures)
