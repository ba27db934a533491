"""Run a fuzz campaign: cases in parallel, outcomes tallied per component, failures kept."""

from __future__ import annotations

import json
import logging
import multiprocessing
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from otlp.fuzz.cases import KINDS, Case, make_case
from otlp.fuzz.checks import Outcome, check_only, limit_worker, run_case, warm_up

log = logging.getLogger("otlp")
CHUNK = 8  # cases per work unit: small, so progress and Ctrl-C respond within seconds
WORKER_MEMORY = 3 * 2**30  # address-space cap per worker process (bytes)


@dataclass
class Tally:
    """Outcomes of one component."""

    ok: int = 0
    refused: int = 0
    failed: int = 0
    seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        setattr(self, outcome.status, getattr(self, outcome.status) + 1)
        self.seconds += outcome.seconds

    @property
    def run(self) -> int:
        return self.ok + self.refused + self.failed


@dataclass
class Failure:
    """One failing (case, component), with the case itself for replay."""

    component: str
    message: str
    case: Case

    @property
    def kind(self) -> str:
        """The failure class: component and message with numbers and token lists masked."""
        return outcome_class(self.component, self.message)


def outcome_class(component: str, message: str) -> str:
    """``component: message`` with numbers and bracketed lists masked, to group outcomes."""
    text = re.sub(r"\[[^\]]*\]|\([^)]*\)", "(..)", message)
    text = re.sub(r"-?\d[\d.e+-]*", "#", text)
    return f"{component}: {text[:120]}"


@dataclass
class FuzzReport:
    """A campaign's result: cases run, a tally per component, every failure."""

    seed: int
    cases: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    tallies: dict[str, Tally] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    classes: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)

    def add(self, case: Case, outcomes: Sequence[Outcome]) -> None:
        self.cases += 1
        self.classes[case["class"]] += 1
        for outcome in outcomes:
            self.tallies.setdefault(outcome.component, Tally()).add(outcome)
            if outcome.status == "failed":
                self.failures.append(Failure(outcome.component, outcome.message, case))
            elif outcome.status == "refused":
                self.refusals[outcome_class(outcome.component, outcome.message)] += 1

    @property
    def failed(self) -> int:
        return len(self.failures)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "cases": self.cases,
            "wall_s": self.wall_s,
            "interrupted": self.interrupted,
            "classes": dict(self.classes),
            "components": {
                name: {**asdict(t), "run": t.run} for name, t in sorted(self.tallies.items())
            },
            "refusals": dict(self.refusals.most_common()),
            "failures": [asdict(f) for f in self.failures],
        }


def _run_chunk(task: tuple[list[Case], frozenset[str]]) -> list[tuple[Case, list[Outcome]]]:
    cases, only = task
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow notes on adversarial input
        return [(case, run_case(case, only)) for case in cases]


def run_campaign(
    cases: Iterable[Case],
    *,
    seed: int = 0,
    workers: int = 1,
    only: Iterable[str] = (),
    on_chunk: Callable[[int], None] | None = None,
) -> FuzzReport:
    """Run every case through its components on ``workers`` processes (1: in this process).

    ``only`` restricts the components to those starting with one of its prefixes (e.g.
    ``"method:"``, ``"rule:kseq"``). ``on_chunk(cases_done)`` reports progress. Ctrl-C stops
    at once and returns what finished, with ``interrupted`` set.
    """
    only = check_only(only)
    report = FuzzReport(seed)
    start = time.perf_counter()
    cases = list(cases)
    tasks = [(cases[i : i + CHUNK], frozenset(only)) for i in range(0, len(cases), CHUNK)]
    log.info("%d cases in %d chunks on %d worker(s)", len(cases), len(tasks), workers)
    try:
        for results in _execute(tasks, workers):
            for case, outcomes in results:
                report.add(case, outcomes)
            if on_chunk is not None:
                on_chunk(len(results))
    except KeyboardInterrupt:
        report.interrupted = True
    report.wall_s = time.perf_counter() - start
    return report


def _execute(
    tasks: list[tuple[list[Case], frozenset[str]]], workers: int
) -> Iterator[list[tuple[Case, list[Outcome]]]]:
    if workers <= 1:
        warm_up()
        for task in tasks:
            yield _run_chunk(task)
        return
    from otlp.bench.executor import pinned_blas

    context = multiprocessing.get_context("spawn")
    with pinned_blas():
        pool = context.Pool(workers, initializer=limit_worker, initargs=(WORKER_MEMORY,))
    try:
        yield from pool.imap_unordered(_run_chunk, tasks)
    except BaseException:  # interrupted or closed early: stop the workers where they are
        pool.terminate()
        pool.join()
        raise
    # Done: each worker takes its sentinel from the queue and exits. Terminating them here
    # instead could kill one holding the task queue's lock, leaving a respawned worker
    # blocked on it and join() waiting forever (seen in tests/test_fuzz.py's --workers 2 run).
    pool.close()
    pool.join()


def campaign_cases(seed: int, count: int, start: int = 0) -> list[Case]:
    """Cases ``start .. start + count - 1`` of the campaign seeded by ``seed``."""
    return [make_case(seed, index) for index in range(start, start + count)]


def save_failures(report: FuzzReport, path: Path) -> None:
    """The failing cases as a JSON file that ``otlp fuzz --replay`` reads."""
    unique = {json.dumps(f.case, sort_keys=True): f.case for f in report.failures}
    path.write_text(
        json.dumps(
            {
                "seed": report.seed,
                "failures": [asdict(f) for f in report.failures],
                "cases": list(unique.values()),
            },
            indent=1,
        )
    )


def load_replay(path: Path) -> list[Case]:
    """The cases of a file written by :func:`save_failures` (or a list of cases); for a
    folder, the cases of every ``failures-*.json`` in it."""
    if path.is_dir():
        files = sorted(path.glob("failures-*.json"))
        if not files:
            raise ValueError(f"--replay: {path} is a folder with no failures-*.json file")
        return [case for file in files for case in load_replay(file)]
    if not path.is_file():
        raise ValueError(f"--replay: no such file {path}")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--replay: {path} is not valid JSON ({exc})") from None
    cases = data.get("cases") if isinstance(data, dict) else data
    if not isinstance(cases, list) or not all(
        isinstance(c, dict) and c.get("kind") in KINDS for c in cases
    ):
        raise ValueError(f"--replay: {path} holds no fuzz cases (expected 'cases': [...])")
    return cases
