"""Where groups of cells run: a local process pool (default) or an existing Dask cluster.

Both call the same :func:`otlp.bench.worker.run_group` on the same groups, so a sweep gives
the same records either way (timings aside). Local workers are spawned with BLAS pinned to
one thread; Dask's nanny sets the same variables in the workers it starts (its default
``distributed.nanny.pre-spawn-environ``), and each record notes what its worker had.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any

from otlp.bench.cells import Cell
from otlp.bench.worker import BLAS_VARIABLES, run_group

Group = tuple[Cell, ...]
Records = list[dict[str, Any]]


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


def run_local(groups: Sequence[Group], workers: int) -> Iterator[Records]:
    """Run ``groups`` on ``workers`` spawned processes; yields each group's records."""
    if workers < 1:
        raise ValueError(f"workers: expected a positive integer, got {workers}")
    if not groups:
        return
    context = multiprocessing.get_context("spawn")
    with pinned_blas(), ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = [pool.submit(run_group, group) for group in groups]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def run_dask(groups: Sequence[Group], scheduler: str) -> Iterator[Records]:
    """Run ``groups`` on the Dask cluster at ``scheduler``; yields each group's records.

    Its workers need this package importable (the same version) and the suites' data.
    """
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise ValueError("--scheduler: needs dask.distributed (pip install 'otlp[dask]')") from None
    if not groups:
        return
    try:
        client = Client(scheduler, set_as_default=False)
    except OSError as exc:
        raise ValueError(f"--scheduler: cannot reach {scheduler!r} ({exc})") from None
    with client:
        futures = [client.submit(run_group, group, pure=False) for group in groups]
        try:
            for future in dask_completed(futures, loop=client.loop):
                yield future.result()
        finally:
            client.cancel(futures)
