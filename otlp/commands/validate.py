"""``otlp validate``: run every checkable statement of the papers on seeded random instances (or
a suite) and write Markdown, JSON and a plot of the worst margins; exit 1 if any check fails."""

from __future__ import annotations

import argparse
from pathlib import Path

from otlp.commands.common import console

DEFAULT_OUT = Path("otlp-results") / "validate"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate", help="check the papers' theorems numerically and report the margins"
    )
    parser.add_argument(
        "--checks",
        default=None,
        help="comma-separated check names or prefixes (gr., spechub., ...)",
    )
    parser.add_argument(
        "--count",
        type=int,
        default=None,
        help="instances per statement (default 200; 6 with --quick)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--suite", default=None, help="draw (p, q) from an instance suite")
    parser.add_argument("--quick", action="store_true", help="CI-sized run")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import otlp.validate as validate

    if args.list:
        for check in validate.checks().values():
            flag = " (expect_fail)" if check.expect_fail else ""
            print(f"{check.name:52s} [{check.paper}] {check.section}{flag}")
        return 0
    names = None if args.checks is None else [c.strip() for c in args.checks.split(",") if c]
    out = console()
    report = validate.run(
        names,
        count=args.count,
        seed=args.seed,
        suite=args.suite,
        quick=args.quick,
        progress=lambda r: out.print(f"{r.status:18s} {r.name} ({r.tried}, {r.seconds:.1f} s)"),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "validate" if args.suite is None else f"validate-{args.suite}"
    (args.out / f"{stem}.md").write_text(report.to_markdown())
    (args.out / f"{stem}.json").write_text(report.to_json())
    if not args.no_plot:
        plot(report, args.out / f"{stem}.png")
    failed = report.failures()
    out.print(
        f"{len(report.results) - len(failed)}/{len(report.results)} statements as expected "
        f"in {report.seconds:.1f} s; report in {args.out}/{stem}.md"
    )
    for r in failed:
        out.print(
            f"[red]{r.status}[/red] {r.name}: worst margin {r.worst_margin:.3g} "
            f"(instance {r.worst_index}) {r.first_error}"
        )
    return 1 if failed else 0


def plot(report, path: Path) -> None:
    """Worst margin per statement on a symmetric log scale (< 0: violated)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report.results
    fig, ax = plt.subplots(figsize=(8, 0.22 * len(rows) + 1.2))
    colors = ["tab:orange" if r.expect_fail else ("tab:green" if r.ok else "tab:red") for r in rows]
    margins = [r.worst_margin if r.worst_margin != float("inf") else 0.0 for r in rows]
    ax.barh(range(len(rows)), margins, color=colors)
    ax.set_yticks(range(len(rows)), [r.name for r in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1e-12)
    ax.set_xticks([-1e2, -1, -1e-4, -1e-8, 0, 1e-8, 1e-4, 1, 1e2])
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_xlabel("worst margin (< 0: violated; orange: printed statements expected to fail)")
    ax.set_title(f"otlp validate: {len(rows)} statements, seed {report.seed}")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
