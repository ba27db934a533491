"""What ``otlp decode`` prints: a progress line per finished run, the texts labelled with
their method, and a statistics table that fits 80 columns (short headers, a legend below);
with ``--check-lossless``, a χ² row per method."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.box import SIMPLE_HEAD
from rich.table import Table

from otlp.commands.common import stderr_note
from otlp.decoding.grid import (
    Config,
    Row,
    Run,
    method_text,
    se_text,
    shares_text,
)
from otlp.decoding.lossless import REJECT_BELOW, ChiSquare, LosslessCheck

TABLE_LEGEND = (
    "BE: block efficiency, tokens per target call ± s.e.; ×ar: wall-clock speed-up over ar "
    "in the same round, median over the rounds, and its min–max; load: mean 1-min load "
    "average at the start of the runs; d/t/v %: share of the time drafting / in the target / "
    "verifying. Tokens per second and every time: --json or --markdown."
)


class RunLog:
    """One stderr line per finished run: which run, its time, the elapsed time and an
    estimate of the time left (each remaining run costs the mean of its config's earlier
    rounds, or of every run so far). Lines, not a live bar: they also show when stderr is a
    log file or a pipe."""

    def __init__(
        self,
        order: Sequence[tuple[int, Config, Config | None]],
        *,
        enabled: bool,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.order = list(order)
        self.rounds = 1 + max((r for r, _, _ in self.order), default=0)
        self.enabled = enabled
        self.clock = clock
        self.started = clock()
        self.last = self.started
        self.seconds: dict[Config, list[float]] = {}

    def __call__(self, run: Run) -> None:
        now = self.clock()
        self.seconds.setdefault(run.config, []).append(now - self.last)
        self.last = now
        if not self.enabled:
            return
        done = sum(len(s) for s in self.seconds.values())
        config = run.config
        what = config.method if config.method == "ar" else f"{config.method} {config.shape}"
        if config.draft:
            what += f" ({config.draft})"
        stderr_note(
            f"decode: run {done}/{len(self.order)} {what}, round {run.round + 1}/{self.rounds}: "
            f"{self.seconds[config][-1]:.1f} s (load {run.load:.1f}); elapsed "
            f"{_clock(now - self.started)}, about {_clock(self.remaining(done))} left"
        )

    def remaining(self, done: int) -> float:
        """Estimated seconds for the runs after the first ``done``."""
        every = [s for times in self.seconds.values() for s in times]
        overall = sum(every) / len(every) if every else 0.0
        total = 0.0
        for _, config, _ in self.order[done:]:
            own = self.seconds.get(config)
            total += sum(own) / len(own) if own else overall
        return total


def _clock(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _legend_table(title: str, legend: str) -> Table:
    """An empty terminal table in decode's layout: a light head rule, no edge padding, the
    legend left-aligned as its caption."""
    return Table(
        title=title,
        caption=legend,
        caption_justify="left",
        box=SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )


def table(rows: Sequence[Row]) -> Table:
    """The statistics of ``rows`` in at most 80 columns: temperature and draft move to the
    title when every row shares them; the legend is the caption."""
    shared = {
        name: values.pop()
        for name, values in (
            ("T", {f"{r.temperature:g}" for r in rows}),
            ("draft", {r.draft or "-" for r in rows if r.method != "ar"} or {"-"}),
        )
        if len(values) == 1
    }
    rounds = {r.rounds for r in rows}
    title = "speculative decoding, same prompts and seeds"
    if len(rounds) == 1:
        title += f", {rounds.pop()} interleaved round(s)"
    title += "".join(f", {name} = {value}" for name, value in shared.items() if value != "-")
    out = _legend_table(title, TABLE_LEGEND)
    widths = {"method": 12, "draft": 9, "K×L": 5}  # folded or wrapped beyond these
    columns = ["method", "draft", "T", "K×L", "BE", "×ar", "min–max", "load", "d/t/v %"]
    columns = [c for c in columns if c not in shared]
    for name in columns:
        out.add_column(
            name,
            justify="left" if name in {"method", "draft"} else "right",
            overflow="fold",
            max_width=widths.get(name),
            no_wrap=name not in widths,
        )
    for r in rows:
        spread = r.rounds > 1 and r.method != "ar"
        cells = {
            "method": method_text(r),
            "draft": r.draft or "-",
            "T": f"{r.temperature:g}",
            "K×L": r.shape,
            "BE": f"{r.block_efficiency:.2f}±{se_text(r.block_efficiency_se)}",
            "×ar": f"{r.speedup:.2f}" if r.method != "ar" else "1",
            "min–max": f"{r.speedup_low:.2f}–{r.speedup_high:.2f}" if spread else "-",
            "load": f"{sum(r.round_loads) / len(r.round_loads):.1f}",
            "d/t/v %": shares_text(r),
        }
        out.add_row(*(cells[c] for c in columns))
    return out


def cut_at_stop(tokens: Sequence[int], stops: Sequence[int]) -> list[int]:
    """``tokens`` up to and including the first stop token (timing runs decode past it)."""
    out = []
    for token in tokens:
        out.append(token)
        if token in stops:
            break
    return out


LOSSLESS_LEGEND = (
    "p: χ² of the decoded pairs (a, b) against the target's p(a) p(b|a) (cells: pairs expected "
    f"≥ 5 times, the rest lumped), rejected below {REJECT_BELOW:g}; control p: the same test "
    "of pairs drawn from the draft's q(a) q(b|a), which must be rejected when the draft "
    "differs from the target (else the test cannot tell them apart at this N). The exit "
    "status is 0 whatever the p-values."
)
LOSSLESS_COLUMNS = ("method", "K×L", "samples", "cells", "χ²", "dof", "p", "control p", "s")


def lossless_cells(config: Config, check: LosslessCheck) -> dict[str, str]:
    """One --check-lossless row as text, by column of :data:`LOSSLESS_COLUMNS`."""
    test = check.decoded
    top_k = config.draft_top_k
    return {
        "method": config.method if top_k is None else f"{config.method} top-{top_k}",
        "K×L": config.shape,
        "samples": str(test.samples),
        "cells": str(test.cells),
        "χ²": f"{test.chi2:.1f}",
        "dof": str(test.dof),
        "p": _verdict(test),
        "control p": _verdict(check.control),
        "s": f"{test.seconds:.0f}",
    }


def lossless_dict(config: Config, check: LosslessCheck) -> dict[str, object]:
    """One --check-lossless row for --json: the config and both tests."""
    return {
        "method": config.method,
        "shape": config.shape,
        "top_k": config.draft_top_k,
        "scheme": config.scheme,
        **check.as_dict(),
    }


def lossless_markdown(checks: Sequence[tuple[Config, LosslessCheck]]) -> str:
    """The --check-lossless rows in Markdown."""
    from otlp.bench.markdown import table_head, table_row  # otlp.bench loads when used

    head = table_head(LOSSLESS_COLUMNS, "l" * len(LOSSLESS_COLUMNS))
    rows = [table_row(list(lossless_cells(config, check).values())) for config, check in checks]
    return "".join(line + "\n" for line in [*head, *rows])


def lossless_table(checks: Sequence[tuple[Config, LosslessCheck]], title: str) -> Table:
    """The --check-lossless rows as a terminal table, the legend as its caption."""
    out = _legend_table(title, LOSSLESS_LEGEND)
    for name in LOSSLESS_COLUMNS:
        out.add_column(name, justify="left" if name == "method" else "right")
    for config, check in checks:
        out.add_row(*lossless_cells(config, check).values())
    return out


def _verdict(test: ChiSquare) -> str:
    """The p-value (``<1e-300`` when it underflows), marked when below the threshold."""
    text = "<1e-300" if test.pvalue == 0.0 else f"{test.pvalue:.3g}"
    return f"{text} rejected" if test.rejected else text
