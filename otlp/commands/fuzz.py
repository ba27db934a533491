"""``otlp fuzz``: a seeded campaign of random and adversarial instances through every method,
rule, draft scheme and multi-step method, every conditional scanned; failures saved for
``--replay``."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from otlp.commands.common import (
    RESULTS_ROOT,
    CommaList,
    Command,
    add_output_arguments,
    add_progress_argument,
    console,
    output_path,
    print_json,
    progress,
    progress_enabled,
    stderr_console,
)
from otlp.fuzz import FuzzReport, campaign_cases, load_replay, run_campaign, save_failures
from otlp.fuzz.checks import check_only

DEFAULT_CASES = 2000
DEFAULT_OUT = RESULTS_ROOT / "fuzz"
SHOWN_FAILURES = 10


COMMAND = Command(
    summary="fuzz every method, rule, scheme and multi-step method with adversarial cases",
    description="Generate --cases seeded instances (random, one-hot and near one-hot p or "
    "q, peaked q, subnormal and 1e-300 masses, subnormal column masses, p = q, disjoint "
    "supports, ties, float32, float16, tiny V, top-k, every scheme, independent drafts, "
    "the largest n the limits allow on tiny V, tau down to 1e-6, p = 0 on the top drafts, "
    "underflowing draft tuples, drafters of split supports) and small multi-step "
    "model pairs; run each through every component and scan every "
    "conditional pi(.|omega) a decoder would sample from (entries >= -tol, sum 1, sampled "
    "tokens valid), and hand every scheme's cases to the decoder API (otlp.verify_drafts) "
    "in float16, bfloat16, float32 and float64, mixed, numpy or torch, with the least "
    "likely drafts and misordered independent pairs; budget cases (budget:<scheme>) give "
    "global resolution's decoder call peaked drafts, V up to 1,000, n up to 8 and a time "
    "budget of 1e-4 to 0.1 s: every row must get a token, within 1.2 x the budget plus one "
    "bounded step. The first cases of every "
    "campaign are fixed reproducers of past failures. A ValueError is a clear refusal, not "
    "a failure (except from the decoder on valid inputs). Prints a table of cases "
    "and failures per component; failing cases go to OUT/failures-seed<SEED>.json for "
    "--replay. Runs on --workers processes (default: every core). Exit status 1 if any "
    "case failed.",
    example="otlp fuzz --cases 20000 --seed 0 --workers 2",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cases", type=int, default=DEFAULT_CASES, metavar="N", help="cases to generate"
    )
    parser.add_argument("--seed", type=int, default=0, help="campaign seed")
    parser.add_argument(
        "--start", type=int, default=0, metavar="I", help="index of the first case (to extend)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="parallel worker processes (default: os.cpu_count(); 1 runs in this process)",
    )
    parser.add_argument(
        "--only",
        action=CommaList,
        default=[],
        metavar="LIST",
        help="only components starting with these prefixes, e.g. method:,rule:kseq,multistep:",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        default=None,
        metavar="PATH",
        help="re-run the cases saved in PATH (a failures file, or a folder: every "
        "failures-*.json in it) instead of generating",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="folder for failing cases"
    )
    add_output_arguments(parser)
    add_progress_argument(parser)


def run(args: argparse.Namespace) -> int:
    if args.cases < 1:
        raise ValueError(f"--cases: expected a positive integer, got {args.cases}")
    if args.seed < 0 or args.start < 0:
        raise ValueError("--seed/--start: expected non-negative integers")
    workers = (os.cpu_count() or 1) if args.workers is None else args.workers
    if workers < 1:
        raise ValueError(f"--workers: expected a positive integer, got {workers}")
    check_only(args.only, "--only")
    output_path("--out", args.out, folder=True, mkdir=args.mkdir)
    if args.replay is not None:
        cases = load_replay(args.replay)
    else:
        cases = campaign_cases(args.seed, args.cases, args.start)
    show = progress_enabled(args)
    with progress("otlp fuzz", len(cases), len(cases), "cases", enabled=show) as bar:
        report = run_campaign(
            cases,
            seed=args.seed,
            workers=workers,
            only=args.only,
            on_chunk=lambda done: bar.advance(done, items=done),
        )
    saved = None
    if report.failures:
        saved = args.out / f"failures-seed{args.seed}.json"
        save_failures(report, saved)
    if args.json:
        print_json({**report.as_dict(), "workers": workers, "saved": str(saved or "")})
    else:
        _print_summary(report, workers, saved)
    if report.interrupted:
        stderr_console().print(
            f"interrupted after {report.cases} of {len(cases)} cases; continue with "
            f"--start {args.start + report.cases} (cases run in parallel, so a few before it "
            "may be missing)"
        )
        return 130
    return 1 if report.failures else 0


def summary_rows(report: FuzzReport) -> list[list[str]]:
    """One row per component: cases run, ok, refused, failed, total seconds."""
    return [
        [name, str(t.run), str(t.ok), str(t.refused), str(t.failed), f"{t.seconds:.1f}"]
        for name, t in sorted(report.tallies.items())
    ]


SUMMARY_HEAD = ("component", "cases", "ok", "refused", "failed", "time [s]")


def _print_summary(report: FuzzReport, workers: int, saved: Path | None) -> None:
    out = console()
    classes = ", ".join(f"{name} {count}" for name, count in sorted(report.classes.items()))
    title = (
        f"otlp fuzz: {report.cases} cases (seed {report.seed}) in {report.wall_s:.1f} s on "
        f"{workers} worker(s); {report.failed} failure(s)"
    )
    table = Table(*map(escape, SUMMARY_HEAD), title=title, caption=f"classes: {classes}")
    for row in summary_rows(report):
        table.add_row(*row, style="red" if row[4] != "0" else None)
    out.print(table)
    kinds = Counter(f.kind for f in report.failures)
    for kind, count in kinds.most_common(SHOWN_FAILURES):
        out.print(escape(f"  {count:5d} x {kind}"))
    if saved is not None:
        out.print(escape(f"failing cases: {saved} (replay: otlp fuzz --replay {saved})"))
