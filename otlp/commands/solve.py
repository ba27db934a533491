"""``otlp solve``: alpha*, then each method's acceptance, time and verification report."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from otlp.api import solve
from otlp.commands.common import add_instance_arguments, console, instance_from_args
from otlp.methods import method_names
from otlp.subset import optimal_acceptance

DEFAULT_METHODS = "highs,maxflow,maxflow-cs,networkx,pot"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("solve", help="solve one instance with several methods")
    add_instance_arguments(parser)
    parser.add_argument(
        "--methods",
        default=DEFAULT_METHODS,
        help=f"comma-separated; available: {', '.join(method_names())}",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    inst = instance_from_args(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in method_names()]
    if unknown:
        raise ValueError(f"--methods: unknown {', '.join(unknown)}")
    selection = optimal_acceptance(inst)
    rows = []
    for method in methods:
        plan = solve(inst, method)
        report = plan.info["verification"]
        rows.append(
            {
                "method": method,
                "time_s": plan.info["total_time"],
                "backend_time_s": plan.wall_time,
                **report.as_dict(),
            }
        )
    if args.json:
        print(
            json.dumps(
                {
                    "instance": inst.describe(),
                    "alpha_star": selection.alpha_star,
                    "H_size": int(selection.H.size),
                    "results": rows,
                },
                default=str,
            )
        )
        return 0 if all(r["ok"] for r in rows) else 1
    out = console()
    out.print(
        f"{inst!r}: alpha* = {selection.alpha_star:.9f} "
        f"(|H*| = {selection.H.size}, by {selection.method})"
    )
    table = Table(
        "method", "acceptance", "gap", "target L1", "draft L1", "min entry", "time [ms]", "verified"
    )
    for r in rows:
        table.add_row(
            r["method"],
            f"{r['acceptance']:.9f}",
            f"{r['acceptance_gap']:.1e}",
            f"{r['target_l1']:.1e}",
            f"{r['draft_l1']:.1e}",
            f"{r['min_entry']:.1e}",
            f"{1e3 * r['time_s']:.2f}",
            "ok" if r["ok"] else "FAILED",
        )
    out.print(table)
    return 0 if all(r["ok"] for r in rows) else 1
