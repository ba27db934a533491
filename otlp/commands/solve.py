"""``otlp solve``: alpha*, then each method's acceptance, time and verification report."""

from __future__ import annotations

import argparse
import logging
import time

from rich.markup import escape
from rich.table import Table

from otlp.api import solve
from otlp.commands.common import (
    CommaList,
    Command,
    add_instance_arguments,
    check_names,
    console,
    instance_from_args,
    name_item,
    print_json,
    stderr_console,
)
from otlp.instance import Instance
from otlp.methods import method_names
from otlp.subset import optimal_acceptance

DEFAULT_METHODS = ["highs", "maxflow", "maxflow_cs", "networkx", "pot"]
WARM_UP_K = 4  # top-k of the untimed warm-up solve (imports, numba compilation)
log = logging.getLogger("otlp")


COMMAND = Command(
    summary="solve one instance with several methods; verify each plan",
    description="Compute alpha* by subset selection, then solve the instance with each "
    "method, verify every plan (marginals, sign, every conditional, acceptance against "
    "alpha*) and print acceptance, deviations and time. Times are in ms, measured after an "
    "untimed warm-up solve per method (first imports and numba compilation excluded). A "
    "method that cannot run on this instance (e.g. over its size cap) is noted and skipped.",
    example="otlp solve --generator zipf --vocab 1000 --n 3 --top-k 12 --methods highs,maxflow",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_instance_arguments(parser)
    parser.add_argument(
        "--methods",
        action=CommaList,
        item=name_item,
        default=DEFAULT_METHODS,
        metavar="LIST",
        help=f"methods, comma-separated or repeated; available: {', '.join(method_names())}",
    )


def _warm_up(inst: Instance, method: str) -> None:
    """One untimed solve on a small instance of the same scheme and n."""
    small_k = max(inst.n, WARM_UP_K) if inst.scheme == "without_replacement" else WARM_UP_K
    try:
        small = Instance(inst.p, inst.q, inst.n, inst.scheme, min(small_k, inst.vocab_size))
        solve(small, method, check=False)
    except ValueError:
        pass  # the real solve reports it


def run(args: argparse.Namespace) -> int:
    methods = check_names("--methods", args.methods, method_names())
    inst = instance_from_args(args)
    selection = optimal_acceptance(inst)
    rows, skipped = [], []
    for method in methods:
        _warm_up(inst, method)
        start = time.perf_counter()
        try:
            plan = solve(inst, method)
        except ValueError as exc:  # too large for this method, or not applicable
            skipped.append({"method": method, "reason": str(exc)})
            log.info("%s skipped: %s", method, exc)
            continue
        elapsed = time.perf_counter() - start
        report = plan.info["verification"]
        rows.append(
            {
                "method": method,
                "time_ms": 1e3 * elapsed,
                "backend_time_ms": 1e3 * plan.wall_time,
                **report.as_dict(),
            }
        )
    if not rows:  # nothing ran: bad input (method and instance do not go together)
        reasons = "; ".join(f"{s['method']}: {s['reason']}" for s in skipped)
        raise ValueError(f"--methods: no method can solve this instance ({reasons})")
    ok = all(r["ok"] for r in rows)
    if args.json:
        print_json(
            {
                "instance": inst.describe(),
                "alpha_star": selection.alpha_star,
                "H_size": int(selection.H.size),
                "results": rows,
                "skipped": skipped,
            }
        )
        return 0 if ok else 1
    out = console()
    out.print(
        escape(
            f"{inst!r}: alpha* = {selection.alpha_star:.9f} "
            f"(|H*| = {selection.H.size}, by {selection.method})"
        )
    )
    head = ["method", "acceptance", "gap", "target L1", "draft L1", "min entry", "time [ms]"]
    table = Table(*map(escape, head), "verified")
    for r in rows:
        table.add_row(
            r["method"],
            f"{r['acceptance']:.9f}",
            f"{r['acceptance_gap']:.1e}",
            f"{r['target_l1']:.1e}",
            f"{r['draft_l1']:.1e}",
            f"{r['min_entry']:.1e}",
            f"{r['time_ms']:.2f}",
            "ok" if r["ok"] else "FAILED",
        )
    out.print(table)
    notes = stderr_console()
    for s in skipped:
        notes.print(escape(f"note: {s['method']} skipped: {s['reason']}"))
    return 0 if ok else 1
