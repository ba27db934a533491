"""``otlp compare``: every verification rule's exact acceptance next to alpha*.

For one instance (the usual instance options) or one or more suites (``--suite``), at each
number of drafts in ``--ns``, every rule of :mod:`otlp.rules` is evaluated exactly: its
acceptance, alpha* of its own draft joint, and the L1 distance of its output law from p. A
lossless rule whose output is off p, or whose acceptance exceeds its own alpha*, fails the
run (exit status 1); Ctrl-C prints what finished (exit status 130). ``--csv`` writes one row
per (item, n, rule); ``--plot`` draws mean acceptance against n per rule ([GR] Figure 1,
[SpecHub] Figure 1).
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import asdict
from pathlib import Path

from rich.table import Table

from otlp.args import canonical_name
from otlp.commands.common import (
    CommaList,
    Command,
    add_instance_arguments,
    add_output_arguments,
    add_progress_argument,
    check_names,
    console,
    generated_top_k,
    instance_from_args,
    name_item,
    output_path,
    positive_int_item,
    print_json,
    progress,
    progress_enabled,
    stderr_console,
)
from otlp.instance import Instance
from otlp.instances.suites import load, suite_names
from otlp.plotting.rules import plot
from otlp.plotting.style import add_format_argument
from otlp.rules import Rule, get, names
from otlp.rules.comparison import Case, Record, SummaryRow, evaluate, summarise
from otlp.rules.mentored import DEFAULT_KL_BUDGET

BOUND_LABELS = {
    "single": "one draft",
    "iid": "i.i.d. drafts",
    "independent": "independent drafts",
    "without_replacement": "drafts without replacement",
    "hub": "SpecHub hub joint",
}


def cases_from_args(args: argparse.Namespace) -> list[Case]:
    """The instances to compare: every suite item at every n, or the one instance (at --ns, or
    at --n or the instance's default number of drafts)."""
    ns = list(dict.fromkeys(args.ns)) if args.ns else None
    if args.suite:
        ns = ns or [args.n if args.n is not None else 2]
        scheme = args.scheme or "iid"
        known = list(suite_names())
        unknown = [name for name in args.suite if name not in known]
        if unknown:
            raise ValueError(
                f"--suite: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(known)}"
            )
        cases = []
        try:
            for suite in dict.fromkeys(args.suite):
                for item in load(suite):
                    top_k = args.top_k if args.top_k is not None else generated_top_k(item.p)
                    cases += [
                        Case(suite, item.name, Instance(item.p, item.q, n, scheme, top_k))
                        for n in ns
                    ]
        except ValueError as exc:
            raise ValueError(f"--suite/--ns/--top-k/--scheme: {exc}") from None
        return cases
    inst = instance_from_args(args)
    ns = ns or [inst.n]
    if inst.scheme == "independent" and ns != [inst.n]:
        raise ValueError("--ns: scheme 'independent' fixes n by its draft rows; use --n")
    label = str(args.instance or args.generator)
    return [
        Case("instance", label, Instance(inst.p, inst.q, n, inst.scheme, inst.top_k)) for n in ns
    ]


COMMAND = Command(
    summary="every verification rule's exact acceptance next to alpha*",
    description=__doc__,
    example="otlp compare --suite synthetic,spechub-toy --ns 2,3,4 --top-k 20 --markdown",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_instance_arguments(parser)
    parser.add_argument(
        "--suite",
        action=CommaList,
        default=None,
        metavar="LIST",
        help="suite names, comma-separated or repeated (see `otlp suites`); replaces the "
        "instance options",
    )
    parser.add_argument(
        "--ns",
        action=CommaList,
        item=positive_int_item,
        default=None,
        metavar="LIST",
        help="numbers of drafts, comma-separated or repeated, e.g. 2,3,4 (default: --n, or 2)",
    )
    parser.add_argument(
        "--rules",
        action=CommaList,
        item=name_item,
        default=names(),
        metavar="LIST",
        help="rules, comma-separated or repeated",
    )
    parser.add_argument(
        "--kl-budget", type=float, default=DEFAULT_KL_BUDGET, help="mentored decoding's KL budget"
    )
    parser.add_argument(
        "--method",
        type=canonical_name,
        default="maxflow",
        help="otlp.solve method behind the ot and canonical rules",
    )
    parser.add_argument(
        "--csv", type=Path, metavar="FILE", help="write one row per (item, n, rule)"
    )
    parser.add_argument(
        "--plot", type=Path, metavar="FILE", help="write a figure of mean acceptance against n"
    )
    add_format_argument(parser, default=None)
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    add_output_arguments(parser)
    add_progress_argument(parser)


def run(args: argparse.Namespace) -> int:
    rules = _rules(args)
    for flag, path in (("--csv", args.csv), ("--plot", args.plot)):
        if path is not None:
            output_path(flag, path, folder=False, mkdir=args.mkdir)
    cases = cases_from_args(args)
    records, interrupted = _evaluate_all(cases, rules, progress_enabled(args))
    if not records:
        raise KeyboardInterrupt
    rule_names = [r.name for r in rules]
    summary = summarise(records)
    failed = [r for r in records if r.failed]
    if args.json:
        print_json(
            {
                "cases": len(cases),
                "finished": len({(r.suite, r.item, r.n) for r in records}),
                "interrupted": interrupted,
                "summary": [asdict(row) for row in summary],
                "records": [asdict(r) | {"failed": r.failed} for r in records],
            }
        )
    elif args.markdown:
        print(markdown_table(summary, rule_names))
        print()
        print(markdown_checks(records, rule_names))
    else:
        _print_rich(summary, records, rule_names)
    if args.csv:
        write_csv(records, args.csv)
    if args.plot:
        plot(summary, rule_names, args.plot, records, args.format)
    notes = stderr_console()
    for r in failed:
        notes.print(
            f"FAILED {r.rule} on {r.item} (n={r.n}): output L1 {r.output_l1:.2e}, "
            f"acceptance - own alpha* {r.acceptance - r.alpha_star_own:.2e}"
        )
    if interrupted:
        done = len({(r.suite, r.item, r.n) for r in records})
        notes.print(
            f"interrupted: the output covers the {done} of {len(cases)} cases that finished; "
            "run the same command again for all of them"
        )
        return 130
    return 1 if failed else 0


def _evaluate_all(cases: list[Case], rules: list[Rule], show: bool) -> tuple[list[Record], bool]:
    """Every case's records with a progress bar; Ctrl-C keeps the finished cases."""
    records: list[Record] = []
    try:
        with progress("otlp compare", len(cases), len(cases), "cases", enabled=show) as bar:
            for case in cases:
                records += evaluate(case, rules)
                bar.advance(description=f"{case.suite} n={case.inst.n}")
    except KeyboardInterrupt:
        return records, True
    return records, False


def _rules(args: argparse.Namespace) -> list[Rule]:
    chosen = check_names("--rules", args.rules, names())
    options = {"mentored": {"kl_budget": args.kl_budget}}
    options.update({name: {"method": args.method} for name in ("ot", "canonical")})
    try:
        return [get(name, **options.get(name, {})) for name in chosen]
    except ValueError as exc:
        raise ValueError(f"--method/--kl-budget: {exc}") from None


# ----- output ------------------------------------------------------------------------------
def _table_rows(summary: list[SummaryRow], rules: list[str]) -> list[list[str]]:
    """Transposed summary: alpha* of each draft joint, then one row per rule."""
    kinds = list(dict.fromkeys(kind for row in summary for kind in row.bounds))
    lines = [
        [f"alpha*, {BOUND_LABELS[kind]}"]
        + [_cell(row.bounds.get(kind, math.nan)) for row in summary]
        for kind in kinds
    ]
    lines += [
        [rule] + [_cell(row.acceptance.get(rule, math.nan)) for row in summary] for rule in rules
    ]
    return lines


def _cell(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.4f}"


def markdown_table(summary: list[SummaryRow], rules: list[str]) -> str:
    """The summary as a Markdown table (README-ready): rows are bounds and rules."""
    from otlp.bench.markdown import table_head, table_row  # otlp.bench loads when used

    head = table_head(["", *(row.label for row in summary)], "l" + "r" * len(summary))
    return "\n".join([*head, *map(table_row, _table_rows(summary, rules))])


def _check_rows(records: list[Record], rules: list[str]) -> list[list[str]]:
    """Per rule: lossless?, max L1(output, p), max acceptance - own alpha*, max KL(p || out)."""
    lines = []
    for rule in rules:
        mine = [r for r in records if r.rule == rule and not r.note]
        if not mine:
            lines.append([rule, "", "not applicable", "", ""])
            continue
        lines.append(
            [
                rule,
                "yes" if mine[0].lossless else "no",
                f"{max(r.output_l1 for r in mine):.1e}",
                f"{max(r.acceptance - r.alpha_star_own for r in mine):.1e}",
                f"{max(r.kl for r in mine):.1e}",
            ]
        )
    return lines


CHECK_HEAD = (
    "rule",
    "lossless",
    "max L1(output, p)",
    "max acceptance - own alpha*",
    "max KL(p, output)",
)


def markdown_checks(records: list[Record], rules: list[str]) -> str:
    """The exactness checks as a Markdown table."""
    from otlp.bench.markdown import table_head, table_row  # otlp.bench loads when used

    head = table_head(CHECK_HEAD, "llrrr")
    return "\n".join([*head, *map(table_row, _check_rows(records, rules))])


def _print_rich(summary: list[SummaryRow], records: list[Record], rules: list[str]) -> None:
    out = console()
    counts = ", ".join(dict.fromkeys(f"{row.suite}: {row.items} items" for row in summary))
    table = Table("", *(row.label for row in summary), title=f"mean exact acceptance ({counts})")
    for cells in _table_rows(summary, rules):
        table.add_row(*cells)
    out.print(table)
    checks = Table(*CHECK_HEAD, title="exactness checks over all cases")
    for cells in _check_rows(records, rules):
        checks.add_row(*cells)
    out.print(checks)


def write_csv(records: list[Record], path: Path) -> None:
    """One row per record, with the field names as the header (the folder is checked by
    :func:`otlp.commands.common.output_path` before any work)."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(records[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in records)
