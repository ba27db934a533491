"""``otlp validate``: run every checkable statement of the papers on seeded random instances (or
a suite) and write Markdown, JSON and a plot of the worst margins; exit 1 if any check fails."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

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
)
from otlp.plotting.style import add_format_argument

DEFAULT_OUT = RESULTS_ROOT / "validate"


COMMAND = Command(
    summary="check the papers' theorems numerically and report the margins",
    description="Run every registered statement of [GR], [SpecHub], [GBV], [Mentored] and "
    "[Musco] (and the printed errors the errata list, expected to fail) on --count seeded "
    "random instances each, or on the pairs of an instance --suite. Writes OUT/validate.md, "
    ".json and a figure of the worst margins (< 0: violated); exit status 1 if any "
    "statement does not behave as expected.",
    example="otlp validate --quick --checks gr.,musco.qjl",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checks",
        action=CommaList,
        default=[],
        metavar="LIST",
        help="check names or prefixes (gr., spechub., ...); default: all",
    )
    parser.add_argument(
        "--count",
        type=int,
        default=None,
        metavar="N",
        help="instances per statement (default 200; 6 with --quick)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the instance stream")
    parser.add_argument("--suite", default=None, help="draw (p, q) from an instance suite")
    parser.add_argument("--quick", action="store_true", help="CI-sized run")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="output folder"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the figure")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    add_format_argument(parser)
    add_output_arguments(parser)
    add_progress_argument(parser)


def run(args: argparse.Namespace) -> int:
    import otlp.validate as validate
    from otlp.args import positive_int

    if args.count is not None:
        positive_int("--count", args.count)
    positive_int("--seed", args.seed, minimum=0)
    if args.suite is not None:
        from otlp.instances import suite_names

        if args.suite not in suite_names():
            known = ", ".join(suite_names())
            raise ValueError(f"--suite: unknown {args.suite!r}; known: {known}")
    try:
        selected = validate.select(args.checks or None)
    except ValueError as exc:
        raise ValueError(f"--{exc}") from None  # "checks: ..." names the flag
    if args.list:
        rows = [
            {
                "name": c.name,
                "paper": c.paper,
                "section": c.section,
                "statement": c.statement,
                "expect_fail": c.expect_fail,
            }
            for c in selected
        ]
        if args.json:
            print_json(rows)
        else:
            for row in rows:
                flag = " (expect_fail)" if row["expect_fail"] else ""
                print(f"{row['name']:52s} [{row['paper']}] {row['section']}{flag}")
        return 0
    output_path("--out", args.out, folder=True, mkdir=args.mkdir)
    with progress(
        "otlp validate", len(selected), len(selected), "statements", enabled=progress_enabled(args)
    ) as bar:
        report = validate.run(
            [c.name for c in selected],
            count=args.count,
            seed=args.seed,
            suite=args.suite,
            quick=args.quick,
            progress=lambda r: bar.advance(description=f"otlp validate: {r.name}"),
        )
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "validate" if args.suite is None else f"validate-{args.suite}"
    (args.out / f"{stem}.md").write_text(report.to_markdown())
    (args.out / f"{stem}.json").write_text(report.to_json())
    figure = None
    if not args.no_plot:
        from otlp.plotting.validate import plot

        figure = plot(report, args.out / f"{stem}.png", args.format)
    failed = report.failures()
    if args.json:
        print_json(
            {
                **report.to_dict(),
                "markdown": str(args.out / f"{stem}.md"),
                "figure": str(figure or ""),
            }
        )
        return 1 if failed else 0
    out = console()
    out.print(
        f"{len(report.results) - len(failed)}/{len(report.results)} statements as expected "
        f"in {report.seconds:.1f} s; report in {args.out}/{stem}.md"
    )
    for r in failed:
        out.print(
            f"[red]{r.status}[/red] {escape(r.name)}: worst margin {r.worst_margin:.3g} "
            f"(instance {r.worst_index}) {escape(r.first_error)}"
        )
    return 1 if failed else 0
