"""``otlp bench``: run a benchmark config (default: the main job) and write report and plots."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import otlp
from otlp.plotting.style import add_format_argument

DEFAULT_CONFIG = Path("benchmarks") / "configs" / "default.toml"
DEFAULT_OUT = Path("benchmarks") / "results"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run the benchmark harness (suites x methods x (k, n, tau)); writes a report",
        description="Measure per-token time, success, acceptance and verifier deviations over "
        "a grid from a TOML config; resumable; local process pool or a Dask cluster.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"TOML config (default: {DEFAULT_CONFIG})",
    )
    parser.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help="run on this suite instead of the config's (repeatable; see `otlp suites`)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder (default: {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--scheduler", default=None, metavar="ADDR", help="run on this Dask scheduler"
    )
    parser.add_argument(
        "--workers", type=int, default=None, metavar="N", help="local worker processes"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--resume",
        action="store_true",
        default=True,
        help="skip cells already in OUT/results.jsonl (default)",
    )
    mode.add_argument(
        "--fresh", dest="resume", action="store_false", help="discard OUT/results.jsonl first"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_format_argument(parser)
    parser.set_defaults(run=run)


def default_config() -> Path:
    """benchmarks/configs/default.toml here, or in the checkout this package runs from."""
    if DEFAULT_CONFIG.is_file():
        return DEFAULT_CONFIG
    source_tree = Path(otlp.__file__).resolve().parents[1] / DEFAULT_CONFIG
    if source_tree.is_file():
        return source_tree
    raise ValueError(f"--config: no {DEFAULT_CONFIG} here or in the source tree; pass --config")


def command_line(args: argparse.Namespace) -> str:
    """The command as typed, for the report (options at their defaults left out)."""
    parts = ["otlp", "bench"]
    if args.config is not None:
        parts += ["--config", str(args.config)]
    for suite in args.suite:
        parts += ["--suite", suite]
    if args.out != DEFAULT_OUT:
        parts += ["--out", str(args.out)]
    if args.scheduler:
        parts += ["--scheduler", args.scheduler]
    if args.workers is not None:
        parts += ["--workers", str(args.workers)]
    if not args.resume:
        parts.append("--fresh")
    if args.format != "png":
        parts += ["--format", args.format]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers: expected a positive integer, got {args.workers}")
    from rich.console import Console  # the harness (matplotlib, rich) loads only when used

    from otlp.bench import load_config, run_bench

    config = load_config(args.config or default_config())
    console = Console(stderr=True)
    outcome = run_bench(
        config,
        args.out,
        suites=args.suite,
        scheduler=args.scheduler,
        workers=args.workers,
        fresh=not args.resume,
        progress=not args.no_progress,
        command=command_line(args),
        console=console,
        figure_format=args.format,
    )
    failed = sum(row["failed"] for row in outcome.summaries)
    console.print(
        f"{len(outcome.summaries)} cells ({outcome.cells_run} measured now, "
        f"{outcome.cells_reused} reused, {outcome.capped} over a size cap) in "
        f"{outcome.wall_s:.1f} s; report: {outcome.out_dir / 'report.md'}"
    )
    if failed:
        console.print(f"[red]{failed} token(s) failed verification[/] (see the report)")
    return 1 if failed else 0
