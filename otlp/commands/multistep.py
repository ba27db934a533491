"""``otlp multistep``: block efficiency per method against L and K on a model pair, with the
[GBV] LP optimum beside it; optional JSON, Markdown and a PNG plot."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from otlp.args import canonical_name
from otlp.commands.common import (
    CommaList,
    Command,
    add_output_arguments,
    add_progress_argument,
    check_names,
    console,
    name_item,
    output_path,
    positive_int_item,
    print_json,
    progress,
    progress_enabled,
)
from otlp.multistep.exact import METHODS, SINGLE_PATH
from otlp.multistep.gbv import RANKINGS
from otlp.multistep.models import MODEL_KINDS, model_pair
from otlp.multistep.sweep import LP_LABEL, EfficiencyRow, efficiency_sweep
from otlp.multistep.verifiers import SingleStepVerifier, get_verifier
from otlp.plotting.multistep import plot
from otlp.plotting.style import add_format_argument

COMMAND = Command(
    summary="block efficiency of multi-step verification against L and K",
    description="Block efficiency (tokens per target call) of token-wise speculative "
    "sampling, block verification, GBV and SpecTr-style traversal with single-step rules, "
    "against the draft block length L (--block-lengths) and the number of draft paths K "
    "(--paths), exact by enumeration and beside the [GBV] LP optimum; optionally Monte "
    "Carlo (--simulate N calls). JSON rows call the block length block_length.",
    example="otlp multistep --model markov --vocab 4 --block-lengths 1,2,3 --paths 1,2 "
    "--rules ot,kseq --markdown",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    model = parser.add_argument_group("model pair")
    model.add_argument("--model", choices=MODEL_KINDS, default="markov", help="model family")
    model.add_argument("--vocab", type=int, default=3, help="vocabulary size V")
    model.add_argument("--seed", type=int, default=0, help="model and simulation seed")
    model.add_argument("--distance", type=float, default=0.5, help="draft = mix with noise")
    model.add_argument("--concentration", type=float, default=1.0, help="Dirichlet parameter")
    model.add_argument("--sparsity", type=float, default=0.0, help="fraction of zeroed entries")
    model.add_argument("--context", type=int, default=2, help="n-gram context length")
    parser.add_argument(
        "--block-lengths",
        "--lengths",
        dest="block_lengths",
        action=CommaList,
        item=positive_int_item,
        default=[1, 2, 3, 4],
        metavar="LIST",
        help="draft block lengths L, comma-separated or repeated (--lengths: old name)",
    )
    parser.add_argument(
        "--paths",
        action=CommaList,
        item=positive_int_item,
        default=[1, 2, 3],
        metavar="LIST",
        help="numbers of draft paths K",
    )
    parser.add_argument(
        "--methods",
        action=CommaList,
        item=name_item,
        default=list(METHODS),
        metavar="LIST",
        help="multi-step methods",
    )
    parser.add_argument(
        "--ranking",
        type=_ranking_spelling,
        choices=RANKINGS,
        default="ratio",
        help="GBV local key (any spelling otlp.multistep.gbv.check_ranking reads: Inverse_Ratio)",
    )
    parser.add_argument(
        "--rules",
        action=CommaList,
        item=name_item,
        default=["ot"],
        metavar="LIST",
        help="single-step verifiers for spectr: otlp.rules names (ot, kseq, rrs, sps, ...) or "
        "otlp.solve methods (e.g. global_resolution)",
    )
    parser.add_argument("--tau", type=float, default=None, help="tau for global_resolution")
    parser.add_argument("--no-lp", action="store_true", help="skip the LP optimum")
    parser.add_argument("--no-exact", action="store_true", help="skip exact enumeration")
    parser.add_argument(
        "--simulate", type=int, default=0, metavar="N", help="also run N Monte Carlo calls"
    )
    parser.add_argument(
        "--decode", action="store_true", help="simulate one decoding run (context grows)"
    )
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--plot", type=Path, default=None, metavar="FILE", help="write a figure here"
    )
    add_format_argument(parser, default=None)
    add_output_arguments(parser)
    add_progress_argument(parser)


def run(args: argparse.Namespace) -> int:
    gammas = sorted(set(args.block_lengths))
    paths = sorted(set(args.paths))
    methods = check_names("--methods", args.methods, list(METHODS))
    if args.simulate < 0:
        raise ValueError(f"--simulate: expected a non-negative integer, got {args.simulate}")
    if args.vocab < 1:
        raise ValueError(f"--vocab: expected a positive integer, got {args.vocab}")
    if args.plot is not None:
        output_path("--plot", args.plot, folder=False, mkdir=args.mkdir)
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
    verifiers = _verifiers(args.rules, args.tau)
    cells = [
        (k, gamma)
        for k in paths
        for gamma in gammas
        for method in methods
        for _ in (verifiers if method == "spectr" else [None])
        if k == 1 or method not in SINGLE_PATH
    ]
    show = progress_enabled(args) and args.simulate > 0
    with progress(
        "otlp multistep", sum(k * g for k, g in cells), len(cells), "cells", enabled=show
    ) as bar:
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
            rules=verifiers,
            on_cell=lambda label, k, g: bar.advance(k * g, description=f"{label} K={k} L={g}"),
        )
    title = (
        f"{args.model} pair, V={args.vocab}, seed={args.seed}, distance={args.distance}, "
        f"concentration={args.concentration}, sparsity={args.sparsity}"
    )
    if args.json:
        print_json({"model": title, "rows": [json_row(r) for r in rows]})
    elif args.markdown:
        print(markdown_table(rows, gammas))
    else:
        console().print(rich_table(rows, gammas, title))
    if args.plot is not None:
        plot(rows, gammas, title, args.plot, args.format)
    return 0


def json_row(row: EfficiencyRow) -> dict[str, object]:
    """A result row with the block length under its CLI name (``block_length``, not gamma)."""
    data = row.as_dict()
    data["block_length"] = data.pop("gamma")
    return data


def _ranking_spelling(value: str) -> str:
    """``--ranking`` read as :func:`otlp.multistep.gbv.check_ranking` reads ``ranking`` (case,
    surrounding spaces, ``-`` or ``_``); an unknown name is left to argparse's ``choices``."""
    return canonical_name(value, "ranking").replace("_", "-")


def _verifiers(names: list[str], tau: float | None) -> dict[str, SingleStepVerifier]:
    """Label -> verifier; ``tau`` goes to global resolution only."""
    out = {}
    for name in dict.fromkeys(names):
        wants_tau = name == "global_resolution" and tau is not None
        try:
            out[name] = get_verifier(name, **({"tau": tau} if wants_tau else {}))
        except ValueError as exc:
            raise ValueError(f"--rules/--tau: {exc}") from None
    return out


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
    from otlp.bench.markdown import table_head, table_row  # otlp.bench loads when used

    lines = table_head(["method", "K", *(f"L={g}" for g in gammas)], "l" * (2 + len(gammas)))
    for (method, k, source), cells in _grid(rows).items():
        name = f"**{method}**" if method == LP_LABEL else _label(method, source)
        lines.append(table_row([name, str(k), *(_cell(cells.get(g)) for g in gammas)]))
    return "\n".join(lines)
