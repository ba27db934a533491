"""Run registered checks on seeded random instances (or suite items) and report margins."""

from __future__ import annotations

import json
import math
import time
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from otlp.args import positive_int
from otlp.validate import registry
from otlp.validate.registry import Case, Check, Outcome, get

QUICK_COUNT = 6
FULL_COUNT = 200


@dataclass
class CheckResult:
    """Per-statement summary: instances tried and passed, worst margin and its instance."""

    name: str
    paper: str
    section: str
    statement: str
    expect_fail: bool
    tried: int = 0
    passed: int = 0
    errors: int = 0
    worst_margin: float = math.inf
    worst_index: int = -1
    worst_values: dict[str, float] = field(default_factory=dict)
    worst_instance: dict[str, Any] = field(default_factory=dict)
    first_error: str = ""
    seconds: float = 0.0

    @property
    def violated(self) -> int:
        return self.tried - self.passed

    @property
    def ok(self) -> bool:
        """A statement holds on every instance; a printed error is refuted on at least one."""
        if self.errors:
            return False
        return self.violated > 0 if self.expect_fail else self.violated == 0 and self.tried > 0

    @property
    def status(self) -> str:
        if self.errors:
            return "ERROR"
        if self.expect_fail:
            return "refuted (expected)" if self.violated else "NOT REFUTED"
        return "holds" if self.ok else "VIOLATED"


@dataclass
class Report:
    """The result of :func:`run`: one :class:`CheckResult` per check plus the run's settings."""

    results: list[CheckResult]
    seed: int
    count: int
    suite: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for r in self.results:
            row = asdict(r)
            row.update(status=r.status, ok=r.ok)
            rows.append(row)
        return {
            "seed": self.seed,
            "count": self.count,
            "suite": self.suite,
            "seconds": self.seconds,
            "ok": self.ok,
            "statements": len(self.results),
            "results": rows,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=_jsonable)

    def to_markdown(self) -> str:
        source = f"suite `{self.suite}`" if self.suite else "random instances"
        held = sum(r.ok for r in self.results)
        lines = [
            f"# otlp validate: {held}/{len(self.results)} statements as expected",
            "",
            f"{source}, seed {self.seed}, up to {self.count} instances per statement, "
            f"{self.seconds:.1f} s. Margin < 0 means the statement is violated on that "
            "instance; `expect_fail` rows are statements as printed in a paper, which must be "
            "refuted (see docs/errata.md).",
            "",
            "| check | paper | section | statement | tried | passed | worst margin | status |",
            "|---|---|---|---|---:|---:|---:|---|",
        ]
        for r in self.results:
            statement = r.statement.replace("|", "\\|")
            lines.append(
                f"| `{r.name}` | [{r.paper}] | {r.section} | {statement} | {r.tried} | "
                f"{r.passed} | {r.worst_margin:.3g} | {r.status} |"
            )
        errors = [r for r in self.results if r.errors]
        if errors:
            lines += ["", "Errors:", ""]
            lines += [f"* `{r.name}`: {r.first_error}" for r in errors]
        return "\n".join(lines) + "\n"


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return str(value)


def instance_rng(seed: int, name: str, index: int) -> np.random.Generator:
    """The generator of instance ``index`` of check ``name`` (independent of other checks)."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(name.encode()), index]))


def run_one(check: Check, seed: int, index: int, item: Any = None) -> tuple[Outcome, Case]:
    """Run instance ``index`` of ``check``: what :func:`run` does, for replaying one instance."""
    case = Case(instance_rng(seed, check.name, index), item)
    return check.func(case), case


def replay(name: str, seed: int = 0, index: int = 0, suite: str | None = None) -> Outcome:
    """Re-run one saved instance (its ``worst_index`` in a report) of check ``name``.

    ``seed`` and ``index`` are non-negative integers (``ValueError`` naming them otherwise).
    """
    if not isinstance(name, str):
        raise ValueError(f"name: expected a check name (a string), got {name!r}")
    check = get(name)
    seed = positive_int("seed", seed, minimum=0)
    index = positive_int("index", index, minimum=0)
    item = None
    if suite is not None:
        items = _suite_items(suite)
        item = items[index % len(items)]
    return run_one(check, seed, index, item)[0]


def _suite_items(name: str) -> list[Any]:
    import otlp.instances

    return list(otlp.instances.load(name))


def select(checks: Iterable[str] | str | None = None) -> list[Check]:
    """Checks by name, or by prefix (``gr.`` selects every [GR] check); None: all.

    One string is one name (``"gr.thm3_1"``, not its characters); anything else must be an
    iterable of strings (``ValueError`` naming ``checks`` otherwise).
    """
    known = registry.checks()
    if checks is None:
        return list(known.values())
    if isinstance(checks, str):
        checks = [checks]
    if not isinstance(checks, Iterable):
        raise ValueError(f"checks: expected a check name or a list of them, got {checks!r}")
    chosen: list[Check] = []
    for name in checks:
        if not isinstance(name, str):
            raise ValueError(f"checks: expected check names (strings), got {name!r}")
        hits = [c for key, c in known.items() if key == name or key.startswith(name)]
        if not hits:
            raise ValueError(f"checks: no check matches {name!r}; known: {', '.join(known)}")
        chosen += [c for c in hits if c not in chosen]
    if not chosen:
        raise ValueError("checks: an empty selection; pass None to run every check")
    return chosen


def run(
    checks: Iterable[str] | str | None = None,
    count: int | None = None,
    seed: int = 0,
    suite: str | None = None,
    quick: bool = False,
    progress: Callable[[CheckResult], None] | None = None,
) -> Report:
    """Run checks and return a :class:`Report`.

    ``count`` instances per statement (default 200, or 6 with ``quick``), scaled down for
    expensive checks by their ``cost``; ``seed`` makes the run reproducible; ``suite`` draws
    the (p, q) pairs of checks that accept them from a named instance suite instead.
    """
    if count is None:
        count = QUICK_COUNT if quick else FULL_COUNT
    count = positive_int("count", count)
    seed = positive_int("seed", seed, minimum=0)
    selected = select(checks)
    items = _suite_items(suite) if suite is not None else None
    start = time.perf_counter()
    results = []
    for check in selected:
        results.append(_run_check(check, count, seed, items))
        if progress is not None:
            progress(results[-1])
    return Report(results, seed, count, suite, time.perf_counter() - start)


def _run_check(check: Check, count: int, seed: int, items: list[Any] | None) -> CheckResult:
    result = CheckResult(check.name, check.paper, check.section, check.statement, check.expect_fail)
    # A printed error needs a few instances to show itself even in a quick run.
    total = max(12 if check.expect_fail else 1, round(count * check.cost))
    use_items = items if items is not None and check.suite else None
    start = time.perf_counter()
    for index in range(total):
        item = use_items[index % len(use_items)] if use_items else None
        try:
            # Overflow warnings of the reference computations are noise: a check whose margin
            # comes out NaN counts as violated.
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                outcome, case = run_one(check, seed, index, item)
        except Exception as exc:  # a crash is a failure of the statement's check, with a reason
            result.tried += 1
            result.errors += 1
            if not result.first_error:
                last = traceback.extract_tb(exc.__traceback__)[-1]
                result.first_error = f"{type(exc).__name__}: {exc} ({last.filename}:{last.lineno})"
            continue
        result.tried += 1
        result.passed += outcome.passed
        margin = -math.inf if math.isnan(outcome.margin) else float(outcome.margin)
        if margin < result.worst_margin or result.worst_index < 0:
            result.worst_margin = margin
            result.worst_index = index
            result.worst_values = outcome.values
            result.worst_instance = dict(case.recorded)
    result.seconds = time.perf_counter() - start
    return result
