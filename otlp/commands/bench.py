"""``otlp bench``: run a benchmark config (default: the main job) and write report and plots."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import otlp
from otlp.commands.common import (
    RESULTS_ROOT,
    CommaList,
    Command,
    Tracker,
    add_output_arguments,
    add_progress_argument,
    output_path,
    print_json,
    progress,
    progress_enabled,
    stderr_console,
)
from otlp.plotting.style import add_format_argument

if TYPE_CHECKING:
    from otlp.bench.runner import BenchProgress, ProgressCallback

DEFAULT_CONFIG = Path("benchmarks") / "configs" / "default.toml"
DEFAULT_OUT = RESULTS_ROOT / "bench"
REFERENCE_OUT = Path("benchmarks") / "results"


COMMAND = Command(
    summary="run the benchmark harness (suites x methods x (k, n, tau)); writes a report",
    description="Measure per-token time, success, acceptance and verifier deviations over "
    "a grid from a TOML config; resumable (finished cells are kept in OUT/results.jsonl, "
    "also after Ctrl-C); local process pool or a Dask cluster. Writes results.csv, "
    f"tokens.csv, results.json, report.md and plots to OUT (default {DEFAULT_OUT}/, "
    f"git-ignored; the tracked reference results are regenerated only with --out "
    f"{REFERENCE_OUT}). Exit status 1 when a token failed verification or a cell errored.",
    example="otlp bench --config benchmarks/configs/default.toml --out otlp-results/bench",
    json_help="print the run's summary (cells, counts, files) as JSON to stdout",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"TOML config (default: {DEFAULT_CONFIG})",
    )
    parser.add_argument(
        "--suite",
        action=CommaList,
        default=[],
        metavar="LIST",
        help="run on these suites instead of the config's, comma-separated or repeated "
        "(see `otlp suites`)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="output folder"
    )
    parser.add_argument(
        "--scheduler", default=None, metavar="ADDR", help="run on the Dask scheduler at ADDR"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="local worker processes (default: the config's)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--resume",
        action="store_true",
        default=True,
        help="skip cells already in OUT/results.jsonl (the default)",
    )
    mode.add_argument(
        "--fresh", dest="resume", action="store_false", help="discard OUT/results.jsonl first"
    )
    add_output_arguments(parser)
    add_progress_argument(parser)
    add_format_argument(parser)


def default_config() -> Path:
    """benchmarks/configs/default.toml here, or in the checkout this package runs from."""
    if DEFAULT_CONFIG.is_file():
        return DEFAULT_CONFIG
    source_tree = Path(otlp.__file__).resolve().parents[1] / DEFAULT_CONFIG
    if source_tree.is_file():
        return source_tree
    raise ValueError(f"--config: no {DEFAULT_CONFIG} here or in the source tree; pass --config")


def command_line(args: argparse.Namespace, *, resume: bool = False) -> str:
    """The command as typed, for the report (options at their defaults left out); with
    ``resume`` the command that continues an interrupted run."""
    parts = ["otlp", "bench"]
    if args.config is not None:
        parts += ["--config", str(args.config)]
    if args.suite:
        parts += ["--suite", ",".join(args.suite)]
    if args.out != DEFAULT_OUT:
        parts += ["--out", str(args.out)]
    if args.scheduler:
        parts += ["--scheduler", args.scheduler]
    if args.workers is not None:
        parts += ["--workers", str(args.workers)]
    if not args.resume and not resume:
        parts.append("--fresh")
    if args.format != "png":
        parts += ["--format", args.format]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers: expected a positive integer, got {args.workers}")
    from otlp.bench import BenchInterrupted, load_config, run_bench
    from otlp.bench.verification import load_verification, run_verification

    verification = load_verification(args.config or default_config())
    if verification is not None:
        output_path("--out", args.out, folder=True, mkdir=args.mkdir)
        print(run_verification(verification, args.out, command_line(args)), end="")
        return 0
    config = load_config(args.config or default_config())
    output_path("--out", args.out, folder=True, mkdir=args.mkdir)
    console = stderr_console()
    try:
        with progress_bar(progress_enabled(args)) as report:
            outcome = run_bench(
                config,
                args.out,
                suites=args.suite,
                scheduler=args.scheduler,
                workers=args.workers,
                fresh=not args.resume,
                progress=report,
                command=command_line(args),
                console=console,
                figure_format=args.format,
            )
    except BenchInterrupted as stop:
        console.print(
            f"interrupted: {stop.cells_kept} of {stop.cells_total} cells finished and kept in "
            f"{stop.store}; resume with: {command_line(args, resume=True)}"
        )
        return 130
    failed = sum(row["failed"] for row in outcome.summaries)
    errors = sum(row["errors"] for row in outcome.summaries)
    if args.json:
        print_json(
            {
                "out": str(outcome.out_dir),
                "files": [str(f) for f in outcome.files],
                "cells": len(outcome.summaries),
                "cells_run": outcome.cells_run,
                "cells_reused": outcome.cells_reused,
                "capped": outcome.capped,
                "wall_s": outcome.wall_s,
                "failed_tokens": failed,
                "error_tokens": errors,
                "notes": list(outcome.notes),
                "summaries": list(outcome.summaries),
            }
        )
    console.print(
        f"{len(outcome.summaries)} cells ({outcome.cells_run} measured now, "
        f"{outcome.cells_reused} reused, {outcome.capped} over a size cap) in "
        f"{outcome.wall_s:.1f} s; report: {outcome.out_dir / 'report.md'}"
    )
    if failed:
        console.print(f"[red]{failed} token(s) failed verification[/] (see the report)")
    if errors:
        console.print(f"[red]{errors} token(s) raised an error[/] (see tokens.csv)")
    return 1 if failed or errors else 0


@contextmanager
def progress_bar(enabled: bool) -> Iterator[ProgressCallback | None]:
    """A callback drawing the run's :class:`~otlp.bench.runner.BenchProgress` as the usual bar
    (by estimated work, ETA from work done), opened at the first event, which carries the
    totals, and closed with the last cell; None when progress is off."""
    if not enabled:
        yield None
        return
    with ExitStack() as stack:
        bar: Tracker | None = None
        done = 0

        def report(event: BenchProgress) -> None:
            nonlocal bar, done
            if bar is None:
                bar = stack.enter_context(
                    progress(
                        "otlp bench", event.total_work, event.total_cells, "cells", enabled=True
                    )
                )
            bar.advance(event.work, items=event.cells, description=event.description)
            done += event.cells
            if done == event.total_cells:
                stack.close()  # every cell is in: the bar ends before the outputs are written

        yield report
