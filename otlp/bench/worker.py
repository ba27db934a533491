"""Measure one group of cells in a worker process (local pool or Dask worker).

Per token ([GR] §7.2): build the top-k instance of one suite item, draw omega from the
draft with a seed fixed by (seed, item, k, n, scheme), compute alpha* once, then for every
cell in turn — side by side — time the work a decoder needs for that token and check it:

* methods: ``otlp.solve`` on a fresh instance plus the slice pi(.|omega), fastest of
  ``repeats`` runs; then ``otlp.verify`` (untimed). A plan that fails verification is a
  failure: its numbers never reach a table.
* rules: ``otlp.rules.get(name).acceptance(inst)``; a rule that does not apply is "n/a".

Every (method, tau, scheme, n) is warmed up on a small instance of the same suite before its
first timed run in a process, so numba compilation and first imports are not timed.
"""

from __future__ import annotations

import importlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from otlp.api import solve
from otlp.bench.cells import ALPHA, METHOD, Cell, WorkUnit, suite_indices
from otlp.bench.decoder_cells import DECODE, measure_decode
from otlp.bench.records import (
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    OK,
    TOO_LARGE,
    token_record,
)
from otlp.errors import ProblemTooLarge
from otlp.instance import SCHEMES, Instance
from otlp.instances.suites import Suite, SuiteItem, load
from otlp.subset import optimal_acceptance
from otlp.verify import Tolerances, verify

BLAS_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
WARM_UP_K = 10
WARM_UP_DRAWS = 3
ACCEPTANCE_SLACK = 1e-9  # a rule's acceptance must lie in [0, 1] up to rounding


_warmed: set[tuple[Any, ...]] = set()


@dataclass(frozen=True)
class Token:
    """One suite item at (k, n, scheme): its drafted omega and alpha*."""

    index: int
    item: SuiteItem
    omega: list[int]
    alpha_star: float
    alpha_time: float


def run_unit(unit: WorkUnit) -> list[dict[str, Any]]:
    """Measure one work unit; one record per cell holding the unit's slice of tokens."""
    return run_group(unit.cells, unit.part, unit.parts)


def run_group(cells: Sequence[Cell], part: int = 0, parts: int = 1) -> list[dict[str, Any]]:
    """Measure ``cells`` (one group) on slice ``part`` of ``parts`` of its tokens and return
    one result record per cell."""
    first = cells[0]
    suite = _suite(first.suite)
    indices = suite_indices([item.meta for item in suite], first.items, first.select)
    if not indices:
        raise ValueError(f"select: no item of suite {first.suite!r} matches {first.select}")
    for cell in cells:
        _warm_up(cell, suite.items[indices[0]])
    results: dict[str, list[dict[str, Any]]] = {cell.id: [] for cell in cells}
    for index in np.array_split(np.asarray(indices, dtype=np.int64), parts)[part].tolist():
        item = suite.items[index]
        try:
            token = draw_token(first, index, item)
        except ValueError as exc:  # k over the vocabulary, too few tokens without replacement
            for cell in cells:
                results[cell.id].append(
                    token_record(index, item, None, NOT_APPLICABLE, message=f"ValueError: {exc}")
                )
            continue
        for cell in cells:
            results[cell.id].append(measure(cell, token))
    worker = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "blas_threads": {v: os.environ.get(v) for v in BLAS_VARIABLES},
    }
    return [
        {
            "id": cell.id,
            "cell": cell.as_dict(),
            "tokens": results[cell.id],
            "worker": worker,
            "part": part,
            "parts": parts,
        }
        for cell in cells
    ]


def measure(cell: Cell, token: Token) -> dict[str, Any]:
    """One token's record for ``cell``."""
    if cell.kind == ALPHA:
        return token_record(
            token.index,
            token.item,
            token.omega,
            OK,
            time_s=token.alpha_time,
            acceptance=token.alpha_star,
            alpha_star=token.alpha_star,
        )
    if cell.kind == METHOD:
        return _measure_method(cell, token)
    if cell.kind == DECODE:
        return measure_decode(cell, token)
    return _measure_rule(cell, token)


# ----- methods and rules -------------------------------------------------------------------
def _measure_method(cell: Cell, token: Token) -> dict[str, Any]:
    kwargs = dict(cell.options)
    if cell.tau is not None:
        kwargs["tau"] = cell.tau
    omega = np.asarray(token.omega)

    def run(inst: Instance) -> Any:
        plan = solve(inst, cell.name, check=False, **kwargs)
        _slice(plan, omega)
        return plan

    try:
        plan, seconds = _timed(cell, token.item, run)
    except Unmeasured as exc:
        return _unmeasured(token, exc)
    tolerances = plan.info.get("tolerances")
    if tolerances is None and cell.tau is not None:
        tolerances = Tolerances.global_resolution(cell.tau)
    try:  # a lazy plan (global resolution) solves the rest of its systems here
        report = verify(plan, tolerances, alpha_star=token.alpha_star)
    except Exception as exc:  # an unverifiable plan is an error, never a number
        message = f"verify: {type(exc).__name__}: {exc}"
        return token_record(
            token.index, token.item, token.omega, ERROR, time_s=seconds, message=message
        )
    fallback = _token_fallback(plan)
    return token_record(
        token.index,
        token.item,
        token.omega,
        OK if report.ok else FAILED,
        time_s=seconds,
        acceptance=report.acceptance,
        alpha_star=token.alpha_star,
        target_l1=report.target_l1,
        draft_l1=report.draft_l1,
        min_entry=report.min_entry,
        fallback=fallback,
        message="; ".join(report.problems),
    )


def _slice(plan: Any, omega: np.ndarray) -> Any:
    """pi(. | omega) over the draft vocabulary: through ``local_slice`` where the plan has it
    (a lazy plan, e.g. global resolution's, then solves only the system omega needs)."""
    local_slice = getattr(plan, "local_slice", None)
    if local_slice is not None:
        return local_slice(omega)
    return plan.column_slice(plan.column_of(omega))


def _token_fallback(plan: Any) -> bool | None:
    """Whether this token's slice came from a fallback: the plan's last per-token report
    (``token_reports``, kept by global resolution) if any, else ``info["fallback"]``."""
    reports = getattr(plan, "token_reports", None)
    if reports:
        return bool(reports[-1].fallback)
    value = plan.info.get("fallback")
    return None if value is None else bool(value)


def _measure_rule(cell: Cell, token: Token) -> dict[str, Any]:
    rule = importlib.import_module("otlp.rules").get(cell.name)
    options = dict(cell.options)
    try:
        value, seconds = _timed(cell, token.item, lambda inst: rule.acceptance(inst, **options))
    except Unmeasured as exc:
        return _unmeasured(token, exc)
    acceptance = float(value)
    valid = np.isfinite(acceptance) and -ACCEPTANCE_SLACK <= acceptance <= 1 + ACCEPTANCE_SLACK
    return token_record(
        token.index,
        token.item,
        token.omega,
        OK if valid else FAILED,
        time_s=seconds,
        acceptance=acceptance,
        alpha_star=token.alpha_star,
        message="" if valid else f"acceptance {acceptance!r} is not a probability",
    )


class Unmeasured(Exception):
    """The work raised: ``status`` says how the token is recorded."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _timed(cell: Cell, item: SuiteItem, work: Callable[[Instance], Any]) -> tuple[Any, float]:
    """(last result, seconds of the fastest of ``cell.repeats`` runs), each on a fresh
    instance so that nothing cached on it is reused; raises :class:`Unmeasured`."""
    best, result = np.inf, None
    try:
        for _ in range(cell.repeats):
            inst = _instance(cell, item)
            start = time.perf_counter()
            result = work(inst)
            best = min(best, time.perf_counter() - start)
    except ProblemTooLarge as exc:
        raise Unmeasured(TOO_LARGE, str(exc)) from None
    except ValueError as exc:
        status = NOT_APPLICABLE if cell.kind != METHOD else ERROR
        raise Unmeasured(status, f"ValueError: {exc}") from None
    except Exception as exc:  # a crashing backend is a recorded error, not a dead sweep
        raise Unmeasured(ERROR, f"{type(exc).__name__}: {exc}") from None
    return result, float(best)


def _unmeasured(token: Token, exc: Unmeasured) -> dict[str, Any]:
    return token_record(
        token.index,
        token.item,
        token.omega,
        exc.status,
        alpha_star=token.alpha_star,
        message=str(exc),
    )


# ----- tokens ------------------------------------------------------------------------------
def _instance(cell: Cell, item: SuiteItem, k: int | None = None) -> Instance:
    return Instance(item.p, item.draft(cell.scheme), cell.n, cell.scheme, top_k=k or cell.k)


def token_rng(cell: Cell, index: int) -> np.random.Generator:
    """The generator that draws omega for suite item ``index`` at the cell's (k, n, scheme)."""
    return np.random.default_rng([cell.seed, index, cell.k, cell.n, SCHEMES.index(cell.scheme)])


def draw_token(cell: Cell, index: int, item: SuiteItem) -> Token:
    inst = _instance(cell, item)
    start = time.perf_counter()
    alpha_star = optimal_acceptance(inst).alpha_star
    alpha_time = time.perf_counter() - start
    omega = inst.sample_drafts(token_rng(cell, index), 1)[0]
    return Token(index, item, [int(t) for t in omega], float(alpha_star), alpha_time)


def _warm_up(cell: Cell, item: SuiteItem) -> None:
    """Run ``cell``'s work untimed on a small instance once per process (numba, imports)."""
    key = (cell.kind, cell.name, cell.tau, cell.scheme, cell.n, cell.options)
    if key in _warmed or cell.kind == ALPHA:
        return
    _warmed.add(key)
    small = replace(cell, k=min(cell.k, max(WARM_UP_K, cell.n)), repeats=1)
    for draw in range(WARM_UP_DRAWS):
        try:
            measure(small, draw_token(small, draw, item))
        except ValueError:
            return


@lru_cache(maxsize=8)
def _suite(name: str) -> Suite:
    return load(name)
