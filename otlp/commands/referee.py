"""``otlp referee``: is a sampler lossless, where does it fail, how far is it from α*?

Exit status 0: lossless on every searched case at the stated power; 1: a deviation found (the
minimal case is written to the reproducer file); 2: bad usage.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from otlp.commands.common import (
    RESULTS_ROOT,
    add_command,
    add_output_arguments,
    output_path,
    print_json,
)

DEFAULT_OUT = RESULTS_ROOT / "referee"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "referee",
        summary="referee a speculative sampler: lossless?, minimal failing case, gap to alpha*",
        description="Run the sampler MODULE:FUNCTION on seeded cases of otlp fuzz's instance "
        "classes (position: V = 2..8, n = 1..3 drafts drawn by the referee under --scheme; "
        "tree: toy model pairs on small trees and chains) and compare its output law with the "
        "target's: exactly where its random draws can be followed (a branching stand-in for "
        "numpy's Generator), else by a Hoeffding test planned to detect TV >= --epsilon with "
        "probability >= 1 - --miss, flagging a lossless sampler with probability <= "
        "--false-alarm. A failing case is shrunk to a minimal one and written to a JSON "
        "reproducer (--replay re-runs it). The sampler's acceptance is shown beside alpha*. "
        "Position protocol: sampler(p, q, drafts, rng) -> token; tree protocol: "
        "sampler(tokens, parents, p, q, rng) -> (accepted nodes, bonus token). Exit status "
        "0 lossless, 1 deviation found, 2 bad usage.",
        example="otlp referee otlp.referee.subjects:SUBJECTS.specinfer --protocol position",
    )
    parser.add_argument(
        "sampler",
        nargs="?",
        default=None,
        metavar="MODULE:FUNCTION",
        help="the sampler (dotted attributes allowed; not needed with --replay)",
    )
    parser.add_argument(
        "--protocol",
        choices=("position", "tree"),
        default=None,
        help="calling convention (default: the sampler's `protocol` attribute, else position)",
    )
    parser.add_argument(
        "--scheme",
        default=None,
        help="draft scheme: iid, without_replacement, independent (position); iid, "
        "without_replacement (tree) (default: the sampler's `scheme` attribute, else iid)",
    )
    parser.add_argument("--epsilon", type=float, default=0.01, help="TV the test must detect")
    parser.add_argument(
        "--false-alarm", type=float, default=1e-6, help="probability of flagging a lossless sampler"
    )
    parser.add_argument(
        "--miss", type=float, default=1e-3, help="probability of missing TV >= epsilon"
    )
    parser.add_argument("--cases", type=int, default=60, help="seeded cases to search")
    parser.add_argument("--seed", type=int, default=0, help="seed of the cases and the draws")
    parser.add_argument(
        "--mode",
        choices=("auto", "exact", "statistical"),
        default="auto",
        help="exact enumeration where possible (auto), only exact, or only statistical",
    )
    parser.add_argument(
        "--shapes",
        default=None,
        metavar="LIST",
        help="tree shapes, comma-separated (chain1,chain2,chain3,root2,root3,paths2x2,tree2x1,"
        "tree2x2; default all, chains only for a sampler declaring max_children = 1)",
    )
    parser.add_argument(
        "--max-n",
        type=int,
        default=None,
        help="most drafts of a position case (default: the sampler's `max_children`, else 3)",
    )
    parser.add_argument(
        "--smollm2",
        type=int,
        default=0,
        metavar="K",
        help="also search K SmolLM2-135M states (position protocol, statistical mode)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"reproducer file (default: {DEFAULT_OUT}/<sampler>.json)",
    )
    parser.add_argument(
        "--replay", type=Path, default=None, metavar="FILE", help="re-run a reproducer"
    )
    add_output_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from otlp.referee import load_sampler, referee, replay

    if args.replay is not None:
        sampler = load_sampler(args.sampler)[0] if args.sampler else None
        verdict = replay(args.replay, sampler, args.sampler)
    else:
        if args.sampler is None:
            raise ValueError("MODULE:FUNCTION: the sampler to referee is required (or --replay)")
        sampler, declared = load_sampler(args.sampler)
        single = declared.get("max_children") == "1"
        out = args.out or DEFAULT_OUT / (re.sub(r"[^A-Za-z0-9_.-]+", "_", args.sampler) + ".json")
        output_path("--out", out, folder=False, mkdir=args.mkdir)
        shapes = None if args.shapes is None else [s for s in args.shapes.split(",") if s]
        if shapes is None and single:
            shapes = ["chain1", "chain2", "chain3"]
        max_n = args.max_n if args.max_n is not None else int(declared.get("max_children", 3))
        verdict = referee(
            sampler,
            protocol=args.protocol or declared.get("protocol"),
            scheme=args.scheme or declared.get("scheme"),
            epsilon=args.epsilon,
            false_alarm=args.false_alarm,
            miss=args.miss,
            cases=args.cases,
            seed=args.seed,
            mode=args.mode,
            shapes=shapes,
            max_n=max_n,
            smollm2=args.smollm2,
            reproducer=out,
            name=args.sampler,
        )
    if args.json:
        print_json(verdict.as_dict())
    else:
        print(verdict.summary())
    return 0 if verdict.lossless else 1
