"""``otlp multistep``: block efficiency per method against L and K on a model pair, with the
seed-002 LP optimum beside it; optional JSON, Markdown and a PNG plot."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from otlp.commands.common import console
from otlp.multistep.exact import METHODS
from otlp.multistep.gbv import RANKINGS
from otlp.multistep.models import MODEL_KINDS, model_pair
from otlp.multistep.sweep import LP_LABEL, EfficiencyRow, efficiency_sweep
from otlp.multistep.verifiers import SingleStepVerifier, get_verifier
from otlp.plotting.multistep import plot
from otlp.plotting.style import add_format_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "multistep", help="block efficiency of multi-step verification methods vs L and K"
    )
    model = parser.add_argument_group("model pair")
    model.add_argument("--model", choices=MODEL_KINDS, default="markov")
    model.add_argument("--vocab", type=int, default=3, help="vocabulary size V")
    model.add_argument("--seed", type=int, default=0)
    model.add_argument("--distance", type=float, default=0.5, help="draft = mix with noise")
    model.add_argument("--concentration", type=float, default=1.0, help="Dirichlet parameter")
    model.add_argument("--sparsity", type=float, default=0.0, help="fraction of zeroed entries")
    model.add_argument("--context", type=int, default=2, help="n-gram context length")
    parser.add_argument("--lengths", default="1,2,3,4", help="draft block lengths L")
    parser.add_argument("--paths", default="1,2,3", help="numbers of draft paths K")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated")
    parser.add_argument("--ranking", choices=RANKINGS, default="ratio", help="GBV local key")
    parser.add_argument(
        "--rules",
        default="ot",
        help="single-step verifiers for spectr, comma-separated: otlp.rules names (ot, kseq, "
        "rrs, sps, ...) or otlp.solve methods (e.g. global_resolution)",
    )
    parser.add_argument("--tau", type=float, default=None, help="tau for global_resolution")
    parser.add_argument("--no-lp", action="store_true", help="skip the LP optimum")
    parser.add_argument("--no-exact", action="store_true", help="skip exact enumeration")
    parser.add_argument("--simulate", type=int, default=0, help="also run N Monte Carlo calls")
    parser.add_argument(
        "--decode", action="store_true", help="simulate one decoding run (context grows)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--plot", type=Path, default=None, help="write a figure here")
    add_format_argument(parser, default=None)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    gammas = _int_list("--lengths", args.lengths)
    paths = _int_list("--paths", args.paths)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    target, draft = model_pair(
        args.model,
        args.vocab,
        seed=args.seed,
        distance=args.distance,
        concentration=args.concentration,
        sparsity=args.sparsity,
        context=args.context,
        depth=max(gammas) + 1,
    )
    rows = efficiency_sweep(
        target,
        draft,
        gammas,
        paths,
        methods,
        exact=not args.no_exact,
        lp=not args.no_lp,
        calls=args.simulate,
        decode=args.decode,
        seed=args.seed,
        ranking=args.ranking,
        rules=_verifiers(args.rules, args.tau),
    )
    title = (
        f"{args.model} pair, V={args.vocab}, seed={args.seed}, distance={args.distance}, "
        f"concentration={args.concentration}, sparsity={args.sparsity}"
    )
    if args.json:
        print(json.dumps({"model": title, "rows": [r.as_dict() for r in rows]}))
    elif args.markdown:
        print(markdown_table(rows, gammas))
    else:
        console().print(rich_table(rows, gammas, title))
    if args.plot is not None:
        plot(rows, gammas, title, args.plot, args.format)
    return 0


def _verifiers(names: str, tau: float | None) -> dict[str, SingleStepVerifier]:
    """Label -> verifier; ``tau`` goes to global resolution only."""
    out = {}
    for name in (n.strip() for n in names.split(",") if n.strip()):
        wants_tau = name == "global_resolution" and tau is not None
        out[name] = get_verifier(name, **({"tau": tau} if wants_tau else {}))
    return out


def _int_list(flag: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{flag}: expected positive integers, got {text!r}")
    return values


def _grid(rows: Sequence[EfficiencyRow]) -> dict[tuple[str, int, str], dict[int, EfficiencyRow]]:
    grid: dict[tuple[str, int, str], dict[int, EfficiencyRow]] = {}
    for row in rows:
        grid.setdefault((row.method, row.paths, row.source), {})[row.gamma] = row
    return dict(sorted(grid.items(), key=lambda item: (item[0][1], item[0][0] == LP_LABEL)))


def _cell(row: EfficiencyRow | None) -> str:
    if row is None:
        return "-"
    text = f"{row.block_efficiency:.4f}"
    return f"{text} ± {row.stderr:.3f}" if row.source == "simulation" else text


def _label(method: str, source: str) -> str:
    return f"{method} (MC)" if source == "simulation" else method


def rich_table(rows: Sequence[EfficiencyRow], gammas: Sequence[int], title: str) -> Table:
    table = Table("method", "K", *[f"L={g}" for g in gammas], title=title)
    for (method, k, source), cells in _grid(rows).items():
        style = "bold" if method == LP_LABEL else None
        table.add_row(
            _label(method, source), str(k), *[_cell(cells.get(g)) for g in gammas], style=style
        )
    return table


def markdown_table(rows: Sequence[EfficiencyRow], gammas: Sequence[int]) -> str:
    header = "| method | K | " + " | ".join(f"L={g}" for g in gammas) + " |"
    lines = [header, "|---|---|" + "---|" * len(gammas)]
    for (method, k, source), cells in _grid(rows).items():
        name = f"**{method}**" if method == LP_LABEL else _label(method, source)
        lines.append(f"| {name} | {k} | " + " | ".join(_cell(cells.get(g)) for g in gammas) + " |")
    return "\n".join(lines)
